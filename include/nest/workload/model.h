#pragma once
/// \file
/// A transformer architecture as published (`workloads/models/*.yaml`), and its parameter count.
///
/// File format (keys marked * are optional):
/// ```yaml
/// kind: model
/// name: gpt3-175b
/// layers: 96                   # transformer blocks
/// hidden: 12288
/// heads: 96
/// kv_heads: 96                 # * grouped-query attention (default: heads)
/// head_dim: 128                # * default hidden / heads
/// ffn_hidden: 49152            # per expert for mixture-of-experts models
/// activation: gelu             # gelu (two-matrix MLP) or swiglu (gate, up, down)
/// norm: layernorm              # layernorm (weight + bias) or rmsnorm (weight)
/// position_embedding: learned  # learned (a table of max_positions rows) or rotary (none)
/// max_positions: 2048          # * rows of the learned table (default: sequence_length)
/// token_types: 0               # * rows of a token-type table (BERT: 2)
/// vocabulary: 50257
/// vocabulary_padding: 128      # * Megatron pads the vocabulary to a multiple of this × t
/// tied_embeddings: true        # output projection shares the input embedding
/// bias: true                   # biases on every linear layer
/// dropout: true                # dropout after attention probabilities, projection and MLP
/// embedding_norm: false        # * a norm after the embeddings (BERT)
/// final_norm: true             # * a norm before the output projection (default true)
/// pooler: false                # * BERT's [CLS] pooler (h×h + h)
/// causal: true                 # * decoder (masked) attention; false for an encoder (BERT)
/// experts: 8                   # * mixture of experts: experts per layer (default 0 = dense)
/// top_k: 2                     # * experts per token (required with experts)
/// sequence_length: 2048        # training sequence length
/// global_batch: 1536           # * sequences per iteration
/// ```

#include <cstdint>
#include <string>
#include <string_view>

#include "nest/config/limits.h"

namespace nest::workload {

/// Ranges of the model keys (inclusive; the minimum is 1 unless said). Far above any published
/// model (the largest hidden size is 25,600, vocabulary 256,000, layers 126), they keep every
/// count the profile derives inside 64 bits; `check_parallel_config` then checks the sizes of
/// one configuration's tensors and times (nest/workload/model_profile.h).
/// Layers: the placer's search grows with the square of the layer count (2,048 layers: 19 s).
inline constexpr std::int64_t kMaxLayers = 4'096;
inline constexpr std::int64_t kMaxHidden = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxHeads = std::int64_t{1} << 16;  ///< also kv_heads
inline constexpr std::int64_t kMaxHeadDim = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxFfnHidden = std::int64_t{1} << 22;
inline constexpr std::int64_t kMaxVocabulary = std::int64_t{1} << 24;  ///< also token_types (>= 0)
inline constexpr std::int64_t kMaxVocabularyPadding = std::int64_t{1} << 20;
/// Also max_positions and the --seq / sequence_length overrides.
inline constexpr std::int64_t kMaxSequenceLength = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxExperts = std::int64_t{1} << 16;
/// Also the --global-batch / global_batch overrides.
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 30;
/// Most parameters of a whole model, 2^56 (7.2e16, 400,000 times GPT-3): 16 bytes each of
/// weights, gradients and Adam state stay below 2^60.
inline constexpr std::int64_t kMaxParameters = std::int64_t{1} << 56;

/// The feed-forward block's non-linearity.
enum class FfnActivation : std::uint8_t {
  kGelu,    ///< h → ffn → h, two weight matrices
  kSwiglu,  ///< h → 2·ffn (gate and up) → ffn → h, three weight matrices
};

/// The normalization layers' kind.
enum class NormKind : std::uint8_t {
  kLayerNorm,  ///< weight and bias: 2·h parameters
  kRmsNorm,    ///< weight only: h parameters
};

/// How positions enter the model.
enum class PositionEmbedding : std::uint8_t {
  kLearned,  ///< a learned table of max_positions × h
  kRotary,   ///< rotary embeddings inside attention: no parameters
};

/// A transformer architecture. Plain data; `validate_model` checks the invariants.
struct Model {
  std::string name;
  std::int64_t layers = 0;  ///< transformer blocks
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  ///< == heads without grouped-query attention
  std::int64_t head_dim = 0;  ///< usually hidden / heads
  std::int64_t ffn_hidden = 0;
  FfnActivation activation = FfnActivation::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionEmbedding position = PositionEmbedding::kLearned;
  std::int64_t max_positions = 0;  ///< rows of the learned position table
  std::int64_t token_types = 0;
  std::int64_t vocabulary = 0;
  std::int64_t vocabulary_padding = 128;
  bool tied_embeddings = false;
  bool bias = false;
  bool dropout = false;
  bool embedding_norm = false;
  bool final_norm = true;
  bool pooler = false;
  bool causal = true;        ///< decoder attention: each token attends to the ones before it
  std::int64_t experts = 0;  ///< 0 for a dense model
  std::int64_t top_k = 0;
  std::int64_t sequence_length = 0;
  std::int64_t global_batch = 0;  ///< 0 when the file gives none

  [[nodiscard]] bool is_moe() const noexcept { return experts > 0; }
};

/// Parameter counts of a whole model (no tensor-parallel split, no vocabulary padding).
struct ParameterCount {
  std::int64_t embedding = 0;  ///< word + position + token-type tables, embedding norm
  std::int64_t block = 0;      ///< one transformer block (all experts)
  std::int64_t head = 0;       ///< final norm, pooler, untied output projection
  std::int64_t total = 0;      ///< embedding + layers·block + head
  /// Parameters that one token uses: total minus the experts it is not routed to.
  std::int64_t active = 0;
};

/// Counts the parameters of `model`, exactly. Throws `Error` (input, key "hidden") when the
/// total is over kMaxParameters. O(1).
[[nodiscard]] ParameterCount count_parameters(const Model& model);

/// The total parameter count in floating point, right (to rounding) however large. O(1).
[[nodiscard]] double approximate_parameters(const Model& model);

/// Throws `Error` (input) unless the model is consistent: every key in its range above,
/// top_k in 1..experts, a learned position table at least as long as the sequence, at most
/// kMaxParameters parameters.
void validate_model(const Model& model);

/// Reads a model file (format above, read by `config::read_input_file`). Throws `Error`
/// (input) naming file, line and key.
[[nodiscard]] Model load_model(const std::string& path, const config::Limits& limits = {});

/// Parses model YAML; `name` stands for the file name in errors.
[[nodiscard]] Model parse_model(std::string_view text, const std::string& name);

}  // namespace nest::workload
