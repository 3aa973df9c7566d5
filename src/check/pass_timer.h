// Timing the passes of a verify run: each pass's wall time goes to the result's stats.
#pragma once

#include <chrono>
#include <type_traits>
#include <vector>

#include "check/verify.h"

namespace sc {

/// Called with a pass's name as it starts (from any thread: a pass may run beside another), so a
/// long run can say where it is ("schedcheck verify: working, 12 s: worst-case memory"). A
/// process-wide hook, unset (null) by default; the command line sets it while a command runs.
using PassObserver = void (*)(const char* pass);
void set_pass_observer(PassObserver observer);
PassObserver pass_observer();

/// Runs passes and appends (name, wall seconds) to `out`; `run` returns what the pass returns.
class PassTimer {
 public:
  explicit PassTimer(std::vector<PassTime>& out) : out_(out) {}
  template <typename F>
  auto run(const char* name, F&& f) {
    if (PassObserver observe = pass_observer()) observe(name);
    auto t0 = std::chrono::steady_clock::now();
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      record(name, t0);
    } else {
      auto v = f();
      record(name, t0);
      return v;
    }
  }

 private:
  void record(const char* name, std::chrono::steady_clock::time_point t0) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out_.push_back({name, s});
  }
  std::vector<PassTime>& out_;
};

}  // namespace sc
