#pragma once
/// \file
/// The one place where strings with units become unit types ("400 GB/s", "400 Gb/s", "1.5 us",
/// "80 GiB", "989 TFLOP/s"). Decimal prefixes are powers of 1000, binary ones (Ki, Mi, Gi, Ti)
/// powers of 1024; a lower-case `b` means bits. A number without its unit is an error.

#include <string>
#include <string_view>

#include "nest/core/units.h"

namespace nest {

/// Parses a duration: units ps, ns, us, ms, s. Throws `Error` (input) naming what was expected.
[[nodiscard]] Time parse_time(std::string_view text);

/// Parses a size: B, KB, MB, GB, TB, PB, EB, KiB, MiB, GiB, TiB, PiB, EiB (and bits: b, Kb, Mb, Gb, Tb,
/// which must come to a whole number of bytes). Throws `Error` (input).
[[nodiscard]] Bytes parse_bytes(std::string_view text);

/// Parses a rate: B/s with the prefixes of `parse_bytes`, or bits per second (b/s, Kb/s, Mb/s,
/// Gb/s, Tb/s); also "Gbps". Throws `Error` (input).
[[nodiscard]] Bandwidth parse_bandwidth(std::string_view text);

/// Parses a compute rate: FLOP/s with prefixes K, M, G, T, P, E ("989 TFLOP/s"). Throws `Error`.
[[nodiscard]] FlopRate parse_flop_rate(std::string_view text);

/// Human-readable forms used in reports: "1.50 us", "80.0 GiB", "400 GB/s", "989 TFLOP/s".
[[nodiscard]] std::string format_time(Time t);
[[nodiscard]] std::string format_bytes(Bytes b);
[[nodiscard]] std::string format_bandwidth(Bandwidth b);
[[nodiscard]] std::string format_flop_rate(FlopRate f);
/// A count or rate without its unit, 4 significant digits with k, M, G, T (powers of 1000):
/// "568.7k", "1.536M", "42". Every human-readable figure of NEST's reports uses these.
[[nodiscard]] std::string format_count(double v);
/// A fraction as a percentage with one decimal: 0.4234 -> "42.3%".
[[nodiscard]] std::string format_percent(double fraction);

}  // namespace nest
