#include "nest/core/units.h"

#include <fmt/format.h>

#include <cmath>

#include "nest/core/error.h"

namespace nest {
namespace {

Time ceil_ps(double seconds) {
  return Time::picoseconds(static_cast<std::int64_t>(checked_ps(std::ceil(seconds * 1e12 - 1e-6))));
}

}  // namespace

double checked_ps(double ps) {
  if (!(ps <= static_cast<double>(kMaxDurationPs) && ps >= -1)) throw_duration_out_of_range(ps);
  return ps;
}

void throw_duration_out_of_range(double picoseconds) {
  throw Error::input("duration out of range",
                     {.value = fmt::format("{:.3g} s", picoseconds * 1e-12),
                      .expected = "a transfer or computation within 2^62 ps (4.6e6 s, 53 days): "
                                  "smaller sizes or faster rates"});
}

Time serialization_time(Bytes size, Bandwidth rate) {
  return ceil_ps(size.as_double() / rate.bytes_per_s());
}

Time compute_time(Flops work, FlopRate rate) { return ceil_ps(work.count() / rate.flops_per_s()); }

Bandwidth rate_of(Bytes size, Time duration) noexcept {
  return Bandwidth::bytes_per_second(size.as_double() / duration.to_seconds());
}

}  // namespace nest
