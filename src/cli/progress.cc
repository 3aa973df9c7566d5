#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace sc::cli {

namespace {
std::mutex g_detail_mu;
std::string g_detail;  // guarded by g_detail_mu
}  // namespace

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
  if (shown_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
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
    std::fprintf(stderr, "\r\x1b[K%s: working, %.0f s%s%s", label_.c_str(), s, detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stderr);
    shown_ = true;
    next = clock::now() + std::chrono::milliseconds(500);
  }
}

}  // namespace sc::cli
