// Progress on standard error for runs that take more than a moment, only when it is a terminal.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <streambuf>
#include <string>
#include <thread>

namespace sc::cli {

/// While it lives, and once `delay_s` has passed (default 1.5 s; the environment variable
/// SCHEDCHECK_PROGRESS_DELAY_S overrides it), rewrites one status line on standard error every
/// half second: "schedcheck verify: working, 12 s". Does nothing when standard error is not a
/// terminal (isatty), so logs, pipes and CI output never hold it. The line is erased when it
/// goes, and before each write of the command's own output to the terminal (std::cout when it
/// is one, std::cerr): the output scrolls above it, and the line is drawn again below it only
/// once that output has ended its line, so no output line starts on the status line.
class ProgressLine {
 public:
  explicit ProgressLine(std::string label);
  ~ProgressLine();
  /// Sets the detail shown after the elapsed time ("…, 12 s: span <= 26 s? unsat"), for the
  /// line of whatever command is running; thread-safe; empty clears it.
  static void set_detail(std::string detail);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

 private:
  class Passthrough;
  void loop();
  /// Under mu_: erases the line if it is shown.
  void erase_locked();

  std::string label_;
  double delay_s_ = 1.5;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool shown_ = false;
  bool at_line_start_ = true;  ///< the command's output to the terminal ended its last line
  std::unique_ptr<Passthrough> out_, err_;
  std::streambuf* out_orig_ = nullptr;
  std::streambuf* err_orig_ = nullptr;
  std::thread thread_;
};

}  // namespace sc::cli
