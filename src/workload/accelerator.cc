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
  root.expect_keys(
      {"kind", "name", "peak_flop_rate", "vector_flop_rate", "hbm", "hbm_bandwidth", "efficiency"});
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
  const auto fraction = [&](std::string_view key) {
    const Node n = efficiency.at(key);
    return n.as_double(kMinEfficiency, 1);
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

Accelerator load_accelerator(const std::string& path, const config::Limits& limits) {
  return parse_root(Node::load_file(path, limits.max_input_bytes));
}

Accelerator parse_accelerator(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
