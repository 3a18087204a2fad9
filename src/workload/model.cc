#include "nest/workload/model.h"

#include <fmt/format.h>

#include <cmath>

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::workload {
namespace {

using config::Node;

// Parameter counts are computed in long double: its 64-bit significand holds every integer
// below 2^64 exactly, so a count NEST accepts (at most kMaxParameters) is exact, and one past
// it is still right to three digits in the message instead of wrapped.
using Count = long double;

Count norm_parameters(const Model& m) {
  return m.norm == NormKind::kLayerNorm ? 2 * Count(m.hidden) : Count(m.hidden);
}

// One expert's feed-forward weights (and biases).
Count expert_parameters(const Model& m) {
  const Count h = m.hidden;
  const Count f = m.ffn_hidden;
  const Count up = m.activation == FfnActivation::kSwiglu ? 2 * f : f;
  return h * up + f * h + (m.bias ? up + h : 0);
}

Count attention_parameters(const Model& m) {
  const Count q = Count(m.heads) * Count(m.head_dim);
  const Count kv = Count(m.kv_heads) * Count(m.head_dim);
  const Count h = m.hidden;
  const Count qkv = h * (q + 2 * kv) + (m.bias ? q + 2 * kv : 0);
  const Count proj = q * h + (m.bias ? h : 0);
  return qkv + proj;
}

struct WideCount {
  Count embedding = 0, block = 0, head = 0, total = 0, active = 0;
};

WideCount wide_count(const Model& m) {
  WideCount c;
  const Count h = m.hidden;
  c.embedding = Count(m.vocabulary) * h + Count(m.token_types) * h;
  if (m.position == PositionEmbedding::kLearned) c.embedding += Count(m.max_positions) * h;
  if (m.embedding_norm) c.embedding += norm_parameters(m);
  const Count dense_part = attention_parameters(m) + 2 * norm_parameters(m);
  Count ffn = expert_parameters(m);
  Count active_ffn = ffn;
  if (m.is_moe()) {
    const Count router = h * Count(m.experts);
    ffn = Count(m.experts) * expert_parameters(m) + router;
    active_ffn = Count(m.top_k) * expert_parameters(m) + router;
  }
  c.block = dense_part + ffn;
  if (m.final_norm) c.head += norm_parameters(m);
  if (m.pooler) c.head += h * h + h;
  if (!m.tied_embeddings) c.head += Count(m.vocabulary) * h;
  c.total = c.embedding + Count(m.layers) * c.block + c.head;
  c.active = c.embedding + Count(m.layers) * (dense_part + active_ffn) + c.head;
  return c;
}

void check_parameter_total(Count total) {
  if (!(total <= Count(kMaxParameters))) {
    throw Error::input(
        "too many parameters",
        {.key = "hidden",
         .value = fmt::format("{:.4g} parameters", static_cast<double>(total)),
         .expected = fmt::format("at most {} ({:.3g}: 16 bytes of weights, "
                                 "gradients and optimizer state per parameter "
                                 "must fit a 64-bit byte count)",
                                 kMaxParameters, static_cast<double>(kMaxParameters))});
  }
}

Error invalid(const std::string& key, const std::string& message, std::int64_t value,
              const std::string& expected) {
  return Error::input(message, {.key = key, .value = std::to_string(value), .expected = expected});
}

}  // namespace

double approximate_parameters(const Model& m) { return static_cast<double>(wide_count(m).total); }

ParameterCount count_parameters(const Model& m) {
  const WideCount w = wide_count(m);
  check_parameter_total(w.total);
  // Exact: every part is an integer below 2^64.
  return ParameterCount{.embedding = static_cast<std::int64_t>(w.embedding),
                        .block = static_cast<std::int64_t>(w.block),
                        .head = static_cast<std::int64_t>(w.head),
                        .total = static_cast<std::int64_t>(w.total),
                        .active = static_cast<std::int64_t>(w.active)};
}

void validate_model(const Model& m) {
  const auto in_range = [](const char* key, std::int64_t v, std::int64_t max) {
    if (v < 1 || v > max) {
      throw invalid(key, "out of range", v, fmt::format("an integer in [1, {}]", max));
    }
  };
  in_range("layers", m.layers, kMaxLayers);
  in_range("hidden", m.hidden, kMaxHidden);
  in_range("heads", m.heads, kMaxHeads);
  in_range("kv_heads", m.kv_heads, kMaxHeads);
  in_range("head_dim", m.head_dim, kMaxHeadDim);
  in_range("ffn_hidden", m.ffn_hidden, kMaxFfnHidden);
  in_range("vocabulary", m.vocabulary, kMaxVocabulary);
  in_range("vocabulary_padding", m.vocabulary_padding, kMaxVocabularyPadding);
  in_range("sequence_length", m.sequence_length, kMaxSequenceLength);
  if (m.heads % m.kv_heads != 0) {
    throw invalid("kv_heads", "attention heads not divisible by KV heads", m.kv_heads,
                  fmt::format("a divisor of heads ({})", m.heads));
  }
  if (m.position == PositionEmbedding::kLearned && m.max_positions < m.sequence_length) {
    throw invalid("max_positions", "learned position table shorter than the sequence",
                  m.max_positions, fmt::format("at least sequence_length ({})", m.sequence_length));
  }
  if (m.experts < 0 || (m.experts == 0 && m.top_k != 0) ||
      (m.experts > 0 && (m.top_k < 1 || m.top_k > m.experts))) {
    throw invalid("top_k", "experts per token out of range", m.top_k,
                  m.experts > 0 ? fmt::format("an integer in [1, {}]", m.experts)
                                : std::string("no top_k without experts"));
  }
  if (m.position == PositionEmbedding::kLearned && m.max_positions > kMaxSequenceLength) {
    throw invalid("max_positions", "out of range", m.max_positions,
                  fmt::format("an integer in [sequence_length, {}]", kMaxSequenceLength));
  }
  if (m.experts > kMaxExperts) {
    throw invalid("experts", "out of range", m.experts,
                  fmt::format("an integer in [1, {}]", kMaxExperts));
  }
  if (m.token_types < 0 || m.token_types > kMaxVocabulary) {
    throw invalid("token_types", "out of range", m.token_types,
                  fmt::format("an integer in [0, {}]", kMaxVocabulary));
  }
  if (m.global_batch < 0 || m.global_batch > kMaxGlobalBatch) {
    throw invalid("global_batch", "out of range", m.global_batch,
                  fmt::format("an integer in [0, {}]", kMaxGlobalBatch));
  }
  check_parameter_total(wide_count(m).total);
}

namespace {

Model parse_root(const Node& root) {
  root.expect_keys({"kind",
                    "name",
                    "layers",
                    "hidden",
                    "heads",
                    "kv_heads",
                    "head_dim",
                    "ffn_hidden",
                    "activation",
                    "norm",
                    "position_embedding",
                    "max_positions",
                    "token_types",
                    "vocabulary",
                    "vocabulary_padding",
                    "tied_embeddings",
                    "bias",
                    "dropout",
                    "embedding_norm",
                    "final_norm",
                    "pooler",
                    "causal",
                    "experts",
                    "top_k",
                    "sequence_length",
                    "global_batch"});
  (void)root.at("kind").as_choice({"model"});
  const auto dimension = [&](std::string_view key, std::int64_t max) {
    return root.at(key).as_int(1, max);
  };
  Model m;
  m.name = root.at("name").as_string();
  m.layers = dimension("layers", kMaxLayers);
  m.hidden = dimension("hidden", kMaxHidden);
  m.heads = dimension("heads", kMaxHeads);
  m.kv_heads = m.heads;
  if (auto n = root.find("kv_heads")) m.kv_heads = n->as_int(1, m.heads);
  m.head_dim = m.hidden / m.heads;
  if (auto n = root.find("head_dim")) {
    m.head_dim = n->as_int(1, kMaxHeadDim);
  } else if (m.hidden % m.heads != 0) {
    throw root.at("heads").error("hidden size not divisible by heads",
                                 "a divisor of hidden, or an explicit head_dim");
  }
  m.ffn_hidden = dimension("ffn_hidden", kMaxFfnHidden);
  m.activation = root.at("activation").as_choice({"gelu", "swiglu"}) == "gelu"
                     ? FfnActivation::kGelu
                     : FfnActivation::kSwiglu;
  m.norm = root.at("norm").as_choice({"layernorm", "rmsnorm"}) == "layernorm" ? NormKind::kLayerNorm
                                                                              : NormKind::kRmsNorm;
  m.position = root.at("position_embedding").as_choice({"learned", "rotary"}) == "learned"
                   ? PositionEmbedding::kLearned
                   : PositionEmbedding::kRotary;
  m.vocabulary = dimension("vocabulary", kMaxVocabulary);
  if (auto n = root.find("vocabulary_padding"))
    m.vocabulary_padding = n->as_int(1, kMaxVocabularyPadding);
  m.tied_embeddings = root.at("tied_embeddings").as_bool();
  m.bias = root.at("bias").as_bool();
  m.dropout = root.at("dropout").as_bool();
  if (auto n = root.find("embedding_norm")) m.embedding_norm = n->as_bool();
  if (auto n = root.find("final_norm")) m.final_norm = n->as_bool();
  if (auto n = root.find("pooler")) m.pooler = n->as_bool();
  if (auto n = root.find("causal")) m.causal = n->as_bool();
  if (auto n = root.find("token_types")) m.token_types = n->as_int(0, kMaxVocabulary);
  m.sequence_length = dimension("sequence_length", kMaxSequenceLength);
  m.max_positions = m.sequence_length;
  if (auto n = root.find("max_positions")) {
    if (m.position != PositionEmbedding::kLearned) {
      throw n->error("max_positions without a learned position table",
                     "no max_positions with position_embedding: rotary");
    }
    m.max_positions = n->as_int(m.sequence_length, kMaxSequenceLength);
  }
  if (auto n = root.find("experts")) m.experts = n->as_int(1, kMaxExperts);
  if (auto n = root.find("top_k")) {
    if (!m.is_moe()) throw n->error("top_k without experts", "experts: N before top_k");
    m.top_k = n->as_int(1, m.experts);
  } else if (m.is_moe()) {
    throw root.error("missing required key \"top_k\"", "top_k with experts");
  }
  if (m.heads % m.kv_heads != 0) {
    throw root.at("kv_heads")
        .error("attention heads not divisible by KV heads",
               fmt::format("a divisor of heads ({})", m.heads));
  }
  if (auto n = root.find("global_batch")) m.global_batch = n->as_int(1, kMaxGlobalBatch);
  try {
    validate_model(m);
  } catch (const Error& e) {
    // Point a whole-model error (too many parameters) at the file.
    throw e.in_file(root.file(), root.find(e.context().key) ? root.at(e.context().key).line() : 0);
  }
  return m;
}

}  // namespace

Model load_model(const std::string& path, const config::Limits& limits) {
  return parse_root(Node::load_file(path, limits.max_input_bytes));
}

Model parse_model(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
