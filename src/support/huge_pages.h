// Transparent huge pages for the large arrays of a big program, and faulting a large input's
// heap in ahead of use.
//
// A 3 M-op program touches about 600 MB of fresh memory; with 4 KiB pages that is ~150 k page
// faults, each zeroing one page, which cost about a tenth of a whole verify. Where the kernel's
// transparent huge pages are in "madvise" mode (Debian's default), an array advised with
// MADV_HUGEPAGE before it is first written is backed by 2 MiB pages: 512x fewer faults.
// See the kernel's Documentation/admin-guide/mm/transhuge.rst.
#pragma once

#include <cstddef>
#include <vector>

namespace sc {

/// Advises the kernel to back the whole 2 MiB-aligned pages inside [data, data + bytes) with
/// transparent huge pages. A hint only: does nothing below 4 MiB, off Linux, or when the kernel
/// refuses (THP "never"); never fails, never changes contents.
void advise_huge_pages(const void* data, size_t bytes);

/// Takes about `bytes` of free heap (growing the heap as needed; at most a quarter of the
/// machine's memory) and has a background thread of the lowest priority (nice 19) fault those
/// pages in while the caller works, so that the kernel zeroes fresh pages on a core the caller
/// leaves idle (its serial phases) rather than in the caller's own page faults. On the largest
/// comms CSV, fresh pages cost a third of verify's time on a 2-core machine (bench/README.md).
///
/// Works only where large blocks come from the one brk heap and freed memory stays there: glibc
/// on Linux with M_MMAP_MAX 0 and no trimming, as the command line sets (cli/main.cc); a block
/// mapped on its own is left alone. The pages are populated with MADV_POPULATE_WRITE (Linux
/// 5.14), which maps them writable exactly as a first write would and never changes their
/// contents, so the caller's threads may allocate and write in the range meanwhile. The thread
/// is detached and stops at the first refusal (an older kernel).
///
/// Returns the bytes of heap the thread will populate: 0 below one 2 MiB page, when the block
/// did not come from the heap (see above), when no thread could be started, off glibc and
/// Linux, or under the sanitizers.
size_t prefault_heap(size_t bytes);

/// Reserves room for `n` elements of `v` and advises its buffer (advise_huge_pages) before any
/// of it is written. Call it before filling a large array (push_back, assign, resize).
template <typename T, typename A>
void reserve_huge(std::vector<T, A>& v, size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

}  // namespace sc
