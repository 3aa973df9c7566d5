// libFuzzer harness: the output rule of every command (cli/common.h). Each input spells up to
// four output paths from fragments (., //, sub/.., a link, a dangling link, a folder, the input,
// a file the input references, new names) in a sandbox folder; when check_output_paths accepts them, write_outputs
// must write each one's text and leave the input, the referenced file and the link as they were,
// with no temporary file behind. A violation aborts (a finding).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/common.h"
#include "support/source.h"

#include "sandbox_util.h"

namespace {

namespace fs = std::filesystem;

using sc::fuzz::slurp;

/// The sandbox, made once per process: input.yaml (the input), ref.csv (a file it references,
/// read through read_input_file as a front-end reads it), link -> input.yaml, dangling ->
/// nowhere (absent), sub/.
const fs::path& sandbox() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("schedcheck-fuzz-out-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d / "sub");
    std::ofstream(d / "input.yaml") << "schedcheck: 1\n";
    std::ofstream(d / "ref.csv") << "0F0,0B0\n";
    fs::create_symlink(d / "input.yaml", d / "link");
    fs::create_symlink(d / "nowhere", d / "dangling");  // written through: creates its target
    std::string text, why;
    sc::read_input_file((d / "ref.csv").string(), &text, &why);
    return d;
  }();
  return dir;
}

// No "../" alone: every path stays in the sandbox ("sub/../" comes back to it).
const char* const kFragments[] = {"input.yaml", "ref.csv", "link", "sub/", "./", "out1", "out2", "sub/out3",
                                  "/", "sub/../", "dangling", "input.yaml/", "out1.tmp"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& d = sandbox();
  // Up to four paths; byte 0xff ends a path, other bytes pick fragments.
  std::vector<std::string> paths(1, d.string() + "/");
  for (size_t i = 0; i < size && paths.size() <= 4; ++i) {
    if (data[i] == 0xff) {
      paths.push_back(d.string() + "/");
      continue;
    }
    if (paths.back().size() < 512) paths.back() += kFragments[data[i] % (sizeof kFragments / sizeof *kFragments)];
  }
  if (paths.size() > 4) paths.resize(4);
  const std::vector<std::string> inputs = {(d / "input.yaml").string()};
  std::vector<std::pair<std::string, std::optional<std::string>>> named;
  std::vector<sc::cli::OutputFile> files;
  for (size_t k = 0; k < paths.size(); ++k) {
    const std::string option = "--out" + std::to_string(k);
    named.push_back({option, paths[k]});
    files.push_back({option, paths[k], "text " + std::to_string(k) + "\n"});
  }
  if (!sc::cli::check_output_paths(named, inputs).empty()) return 0;  // refused before any work
  const bool written = sc::cli::write_outputs(files, inputs);
  // Never the input, the referenced file or the link itself.
  if (slurp(d / "input.yaml") != "schedcheck: 1\n") std::abort();
  if (slurp(d / "ref.csv") != "0F0,0B0\n") std::abort();
  if (!fs::is_symlink(d / "link") || !fs::is_symlink(d / "dangling")) std::abort();
  // All or none: every output holds its text when written.
  if (written)
    for (const auto& f : files)
      if (slurp(f.path) != f.text) std::abort();
  // No temporary file left behind.
  for (const auto& e : fs::recursive_directory_iterator(d))
    if (e.path().filename().string().rfind(".", 0) == 0) std::abort();
  // Outputs go, so the next input starts from the same sandbox.
  for (const auto& name : {"out1", "out2", "sub/out3", "nowhere", "out1.tmp"}) fs::remove(d / name);
  return 0;
}
