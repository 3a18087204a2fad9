#pragma once
/// \file
/// An accelerator as the roofline sees it (`workloads/accelerators/*.yaml`).
///
/// File format (keys marked * are optional):
/// ```yaml
/// kind: accelerator
/// name: h100-sxm
/// peak_flop_rate:              # dense (no sparsity) matrix rate per precision
///   bf16: 989 TFLOP/s
///   fp16: 989 TFLOP/s
///   fp8: 1979 TFLOP/s
/// vector_flop_rate: 67 TFLOP/s # * non-matrix (FP32) rate for element-wise operators;
///                              #   default: the matrix rate of the precision
/// hbm: 80 GiB
/// hbm_bandwidth: 3.35 TB/s
/// efficiency:
///   gemm: 0.803                # achievable fraction of the matrix peak on large GEMMs
///   memory: 0.8                # achievable fraction of the HBM bandwidth
/// ```

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nest/core/units.h"

namespace nest::workload {

/// A device's compute and memory figures. Plain data.
struct Accelerator {
  std::string name;
  /// Dense peak per precision name ("bf16", "fp16", "fp8", ...), in file order.
  std::vector<std::pair<std::string, FlopRate>> peak;
  FlopRate vector_rate;  ///< 0 when the file gives none
  Bytes hbm;
  Bandwidth hbm_bandwidth;
  double gemm_efficiency = 1;    ///< in (0, 1]
  double memory_efficiency = 1;  ///< in (0, 1]

  /// Dense matrix peak for `precision`; throws `Error` (input, key "precision") naming the
  /// precisions the accelerator has when it has not this one.
  [[nodiscard]] FlopRate peak_for(std::string_view precision) const;
};

/// Reads an accelerator file. Throws `Error` (input) naming file, line and key.
[[nodiscard]] Accelerator load_accelerator(const std::string& path);

/// Parses accelerator YAML; `name` stands for the file name in errors.
[[nodiscard]] Accelerator parse_accelerator(std::string_view text, const std::string& name);

}  // namespace nest::workload
