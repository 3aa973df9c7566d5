// A wall-clock deadline for solver calls: a thread that interrupts the solver once it passes.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace sc {

/// Runs `interrupt` (for Z3, `context::interrupt()`, which is thread-safe) from its own thread
/// once `seconds` of wall time have passed since construction, and again every 50 ms until it is
/// destroyed (an interrupt that arrives between two solver calls is otherwise lost). A Z3 timeout
/// is a hint that a long preprocessing step can overrun by seconds; this is the hard limit.
/// `seconds` <= 0 or not finite: no deadline, no thread. A limit above kMaxSeconds (about three
/// years) is taken as kMaxSeconds, so the deadline never overflows the clock's 64-bit nanosecond
/// count (which 1e10 s would, and an overflowed deadline lies in the past). Own it after the
/// context it interrupts (destroyed first). Callers check expired() before starting another
/// solver call, and discard any answer a solver gave once expired() is true: an interrupted Z3
/// call is not a verdict.
class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  /// The longest deadline kept, in seconds (1e8 s, about 3.2 years); longer limits are clamped.
  static constexpr double kMaxSeconds = 1e8;

  Watchdog(double seconds, std::function<void()> interrupt) : start_(Clock::now()), seconds_(seconds) {
    if (!(seconds > 0) || !std::isfinite(seconds)) return;
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(std::min(seconds, kMaxSeconds)));
    thread_ = std::thread([this, f = std::move(interrupt)] {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_until(lock, deadline_, [this] { return stop_; })) return;
      expired_ = true;
      do f();
      while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; }));
    });
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// True once the deadline has passed (whether or not a solver call was interrupted).
  bool expired() const { return has_deadline() && (expired_.load() || Clock::now() >= deadline_); }
  /// Whole milliseconds left before the deadline (at least 1), for a solver's own timeout
  /// parameter; `fallback` when there is no deadline.
  unsigned ms_left(unsigned fallback = 4'000'000'000u) const {
    if (!has_deadline()) return fallback;
    double ms = std::chrono::duration<double, std::milli>(deadline_ - Clock::now()).count();
    return static_cast<unsigned>(std::clamp(ms, 1.0, 4.0e9));
  }
  bool has_deadline() const { return seconds_ > 0 && std::isfinite(seconds_); }
  double seconds() const { return seconds_; }

 private:
  Clock::time_point start_;
  Clock::time_point deadline_{};
  double seconds_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

}  // namespace sc
