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
///   gemm: 0.803                # achievable fraction of the matrix peak on large GEMMs; or a
///                              #   map per precision, e.g. {bf16: 0.803, fp8: 0.65}
///   memory: 0.8                # achievable fraction of the HBM bandwidth
/// gemm_shape:                  # * GEMM efficiency by shape (below); without it every GEMM runs
///                              #   at `efficiency.gemm`
///   streaming_multiprocessors: 132
///   tiles: [[256, 128], [128, 256]]   # output tiles (rows x columns) the GEMM library picks from
///   k_overhead: 192            # per-tile fixed cost, in steps of the inner dimension k
/// ```
/// With `gemm_shape`, a GEMM C[m×n] = A[m×k]·B[k×n] repeated `batch` times runs at
/// peak × efficiency.gemm × u(m, n, batch) × k / (k + k_overhead): u is the best tile's
/// utilization of the device, m·n·batch / (waves · SMs · tile_m · tile_n) with
/// waves = ceil(ceil(m/tile_m) · ceil(n/tile_n) · batch / SMs) (tile and wave quantization, NVIDIA
/// "Matrix Multiplication Background" user's guide §3), and the last factor is the part of a
/// tile's time spent in its k-loop rather than in its prologue and epilogue.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/units.h"

namespace nest::workload {

/// The shape model of GEMM efficiency (see the file format). Plain data.
struct GemmShapeModel {
  int streaming_multiprocessors = 0;       ///< 0: no shape model
  std::vector<std::pair<int, int>> tiles;  ///< (rows, columns) of the output tiles
  double k_overhead = 0;                   ///< per-tile fixed cost in k steps (>= 0)
};

/// A device's compute and memory figures. Plain data.
struct Accelerator {
  std::string name;
  /// Dense peak per precision name ("bf16", "fp16", "fp8", ...), in file order.
  std::vector<std::pair<std::string, FlopRate>> peak;
  FlopRate vector_rate;  ///< 0 when the file gives none
  Bytes hbm;
  Bandwidth hbm_bandwidth;
  double gemm_efficiency = 1;  ///< in (0, 1]; `efficiency.gemm` given as one fraction
  /// `efficiency.gemm` given as a map: the efficiency of each precision listed (then only these).
  std::vector<std::pair<std::string, double>> gemm_efficiency_by_precision;
  double memory_efficiency = 1;  ///< in (0, 1]
  GemmShapeModel gemm_shape;

  /// The GEMM efficiency of `precision`: `gemm_efficiency`, or the map's entry; throws `Error`
  /// (input, key "precision") when the map does not list it.
  [[nodiscard]] double gemm_efficiency_for(std::string_view precision) const;

  /// Dense matrix peak for `precision`; throws `Error` (input, key "precision") naming the
  /// precisions the accelerator has when it has not this one.
  [[nodiscard]] FlopRate peak_for(std::string_view precision) const;
};

/// Ranges of the accelerator keys: rates and sizes a device could have, wide enough for any
/// real one and narrow enough that a layer's time stays a finite number of picoseconds.
inline constexpr double kMinFlopRate = 1e6;                     ///< FLOP/s, peak and vector rates
inline constexpr double kMaxFlopRate = 1e21;                    ///< FLOP/s (a zettaFLOP/s)
inline constexpr double kMinMemoryBandwidth = 1e6;              ///< B/s
inline constexpr double kMaxMemoryBandwidth = 1e18;             ///< B/s
inline constexpr std::int64_t kMinHbm = std::int64_t{1} << 20;  ///< bytes (1 MiB)
inline constexpr std::int64_t kMaxHbm = std::int64_t{1} << 60;  ///< bytes (1 EiB)
inline constexpr double kMinEfficiency = 1e-3;  ///< gemm and memory efficiency, up to 1

/// Reads an accelerator file (read by `config::read_input_file`). Throws `Error` (input)
/// naming file, line and key; every rate, size and efficiency must be in its range above.
[[nodiscard]] Accelerator load_accelerator(const std::string& path,
                                           const config::Limits& limits = {});

/// Parses accelerator YAML; `name` stands for the file name in errors.
[[nodiscard]] Accelerator parse_accelerator(std::string_view text, const std::string& name);

}  // namespace nest::workload
