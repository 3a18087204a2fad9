#include "nest/workload/model_profile.h"

#include <fmt/format.h>

#include <limits>

#include "nest/core/error.h"
#include "nest/workload/roofline.h"
#include "workload/layers.h"
#include "workload/size_check.h"

namespace nest::workload {
namespace {

Error bad(const std::string& key, const std::string& message, std::int64_t value,
          const std::string& expected) {
  return Error::input(message, {.key = key, .value = std::to_string(value), .expected = expected});
}

constexpr int kMaxDegree = 1 << 20;

void check_degree(const char* key, int value) {
  if (value < 1 || value > kMaxDegree) {
    throw bad(key, "out of range", value, fmt::format("an integer in [1, {}]", kMaxDegree));
  }
}

std::int64_t global_batch_of(const Model& model, const BuildOptions& options) {
  return options.global_batch > 0 ? options.global_batch : model.global_batch;
}

}  // namespace

void check_parallel_config(const Model& m, const ParallelConfig& p, const BuildOptions& options) {
  check_degree("tensor_parallel", p.tensor);
  check_degree("context_parallel", p.context);
  check_degree("expert_parallel", p.expert);
  check_degree("micro_batch", p.micro_batch);
  if (options.sequence_length < 0 || options.sequence_length > kMaxSequenceLength) {
    throw bad("sequence_length", "out of range", options.sequence_length,
              fmt::format("an integer in [1, {}] (0: the model's)", kMaxSequenceLength));
  }
  if (options.global_batch < 0 || options.global_batch > kMaxGlobalBatch) {
    throw bad("global_batch", "out of range", options.global_batch,
              fmt::format("an integer in [1, {}] (0: the model's)", kMaxGlobalBatch));
  }
  const std::int64_t t = p.tensor;
  if (m.heads % t != 0) {
    throw bad("tensor_parallel", "attention heads not divisible by the tensor-parallel degree", t,
              fmt::format("a divisor of {} (heads)", m.heads));
  }
  if (m.kv_heads % t != 0 && t % m.kv_heads != 0) {
    throw bad("tensor_parallel", "KV heads and the tensor-parallel degree do not divide", t,
              fmt::format("a divisor or a multiple of {} (KV heads)", m.kv_heads));
  }
  if (m.ffn_hidden % t != 0) {
    throw bad("tensor_parallel", "FFN size not divisible by the tensor-parallel degree", t,
              fmt::format("a divisor of {} (ffn_hidden)", m.ffn_hidden));
  }
  if (!m.is_moe() && p.expert > 1) {
    throw bad("expert_parallel", "expert parallelism on a model without experts", p.expert,
              "1 for a dense model");
  }
  if (m.is_moe() && m.experts % p.expert != 0) {
    throw bad("expert_parallel", "experts not divisible by the expert-parallel degree", p.expert,
              fmt::format("a divisor of {} (experts)", m.experts));
  }
  if (m.is_moe() && t > 1 && !p.sequence) {
    throw Error::input("mixture of experts with tensor parallelism needs sequence parallelism",
                       {.key = "sequence_parallel",
                        .value = "false",
                        .expected = "true when tensor_parallel > 1 (as in Megatron-Core)"});
  }
  const std::int64_t s = options.sequence_length > 0 ? options.sequence_length : m.sequence_length;
  if (m.position == PositionEmbedding::kLearned && s > m.max_positions) {
    throw bad("sequence_length", "longer than the learned position table", s,
              fmt::format("at most {} (max_positions)", m.max_positions));
  }
  if (s % p.context != 0) {
    throw bad("context_parallel", "sequence length not divisible by the context-parallel degree",
              p.context, fmt::format("a divisor of {} (sequence length)", s));
  }
  if (p.sequence && t > 1 && (s / p.context) % t != 0) {
    throw bad("tensor_parallel",
              "sequence per context-parallel rank not divisible by the tensor-parallel degree "
              "under sequence parallelism",
              t, fmt::format("a divisor of {}", s / p.context));
  }
  const std::int64_t gb = global_batch_of(m, options);
  const std::int64_t step = std::int64_t{p.micro_batch} * p.expert;
  if (gb > 0 && gb % step != 0) {
    throw bad("global_batch", "not divisible by micro_batch × expert_parallel", gb,
              fmt::format("a multiple of {}", step));
  }
}

std::vector<LayerGraph> layer_graphs(const Model& model, const Accelerator& device,
                                     const ParallelConfig& config, const BuildOptions& options) {
  check_parallel_config(model, config, options);
  const Roofline roofline = Roofline::of(device, options.precision);
  const detail::Dims d = detail::make_dims(model, config, options);
  detail::check_layer_sizes(model, d, roofline);
  std::vector<LayerGraph> graphs;
  graphs.reserve(3);
  graphs.push_back(detail::embedding_graph(model, d, roofline));
  graphs.push_back(detail::block_graph(model, d, roofline));
  graphs.push_back(detail::head_graph(model, d, roofline));
  if (options.gradient_accumulation_bytes > 0) {
    // Each microbatch's weight gradients are added to the accumulated ones by a memory-bound
    // pass over the layer's parameters, in its backward.
    for (LayerGraph& g : graphs) {
      if (g.parameters <= 0) continue;
      if (g.parameters >
          std::numeric_limits<std::int64_t>::max() / options.gradient_accumulation_bytes) {
        throw Error::input(
            fmt::format("gradient accumulation traffic out of range: {} parameters in the {} "
                        "layer",
                        g.parameters, g.name),
            {.key = "gradient_accumulation_bytes",
             .value = std::to_string(options.gradient_accumulation_bytes),
             .expected = fmt::format("at most {} bytes per parameter",
                                     std::numeric_limits<std::int64_t>::max() / g.parameters)});
      }
      const Bytes traffic(g.parameters * options.gradient_accumulation_bytes);
      g.operators.push_back(Operator{.name = "gradient_accumulation",
                                     .kind = OperatorKind::kMemory,
                                     .backward_factor = 0,
                                     .backward_bytes = traffic,
                                     .backward = serialization_time(traffic, roofline.memory)});
    }
  }
  return graphs;
}

Layer to_layer(const LayerGraph& graph, std::int64_t parameter_bytes_each) {
  Layer l;
  l.name = graph.name;
  Flops flops;
  for (const Operator& op : graph.operators) {
    l.forward += op.forward;
    l.backward += op.backward;
    if (op.kind == OperatorKind::kMatmul) {
      flops += op.forward_flops * (1 + op.backward_factor);
    }
  }
  l.recompute = graph.recomputed ? l.forward : Time::zero();
  l.selective_recompute = graph.recomputed ? graph.attention_core_forward() : Time::zero();
  l.parameters = graph.parameters;
  l.expert_parameters = graph.expert_parameters;
  l.parameter_bytes = Bytes(graph.parameters * parameter_bytes_each);
  l.activation_bytes = graph.saved_bytes();
  l.selective_activation_bytes =
      graph.recomputed ? l.activation_bytes - graph.recomputed_bytes() : l.activation_bytes;
  l.input_bytes = graph.input_bytes;
  l.output_bytes = graph.output_bytes;
  l.output_gather = graph.output_gather;
  l.flops = flops;
  l.collectives = graph.collectives;
  return l;
}

Variant build_variant(const Model& model, const Accelerator& device, const ParallelConfig& config,
                      const BuildOptions& options) {
  const std::vector<LayerGraph> graphs = layer_graphs(model, device, config, options);
  const std::int64_t pb = options.precision == "fp32" || options.precision == "tf32" ? 4 : 2;
  Variant v;
  v.tensor_parallel = config.tensor;
  v.expert_parallel = config.expert;
  v.context_parallel = config.context;
  v.sequence_parallel = config.sequence && config.tensor > 1;
  v.micro_batch = config.micro_batch;
  v.devices_per_replica = config.tensor * config.context * config.expert;
  const std::int64_t gb = global_batch_of(model, options);
  v.microbatches = gb > 0 ? gb / (std::int64_t{config.micro_batch} * config.expert) : 1;
  v.layers.reserve(static_cast<std::size_t>(model.layers) + 2);
  v.layers.push_back(to_layer(graphs[0], pb));
  const Layer block = to_layer(graphs[1], pb);
  for (std::int64_t i = 0; i < model.layers; ++i) v.layers.push_back(block);
  v.layers.push_back(to_layer(graphs[2], pb));
  detail::check_variant_totals(v);
  return v;
}

LayerProfile build_profile(const Model& model, const Accelerator& device,
                           const std::vector<ParallelConfig>& configs,
                           const BuildOptions& options) {
  LayerProfile p;
  p.model = model.name;
  p.accelerator = device.name;
  p.sequence_length = options.sequence_length > 0 ? options.sequence_length : model.sequence_length;
  p.global_batch = global_batch_of(model, options);
  p.hbm = device.hbm;
  p.recompute_allowed = true;
  p.selective_recompute_allowed = true;
  p.total_parameters = count_parameters(model).total;
  p.peak_flop_rate = device.peak_for(options.precision);
  if (p.global_batch > 0) {
    const std::vector<LayerGraph> one = layer_graphs(model, device, ParallelConfig{}, options);
    const Flops per_sequence = one[0].forward_matmul_flops() +
                               one[1].forward_matmul_flops() * static_cast<double>(model.layers) +
                               one[2].forward_matmul_flops();
    p.flops_per_iteration = per_sequence * (3.0 * static_cast<double>(p.global_batch));
  }
  p.variants.reserve(configs.size());
  for (const ParallelConfig& c : configs)
    p.variants.push_back(build_variant(model, device, c, options));
  return p;
}

}  // namespace nest::workload
