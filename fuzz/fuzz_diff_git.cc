// libFuzzer harness: `schedcheck diff --git REV FILE...` and its handling of what a caller
// passes. The input is newline-separated: the first line is REV, each further line a FILE (at
// most four); "@" in a line stands for the sandbox's absolute path. The command runs in process
// (run_cli) inside a sandbox git repository made once per process: two commits (tag v1 on the
// first), a spec that references a CSV, a file added in the working tree and one deleted from
// it. Whatever REV and FILE say, the command must not crash or report an internal error (exit
// 70), must leave the working tree, the index and every ref as they were, must hand git nothing
// as an option (no file such as `o` appears from `--output=o`), and must leave no temporary
// folder behind (TMPDIR is a private folder checked empty after each run). A violation aborts.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli_util.h"
#include "support/source.h"

#include "sandbox_util.h"

namespace {

namespace fs = std::filesystem;

using sc::fuzz::slurp;

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// Every regular file under `d` (the .git folder's refs, HEAD and index included, its objects
/// and logs left out: reading them is all git may do) with its content.
std::map<std::string, std::string> snapshot(const fs::path& d) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(d); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), d).generic_string();
    if (rel == ".git/objects" || rel == ".git/logs") {
      it.disable_recursion_pending();
      continue;
    }
    out[rel] = it->is_regular_file() ? slurp(it->path()) : std::string("<dir>");
  }
  return out;
}

struct Sandbox {
  fs::path repo, tmp;
  std::map<std::string, std::string> before;
};

const Sandbox& sandbox() {
  static const Sandbox s = [] {
    Sandbox b;
    const fs::path root = fs::temp_directory_path() / ("schedcheck-fuzz-diffgit-" + std::to_string(getpid()));
    fs::remove_all(root);
    b.repo = root / "repo";
    b.tmp = root / "tmp";
    fs::create_directories(b.repo / "sub");
    fs::create_directories(b.tmp);
    const std::string git = "cd '" + b.repo.string() + "' && git -c init.defaultBranch=main init -q && "
                            "git config user.email f@example.com && git config user.name fuzz && "
                            "git config commit.gpgsign false && ";
    put(b.repo / "spec.yaml", "schedcheck: 1\nranks: 2\nschedule:\n  csv: ref.csv\n  format: compute_only\n");
    put(b.repo / "ref.csv", "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
    put(b.repo / "sub" / "gone.yaml", "schedcheck: 1\nranks: 2\nschedule:\n  actions:\n    0: 0F0 0B0\n    1: 1F0 1B0\n");
    if (std::system((git + "git add -A && git commit -q -m one && git tag v1").c_str()) != 0) std::abort();
    put(b.repo / "ref.csv", "0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n");
    if (std::system(("cd '" + b.repo.string() + "' && git commit -q -am two").c_str()) != 0) std::abort();
    put(b.repo / "new.yaml", "schedcheck: 1\nranks: 2\nschedule:\n  actions:\n    0: 0F0 0F1 0B0 0B1\n    1: 1F0 1F1 1B0 1B1\n");
    fs::remove(b.repo / "sub" / "gone.yaml");
    b.before = snapshot(b.repo);
    // The command's temporary folders go to a private TMPDIR, checked empty after each run.
    setenv("TMPDIR", b.tmp.c_str(), 1);
    // Reports go nowhere; libFuzzer writes to standard error, which std::cerr no longer uses.
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0 || ::dup2(null, STDOUT_FILENO) < 0) std::abort();
    ::close(null);
    return b;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Sandbox& s = sandbox();
  std::vector<std::string> lines(1);
  for (size_t i = 0; i < size && lines.size() <= 5; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      lines.emplace_back();
    } else if (c == '@') {
      lines.back() += s.repo.string();
    } else {
      if (c == '\0') return 0;  // argv cannot hold it
      lines.back() += c;
    }
  }
  if (lines.size() > 5) lines.resize(5);
  for (size_t k = 1; k < lines.size(); ++k) {
    const std::string& f = lines[k];
    // Reading outside the sandbox (a device, /proc, a FIFO, standard input) is not this
    // harness's question: only relative paths that stay inside and the sandbox's absolute ones.
    if (f == "-" || f.find("..") != std::string::npos) return 0;
    if (!f.empty() && f[0] == '/' && f.rfind(s.repo.string(), 0) != 0) return 0;
  }
  std::vector<std::string> args = {"schedcheck", "diff", "--git", lines[0]};
  args.insert(args.end(), lines.begin() + 1, lines.end());
  const fs::path cwd = fs::current_path();
  fs::current_path(s.repo);
  const int code = sc::fuzz::run_cli_quiet(std::move(args));
  fs::current_path(cwd);
  sc::clear_sources();  // each input starts as a fresh process would (no files read, no sources)

  if (code == 70) std::abort();                              // an internal error
  if (snapshot(s.repo) != s.before) std::abort();            // the tree, index or refs changed
  if (!fs::is_empty(s.tmp)) std::abort();                    // a temporary folder left behind
  return 0;
}
