#pragma once
/// \file
/// Seeded random numbers, passed explicitly (never a global generator). The sequence for a seed
/// is fixed by this file alone: no standard-library distribution (whose output differs between
/// library versions) stands between the engine and the caller.

#include <cstdint>

namespace nest {

/// Mixes two 64-bit values into one (SplitMix64 finalizer); deterministic on every platform.
/// Used for ECMP path choice and for deriving independent seeds.
[[nodiscard]] constexpr std::uint64_t hash_mix(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256** generator seeded by SplitMix64. Not thread-safe; give each thread its own,
/// e.g. `Rng(hash_mix(seed, thread_index))`.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept;

  /// Next 64 random bits.
  [[nodiscard]] std::uint64_t next() noexcept;
  /// Uniform in [0, 1) with 53 random bits.
  [[nodiscard]] double uniform() noexcept;
  /// Uniform integer in [0, n); n must be > 0. Unbiased (rejection sampling).
  [[nodiscard]] std::uint64_t below(std::uint64_t n) noexcept;

 private:
  std::uint64_t s_[4];
};

}  // namespace nest
