// schedcheck: the command-line driver.
#include <algorithm>
#include <iostream>
#include <new>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "check/pass_timer.h"
#include "support/diagnostics.h"
#include "support/version.h"

namespace {

/// After CLI11 found arguments it did not expect: names the first unknown long option of the
/// command with the closest known one ("unknown option '--rank'; did you mean '--ranks'?"), as
/// commands, keys and values are answered. False when no unknown option is among the arguments
/// (an extra positional argument: CLI11's own message then says which).
bool report_unknown_option(CLI::App& app, int argc, char** argv) {
  CLI::App* cmd = nullptr;
  for (CLI::App* sub : app.get_subcommands())
    if (sub->parsed()) cmd = sub;
  if (!cmd) return false;
  std::vector<std::string> known;
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0 || arg.size() < 3) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string near = sc::closest_match(name, known);
    std::cerr << "schedcheck " << cmd->get_name() << ": error: unknown option '" << name << "'"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << " (schedcheck " << cmd->get_name()
              << " --help lists its options)\n";
    return true;
  }
  return false;
}

/// Help text within the terminal's width (80 columns when standard output is not a terminal):
/// option descriptions wrap at blanks, their continuation lines indented to the description
/// column; the command's description and footer keep their own line breaks and wrap the lines
/// that are longer.
class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() {
    width_ = 80;
    struct winsize ws {};
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) width_ = ws.ws_col;
    column_width(std::min<size_t>(30, width_ / 3));
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap(CLI::Formatter::make_option_desc(opt), width_ > get_column_width() + 20 ? width_ - get_column_width() : 40);
  }
  std::string make_description(const CLI::App* app) const override {
    return wrap(reflow(CLI::Formatter::make_description(app)), width_);
  }
  std::string make_footer(const CLI::App* app) const override {
    return wrap(reflow(CLI::Formatter::make_footer(app)), width_);
  }

  /// Joins the lines of each prose paragraph (consecutive lines that start without a blank),
  /// which the descriptions break at about 110 columns, so that wrap() breaks them at the
  /// width instead; indented lines (command examples) and blank lines stay as they are, and
  /// "Exit codes:" starts a paragraph of its own.
  static std::string reflow(const std::string& text) {
    std::string out;
    bool prose = false;  // the last line written is prose a next prose line continues
    size_t at = 0;
    while (at <= text.size()) {
      const size_t nl = text.find('\n', at);
      const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      const bool is_prose = !line.empty() && line[0] != ' ' && line.rfind("Exit codes:", 0) != 0;
      if (is_prose && prose) out += " " + line;
      else out += (out.empty() && at == 0 ? "" : "\n") + line;
      prose = is_prose || line.rfind("Exit codes:", 0) == 0;
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    return out;
  }

  /// `text` with each line longer than `width` broken at its last blanks before the width (a
  /// word longer than the width stays whole); existing line breaks and leading indentation kept.
  static std::string wrap(const std::string& text, size_t width) {
    std::string out;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t nl = text.find('\n', at);
      std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      const size_t indent = std::min(line.find_first_not_of(' '), line.size());
      // A command example ("  schedcheck ...") goes on with a shell continuation, so that it
      // still runs when pasted.
      const bool command = indent > 0 && line.compare(indent, 11, "schedcheck ") == 0;
      size_t next_indent = command ? indent + 4 : indent;
      while (line.size() > width) {
        const size_t room = command ? width - 2 : width;
        size_t cut = line.rfind(' ', room);
        if (cut == std::string::npos || cut <= next_indent) cut = line.find(' ', room);
        if (cut == std::string::npos) break;
        out += line.substr(0, cut) + (command ? " \\\n" : "\n");
        const size_t rest = line.find_first_not_of(' ', cut);
        line = std::string(next_indent, ' ') + (rest == std::string::npos ? std::string() : line.substr(rest));
      }
      out += line;
      if (nl == std::string::npos) break;
      out += "\n";
      at = nl + 1;
    }
    return out;
  }

 private:
  size_t width_;
};

}  // namespace

int sc::cli::run_cli(int argc, char** argv) {
  CLI::App app{
      "schedcheck: a model checker for distributed-training schedules.\n"
      "It reads a pipeline schedule (a YAML spec, or a CSV from torch.distributed.pipelining), an FSDP / ZeRO-3\n"
      "spec or an MoE router spec and proves or refutes deadlock-freedom, causality, channel and collective\n"
      "agreement and memory limits, and predicts span, makespan, bubbles and peak memory per rank; `run`\n"
      "confirms the prediction on a GPU. `schedcheck COMMAND --help` explains each command.\n\n"
      "Exit codes: 0 holds; 1 usage error; 2 spec error; 5 inconclusive (solver or memory limit); 10 violations of\n"
      "several kinds; 11 deadlock; 12 structure, causality or residency; 13 memory limit exceeded; 14 channel or\n"
      "collective mismatch; 15 router drops tokens; 16 router not deterministic; 17 reduction numerics beyond\n"
      "tolerance; 18 budget exceeded; 19 diff regression beyond threshold; 20 GPU measurement differs\n"
      "from the prediction beyond tolerance; 69 no GPU (built without CUDA, or no device); 70 internal error.",
      "schedcheck"};
  app.formatter(std::make_shared<WrappingFormatter>());
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("schedcheck ") + sc::kToolVersion);
  std::vector<sc::cli::Command> commands = {sc::cli::add_verify(app), sc::cli::add_lower(app), sc::cli::add_gen(app),
                                            sc::cli::add_compare(app), sc::cli::add_synth(app), sc::cli::add_run(app),
                                            sc::cli::add_numerics(app), sc::cli::add_diff(app), sc::cli::add_plan(app)};
  // No command: list them, each with the first line of its description (CLI11 would only say
  // that one is required). A usage error, as git and cmake treat a bare call.
  if (argc == 1) {
    size_t width = 0;
    for (const auto& c : commands) width = std::max(width, c.app->get_name().size());
    std::cout << "usage: schedcheck COMMAND [ARGS...]   (schedcheck COMMAND --help explains one)\n\ncommands:\n";
    for (const auto& c : commands) {
      // One line each, within 80 columns (a command missing here shows its description's first line).
      static const std::map<std::string, const char*> kSummary = {
          {"verify", "check schedules and training configs, and predict their timeline"},
          {"lower", "add explicit SEND/RECV actions to a compute-only schedule"},
          {"gen", "generate a named pipeline schedule as its reference code does"},
          {"compare", "verify named schedules with the same costs, over sweeps"},
          {"synth", "search the order with the least span within the memory limit (Z3)"},
          {"run", "execute a verified schedule on a GPU and compare with the prediction"},
          {"numerics", "error and bias of a reducing collective's arithmetic"},
          {"diff", "compare two verify results, or each input a git change touches"},
          {"plan", "find the parallel layouts that fit a model on N GPUs"}};
      const auto known = kSummary.find(c.app->get_name());
      const std::string& d = c.app->get_description();
      const std::string first = known != kSummary.end() ? known->second : d.substr(0, d.find('\n'));
      std::cout << "  " << c.app->get_name() << std::string(width - c.app->get_name().size() + 2, ' ') << first << "\n";
    }
    return sc::cli::kExitUsage;
  }
  // An unknown command: name the commands (CLI11 would only say that one is required).
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& c : commands) names.push_back(c.app->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::string near = sc::closest_match(argv[1], names), list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      std::cerr << "schedcheck: error: unknown command '" << argv[1] << "'"
                << (near.empty() ? "" : "; did you mean '" + near + "'?") << " (commands: " << list
                << "; schedcheck --help explains them)\n";
      return sc::cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An unknown option first: CLI11 would report a required option it hid ("--ranks is required").
    if (e.get_exit_code() != 0 && report_unknown_option(app, argc, argv)) return sc::cli::kExitUsage;
    int code = app.exit(e);
    return code == 0 ? 0 : sc::cli::kExitUsage;
  }
  try {
    for (const auto& c : commands)
      if (*c.app) {
        sc::cli::ProgressLine progress("schedcheck " + c.app->get_name());  // only on a terminal
        // verify: the pass running now, after the elapsed time ("working, 12 s: worst-case
        // memory"). Not for commands that verify many programs and say their own progress (synth).
        if (c.app->get_name() == "verify")
          sc::set_pass_observer([](const char* pass) { sc::cli::ProgressLine::set_detail(pass); });
        const int code = c.run();
        sc::set_pass_observer(nullptr);
        return code;
      }
  } catch (const std::bad_alloc&) {
    // Running out of memory is a resource limit, as a solver's is: nothing was decided (exit 5),
    // which is no fault of schedcheck's (exit 70) nor of the input's wording (exit 2).
    sc::set_pass_observer(nullptr);
    std::cerr << "schedcheck: error: out of memory: this input needs more memory than the machine or its limit "
                 "(ulimit -v, a container's) gives; nothing was decided (exit 5, inconclusive)\n";
    return sc::cli::kExitInconclusive;
  } catch (const std::exception& e) {
    std::cerr << "schedcheck: internal error: " << e.what() << "\n";
    return sc::cli::kExitInternal;
  }
  return sc::cli::kExitUsage;
}
