#include "nest/workload/memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "nest/core/error.h"

namespace nest::workload {
namespace {

// Bytes per parameter under mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3): fp16/bf16
// weights and gradients, fp32 master weights + momentum + variance.
constexpr std::int64_t kWeightBytes = 2;
constexpr std::int64_t kGradientBytes = 2;
constexpr std::int64_t kOptimizerBytes = 12;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Parameter count of a layer; a layer that only knows its bytes (a profile file that left
// `parameters` out) is taken to hold 2-byte weights.
std::int64_t parameters_of(const Layer& layer) {
  return layer.parameters > 0 ? layer.parameters : layer.parameter_bytes.count() / kWeightBytes;
}

void check_arguments(const Variant& variant, std::size_t first, std::size_t last, int in_flight,
                     const MemoryOptions& options) {
  if (first >= last || last > variant.layers.size()) {
    throw Error::internal(fmt::format("stage_memory: layer range [{}, {}) outside 0..{}", first,
                                      last, variant.layers.size()));
  }
  if (in_flight < 1) {
    throw Error::internal(fmt::format("stage_memory: in_flight {} < 1", in_flight));
  }
  if (options.zero_stage < 0 || options.zero_stage > 3) {
    throw Error::input("invalid ZeRO stage", {.key = "zero_stage",
                                              .value = std::to_string(options.zero_stage),
                                              .expected = "0, 1, 2 or 3"});
  }
  if (options.data_parallel < 1) {
    throw Error::input("invalid data-parallel degree",
                       {.key = "data_parallel",
                        .value = std::to_string(options.data_parallel),
                        .expected = "an integer >= 1"});
  }
}

StageMemory nest_artifact_memory(const Variant& variant, std::size_t first, std::size_t last,
                                 int in_flight, Recompute recompute) {
  Bytes params;
  Bytes activations;
  for (std::size_t i = first; i < last; ++i) {
    params += variant.layers[i].parameter_bytes;
    activations += variant.layers[i].activation_bytes;
  }
  const Bytes stash =
      recompute == Recompute::kFull ? variant.layers[first].input_bytes : activations;
  return StageMemory{.weights = params,
                     .gradients = params,
                     .optimizer = Bytes(0),
                     .activations = activations + stash * (in_flight - 1)};
}

StageMemory megatron_memory(const Variant& variant, std::size_t first, std::size_t last,
                            int in_flight, const MemoryOptions& options) {
  std::int64_t params = 0;
  Bytes activations;
  Bytes inputs;
  Bytes largest;
  Bytes kept;          // under selective recomputation
  Bytes largest_core;  // the largest attention core recomputed during one backward
  for (std::size_t i = first; i < last; ++i) {
    const Layer& layer = variant.layers[i];
    params += parameters_of(layer);
    activations += layer.activation_bytes;
    inputs += layer.input_bytes;
    largest = std::max(largest, layer.activation_bytes);
    kept += layer.selective_activation_bytes;
    largest_core =
        std::max(largest_core, layer.activation_bytes - layer.selective_activation_bytes);
  }
  Bytes held = activations * in_flight;
  if (options.recompute == Recompute::kFull) held = inputs * in_flight + largest;
  if (options.recompute == Recompute::kSelective) held = kept * in_flight + largest_core;
  const std::int64_t d = options.data_parallel;
  const int zero = options.zero_stage;
  const std::int64_t weights = kWeightBytes * params;
  const std::int64_t gradients = kGradientBytes * params;
  const std::int64_t optimizer = kOptimizerBytes * params;
  return StageMemory{.weights = Bytes(zero >= 3 ? ceil_div(weights, d) : weights),
                     .gradients = Bytes(zero >= 2 ? ceil_div(gradients, d) : gradients),
                     .optimizer = Bytes(zero >= 1 ? ceil_div(optimizer, d) : optimizer),
                     .activations = held};
}

}  // namespace

StageMemory stage_memory(const Variant& variant, std::size_t first, std::size_t last, int in_flight,
                         const MemoryOptions& options) {
  check_arguments(variant, first, last, in_flight, options);
  if (options.rules == MemoryRules::kNestArtifact) {
    return nest_artifact_memory(variant, first, last, in_flight, options.recompute);
  }
  return megatron_memory(variant, first, last, in_flight, options);
}

}  // namespace nest::workload
