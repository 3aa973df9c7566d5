// `schedcheck diff OLD NEW` and `schedcheck diff --git REV FILE...`: two verify results side by side.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/ci_verify.h"
#include "cli/common.h"
#include "config/key_changes.h"
#include "cli/frontends.h"
#include "config/readers.h"
#include "report/ci_report.h"
#include "report/diff_report.h"
#include "spec/yaml_util.h"
#include "support/source.h"

extern char** environ;

namespace sc::cli {
namespace {

namespace fs = std::filesystem;

struct DiffArgs {
  std::vector<std::string> files;
  std::optional<std::string> git;
  std::string format = "text";
  std::optional<std::string> fail_on_regression;
  config::JobContext job;          ///< framework configs: --gpus, --model, --hardware, --seq-len, ...
  std::vector<std::string> env;    ///< --env NAME=VALUE, into job.env
};

/// A private folder under the temporary folder (mkdtemp: mode 0700, a fresh name, never an
/// existing folder or a link), removed with its files when this goes.
class TempDir {
 public:
  /// Empty path() when it cannot be made (`why` says why).
  explicit TempDir(std::string* why) {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "schedcheck-diff-XXXXXX").string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (::mkdtemp(name.data())) path_ = name.data();
    else *why = std::strerror(errno);
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// What one git command gave: exit status, standard output (at most kMaxInputBytes) and standard
/// error, kept apart.
struct GitOutput {
  bool ran = false;        ///< git could be started
  int status = -1;         ///< its exit status (-1 when killed)
  bool too_large = false;  ///< standard output passed kMaxInputBytes (reading stopped, git killed)
  std::string out, err;
};

/// Runs `git ARGS...` without a shell (arguments are never interpreted: a revision or path that
/// starts with '-' stays an argument, as git's own --end-of-options places it). Standard error
/// goes to a file in `tmp`, so it never mixes with the content read from standard output.
GitOutput run_git(const std::vector<std::string>& args, const fs::path& tmp) {
  GitOutput g;
  int out_pipe[2];
  if (::pipe(out_pipe) != 0) return g;
  const std::string err_path = (tmp / ".git-stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, out_pipe[1]);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> argv_s = {"git"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& x : argv_s) argv.push_back(x.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "git", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    return g;
  }
  g.ran = true;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (g.out.size() + static_cast<size_t>(n) > kMaxInputBytes) {
      g.too_large = true;
      ::kill(pid, SIGKILL);
      break;
    }
    g.out.append(buf, static_cast<size_t>(n));
  }
  ::close(out_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (g.status == 127) g.ran = false;  // the shell convention for "not found" (posix_spawnp may report it so)
  std::string why;
  read_input_file(err_path, &g.err, &why);
  std::error_code ec;
  fs::remove(err_path, ec);
  return g;
}

/// The first line of git's standard error without its "fatal: " or "error: " prefix.
std::string git_reason(const GitOutput& g) {
  std::string line = g.err.substr(0, g.err.find('\n'));
  for (const char* prefix : {"fatal: ", "error: "})
    if (line.rfind(prefix, 0) == 0) line = line.substr(std::strlen(prefix));
  return line.empty() ? fmt::format("git exited with status {}", g.status) : line;
}

/// A file of `diff --git` at the revision and in the working tree.
struct GitFile {
  std::string arg;       ///< as given on the command line, or as git names it (found changed)
  std::string rel;       ///< relative to the repository's top folder
  std::string old_rel;   ///< its path at the revision: `rel`, or where a renamed file was
  bool in_tree = false;  ///< exists in the working tree
  bool at_rev = false;   ///< exists (as a file) at the revision (at old_rel)
};

/// Writes `text` to `path` (a fresh file in our private folder), creating its folders.
bool write_private(const fs::path& path, const std::string& text, std::string* why) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    *why = ec.message();
    return false;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = std::strerror(errno);
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0;
}

/// Reads `rel` at `commit` (a full hash) into `*text`: refused past kMaxInputBytes before it is
/// read (git cat-file -s), and cut off if it grows past it while read.
bool read_blob(const std::string& commit, const std::string& rel, const fs::path& tmp, std::string* text,
               std::string* why) {
  const std::string object = commit + ":" + rel;
  GitOutput size = run_git({"cat-file", "-s", object}, tmp);
  if (size.status != 0) {
    *why = git_reason(size);
    return false;
  }
  if (std::strtoull(size.out.c_str(), nullptr, 10) > kMaxInputBytes) {
    *why = "it is larger than 256 MiB";
    return false;
  }
  GitOutput blob = run_git({"cat-file", "blob", object}, tmp);
  if (blob.too_large) {
    *why = "it is larger than 256 MiB";
    return false;
  }
  if (blob.status != 0) {
    *why = git_reason(blob);
    return false;
  }
  *text = std::move(blob.out);
  return true;
}

/// Whether `rel` is a file (blob) at `commit`.
bool blob_exists(const std::string& commit, const std::string& rel, const fs::path& tmp) {
  GitOutput t = run_git({"cat-file", "-t", commit + ":" + rel}, tmp);
  return t.status == 0 && t.out.rfind("blob", 0) == 0;
}

/// `path` relative to the repository's top folder `top` (absolute paths and paths from any
/// working directory inside the repository), or nullopt when it lies outside.
std::optional<std::string> repo_relative(const std::string& path, const fs::path& top) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return std::nullopt;
  fs::path rel = abs.lexically_relative(top);
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel.generic_string();
}

/// Whether a changed file is an input schedcheck checks, judged from its text (`path` names the
/// copy to read: the working tree's, or the revision's in the private folder): a CSV; a YAML file
/// with a top-level schedcheck:, schedule:, mesh:, fsdp: or router: key; a torchtitan TOML, a
/// Megatron-LM launch script or argument file, or a DeepSpeed JSON config (readers.h).
bool is_checked_input(const std::string& name, const std::string& path) {
  const std::string ext = fs::path(name).extension().string();
  if (ext == ".csv") return true;
  if (ext == ".yaml" || ext == ".yml") {
    std::string text, why;
    if (!read_input_file(path, &text, &why)) return false;
    for (const char* key : {"schedcheck", "schedule", "mesh", "fsdp", "router"})
      if (yaml_util::declares_key(text, key)) return true;
    return false;
  }
  return config::is_torchtitan_config(path) || config::is_megatron_config(path) || config::is_deepspeed_config(path);
}

/// Splits git's -z output into its fields.
std::vector<std::string> nul_fields(const std::string& out) {
  std::vector<std::string> f;
  for (size_t start = 0; start < out.size();) {
    size_t end = out.find('\0', start);
    if (end == std::string::npos) end = out.size();
    f.push_back(out.substr(start, end - start));
    start = end + 1;
  }
  return f;
}

int run_diff(const DiffArgs& a_in) {
  DiffArgs a = a_in;
  if (std::string problem = parse_env(a_in.env, &a.job); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  Thresholds thresholds;  // none given: only a verdict that stops holding is a regression
  if (a.fail_on_regression) {
    std::string why;
    auto parsed = parse_thresholds(*a.fail_on_regression, &why);
    if (!parsed) {
      std::cerr << "schedcheck: error: " << why << "\n";
      return kExitUsage;
    }
    thresholds = *parsed;
  }
  // Pairs of (label, path) to compare.
  struct Side {
    std::string label, path;
  };
  std::vector<std::pair<Side, Side>> pairs;
  std::unique_ptr<TempDir> tmp;
  std::vector<GitFile> git_files;
  std::vector<ReportDiff> diffs;
  // A file that cannot be compared at all is one result in error; the others are still compared.
  auto error_pair = [&diffs](const std::string& old_label, const std::string& new_label, const std::string& message) {
    ReportDiff d;
    d.old_label = old_label;
    d.new_label = new_label;
    d.old_figures.verdict = d.new_figures.verdict = "error";
    d.old_figures.exit_code = d.new_figures.exit_code = kExitSpec;
    d.error = message;
    std::cerr << message << "\n";
    diffs.push_back(std::move(d));
  };
  std::string commit;
  fs::path repo_top;
  if (a.git) {
    std::string why;
    tmp = std::make_unique<TempDir>(&why);
    if (tmp->path().empty()) {
      std::cerr << "schedcheck: error: cannot make a temporary folder: " << why << "\n";
      return kExitUsage;
    }
    GitOutput top = run_git({"rev-parse", "--show-toplevel"}, tmp->path());
    if (!top.ran) {
      std::cerr << "schedcheck: error: diff --git needs git, which is not installed\n";
      return kExitUsage;
    }
    if (top.status != 0) {
      std::cerr << "schedcheck: error: diff --git: " << git_reason(top) << "\n";
      return kExitUsage;
    }
    // The revision is resolved once, to a commit: an option-like or ambiguous name is an error here,
    // never an option or a path of a later git command.
    GitOutput rev = run_git({"rev-parse", "--verify", "--quiet", "--end-of-options", *a.git + "^{commit}"}, tmp->path());
    if (rev.status != 0 || rev.out.size() < 40) {
      std::cerr << fmt::format("schedcheck: error: --git {}: not a revision of this repository (a commit, branch "
                               "or tag such as HEAD~1 or origin/main)\n", *a.git);
      return kExitUsage;
    }
    commit = rev.out.substr(0, rev.out.find('\n'));
    // Compared with the merge-base of REV and HEAD, as a pull request's changes are: what the base
    // branch gained since the branch point is not this change.
    GitOutput base = run_git({"merge-base", "--end-of-options", commit, "HEAD"}, tmp->path());
    if (base.status != 0 || base.out.size() < 40) {
      std::cerr << fmt::format("schedcheck: error: --git {}: no merge-base with HEAD ({}); a shallow clone needs the "
                               "history (fetch-depth: 0)\n", *a.git, base.status == 1 ? "unrelated histories" : git_reason(base));
      return kExitUsage;
    }
    commit = base.out.substr(0, base.out.find('\n'));
    const fs::path top_dir = fs::path(top.out.substr(0, top.out.find('\n')));
    repo_top = top_dir;
    if (a.files.empty()) {
      // The changed inputs: git's own list of changes since the merge-base (renames found with
      // -M), and files not yet added; everything else is unchanged and skipped.
      const std::string top_s = top_dir.string();
      GitOutput changed = run_git({"-C", top_s, "diff", "-M", "--name-status", "-z", "--no-relative", commit, "--"},
                                  tmp->path());
      GitOutput untracked = run_git({"-C", top_s, "ls-files", "--others", "--exclude-standard", "-z", "--full-name"},
                                    tmp->path());
      if (changed.status != 0 || untracked.status != 0) {
        std::cerr << "schedcheck: error: diff --git: " << git_reason(changed.status != 0 ? changed : untracked) << "\n";
        return kExitUsage;
      }
      std::vector<GitFile> found;
      const std::vector<std::string> f = nul_fields(changed.out);
      for (size_t k = 0; k < f.size();) {
        const std::string status = f[k++];
        if (status.empty() || k >= f.size()) break;
        GitFile g;
        g.rel = g.old_rel = f[k++];
        if ((status[0] == 'R' || status[0] == 'C') && k < f.size()) g.rel = f[k++];
        if (status[0] == 'C') g.old_rel = g.rel;  // a copy is a new file
        g.in_tree = status[0] != 'D';
        g.at_rev = status[0] != 'A' && status[0] != 'C';
        found.push_back(std::move(g));
      }
      for (const std::string& rel : nul_fields(untracked.out))
        if (!rel.empty()) found.push_back(GitFile{"", rel, rel, true, false});
      for (GitFile& g : found) {
        g.arg = (fs::path(top_s) / g.rel).lexically_relative(fs::current_path()).generic_string();
        if (g.arg.empty() || g.arg.rfind("..", 0) == 0) g.arg = (fs::path(top_s) / g.rel).string();
        std::string text;
        // Judged by its text: the working tree's, or a deleted file's at the revision.
        std::string look = g.arg;
        if (!g.in_tree) {
          look = (tmp->path() / "probe" / g.old_rel).string();
          if (!read_blob(commit, g.old_rel, tmp->path(), &text, &why) || !write_private(look, text, &why)) continue;
        }
        if (is_checked_input(g.rel, look)) git_files.push_back(std::move(g));
      }
      if (git_files.empty()) {
        const std::string none = fmt::format("no changed inputs since {} (merge-base {}): nothing to compare", *a.git,
                                             commit.substr(0, 12));
        if (a.format == "json") std::cout << diff_json({}, 0);
        else if (a.format == "sarif") std::cout << sarif_log(nlohmann::json::array(), 0);
        else if (a.format == "markdown") std::cout << "**schedcheck:** " << none << "\n";
        else std::cout << none << "\n";
        return 0;
      }
    }
    for (const std::string& f : a.files) {
      GitFile g{f, "", "", false, false};
      auto rel = repo_relative(f, top_dir);
      if (!rel) {
        error_pair(f + "@" + *a.git, f, fmt::format("{}: error: it is outside the git repository at {}", f, top_dir.string()));
        continue;
      }
      g.rel = g.old_rel = *rel;
      std::error_code ec;
      g.in_tree = fs::exists(f, ec);
      g.at_rev = blob_exists(commit, g.rel, tmp->path());
      if (!g.in_tree && !g.at_rev) {
        error_pair(f + "@" + *a.git, f, fmt::format("{}: error: no such file, in the working tree or at {}", f, *a.git));
        continue;
      }
      // A file of a submodule (or another repository nested in this one) is not in this
      // repository's tree at any revision: it is not an added file, it is another repository's.
      if (g.in_tree && !g.at_rev) {
        const fs::path dir = fs::absolute(f, ec).parent_path();
        GitOutput nested = run_git({"-C", dir.string(), "rev-parse", "--show-toplevel"}, tmp->path());
        const std::string nested_top = nested.out.substr(0, nested.out.find('\n'));
        if (nested.status == 0 && !nested_top.empty() && fs::path(nested_top) != top_dir) {
          error_pair(f + "@" + *a.git, f,
                     fmt::format("{}: error: it belongs to the repository at {} (a submodule or a nested repository), "
                                 "not to {}: run schedcheck diff --git there, with that repository's revision",
                                 f, nested_top, top_dir.string()));
          continue;
        }
      }
      git_files.push_back(std::move(g));
    }
    // Messages about a file read at the revision name it as "PATH@REV", never the temporary copy.
    const std::string folder = (tmp->path() / "rev").string() + "/";
    const std::string label = *a.git;
    set_source_display(folder, [folder, label](const std::string& p) { return p.substr(folder.size()) + "@" + label; });
  } else {
    if (a.files.size() != 2) {  // (with --git, no file list finds the changed inputs)
      std::cerr << "schedcheck: error: diff takes two files (OLD NEW), or --git REV FILE...\n";
      return kExitUsage;
    }
    pairs.push_back({Side{a.files[0], a.files[0]}, Side{a.files[1], a.files[1]}});
  }
  nlohmann::json sarif_records = nlohmann::json::array();  // the new sides' verify records
  std::function<void()> prepare_old;  // set per git file: materialises what the old side reads
  size_t read_mark = 0;               // input_files_read() before the new side of the current pair
  // One pair compared: `old_record` / `new_record` stand in for an absent side (an added or a
  // deleted file); otherwise each side is verified through its front-end.
  // Both sides of a framework config are read with the same facts (--gpus, --env, ...).
  const RunOneFile verify_config = [&a](const std::string& file, ReportSink& sink) {
    return verify_one_file(file, sink, a.job);
  };
  auto compare = [&](const Side& old_side, const Side& new_side, const nlohmann::json* old_record_given,
                     const nlohmann::json* new_record_given) -> int {
    if (!old_record_given && !new_record_given) {
      const FrontEnd& fo = front_end_for(old_side.path);
      const FrontEnd& fn = front_end_for(new_side.path);
      if (std::string(fo.name) != fn.name) {
        std::cerr << fmt::format("schedcheck: error: diff compares inputs of one kind: {} is one of the {}, {} one of "
                                 "the {}\n", old_side.label, fo.what, new_side.label, fn.what);
        return kExitUsage;
      }
    }
    int old_code = 0, new_code = 0;
    // The new side first: the files it reads are those to materialise for the old one.
    read_mark = input_files_read().size();
    const nlohmann::json new_record =
        new_record_given ? *new_record_given : record_of(new_side.path, verify_config, &new_code);
    if (new_code != kExitSpec && prepare_old) prepare_old();
    const nlohmann::json old_record =
        old_record_given ? *old_record_given : record_of(old_side.path, verify_config, &old_code);
    // A side with input errors (printed above) makes this pair one result in error.
    ReportDiff d = diff_reports(old_side.label, old_record, new_side.label, new_record);
    // SARIF: the new side's results, each carrying the lines this change touched.
    nlohmann::json sarif_record = new_record_given ? nlohmann::json() : new_record;
    // The keys that changed, read from both versions of the file.
    if (!old_record_given && !new_record_given && d.error.empty()) {
      std::string old_text, new_text, why;
      if (read_input_file(old_side.path, &old_text, &why) && read_input_file(new_side.path, &new_text, &why))
        d.keys = config::changed_keys(new_side.path, old_text, new_text);
    }
    if (sarif_record.is_object()) {
      sarif_record["keys_changed"] = key_changes_json(d.keys);
      sarif_records.push_back(std::move(sarif_record));
    }
    find_regressions(d, thresholds);
    diffs.push_back(std::move(d));
    return 0;
  };
  for (const auto& [old_side, new_side] : pairs)
    if (int code = compare(old_side, new_side, nullptr, nullptr)) return code;
  std::set<std::string> written;  // repository-relative paths materialised so far
  for (const GitFile& g : git_files) {
    const bool renamed = g.old_rel != g.rel && g.at_rev;
    const std::string old_label = (renamed ? g.old_rel : g.arg) + "@" + *a.git;
    const fs::path rev_dir = tmp->path() / "rev";
    const std::string old_path = (rev_dir / g.old_rel).string();
    std::string why;
    // Materialises the file at the revision, and every file the working-tree side read that the
    // revision has (a CSV or router spec it references), at the same place relative to it.
    auto materialise = [&](const std::string& rel) -> bool {
      if (!written.insert(rel).second) return true;
      std::string text;
      if (!read_blob(commit, rel, tmp->path(), &text, &why)) return false;
      return write_private(rev_dir / rel, text, &why);
    };
    if (g.at_rev && !materialise(g.old_rel)) {
      error_pair(old_label, g.arg, fmt::format("{}: error: cannot read it at {}: {}", g.arg, *a.git, why));
      continue;
    }
    // Only what this pair's new side read (input_files_read() holds every file the process has
    // read: walking all of it for each file made diff --git of K files cost K² git calls).
    prepare_old = [&] {
      const fs::path top = tmp->path();
      const std::vector<std::string>& all = input_files_read();
      for (size_t k = std::min(read_mark, all.size()); k < all.size(); ++k) {
        const std::string& read = all[k];
        if (read.rfind(rev_dir.string(), 0) == 0) continue;
        auto rel = repo_relative(read, repo_top);
        if (rel && blob_exists(commit, *rel, top)) materialise(*rel);
      }
    };
    static const nlohmann::json kAbsent = {{"verdict", "absent"}, {"exit_code", 0}};
    static const nlohmann::json kDeleted = {{"verdict", "deleted"}, {"exit_code", 0}};
    int code = 0;
    if (!g.in_tree) code = compare(Side{old_label, old_path}, Side{g.arg + " (deleted)", g.arg}, nullptr, &kDeleted);
    else if (!g.at_rev) code = compare(Side{old_label + " (absent)", old_path}, Side{g.arg, g.arg}, &kAbsent, nullptr);
    else if (renamed) code = compare(Side{old_label, old_path}, Side{g.arg + " (renamed)", g.arg}, nullptr, nullptr);
    else code = compare(Side{old_label, old_path}, Side{g.arg, g.arg}, nullptr, nullptr);
    prepare_old = nullptr;
    if (code) return code;
  }
  const int exit = diff_exit_code(diffs);
  if (a.format == "json") std::cout << diff_json(diffs, exit);
  else if (a.format == "markdown") std::cout << diff_markdown(diffs, exit);
  else if (a.format == "sarif") std::cout << sarif_log(sarif_records, exit);
  else std::cout << diff_text(diffs, exit);
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
              "and removed, span or step time, bubble rate, peak and worst-case memory per rank, communication; for\n"
              "framework configs also tokens per step, throughput (tokens/s) and MFU.\n"
              "  schedcheck diff examples/gpu-1f1b-p4-m8.yaml examples/gpu-zbh1-p4-m8.yaml\n"
              "  schedcheck diff --git origin/main specs/prod.yaml --fail-on-regression time=5%,memory=2%\n"
              "Exit codes: 0 no regression beyond the thresholds; 19 a regression; 1 usage; 2 spec error.");
  cmd->add_option("files", a->files,
                  "OLD NEW, or with --git the files to compare with their version at the merge-base of REV and HEAD "
                  "(none: every changed input, found by git diff -M)");
  cmd->add_option("--git", a->git,
                  "compare each file as it is at the merge-base of this git revision and HEAD with the working tree; "
                  "without files, the inputs changed since then: added, deleted (with the old verdict) and renamed "
                  "(old path -> new path)");
  cmd->add_option("--format", a->format,
                  "text, json, markdown (a table for a pull-request comment) or sarif (the new side's findings and "
                  "errors, each with related locations at the lines the change touched)")
      ->check(one_of({"text", "json", "markdown", "sarif"}));
  cmd->add_option("--gpus", a->job.gpus, "framework configs: the world size, when the config does not fix it")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--model", a->job.model, "framework configs: the model preset, when the config names none");
  cmd->add_option("--hardware", a->job.hardware, "framework configs: the GPU preset");
  cmd->add_option("--seq-len", a->job.seq_len, "framework configs: the sequence length, when the config states none");
  cmd->add_option("--micro-batch-size", a->job.micro_batch_size,
                  "DeepSpeed configs that leave the microbatch size to the autotuner")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--grad-accum", a->job.grad_accum, "DeepSpeed configs that leave accumulation to the autotuner")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--env", a->env, "Megatron-LM launch scripts: NAME=VALUE of the launch environment, repeatable");
  cmd->add_option("--fail-on-regression", a->fail_on_regression,
                  "exit 19 when a figure changes for the worse by more than its threshold: time=5% (span, step "
                  "time, exposed communication, and a fall of throughput in tokens/s), memory=2% (peak and "
                  "worst-case bytes per rank), bubble=, comm= (bytes, messages), throughput= and mfu= (a fall, "
                  "framework configs), a single figure key (span=1%), and findings (any new finding). When the "
                  "tokens per step differ, step time and communication are shown but not compared");
  return {cmd, [a] { return run_diff(*a); }};
}

}  // namespace sc::cli
