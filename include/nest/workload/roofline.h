#pragma once
/// \file
/// The roofline: an operator takes as long as its arithmetic at the achievable compute rate or
/// its memory traffic at the achievable HBM bandwidth, whichever is longer (Williams, Waterman
/// and Patterson, "Roofline", CACM 2009). GEMMs run at a rate that depends on their shape when
/// the accelerator gives a shape model (nest/workload/accelerator.h).

#include <cstdint>
#include <string_view>

#include "nest/core/units.h"
#include "nest/workload/accelerator.h"

namespace nest::workload {

/// One GEMM kernel: C[m×n] = A[m×k]·B[k×n], `batch` times (a batched GEMM). All >= 1.
struct GemmShape {
  std::int64_t m = 1;
  std::int64_t n = 1;
  std::int64_t k = 1;
  std::int64_t batch = 1;
  [[nodiscard]] double flops() const noexcept {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
           static_cast<double>(batch);
  }
  friend bool operator==(const GemmShape&, const GemmShape&) = default;
};

/// Achievable rates of one device for one precision.
struct Roofline {
  FlopRate matrix;  ///< GEMMs of linear layers: peak × GEMM efficiency of the precision
  /// The attention core's batched GEMMs: as `matrix`, except under fp8, whose attention core
  /// runs in bf16 (Transformer Engine casts only the linear layers' GEMMs to fp8).
  FlopRate attention;
  FlopRate vector;       ///< element-wise rate (the matrix rate when the device gives none)
  Bandwidth memory;      ///< HBM bandwidth × memory efficiency
  GemmShapeModel shape;  ///< no SMs: every GEMM at the plateau

  /// The achievable rates of `device` in `precision`; throws `Error` (input) for an unknown
  /// precision.
  [[nodiscard]] static Roofline of(const Accelerator& device, std::string_view precision);

  /// The fraction of the plateau rate a GEMM of shape `g` reaches: the best tile's utilization
  /// (tile and wave quantization) × k / (k + k_overhead); 1 without a shape model. In (0, 1].
  [[nodiscard]] double shape_factor(const GemmShape& g) const noexcept;
  /// max(flops / (rate × shape_factor), traffic / memory), rounded up to 1 ps.
  [[nodiscard]] Time gemm_time(const GemmShape& g, FlopRate rate, Bytes traffic) const;
};

/// max(work / compute, traffic / memory), rounded up to 1 ps. Rates must be > 0.
[[nodiscard]] Time roofline_time(Flops work, Bytes traffic, FlopRate compute, Bandwidth memory);

/// Cost of one GEMM C[m×n] = A[m×k]·B[k×n] with `element_bytes`-byte operands.
struct GemmCost {
  Flops flops;          ///< 2·m·n·k
  Bytes bytes;          ///< (m·k + k·n + m·n) · element_bytes: each operand once
  Time time;            ///< roofline time on the matrix rate and the GEMM's shape factor
  bool memory_bound{};  ///< the traffic term is the larger one
};

/// The roofline cost of a GEMM. All sizes >= 1.
[[nodiscard]] GemmCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k,
                                 std::int64_t element_bytes, const Roofline& roofline);

}  // namespace nest::workload
