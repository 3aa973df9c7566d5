// Transparent huge pages for the large arrays of a big program.
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

/// Reserves room for `n` elements of `v` and advises its buffer (advise_huge_pages) before any
/// of it is written. Call it before filling a large array (push_back, assign, resize).
template <typename T, typename A>
void reserve_huge(std::vector<T, A>& v, size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

}  // namespace sc
