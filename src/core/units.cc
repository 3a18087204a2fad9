#include "nest/core/units.h"

#include <cmath>

namespace nest {
namespace {

Time ceil_ps(double seconds) noexcept {
  return Time::picoseconds(static_cast<std::int64_t>(std::ceil(seconds * 1e12 - 1e-6)));
}

}  // namespace

Time serialization_time(Bytes size, Bandwidth rate) noexcept {
  return ceil_ps(size.as_double() / rate.bytes_per_s());
}

Time compute_time(Flops work, FlopRate rate) noexcept {
  return ceil_ps(work.count() / rate.flops_per_s());
}

Bandwidth rate_of(Bytes size, Time duration) noexcept {
  return Bandwidth::bytes_per_second(size.as_double() / duration.to_seconds());
}

}  // namespace nest
