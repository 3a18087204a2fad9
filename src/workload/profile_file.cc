#include "nest/workload/profile_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "nest/config/node.h"
#include "nest/core/error.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "workload/size_check.h"

namespace nest::workload {
namespace {

using config::Node;

// Layers of one variant: a model's blocks, its embedding and its head; of all variants together
// (bounds the memory: a layer is about 170 bytes).
constexpr std::int64_t kMaxVariantLayers = kMaxLayers + 2;
constexpr std::int64_t kMaxProfileLayers = 1'000'000;
constexpr int kMaxDegree = 1 << 20;
// FLOPs of one layer per microbatch: 1e30 is 10^12 times a GPT-3 block's.
constexpr double kMaxLayerFlops = 1e30;

// The `time_unit` of a file: its name and picoseconds per unit.
struct TimeUnit {
  std::string name;
  double ps = 1;
};

TimeUnit time_unit_of(const Node& node) {
  const std::string unit = node.as_choice({"ps", "ns", "us", "ms", "s"});
  if (unit == "ps") return {unit, 1};
  if (unit == "ns") return {unit, 1e3};
  if (unit == "us") return {unit, 1e6};
  if (unit == "ms") return {unit, 1e9};
  return {unit, 1e12};
}

Time time_of(const Node& node, const TimeUnit& unit) {
  const double v = node.as_double();
  const double ps = v * unit.ps;
  if (v < 0 || ps > 9.2e18) {
    throw node.error(v < 0 ? "negative duration" : "duration too long",
                     fmt::format("a number of {} in [0, {:g}]", unit.name, 9.2e18 / unit.ps));
  }
  return Time::picoseconds(static_cast<std::int64_t>(std::llround(ps)));
}

// A byte count: a plain integer (bytes) or a size with a unit ("1.5 GiB").
Bytes bytes_of(const Node& node) {
  const std::string text = node.is_scalar() ? node.text() : "";
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (plain) return Bytes(node.as_int(0));
  return node.as_bytes(/*allow_zero=*/true);
}

CollectiveOp op_of(const Node& node) {
  const std::string op = node.as_choice({"allreduce", "allgather", "reducescatter", "alltoall"});
  if (op == "allreduce") return CollectiveOp::kAllReduce;
  if (op == "allgather") return CollectiveOp::kAllGather;
  if (op == "reducescatter") return CollectiveOp::kReduceScatter;
  return CollectiveOp::kAllToAll;
}

ParallelAxis axis_of(const Node& node) {
  const std::string axis = node.as_choice({"tensor", "expert", "context"});
  if (axis == "tensor") return ParallelAxis::kTensor;
  if (axis == "expert") return ParallelAxis::kExpert;
  return ParallelAxis::kContext;
}

LayerCollective parse_collective(const Node& node) {
  node.expect_keys({"op", "axis", "size", "count", "recompute_count"});
  LayerCollective c;
  c.op = op_of(node.at("op"));
  c.axis = axis_of(node.at("axis"));
  c.size = bytes_of(node.at("size"));
  if (auto n = node.find("count")) c.count = static_cast<int>(n->as_int(0, 1'000'000));
  if (auto n = node.find("recompute_count")) {
    c.recompute_count = static_cast<int>(n->as_int(0, 1'000'000));
  }
  return c;
}

// One entry of `layers:` and how many times it repeats; `output_bytes` stays unset (nullopt)
// when the file leaves it to the next layer's input.
struct LayerEntry {
  Layer layer;
  std::int64_t repeat = 1;
  std::optional<Bytes> output;
  bool selective = false;  // gives selective-recomputation figures
};

LayerEntry parse_layer(const Node& node, const TimeUnit& unit) {
  node.expect_keys({"name", "repeat", "forward", "backward", "recompute", "selective_recompute",
                    "parameter_bytes", "activation_bytes", "selective_activation_bytes",
                    "input_bytes", "output_bytes", "parameters", "flops", "collectives"});
  LayerEntry e;
  Layer& l = e.layer;
  l.name = node.at("name").as_string();
  if (auto n = node.find("repeat")) e.repeat = n->as_int(1, kMaxVariantLayers);
  l.forward = time_of(node.at("forward"), unit);
  l.backward = time_of(node.at("backward"), unit);
  l.recompute = l.forward;
  if (auto n = node.find("recompute")) l.recompute = time_of(*n, unit);
  l.parameter_bytes = bytes_of(node.at("parameter_bytes"));
  l.activation_bytes = bytes_of(node.at("activation_bytes"));
  l.selective_activation_bytes = l.activation_bytes;
  if (auto n = node.find("selective_recompute")) {
    l.selective_recompute = time_of(*n, unit);
    e.selective = true;
  }
  if (auto n = node.find("selective_activation_bytes")) {
    l.selective_activation_bytes = bytes_of(*n);
    e.selective = true;
    if (l.selective_activation_bytes > l.activation_bytes) {
      throw n->error("more than activation_bytes", "at most the layer's activation_bytes");
    }
  }
  l.input_bytes = bytes_of(node.at("input_bytes"));
  if (auto n = node.find("output_bytes")) e.output = bytes_of(*n);
  l.parameters = l.parameter_bytes.count() / 2;
  if (auto n = node.find("parameters")) l.parameters = n->as_int(0, kMaxParameters);
  if (auto n = node.find("flops")) l.flops = Flops(n->as_double(0, kMaxLayerFlops));
  if (auto n = node.find("collectives")) {
    for (const Node& c : n->elements()) l.collectives.push_back(parse_collective(c));
  }
  return e;
}

// `budget`: the layers the file may still hold, over all its variants.
// `selective` is set when a layer gives selective-recomputation figures.
std::vector<Layer> expand_layers(const Node& node, const TimeUnit& unit, std::int64_t budget,
                                 bool& selective) {
  std::vector<LayerEntry> entries;
  std::int64_t total = 0;
  for (const Node& n : node.elements()) {
    entries.push_back(parse_layer(n, unit));
    selective = selective || entries.back().selective;
    total += entries.back().repeat;
    if (total > kMaxVariantLayers) {
      throw n.error("too many layers",
                    fmt::format("at most {} layers in a variant", kMaxVariantLayers));
    }
    if (total > budget) {
      throw n.error("too many layers",
                    fmt::format("at most {} layers in all variants together", kMaxProfileLayers));
    }
  }
  if (entries.empty()) throw node.error("no layers", "a list of at least one layer");
  std::vector<Layer> layers;
  std::vector<std::optional<Bytes>> outputs;
  layers.reserve(static_cast<std::size_t>(total));
  for (const LayerEntry& e : entries) {
    for (std::int64_t i = 0; i < e.repeat; ++i) {
      layers.push_back(e.layer);
      outputs.push_back(e.output);
    }
  }
  // A stage boundary after layer i sends what layer i + 1 takes in; the last layer's output is
  // taken to be as large as its input (a transformer block maps [s, b, h] to [s, b, h]).
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (outputs[i]) {
      layers[i].output_bytes = *outputs[i];
    } else {
      layers[i].output_bytes =
          i + 1 < layers.size() ? layers[i + 1].input_bytes : layers[i].input_bytes;
    }
  }
  return layers;
}

Variant parse_variant(const Node& node, const TimeUnit& unit, int micro_batch,
                      std::int64_t global_batch, std::int64_t budget, bool& selective) {
  node.expect_keys({"tensor_parallel", "expert_parallel", "context_parallel", "sequence_parallel",
                    "devices_per_replica", "microbatches", "source", "layers"});
  Variant v;
  v.tensor_parallel = static_cast<int>(node.at("tensor_parallel").as_int(1, kMaxDegree));
  if (auto n = node.find("expert_parallel")) {
    v.expert_parallel = static_cast<int>(n->as_int(1, kMaxDegree));
  }
  if (auto n = node.find("context_parallel")) {
    v.context_parallel = static_cast<int>(n->as_int(1, kMaxDegree));
  }
  if (auto n = node.find("sequence_parallel")) v.sequence_parallel = n->as_bool();
  v.micro_batch = micro_batch;
  const std::int64_t product =
      std::int64_t{v.tensor_parallel} * v.context_parallel * v.expert_parallel;
  if (product > kMaxDegree) {
    throw node.error("tensor_parallel × context_parallel × expert_parallel too large",
                     fmt::format("a product of at most {}", kMaxDegree));
  }
  v.devices_per_replica = static_cast<int>(product);
  if (auto n = node.find("devices_per_replica")) {
    v.devices_per_replica = static_cast<int>(n->as_int(1, kMaxDegree));
  }
  v.microbatches = global_batch / micro_batch;
  if (auto n = node.find("microbatches")) v.microbatches = n->as_int(1, kMaxGlobalBatch);
  if (auto n = node.find("source")) (void)n->as_string();
  v.layers = expand_layers(node.at("layers"), unit, budget, selective);
  try {
    detail::check_variant_totals(v);
  } catch (const Error& e) {
    const Node layers = node.at("layers");
    ErrorContext c = e.context();
    c.file = layers.file();
    c.line = layers.line();
    c.key = layers.path();
    throw Error::input(e.message(), std::move(c));
  }
  return v;
}

LayerProfile parse_root(const Node& root) {
  root.expect_keys({"kind", "model", "accelerator", "sequence_length", "micro_batch",
                    "global_batch", "time_unit", "hbm", "activation_recomputation",
                    "total_parameters", "peak_flop_rate", "variants"});
  (void)root.at("kind").as_choice({"layer_profile"});
  LayerProfile p;
  p.model = root.at("model").as_string();
  p.accelerator = root.at("accelerator").as_string();
  p.sequence_length = root.at("sequence_length").as_int(1, kMaxSequenceLength);
  const int micro_batch = static_cast<int>(root.at("micro_batch").as_int(1, kMaxDegree));
  const Node global = root.at("global_batch");
  p.global_batch = global.as_int(1, kMaxGlobalBatch);
  if (p.global_batch % micro_batch != 0) {
    throw global.error("not a multiple of micro_batch",
                       fmt::format("a multiple of {}", micro_batch));
  }
  const TimeUnit unit = time_unit_of(root.at("time_unit"));
  const Node hbm = root.at("hbm");
  p.hbm = hbm.as_bytes();
  if (p.hbm.count() < kMinHbm || p.hbm.count() > kMaxHbm) {
    throw hbm.error("out of range", "a size in [1 MiB, 1 EiB]");
  }
  p.recompute_allowed = root.at("activation_recomputation").as_bool();
  if (auto n = root.find("total_parameters")) p.total_parameters = n->as_int(0, kMaxParameters);
  if (auto n = root.find("peak_flop_rate")) {
    p.peak_flop_rate = n->as_flop_rate();
    if (p.peak_flop_rate.flops_per_s() < kMinFlopRate ||
        p.peak_flop_rate.flops_per_s() > kMaxFlopRate) {
      throw n->error("out of range", "a compute rate in [1e6 FLOP/s, 1e21 FLOP/s]");
    }
  }
  const Node variants = root.at("variants");
  std::int64_t budget = kMaxProfileLayers;  // layers of all variants together: bounds the memory
  for (const Node& n : variants.elements()) {
    p.variants.push_back(
        parse_variant(n, unit, micro_batch, p.global_batch, budget, p.selective_recompute_allowed));
    budget -= static_cast<std::int64_t>(p.variants.back().layers.size());
  }
  if (p.variants.empty()) throw variants.error("no variants", "a list of at least one variant");
  return p;
}

}  // namespace

LayerProfile load_layer_profile(const std::string& path, const config::Limits& limits) {
  return parse_root(Node::load_file(path, limits.max_input_bytes));
}

LayerProfile parse_layer_profile(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
