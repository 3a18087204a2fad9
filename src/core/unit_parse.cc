#include "nest/core/unit_parse.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

#include "nest/core/error.h"

namespace nest {
namespace {

struct Unit {
  std::string_view name;
  double factor;
};

// Bytes (B) and bits (b) with decimal and binary prefixes; the factor converts to bytes.
constexpr std::array kSizeUnits = {
    Unit{"B", 1},
    Unit{"KB", 1e3},
    Unit{"MB", 1e6},
    Unit{"GB", 1e9},
    Unit{"TB", 1e12},
    Unit{"PB", 1e15},
    Unit{"EB", 1e18},
    Unit{"KiB", 1024.0},
    Unit{"MiB", 1048576.0},
    Unit{"GiB", 1073741824.0},
    Unit{"TiB", 1099511627776.0},
    Unit{"PiB", 1125899906842624.0},
    Unit{"EiB", 1152921504606846976.0},
    Unit{"b", 0.125},
    Unit{"Kb", 125.0},
    Unit{"Mb", 125e3},
    Unit{"Gb", 125e6},
    Unit{"Tb", 125e9},
};

constexpr std::array kTimeUnits = {
    Unit{"ps", 1e-12}, Unit{"ns", 1e-9}, Unit{"us", 1e-6}, Unit{"ms", 1e-3}, Unit{"s", 1.0},
};

constexpr std::array kFlopUnits = {
    Unit{"FLOP/s", 1},     Unit{"KFLOP/s", 1e3},  Unit{"MFLOP/s", 1e6},  Unit{"GFLOP/s", 1e9},
    Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15}, Unit{"EFLOP/s", 1e18},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "400 GB/s" into 400 and "GB/s". Throws when the number or the unit is missing.
std::pair<double, std::string_view> split(std::string_view text, std::string_view expected) {
  const std::string_view s = trim(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || !std::isfinite(value)) {
    throw Error::input("not a number with a unit",
                       {.value = std::string(text), .expected = std::string(expected)});
  }
  const std::string_view unit = trim(s.substr(static_cast<std::size_t>(end - s.data())));
  if (unit.empty()) {
    throw Error::input("missing unit",
                       {.value = std::string(text), .expected = std::string(expected)});
  }
  return {value, unit};
}

template <std::size_t N>
double lookup(const std::array<Unit, N>& units, std::string_view unit, std::string_view text,
              std::string_view expected) {
  for (const Unit& u : units) {
    if (u.name == unit) return u.factor;
  }
  throw Error::input(fmt::format("unknown unit \"{}\"", unit),
                     {.value = std::string(text), .expected = std::string(expected)});
}

// A finite number times its unit's factor can still overflow ("1e300 TB/s").
double require_finite(double v, std::string_view text, std::string_view expected) {
  if (!std::isfinite(v)) {
    throw Error::input("quantity out of range",
                       {.value = std::string(text), .expected = std::string(expected)});
  }
  return v;
}

void require_non_negative(double v, std::string_view text, std::string_view expected) {
  if (v < 0) {
    throw Error::input("negative quantity",
                       {.value = std::string(text), .expected = std::string(expected)});
  }
}

constexpr std::string_view kTimeExpected = "a duration like \"1.5 us\" (ps, ns, us, ms, s)";
constexpr std::string_view kSizeExpected =
    "a size like \"80 GiB\" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; b, Kb, Mb, Gb for bits)";
constexpr std::string_view kRateExpected =
    "a bandwidth like \"400 GB/s\" or \"400 Gb/s\" (B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, ..., "
    "b/s, Kb/s, Mb/s, Gb/s, Tb/s, Gbps)";
constexpr std::string_view kFlopExpected =
    "a compute rate like \"989 TFLOP/s\" (FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s)";

}  // namespace

Time parse_time(std::string_view text) {
  const auto [value, unit] = split(text, kTimeExpected);
  require_non_negative(value, text, kTimeExpected);
  const double seconds =
      require_finite(value * lookup(kTimeUnits, unit, text, kTimeExpected), text, kTimeExpected);
  if (seconds * 1e12 > 9.2e18) {
    throw Error::input("quantity out of range",
                       {.value = std::string(text), .expected = std::string(kTimeExpected)});
  }
  return Time::seconds(seconds);
}

Bytes parse_bytes(std::string_view text) {
  const auto [value, unit] = split(text, kSizeExpected);
  require_non_negative(value, text, kSizeExpected);
  const double bytes = value * lookup(kSizeUnits, unit, text, kSizeExpected);
  const double rounded = std::round(bytes);
  if (!(rounded <= 9.2e18)) {
    throw Error::input("quantity out of range",
                       {.value = std::string(text), .expected = "at most 9.2e18 B"});
  }
  if (std::abs(bytes - rounded) > 1e-6 * std::max(1.0, bytes)) {
    throw Error::input("not a whole number of bytes",
                       {.value = std::string(text), .expected = std::string(kSizeExpected)});
  }
  return Bytes(static_cast<std::int64_t>(rounded));
}

Bandwidth parse_bandwidth(std::string_view text) {
  auto [value, unit] = split(text, kRateExpected);
  require_non_negative(value, text, kRateExpected);
  std::string base;
  if (unit.size() > 2 && unit.substr(unit.size() - 2) == "/s") {
    base = std::string(unit.substr(0, unit.size() - 2));
  } else if (unit.size() > 3 && unit.substr(unit.size() - 3) == "bps") {
    base = std::string(unit.substr(0, unit.size() - 3)) + "b";
  } else {
    throw Error::input(fmt::format("unknown unit \"{}\"", unit),
                       {.value = std::string(text), .expected = std::string(kRateExpected)});
  }
  return Bandwidth::bytes_per_second(
      require_finite(value * lookup(kSizeUnits, base, text, kRateExpected), text, kRateExpected));
}

FlopRate parse_flop_rate(std::string_view text) {
  const auto [value, unit] = split(text, kFlopExpected);
  require_non_negative(value, text, kFlopExpected);
  return FlopRate::per_second(
      require_finite(value * lookup(kFlopUnits, unit, text, kFlopExpected), text, kFlopExpected));
}

std::string format_time(Time t) {
  const double s = t.to_seconds();
  const double a = std::abs(s);
  if (a >= 1.0 || a == 0.0) return fmt::format("{:.4g} s", s);
  if (a >= 1e-3) return fmt::format("{:.4g} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.4g} us", s * 1e6);
  if (a >= 1e-9) return fmt::format("{:.4g} ns", s * 1e9);
  return fmt::format("{} ps", t.ps());
}

std::string format_bytes(Bytes b) {
  const double v = b.as_double();
  constexpr std::array kNames = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t i = 0;
  double x = v;
  while (std::abs(x) >= 1024.0 && i + 1 < kNames.size()) {
    x /= 1024.0;
    ++i;
  }
  return i == 0 ? fmt::format("{} B", b.count()) : fmt::format("{:.4g} {}", x, kNames[i]);
}

std::string format_bandwidth(Bandwidth b) {
  const double v = b.bytes_per_s();
  if (v >= 1e12) return fmt::format("{:.4g} TB/s", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.4g} GB/s", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.4g} MB/s", v / 1e6);
  return fmt::format("{:.4g} B/s", v);
}

std::string format_flop_rate(FlopRate f) {
  const double v = f.flops_per_s();
  if (v >= 1e15) return fmt::format("{:.4g} PFLOP/s", v / 1e15);
  if (v >= 1e12) return fmt::format("{:.4g} TFLOP/s", v / 1e12);
  return fmt::format("{:.4g} GFLOP/s", v / 1e9);
}

std::string format_count(double v) {
  const double a = std::abs(v);
  if (a >= 1e12) return fmt::format("{:.4g}T", v / 1e12);
  if (a >= 1e9) return fmt::format("{:.4g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.4g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.4g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

std::string format_percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

}  // namespace nest
