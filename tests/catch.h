// The one include of Catch2 (Debian ships 2.13); tests include this shim.
#pragma once
#include <catch2/catch.hpp>
