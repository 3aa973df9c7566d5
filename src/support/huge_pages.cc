#include "support/huge_pages.h"
#include "support/sanitized.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <thread>

#if defined(__linux__)
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#endif


#if defined(__linux__) && defined(__GLIBC__)
extern "C" char end;  // the end of the program's data, where the brk heap begins (end(3))
#endif

namespace sc {
#if defined(__linux__) && defined(__GLIBC__) && !defined(SC_SANITIZED)
namespace {
constexpr uintptr_t kChunk = uintptr_t{2} << 20;  // prefault_heap: one huge page a call, so the caller's faults wait less
}  // namespace
#endif

void advise_huge_pages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (data == nullptr || bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t stop = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (stop > begin) madvise(reinterpret_cast<void*>(begin), stop - begin, MADV_HUGEPAGE);  // a hint: errors ignored
#else
  (void)data;
  (void)bytes;
#endif
}

size_t prefault_heap(size_t bytes) {
#if defined(__linux__) && defined(__GLIBC__) && !defined(SC_SANITIZED)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (Linux 5.14), older headers lack the name
  // Never more than a quarter of the machine's memory: the caller's own allocations decide the rest.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) bytes = std::min(bytes, static_cast<size_t>(pages) / 4 * static_cast<size_t>(page));
  if (bytes < kChunk) return 0;
  // Allocated and freed at once: with M_MMAP_MAX 0 the block is carved from the heap (from the
  // free memory at its top, which brk grows as needed), and freed it stays there, free, for the
  // caller's next allocations (no trimming). A block mapped on its own (mmap allowed) lies
  // outside [end of the program's data, program break) and is not touched: freed, it is gone.
  char* const block = static_cast<char*>(std::malloc(bytes));
  if (block == nullptr) return 0;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(block);
  const uintptr_t hi = lo + bytes;
  const uintptr_t brk = reinterpret_cast<uintptr_t>(sbrk(0));
  const bool in_heap = lo >= reinterpret_cast<uintptr_t>(&end) && brk != static_cast<uintptr_t>(-1) && hi <= brk;
  std::free(block);
  const uintptr_t begin = (lo + kChunk - 1) & ~(kChunk - 1);
  if (!in_heap || hi <= begin) return 0;
  try {
    std::thread([begin, hi] {
      setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);  // this thread only (Linux); a hint
      for (uintptr_t at = begin; at < hi; at += kChunk)
        if (madvise(reinterpret_cast<void*>(at), std::min(kChunk, hi - at), kPopulateWrite) != 0) return;
    }).detach();
  } catch (const std::system_error&) {
    return 0;
  }
  return hi - begin;
#else
  (void)bytes;
  return 0;
#endif
}

}  // namespace sc
