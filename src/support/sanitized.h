// SC_SANITIZED: defined to 1 when the build runs under a sanitizer (ASan, TSan, MSan), whose
// allocator replaces glibc's: the allocator tuning and heap prefaulting then stand aside.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#ifndef SC_SANITIZED
#define SC_SANITIZED 1
#endif
#endif
