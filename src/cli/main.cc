// schedcheck: the command-line driver.
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace sc::cli { Command add_run(CLI::App& parent); }  // src/cli/run_cmd.cc (verify_gpu)

int main(int argc, char** argv) {
  CLI::App app{
      "schedcheck: a model checker for distributed-training schedules.\n"
      "It reads a pipeline schedule (a YAML spec, or a CSV from torch.distributed.pipelining) and proves or\n"
      "refutes deadlock-freedom, causality, channel agreement and memory limits, and predicts span, makespan,\n"
      "bubbles and peak memory per rank. `schedcheck COMMAND --help` explains each command.\n\n"
      "Exit codes: 0 holds; 1 usage error; 2 spec error; 5 inconclusive (solver limit); 10 violations of\n"
      "several kinds; 11 deadlock; 12 structure or causality; 13 memory limit exceeded; 14 channel mismatch;\n"
      "15 router drops tokens; 16 router not deterministic; 70 internal error.",
      "schedcheck"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "schedcheck 0.1.0");
  std::vector<sc::cli::Command> commands = {sc::cli::add_verify(app), sc::cli::add_lower(app), sc::cli::add_gen(app),
                                            sc::cli::add_compare(app), sc::cli::add_synth(app)};
  commands.push_back(sc::cli::add_run(app));  // verify_gpu: `schedcheck run` (src/cli/run_cmd.cc)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : sc::cli::kExitUsage;
  }
  try {
    for (const auto& c : commands)
      if (*c.app) return c.run();
  } catch (const std::exception& e) {
    std::cerr << "schedcheck: internal error: " << e.what() << "\n";
    return sc::cli::kExitInternal;
  }
  return sc::cli::kExitUsage;
}
