// Tests of faulting the heap in ahead of use (support/huge_pages.h, prefault_heap).
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

#include "catch.h"
#include "support/huge_pages.h"

using namespace sc;

namespace {

/// This process's resident bytes (/proc/self/statm), or -1.
long long resident_bytes() {
  long long pages = -1, resident = -1;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int read = std::fscanf(f, "%lld %lld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? resident * static_cast<long long>(sysconf(_SC_PAGESIZE)) : -1;
}

}  // namespace

TEST_CASE("prefault_heap faults in the heap it grows and leaves what the caller writes there alone", "[memory]") {
#if defined(__linux__) && defined(__GLIBC__)
  // The allocator as the command line sets it (cli/main.cc): no mmap per large block, no trimming.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  constexpr size_t kAsked = size_t{96} << 20;
  const long long before = resident_bytes();
  const size_t grown = prefault_heap(kAsked);
  if (grown == 0) SC_SKIP("the heap did not grow here (a sanitizer's allocator)");
  // All of it but the first, partly used 2 MiB page.
  CHECK(grown + (size_t{2} << 20) >= kAsked);
  CHECK(grown <= kAsked + (size_t{2} << 20));

  // The caller allocates from that heap and writes there while the thread faults it in.
  std::vector<uint32_t> data(size_t{8} << 20);  // 32 MiB
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);

  // The thread makes the whole range resident (it runs at the lowest priority: allow it time).
  bool resident = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!resident && std::chrono::steady_clock::now() < deadline) {
    resident = resident_bytes() - before >= static_cast<long long>(grown) * 9 / 10;
    if (!resident) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(resident);
  size_t changed = 0;
  for (size_t i = 0; i < data.size(); ++i) changed += data[i] != static_cast<uint32_t>(i * 2654435761u);
  CHECK(changed == 0);
#else
  SC_SKIP("prefault_heap works on glibc and Linux only");
#endif
}

TEST_CASE("prefault_heap does nothing for less than a huge page", "[memory]") {
  CHECK(prefault_heap(0) == 0);
  CHECK(prefault_heap(size_t{1} << 20) == 0);
}
