#include "nest/workload/roofline.h"

#include <algorithm>

namespace nest::workload {

Roofline Roofline::of(const Accelerator& device, std::string_view precision) {
  const FlopRate peak = device.peak_for(precision);  // names the precisions when unknown
  const FlopRate matrix = peak * device.gemm_efficiency_for(precision);
  FlopRate attention = matrix;
  if (precision == "fp8") {
    // The attention core stays in bf16 (fp16 when the device has no bf16).
    for (const std::string_view wide : {"bf16", "fp16"}) {
      bool has = false;
      for (const auto& [p, rate] : device.peak) has = has || p == wide;
      if (has) {
        attention = device.peak_for(wide) * device.gemm_efficiency_for(wide);
        break;
      }
    }
  }
  const FlopRate vector = device.vector_rate.flops_per_s() > 0 ? device.vector_rate : matrix;
  return Roofline{.matrix = matrix,
                  .attention = attention,
                  .vector = vector,
                  .memory = device.hbm_bandwidth * device.memory_efficiency,
                  .shape = device.gemm_shape};
}

double Roofline::shape_factor(const GemmShape& g) const noexcept {
  if (shape.streaming_multiprocessors <= 0 || shape.tiles.empty()) return 1;
  const auto sms = static_cast<double>(shape.streaming_multiprocessors);
  const double work =
      static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.batch);
  double best = 0;
  for (const auto& [rows, columns] : shape.tiles) {
    const std::int64_t tiles =
        ((g.m + rows - 1) / rows) * ((g.n + columns - 1) / columns) * g.batch;
    const double waves = static_cast<double>((tiles + shape.streaming_multiprocessors - 1) /
                                             shape.streaming_multiprocessors);
    best = std::max(best, work / (waves * sms * rows * columns));
  }
  const auto k = static_cast<double>(g.k);
  return best * k / (k + shape.k_overhead);
}

Time Roofline::gemm_time(const GemmShape& g, FlopRate rate, Bytes traffic) const {
  return roofline_time(Flops(g.flops()), traffic, rate * shape_factor(g), memory);
}

Time roofline_time(Flops work, Bytes traffic, FlopRate compute, Bandwidth memory) {
  return std::max(compute_time(work, compute), serialization_time(traffic, memory));
}

GemmCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t element_bytes,
                   const Roofline& roofline) {
  const GemmShape g{.m = m, .n = n, .k = k};
  GemmCost c;
  c.flops = Flops(g.flops());
  c.bytes = Bytes((m * k + k * n + m * n) * element_bytes);
  const Time compute = compute_time(c.flops, roofline.matrix * roofline.shape_factor(g));
  const Time memory = serialization_time(c.bytes, roofline.memory);
  c.time = std::max(compute, memory);
  c.memory_bound = memory > compute;
  return c;
}

}  // namespace nest::workload
