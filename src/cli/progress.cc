#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace sc::cli {

namespace {
std::mutex g_detail_mu;
std::string g_detail;  // guarded by g_detail_mu
}  // namespace

// The command's output stream while the line lives: each write erases the line first and notes
// whether the output now ends a line, under the line's lock, so a redraw never lands between the
// erase and the text, nor in the middle of an output line.
class ProgressLine::Passthrough : public std::streambuf {
 public:
  Passthrough(ProgressLine& line, std::streambuf* to) : line_(line), to_(to) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(line_.mu_);
    line_.erase_locked();
    std::streamsize written = to_->sputn(s, n);
    if (written > 0) line_.at_line_start_ = s[written - 1] == '\n';
    return written;
  }
  int sync() override { return to_->pubsync(); }

 private:
  ProgressLine& line_;
  std::streambuf* to_;
};

void ProgressLine::erase_locked() {
  if (!shown_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

void ProgressLine::set_detail(std::string detail) {
  std::lock_guard<std::mutex> lock(g_detail_mu);
  g_detail = std::move(detail);
}

ProgressLine::ProgressLine(std::string label) : label_(std::move(label)) {
  if (!::isatty(STDERR_FILENO)) return;
  if (const char* d = std::getenv("SCHEDCHECK_PROGRESS_DELAY_S")) {
    char* end = nullptr;
    double v = std::strtod(d, &end);
    if (end != d && v >= 0) delay_s_ = v;
  }
  if (::isatty(STDOUT_FILENO)) {
    out_ = std::make_unique<Passthrough>(*this, std::cout.rdbuf());
    out_orig_ = std::cout.rdbuf(out_.get());
  }
  err_ = std::make_unique<Passthrough>(*this, std::cerr.rdbuf());
  err_orig_ = std::cerr.rdbuf(err_.get());
  if (delay_s_ <= 0) {  // shown at once, however soon the work ends (the thread may start late)
    std::fprintf(stderr, "\r\x1b[K%s: working, 0 s", label_.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  erase_locked();
  if (out_orig_) std::cout.rdbuf(out_orig_);
  if (err_orig_) std::cerr.rdbuf(err_orig_);
}

void ProgressLine::loop() {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  auto next = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(delay_s_));
  while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
    const double s = std::chrono::duration<double>(clock::now() - start).count();
    std::string detail;
    {
      std::lock_guard<std::mutex> dl(g_detail_mu);
      detail = g_detail;
    }
    next = clock::now() + std::chrono::milliseconds(500);
    if (!at_line_start_) continue;        // the output's line is not done: draw below it later
    if (out_orig_) out_orig_->pubsync();  // what the output wrote so far goes above the line
    std::fprintf(stderr, "\r\x1b[K%s: working, %.0f s%s%s", label_.c_str(), s, detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
}

}  // namespace sc::cli
