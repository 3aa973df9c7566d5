// The one include of Catch2 (Debian ships 2.13); tests include this shim.
#pragma once
#include <cstdlib>
#include <iostream>

#include <catch2/catch.hpp>

/// Ends the running test as skipped, saying why (a missing corpus, tool or package). Catch2 2.13
/// has no SKIP: under ctest (tests/CMakeLists.txt sets SCHEDCHECK_SKIP_EXIT and the matching
/// SKIP_RETURN_CODE, one process per test case) the process exits with that code and ctest reports
/// the test as skipped, never as passed; run by hand, a warning and a return.
#define SC_SKIP(why)                                                        \
  do {                                                                      \
    if (const char* sc_skip_code = std::getenv("SCHEDCHECK_SKIP_EXIT")) {   \
      std::cout << "SKIPPED: " << why << std::endl;                         \
      std::_Exit(std::atoi(sc_skip_code));                                  \
    }                                                                       \
    WARN(why);                                                              \
    return;                                                                 \
  } while (0)
