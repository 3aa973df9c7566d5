# Finds Z3 (Debian's libz3-dev ships no CMake package): defines the imported target Z3::Z3.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_Z3 QUIET z3)
endif()
find_path(Z3_INCLUDE_DIR z3++.h HINTS ${PC_Z3_INCLUDE_DIRS})
find_library(Z3_LIBRARY NAMES z3 HINTS ${PC_Z3_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Z3 REQUIRED_VARS Z3_LIBRARY Z3_INCLUDE_DIR VERSION_VAR PC_Z3_VERSION)
if(Z3_FOUND AND NOT TARGET Z3::Z3)
  add_library(Z3::Z3 UNKNOWN IMPORTED)
  set_target_properties(Z3::Z3 PROPERTIES IMPORTED_LOCATION "${Z3_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${Z3_INCLUDE_DIR}")
endif()
