#include "nest/workload/accelerator.h"

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::workload {
namespace {

using config::Node;

Accelerator parse_root(const Node& root) {
  root.expect_keys(
      {"kind", "name", "peak_flop_rate", "vector_flop_rate", "hbm", "hbm_bandwidth", "efficiency"});
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
  const auto fraction = [&](std::string_view key) {
    const Node n = efficiency.at(key);
    const double v = n.as_double(0, 1);
    if (v <= 0) throw n.error("must be positive", "a fraction in (0, 1]");
    return v;
  };
  a.gemm_efficiency = fraction("gemm");
  a.memory_efficiency = fraction("memory");
  return a;
}

}  // namespace

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
