// Two independent pieces of work at once: the largest inputs' passes share a machine's cores.
#pragma once

#include <exception>
#include <system_error>
#include <thread>
#include <utility>

namespace sc {

/// Runs `a` on the calling thread and `b` on a second thread, and returns when both are done.
/// The two must not write the same data. An exception from either is rethrown here after both
/// have finished (`a`'s first). Where no thread can be started (std::system_error), `b` runs
/// after `a` on the calling thread. `parallel` false runs both on the calling thread, in order.
template <typename A, typename B>
void run_concurrently(bool parallel, A&& a, B&& b) {
  if (!parallel) {
    a();
    b();
    return;
  }
  std::exception_ptr b_error;
  std::thread t;
  try {
    t = std::thread([&] {
      try {
        b();
      } catch (...) {
        b_error = std::current_exception();
      }
    });
  } catch (const std::system_error&) {
    a();
    b();
    return;
  }
  std::exception_ptr a_error;
  try {
    a();
  } catch (...) {
    a_error = std::current_exception();
  }
  t.join();
  if (a_error) std::rethrow_exception(a_error);
  if (b_error) std::rethrow_exception(b_error);
}

}  // namespace sc
