// `schedcheck diff OLD NEW` and `schedcheck diff --git REV FILE...`: two verify results side by side.
#include <unistd.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/ci_verify.h"
#include "cli/common.h"
#include "cli/frontends.h"
#include "report/diff_report.h"

namespace sc::cli {
namespace {

namespace fs = std::filesystem;

/// Exit code of `diff --fail-on-regression` when a figure regressed beyond its threshold.
constexpr int kExitRegression = 19;

struct DiffArgs {
  std::vector<std::string> files;
  std::optional<std::string> git;
  std::string format = "text";
  std::optional<std::string> fail_on_regression;
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// `git show REV:./PATH` into `*text`; false with git's message in `*why`.
bool git_show(const std::string& rev, const std::string& path, std::string* text, std::string* why) {
  const std::string cmd = "git show " + shell_quote(rev + ":./" + path) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    *why = "cannot run git";
    return false;
  }
  char buf[65536];
  size_t n;
  text->clear();
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) text->append(buf, n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = text->substr(0, text->find('\n'));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) *why = "git is not installed";
    return false;
  }
  return true;
}

/// A folder under the temporary folder, removed with its files when this goes.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / fmt::format("schedcheck-diff-{}", ::getpid());
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

int run_diff(const DiffArgs& a) {
  std::optional<Thresholds> thresholds;
  if (a.fail_on_regression) {
    std::string why;
    thresholds = parse_thresholds(*a.fail_on_regression, &why);
    if (!thresholds) {
      std::cerr << "schedcheck: error: " << why << "\n";
      return kExitUsage;
    }
  }
  // Pairs of (label, path) to compare.
  struct Side {
    std::string label, path;
  };
  std::vector<std::pair<Side, Side>> pairs;
  std::unique_ptr<TempDir> tmp;
  if (a.git) {
    if (a.files.empty()) {
      std::cerr << "schedcheck: error: diff --git REV takes one or more files to compare with REV\n";
      return kExitUsage;
    }
    tmp = std::make_unique<TempDir>();
    for (size_t i = 0; i < a.files.size(); ++i) {
      const std::string& f = a.files[i];
      std::string text, why;
      if (!git_show(*a.git, f, &text, &why)) {
        std::cerr << fmt::format("{}: error: cannot read it at {}: {}\n", f, *a.git, why);
        return kExitSpec;
      }
      const fs::path dir = tmp->path() / std::to_string(i);
      fs::create_directories(dir);
      const std::string old_path = (dir / fs::path(f).filename()).string();
      if (!write_output(old_path, text)) return kExitUsage;
      pairs.push_back({Side{f + "@" + *a.git, old_path}, Side{f, f}});
    }
  } else {
    if (a.files.size() != 2) {
      std::cerr << "schedcheck: error: diff takes two files (OLD NEW), or --git REV FILE...\n";
      return kExitUsage;
    }
    pairs.push_back({Side{a.files[0], a.files[0]}, Side{a.files[1], a.files[1]}});
  }
  std::vector<ReportDiff> diffs;
  int exit = 0;
  for (const auto& [old_side, new_side] : pairs) {
    const FrontEnd& fo = front_end_for(old_side.path);
    const FrontEnd& fn = front_end_for(new_side.path);
    if (std::string(fo.name) != fn.name) {
      std::cerr << fmt::format("schedcheck: error: diff compares inputs of one kind: {} is one of the {}, {} one of the {}\n",
                               old_side.label, fo.what, new_side.label, fn.what);
      return kExitUsage;
    }
    int old_code = 0, new_code = 0;
    const std::string old_record = record_of(old_side.path, verify_one_file, &old_code);
    const std::string new_record = record_of(new_side.path, verify_one_file, &new_code);
    if (old_code == kExitSpec || new_code == kExitSpec) {
      std::cerr << fmt::format("schedcheck: error: {} has spec errors (above); nothing to compare\n",
                               old_code == kExitSpec ? old_side.label : new_side.label);
      return kExitSpec;
    }
    ReportDiff d = diff_reports(old_side.label, old_record, new_side.label, new_record);
    if (thresholds) find_regressions(d, *thresholds);
    if (!d.regressions.empty()) exit = kExitRegression;
    diffs.push_back(std::move(d));
  }
  if (a.format == "json") std::cout << diff_json(diffs, exit);
  else if (a.format == "markdown") std::cout << diff_markdown(diffs);
  else std::cout << diff_text(diffs);
  if (a.format != "text")  // the located regressions go to standard error too, for the job log
    for (const auto& d : diffs)
      for (const auto& r : d.regressions) std::cerr << d.new_label << ": REGRESSION: " << r << "\n";
  return exit;
}

}  // namespace

Command add_diff(CLI::App& parent) {
  auto a = std::make_shared<DiffArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "diff", "Compare the verify results of two inputs of one kind (two specs, two CSVs): verdict, findings added\n"
              "and removed, span or step time, bubble rate, peak and worst-case memory per rank, communication.\n"
              "  schedcheck diff examples/gpu-1f1b-p4-m8.yaml examples/gpu-zbh1-p4-m8.yaml\n"
              "  schedcheck diff --git origin/main specs/prod.yaml --fail-on-regression time=5%,memory=2%\n"
              "Exit codes: 0 no regression beyond the thresholds; 19 a regression; 1 usage; 2 spec error.");
  cmd->add_option("files", a->files, "OLD NEW, or with --git the files to compare with their version at REV")->required();
  cmd->add_option("--git", a->git, "compare each file as it is at this git revision (git show REV:path) with the working tree");
  cmd->add_option("--format", a->format, "text, json or markdown (a table for a pull-request comment)")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  cmd->add_option("--fail-on-regression", a->fail_on_regression,
                  "exit 19 when a figure grows by more than its threshold: time=5% (span, step time, exposed "
                  "communication), memory=2% (peak and worst-case bytes per rank), bubble=, comm= (bytes, "
                  "messages), a single figure key (span=1%), and findings (any new finding)");
  return {cmd, [a] { return run_diff(*a); }};
}

}  // namespace sc::cli
