#include "nest/workload/accelerator.h"

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::workload {
namespace {

using config::Node;

Accelerator parse_root(const Node& root) {
  root.expect_keys({"kind", "name", "peak_flop_rate", "vector_flop_rate", "hbm", "hbm_bandwidth",
                    "efficiency", "gemm_shape"});
  (void)root.at("kind").as_choice({"accelerator"});
  Accelerator a;
  a.name = root.at("name").as_string();
  const Node peaks = root.at("peak_flop_rate");
  for (const auto& [precision, rate] : peaks.entries()) {
    a.peak.emplace_back(precision, rate.as_flop_rate());
  }
  if (a.peak.empty()) throw peaks.error("no precision", "a map like {bf16: 989 TFLOP/s}");
  if (auto n = root.find("vector_flop_rate")) a.vector_rate = n->as_flop_rate();
  a.hbm = root.at("hbm").as_bytes();
  a.hbm_bandwidth = root.at("hbm_bandwidth").as_bandwidth();
  const Node efficiency = root.at("efficiency");
  efficiency.expect_keys({"gemm", "memory"});
  const auto fraction = [](const Node& n) {
    const double v = n.as_double(0, 1);
    if (v <= 0) throw n.error("must be positive", "a fraction in (0, 1]");
    return v;
  };
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

Accelerator load_accelerator(const std::string& path) { return parse_root(Node::load_file(path)); }

Accelerator parse_accelerator(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
