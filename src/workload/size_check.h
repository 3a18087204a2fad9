#pragma once
// Private to src/workload: the checks that keep a profile's numbers inside their types. The
// operator graphs compute sizes in 64-bit integers and times in integer picoseconds, and the
// placer sums them over layers, microbatches and stages; these checks refuse, before anything
// is built, a configuration whose upper estimates could leave those ranges.

#include <cstdint>
#include <string>

#include "nest/workload/layer_profile.h"
#include "workload/layers.h"

namespace nest::workload::detail {

/// Upper estimate of one layer's per-device bytes (its tensors, weights and traffic) times
/// (layers + 2)^2 — a stage's activations for every microbatch in flight — must stay below.
inline constexpr long double kMaxStageBytes = 0x1p62L;
/// Upper estimate of one iteration on one device — every layer's forward, backward and
/// recompute for every microbatch — must stay below (in ps; 26.7 days).
inline constexpr long double kMaxIterationPs = 0x1p61L;

/// Upper estimates of one microbatch's layers on one device: bytes of tensors, weights and
/// memory traffic, and forward + backward + recompute time (ps), of the embedding, one block
/// and the head. Long double: finite whatever the inputs.
struct LayerEstimate {
  long double embedding_bytes = 0, block_bytes = 0, head_bytes = 0;
  long double embedding_ps = 0, block_ps = 0, head_ps = 0;
  long double matrix_ps = 0, vector_ps = 0, memory_ps = 0;  ///< of the whole chain, by kind
};

/// The estimate for `model` under dimensions `d` on `roofline`. O(1).
[[nodiscard]] LayerEstimate estimate_layers(const Model& model, const Dims& d,
                                            const Roofline& roofline);

/// Throws `Error` (input) when the layers of `model` under dimensions `d` on `roofline` could
/// pass kMaxStageBytes, or one microbatch through all of them kMaxIterationPs: then every
/// size and time the operator graphs compute fits its integer type. (The iteration, × the
/// microbatches, is checked on the built variant by `check_variant_totals`.) The key names the
/// input whose term dominates ("sequence_length", "micro_batch", "vocabulary", "hidden", or the
/// accelerator's "peak_flop_rate", "vector_flop_rate", "hbm_bandwidth"). O(1).
void check_layer_sizes(const Model& model, const Dims& d, const Roofline& roofline);

/// The same for a variant given layer by layer (a profile file): Σ (forward + backward +
/// recompute) × microbatches below kMaxIterationPs, and Σ (activation + input + output +
/// collective bytes) × layers + 16 × Σ parameters below kMaxStageBytes. Throws `Error` (input,
/// key "layers"). O(layers).
void check_variant_totals(const Variant& variant);

}  // namespace nest::workload::detail
