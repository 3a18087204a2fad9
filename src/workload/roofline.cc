#include "nest/workload/roofline.h"

#include <algorithm>

namespace nest::workload {

Roofline Roofline::of(const Accelerator& device, std::string_view precision) {
  const FlopRate matrix = device.peak_for(precision) * device.gemm_efficiency;
  const FlopRate vector = device.vector_rate.flops_per_s() > 0 ? device.vector_rate : matrix;
  return Roofline{.matrix = matrix,
                  .vector = vector,
                  .memory = device.hbm_bandwidth * device.memory_efficiency};
}

Time roofline_time(Flops work, Bytes traffic, FlopRate compute, Bandwidth memory) {
  return std::max(compute_time(work, compute), serialization_time(traffic, memory));
}

GemmCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t element_bytes,
                   const Roofline& roofline) {
  GemmCost c;
  c.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  c.bytes = Bytes((m * k + k * n + m * n) * element_bytes);
  const Time compute = compute_time(c.flops, roofline.matrix);
  const Time memory = serialization_time(c.bytes, roofline.memory);
  c.time = std::max(compute, memory);
  c.memory_bound = memory > compute;
  return c;
}

}  // namespace nest::workload
