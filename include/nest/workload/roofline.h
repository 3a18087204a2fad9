#pragma once
/// \file
/// The roofline: an operator takes as long as its arithmetic at the achievable compute rate or
/// its memory traffic at the achievable HBM bandwidth, whichever is longer (Williams, Waterman
/// and Patterson, "Roofline", CACM 2009).

#include <cstdint>
#include <string_view>

#include "nest/core/units.h"
#include "nest/workload/accelerator.h"

namespace nest::workload {

/// Achievable rates of one device for one precision.
struct Roofline {
  FlopRate matrix;   ///< peak × GEMM efficiency
  FlopRate vector;   ///< element-wise rate (the matrix rate when the device gives none)
  Bandwidth memory;  ///< HBM bandwidth × memory efficiency

  /// The achievable rates of `device` in `precision`; throws `Error` (input) for an unknown
  /// precision.
  [[nodiscard]] static Roofline of(const Accelerator& device, std::string_view precision);
};

/// max(work / compute, traffic / memory), rounded up to 1 ps. Rates must be > 0.
[[nodiscard]] Time roofline_time(Flops work, Bytes traffic, FlopRate compute, Bandwidth memory);

/// Cost of one GEMM C[m×n] = A[m×k]·B[k×n] with `element_bytes`-byte operands.
struct GemmCost {
  Flops flops;          ///< 2·m·n·k
  Bytes bytes;          ///< (m·k + k·n + m·n) · element_bytes: each operand once
  Time time;            ///< roofline time on the matrix rate
  bool memory_bound{};  ///< the traffic term is the larger one
};

/// The roofline cost of a GEMM. All sizes >= 1.
[[nodiscard]] GemmCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k,
                                 std::int64_t element_bytes, const Roofline& roofline);

}  // namespace nest::workload
