// The schedcheck command line.
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#if defined(__linux__) && defined(__GLIBC__)
#include <limits.h>
#include <malloc.h>
#include <unistd.h>
#endif

#include "cli/cli.h"
#include "support/sanitized.h"


namespace {

/// On glibc, runs the binary again with the malloc tunable `glibc.malloc.hugetlb=1` unless the
/// environment already sets it (to anything, 0 included): malloc then advises the memory it
/// takes from the kernel for transparent huge pages (glibc's manual, "Memory Allocation
/// Tunables"), and the 550 MB a 3 M-op program touches fault in 2 MiB pages instead of 4 KiB
/// ones (support/huge_pages.h; on the largest comms CSV, verify goes from about 3.2 s to 2.2 s,
/// bench/README.md). Tunables are read only at startup, hence the exec. If the exec fails the
/// run goes on as it is; `SCHEDCHECK_NO_REEXEC=1` turns this off. Not under the sanitizers.
void reexec_with_huge_pages(char** argv) {
#if defined(__linux__) && defined(__GLIBC__) && !defined(SC_SANITIZED)
  if (std::getenv("SCHEDCHECK_NO_REEXEC") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return;
  const std::string value =
      tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":glibc.malloc.hugetlb=1" : "glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  // By the binary's real path, not /proc/self/exe: the kernel names the new process after the
  // file it runs, so the process stays `schedcheck` for ps -C, pgrep and top ("exe" otherwise).
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    execv(self, argv);  // fails when the file was replaced or removed since it started: then as below
  }
  execv("/proc/self/exe", argv);
  // Still here: the exec failed (no /proc); go on with the default allocator.
  if (tunables != nullptr) setenv("GLIBC_TUNABLES", tunables, 1);
  else unsetenv("GLIBC_TUNABLES");
#else
  (void)argv;
#endif
}

/// On glibc, keeps freed memory for the process's own reuse: every block comes from the heap
/// (no mmap per large block, M_MMAP_MAX 0) and the heap is never trimmed (M_TRIM_THRESHOLD).
/// A large input's arrays are built, freed and allocated again pass after pass (the parsed
/// schedule, then the program's ops, then each pass's own arrays); returned to the kernel, each
/// new array faults its pages in again and the kernel zeroes them, which on the largest comms
/// CSV cost about a fifth of verify's time (bench/README.md). The peak is what the run needs
/// anyway; a run is one command, so nothing is held longer than the process lives.
/// Every thread allocates from that one heap (M_ARENA_MAX 1): a second thread (half of a large
/// CSV's rows, the worst case of memory beside the deadlock walk) otherwise gets an arena of its
/// own, whose freed memory the other thread never reuses, and which prefault_heap does not
/// reach. The few threads allocate large blocks, rarely, so they hardly meet on its lock.
void keep_freed_memory() {
#if defined(__linux__) && defined(__GLIBC__) && !defined(SC_SANITIZED)
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_huge_pages(argv);
  keep_freed_memory();
  return sc::cli::run_cli(argc, argv);
}
