#include "nest/workload/accelerator.h"

#include <fmt/format.h>

#include "nest/config/node.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::workload {
namespace {

using config::Node;

FlopRate flop_rate(const Node& n) {
  const FlopRate f = n.as_flop_rate();
  if (f.flops_per_s() < kMinFlopRate || f.flops_per_s() > kMaxFlopRate) {
    throw n.error("out of range", "a compute rate in [1e6 FLOP/s, 1e21 FLOP/s]");
  }
  return f;
}

Accelerator parse_root(const Node& root) {
  root.expect_keys({"kind", "name", "peak_flop_rate", "vector_flop_rate", "hbm", "hbm_bandwidth",
                    "efficiency", "gemm_shape"});
  (void)root.at("kind").as_choice({"accelerator"});
  Accelerator a;
  a.name = root.at("name").as_string();
  const Node peaks = root.at("peak_flop_rate");
  for (const auto& [precision, rate] : peaks.entries()) {
    a.peak.emplace_back(precision, flop_rate(rate));
  }
  if (a.peak.empty()) throw peaks.error("no precision", "a map like {bf16: 989 TFLOP/s}");
  if (auto n = root.find("vector_flop_rate")) a.vector_rate = flop_rate(*n);
  const Node hbm = root.at("hbm");
  a.hbm = hbm.as_bytes();
  if (a.hbm.count() < kMinHbm || a.hbm.count() > kMaxHbm) {
    throw hbm.error("out of range", "a size in [1 MiB, 1 EiB]");
  }
  const Node bandwidth = root.at("hbm_bandwidth");
  a.hbm_bandwidth = bandwidth.as_bandwidth();
  if (a.hbm_bandwidth.bytes_per_s() < kMinMemoryBandwidth ||
      a.hbm_bandwidth.bytes_per_s() > kMaxMemoryBandwidth) {
    throw bandwidth.error("out of range", "a bandwidth in [1 MB/s, 1e6 TB/s]");
  }
  const Node efficiency = root.at("efficiency");
  efficiency.expect_keys({"gemm", "memory"});
  const auto fraction = [](const Node& n) { return n.as_double(kMinEfficiency, 1); };
  const Node gemm = efficiency.at("gemm");
  if (gemm.is_map()) {
    // Per precision: every precision of the map must be one the device has.
    for (const auto& [precision, value] : gemm.entries()) {
      bool known = false;
      for (const auto& [p, rate] : a.peak) known = known || p == precision;
      if (!known) throw value.error("not a precision of peak_flop_rate", "a key of peak_flop_rate");
      a.gemm_efficiency_by_precision.emplace_back(precision, fraction(value));
    }
    if (a.gemm_efficiency_by_precision.empty()) {
      throw gemm.error("no precision", "a fraction, or a map like {bf16: 0.8}");
    }
  } else {
    a.gemm_efficiency = fraction(gemm);
  }
  a.memory_efficiency = fraction(efficiency.at("memory"));
  if (auto shape = root.find("gemm_shape")) {
    shape->expect_keys({"streaming_multiprocessors", "tiles", "k_overhead"});
    GemmShapeModel& g = a.gemm_shape;
    g.streaming_multiprocessors =
        static_cast<int>(shape->at("streaming_multiprocessors").as_int(1, 1 << 20));
    for (const Node& tile : shape->at("tiles").elements()) {
      const auto dims = tile.as_int_list(1, 1 << 16);
      if (dims.size() != 2) throw tile.error("not a tile", "[rows, columns]");
      g.tiles.emplace_back(static_cast<int>(dims[0]), static_cast<int>(dims[1]));
    }
    if (g.tiles.empty()) throw shape->at("tiles").error("no tile", "a list of [rows, columns]");
    g.k_overhead = shape->at("k_overhead").as_double(0, 1e6);
  }
  return a;
}

}  // namespace

double Accelerator::gemm_efficiency_for(std::string_view precision) const {
  if (gemm_efficiency_by_precision.empty()) return gemm_efficiency;
  std::string names;
  for (const auto& [p, e] : gemm_efficiency_by_precision) {
    if (p == precision) return e;
    names += (names.empty() ? "" : ", ") + p;
  }
  throw Error::input("no GEMM efficiency for this precision on accelerator " + name,
                     {.key = "precision",
                      .value = std::string(precision),
                      .expected = "one of " + names + " (efficiency.gemm)"});
}

FlopRate Accelerator::peak_for(std::string_view precision) const {
  std::string names;
  for (const auto& [p, rate] : peak) {
    if (p == precision) return rate;
    names += (names.empty() ? "" : ", ") + p;
  }
  throw Error::input(
      "precision not offered by accelerator " + name,
      {.key = "precision", .value = std::string(precision), .expected = "one of " + names});
}

Accelerator load_accelerator(const std::string& path, const config::Limits& limits) {
  return parse_root(Node::load_file(path, limits.max_input_bytes));
}

Accelerator parse_accelerator(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
