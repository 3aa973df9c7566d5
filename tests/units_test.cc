// Tests of quantity parsing and formatting (support/units.h).
#include <cmath>
#include <limits>
#include <string>

#include "catch.h"
#include "support/units.h"

using namespace sc;

TEST_CASE("durations read with every unit and bare numbers as seconds", "[units]") {
  CHECK(parse_duration_s("1.5ms").value() == Approx(0.0015));
  CHECK(parse_duration_s("27s").value() == 27.0);
  CHECK(parse_duration_s("10us").value() == Approx(1e-5));
  CHECK(parse_duration_s("10\xC2\xB5s").value() == Approx(1e-5));
  CHECK(parse_duration_s("250ns").value() == Approx(2.5e-7));
  CHECK(parse_duration_s("2").value() == 2.0);
  CHECK(parse_duration_s("1e-3").value() == Approx(1e-3));
  CHECK(parse_duration_s("0").value() == 0.0);
  // Spaces between number and unit, and around the text, are allowed.
  CHECK(parse_duration_s(" 18.522 ms ").value() == Approx(0.018522));
  // ZB paper appendix, p = 8, m = 24: T_comm 0.601 ms (docs/facts/pipeline-schedules.md).
  CHECK(parse_duration_s("0.601ms").value() == Approx(6.01e-4));
}

TEST_CASE("bad durations are rejected with a reason", "[units]") {
  std::string why;
  CHECK_FALSE(parse_duration_s("10 parsecs", &why));
  CHECK(why == "'10 parsecs': unknown duration unit 'parsecs' (expected s, ms, us or ns)");
  CHECK_FALSE(parse_duration_s("-1ms", &why));
  CHECK(why == "'-1ms': a duration must not be negative");
  CHECK_FALSE(parse_duration_s("inf", &why));
  CHECK(why == "'inf': a duration must be a finite number");
  CHECK_FALSE(parse_duration_s("nan ms", &why));
  CHECK(why == "'nan ms': a duration must be a finite number");
  CHECK_FALSE(parse_duration_s("1e999s", &why));
  CHECK(why == "'1e999s': duration is too large");
  CHECK_FALSE(parse_duration_s("", &why));
  CHECK(why == "empty duration; write a number with a unit, as in 1.5ms");
  CHECK_FALSE(parse_duration_s("fast", &why));
  CHECK(why == "'fast' is not a duration; write a number with a unit, as in 1.5ms");
  CHECK_FALSE(parse_duration_s("1ms extra", &why));
  CHECK(why.find("unknown duration unit 'ms extra'") != std::string::npos);
  // Case slips get a suggestion.
  CHECK_FALSE(parse_duration_s("5 MS", &why));
  CHECK(why == "'5 MS': unknown duration unit 'MS' (expected s, ms, us or ns); did you mean 'ms'?");
  CHECK_FALSE(parse_duration_s("+1ms"));
  // No message is required.
  CHECK_FALSE(parse_duration_s("1 hour"));
}

TEST_CASE("byte counts read decimal and binary units", "[units]") {
  CHECK(parse_bytes("64MiB").value() == 67108864);
  CHECK(parse_bytes("2GiB").value() == 2147483648LL);
  CHECK(parse_bytes("80GiB").value() == 85899345920LL);
  CHECK(parse_bytes("1KiB").value() == 1024);
  CHECK(parse_bytes("1TiB").value() == 1099511627776LL);
  CHECK(parse_bytes("1KB").value() == 1000);
  CHECK(parse_bytes("3 MB").value() == 3000000);
  CHECK(parse_bytes("50GB").value() == 50000000000LL);
  CHECK(parse_bytes("2TB").value() == 2000000000000LL);
  CHECK(parse_bytes("17B").value() == 17);
  CHECK(parse_bytes("17").value() == 17);
  CHECK(parse_bytes("0").value() == 0);
  CHECK(parse_bytes("0.5GiB").value() == 536870912);
  CHECK(parse_bytes("1.5KiB").value() == 1536);
  // A fraction of a byte rounds to the nearest byte.
  CHECK(parse_bytes("0.0001KB").value() == 0);
  CHECK(parse_bytes("1.6B").value() == 2);
}

TEST_CASE("bad byte counts are rejected with a reason", "[units]") {
  std::string why;
  CHECK_FALSE(parse_bytes("1.5", &why));
  CHECK(why == "'1.5': a byte count without a unit must be a whole number");
  CHECK_FALSE(parse_bytes("-4KiB", &why));
  CHECK(why == "'-4KiB': a byte count must not be negative");
  CHECK_FALSE(parse_bytes("80 gigs", &why));
  CHECK(why.rfind("'80 gigs': unknown byte count unit 'gigs' (expected B, KB", 0) == 0);
  CHECK_FALSE(parse_bytes("2gib", &why));
  CHECK(why.find("did you mean 'GiB'?") != std::string::npos);
  CHECK_FALSE(parse_bytes("9000000TiB", &why));
  CHECK(why == "'9000000TiB': byte count is too large");
  CHECK_FALSE(parse_bytes("inf", &why));
  CHECK_FALSE(parse_bytes("", &why));
  CHECK_FALSE(parse_bytes("GiB", &why));
  CHECK(why == "'GiB' is not a byte count; write a number with a unit, as in 64MiB");
}

TEST_CASE("bandwidths are bytes per second", "[units]") {
  CHECK(parse_bandwidth_bytes_per_s("50GB/s").value() == 5e10);
  CHECK(parse_bandwidth_bytes_per_s("12.5 GiB/s").value() == 12.5 * 1024 * 1024 * 1024);
  CHECK(parse_bandwidth_bytes_per_s("450GB/s").value() == 4.5e11);
  CHECK(parse_bandwidth_bytes_per_s("100B/s").value() == 100.0);
  CHECK(parse_bandwidth_bytes_per_s("1e9").value() == 1e9);
  CHECK(parse_bandwidth_bytes_per_s("1e9/s").value() == 1e9);

  std::string why;
  CHECK_FALSE(parse_bandwidth_bytes_per_s("0GB/s", &why));
  CHECK(why == "'0GB/s': a bandwidth must be greater than zero");
  CHECK_FALSE(parse_bandwidth_bytes_per_s("50GB", &why));
  CHECK(why == "'50GB': a bandwidth is bytes per second; write 50GB/s");
  CHECK_FALSE(parse_bandwidth_bytes_per_s("50 Gbit/s", &why));
  CHECK(why.find("unknown bandwidth unit 'Gbit'") != std::string::npos);
  CHECK_FALSE(parse_bandwidth_bytes_per_s("-1GB/s", &why));
  CHECK(why == "'-1GB/s': a bandwidth must not be negative");
  CHECK_FALSE(parse_bandwidth_bytes_per_s("inf", &why));
}

TEST_CASE("durations format with a fitting unit", "[units]") {
  CHECK(format_duration(0.0015) == "1.5 ms");
  CHECK(format_duration(27) == "27 s");
  CHECK(format_duration(28.5) == "28.5 s");
  CHECK(format_duration(26.25) == "26.25 s");
  CHECK(format_duration(0) == "0 s");
  CHECK(format_duration(1e-5) == "10 us");
  CHECK(format_duration(2.5e-7) == "250 ns");
  CHECK(format_duration(0.018522) == "18.522 ms");
  CHECK(format_duration(-0.002) == "-2 ms");
  CHECK(format_duration(std::numeric_limits<double>::infinity()) == "inf s");
}

TEST_CASE("byte counts format with binary units", "[units]") {
  CHECK(format_bytes(2147483648.0) == "2 GiB");
  CHECK(format_bytes(1.5 * 1024 * 1024) == "1.5 MiB");
  CHECK(format_bytes(17) == "17 B");
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1 KiB");
  CHECK(format_bytes(85899345920.0) == "80 GiB");
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024 * 1024) == "3 TiB");
}

TEST_CASE("formatted quantities read back to the same value", "[units]") {
  for (double s : {0.0015, 27.0, 1e-5, 2.5e-7, 0.125})
    CHECK(parse_duration_s(format_duration(s)).value() == Approx(s));
  for (double b : {17.0, 2147483648.0, 1.5 * 1024 * 1024, 1024.0})
    CHECK(static_cast<double>(parse_bytes(format_bytes(b)).value()) == b);
}
