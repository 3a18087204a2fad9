#pragma once
/// \file
/// Strong unit types. Quantities never cross an interface as bare doubles: a `Time` is an integer
/// count of picoseconds, a `Bytes` an integer count of bytes, a `Bandwidth` bytes per second,
/// `Flops` a count of floating-point operations and `FlopRate` operations per second.

#include <compare>
#include <cstdint>
#include <limits>

namespace nest {

/// Throws `Error` (input) "duration out of range": a time computed from the inputs does not
/// fit `Time` (or is not a number). Defined in units.cc so that this header needs no error.h.
[[noreturn]] void throw_duration_out_of_range(double picoseconds);

/// Simulated time or duration, an integer number of picoseconds (range ±106 days).
class Time {
 public:
  constexpr Time() noexcept = default;
  [[nodiscard]] static constexpr Time picoseconds(std::int64_t ps) noexcept { return Time(ps); }
  /// These round to the nearest picosecond and throw `Error` (input) for a duration beyond
  /// ±9.2e18 ps (±106 days) or NaN, instead of the undefined cast.
  [[nodiscard]] static constexpr Time nanoseconds(double ns) { return from_ps(ns * 1e3); }
  [[nodiscard]] static constexpr Time microseconds(double us) { return from_ps(us * 1e6); }
  [[nodiscard]] static constexpr Time milliseconds(double ms) { return from_ps(ms * 1e9); }
  [[nodiscard]] static constexpr Time seconds(double s) { return from_ps(s * 1e12); }
  [[nodiscard]] static constexpr Time zero() noexcept { return Time(0); }
  [[nodiscard]] static constexpr Time max() noexcept {
    return Time(std::numeric_limits<std::int64_t>::max());
  }

  [[nodiscard]] constexpr std::int64_t ps() const noexcept { return ps_; }
  [[nodiscard]] constexpr double to_seconds() const noexcept {
    return static_cast<double>(ps_) * 1e-12;
  }
  [[nodiscard]] constexpr double to_milliseconds() const noexcept {
    return static_cast<double>(ps_) * 1e-9;
  }

  constexpr Time& operator+=(Time o) noexcept {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Time& operator-=(Time o) noexcept {
    ps_ -= o.ps_;
    return *this;
  }
  friend constexpr Time operator+(Time a, Time b) noexcept { return Time(a.ps_ + b.ps_); }
  friend constexpr Time operator-(Time a, Time b) noexcept { return Time(a.ps_ - b.ps_); }
  friend constexpr Time operator*(Time a, std::int64_t k) noexcept { return Time(a.ps_ * k); }
  friend constexpr Time operator*(std::int64_t k, Time a) noexcept { return Time(a.ps_ * k); }
  friend constexpr auto operator<=>(Time, Time) noexcept = default;

 private:
  constexpr explicit Time(std::int64_t ps) noexcept : ps_(ps) {}
  static constexpr Time from_ps(double ps) {
    if (!(ps > -9.2e18 && ps < 9.2e18)) throw_duration_out_of_range(ps);
    return Time(static_cast<std::int64_t>(ps < 0 ? ps - 0.5 : ps + 0.5));
  }
  std::int64_t ps_ = 0;
};

/// An amount of data, an integer number of bytes.
class Bytes {
 public:
  constexpr Bytes() noexcept = default;
  constexpr explicit Bytes(std::int64_t n) noexcept : n_(n) {}
  [[nodiscard]] static constexpr Bytes kibibytes(std::int64_t k) noexcept { return Bytes(k << 10); }
  [[nodiscard]] static constexpr Bytes mebibytes(std::int64_t m) noexcept { return Bytes(m << 20); }
  [[nodiscard]] static constexpr Bytes gibibytes(std::int64_t g) noexcept { return Bytes(g << 30); }

  [[nodiscard]] constexpr std::int64_t count() const noexcept { return n_; }
  [[nodiscard]] constexpr double as_double() const noexcept { return static_cast<double>(n_); }

  constexpr Bytes& operator+=(Bytes o) noexcept {
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) noexcept {
    n_ -= o.n_;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) noexcept { return Bytes(a.n_ + b.n_); }
  friend constexpr Bytes operator-(Bytes a, Bytes b) noexcept { return Bytes(a.n_ - b.n_); }
  friend constexpr Bytes operator*(Bytes a, std::int64_t k) noexcept { return Bytes(a.n_ * k); }
  friend constexpr Bytes operator*(std::int64_t k, Bytes a) noexcept { return Bytes(a.n_ * k); }
  friend constexpr auto operator<=>(Bytes, Bytes) noexcept = default;

 private:
  std::int64_t n_ = 0;
};

/// A data rate in bytes per second. Decimal prefixes: 1 GB/s = 1e9 B/s; 1 Gb/s = 1.25e8 B/s.
class Bandwidth {
 public:
  constexpr Bandwidth() noexcept = default;
  [[nodiscard]] static constexpr Bandwidth bytes_per_second(double b) noexcept {
    return Bandwidth(b);
  }
  [[nodiscard]] static constexpr Bandwidth gigabytes_per_second(double g) noexcept {
    return Bandwidth(g * 1e9);
  }
  [[nodiscard]] static constexpr Bandwidth gigabits_per_second(double g) noexcept {
    return Bandwidth(g * 1e9 / 8);
  }
  [[nodiscard]] constexpr double bytes_per_s() const noexcept { return bps_; }

  friend constexpr Bandwidth operator*(Bandwidth a, double k) noexcept {
    return Bandwidth(a.bps_ * k);
  }
  friend constexpr Bandwidth operator/(Bandwidth a, double k) noexcept {
    return Bandwidth(a.bps_ / k);
  }
  friend constexpr Bandwidth operator+(Bandwidth a, Bandwidth b) noexcept {
    return Bandwidth(a.bps_ + b.bps_);
  }
  friend constexpr auto operator<=>(Bandwidth, Bandwidth) noexcept = default;

 private:
  constexpr explicit Bandwidth(double b) noexcept : bps_(b) {}
  double bps_ = 0;
};

/// A count of floating-point operations (a multiply-add counts as two).
class Flops {
 public:
  constexpr Flops() noexcept = default;
  constexpr explicit Flops(double n) noexcept : n_(n) {}
  [[nodiscard]] constexpr double count() const noexcept { return n_; }
  friend constexpr Flops operator+(Flops a, Flops b) noexcept { return Flops(a.n_ + b.n_); }
  friend constexpr Flops operator*(Flops a, double k) noexcept { return Flops(a.n_ * k); }
  constexpr Flops& operator+=(Flops o) noexcept {
    n_ += o.n_;
    return *this;
  }
  friend constexpr auto operator<=>(Flops, Flops) noexcept = default;

 private:
  double n_ = 0;
};

/// A compute rate in floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() noexcept = default;
  [[nodiscard]] static constexpr FlopRate per_second(double f) noexcept { return FlopRate(f); }
  [[nodiscard]] static constexpr FlopRate teraflops(double t) noexcept {
    return FlopRate(t * 1e12);
  }
  [[nodiscard]] constexpr double flops_per_s() const noexcept { return f_; }
  friend constexpr FlopRate operator*(FlopRate a, double k) noexcept { return FlopRate(a.f_ * k); }
  friend constexpr auto operator<=>(FlopRate, FlopRate) noexcept = default;

 private:
  constexpr explicit FlopRate(double f) noexcept : f_(f) {}
  double f_ = 0;
};

/// Longest duration `serialization_time` and `compute_time` return: 2^62 ps (4.6e6 s, 53 days),
/// the simulator's horizon; sums of a few stay inside `Time`.
inline constexpr std::int64_t kMaxDurationPs = std::int64_t{1} << 62;

/// `ps` unchanged when it is a number in [-1, kMaxDurationPs]; otherwise throws `Error`
/// (input) "duration out of range". Guards a conversion of a computed picosecond count.
[[nodiscard]] double checked_ps(double ps);

/// std::max(0, std::llround(checked_ps(ps))) without the library calls (the placer's dynamic
/// program rounds in its inner loop). Equal for every ps: below 2^63 a positive double's
/// truncation is exact, and so is its fraction ps − trunc(ps), which rounds half away from zero
/// as llround does.
[[nodiscard]] inline std::int64_t rounded_ps(double ps) {
  if (!(ps <= static_cast<double>(kMaxDurationPs) && ps >= -1)) throw_duration_out_of_range(ps);
  if (ps <= 0) return 0;
  const auto whole = static_cast<std::int64_t>(ps);
  return ps - static_cast<double>(whole) >= 0.5 ? whole + 1 : whole;
}

/// Time to push `size` through a link of rate `rate`, rounded up to 1 ps. `rate` must be > 0.
/// Throws `Error` (input) "duration out of range" past kMaxDurationPs.
[[nodiscard]] Time serialization_time(Bytes size, Bandwidth rate);

/// Time to execute `work` at `rate`, rounded up to 1 ps. `rate` must be > 0. Throws `Error`
/// (input) "duration out of range" past kMaxDurationPs.
[[nodiscard]] Time compute_time(Flops work, FlopRate rate);

/// Rate that moves `size` in `duration`; `duration` must be > 0.
[[nodiscard]] Bandwidth rate_of(Bytes size, Time duration) noexcept;

}  // namespace nest
