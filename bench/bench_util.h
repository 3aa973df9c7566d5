// Shared helpers of the benchmarks: peak resident set, a measurement in its own child process,
// and the growth exponent between two sizes.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <type_traits>

namespace sc::bench {

/// Peak resident set of this process so far, in bytes (ru_maxrss is in KiB on Linux).
inline double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

/// Runs `measure()` in a child process, so that its peak resident set is its own, and returns
/// the Row it produced (a value-initialised Row when the child failed). Row must be trivially
/// copyable: it travels through a pipe.
template <typename Row, typename F>
Row in_child(F&& measure) {
  static_assert(std::is_trivially_copyable_v<Row>);
  int fds[2];
  if (pipe(fds) != 0) return Row{};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const Row row = measure();
    const ssize_t n = write(fds[1], &row, sizeof row);
    _exit(n == static_cast<ssize_t>(sizeof row) ? 0 : 1);
  }
  close(fds[1]);
  Row row{};
  if (child < 0 || read(fds[0], &row, sizeof row) != static_cast<ssize_t>(sizeof row)) row = Row{};
  close(fds[0]);
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  return row;
}

/// The growth exponent log(t2 / t1) / log(n2 / n1) of a cost t at sizes n1 and n2 (1 = linear),
/// or NaN when a cost is under `floor` (too small to say) or the sizes are equal.
inline double growth_exponent(double t1, double t2, double n1, double n2, double floor = 0.005) {
  if (t1 < floor || t2 < floor || n1 == n2) return std::nan("");
  return std::log(t2 / t1) / std::log(n2 / n1);
}

}  // namespace sc::bench
