#include "nest/workload/model.h"

#include <fmt/format.h>

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::workload {
namespace {

using config::Node;

constexpr std::int64_t kMaxDimension = std::int64_t{1} << 32;

std::int64_t norm_parameters(const Model& m) {
  return m.norm == NormKind::kLayerNorm ? 2 * m.hidden : m.hidden;
}

// One expert's feed-forward weights (and biases).
std::int64_t expert_parameters(const Model& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t f = m.ffn_hidden;
  const std::int64_t up = m.activation == FfnActivation::kSwiglu ? 2 * f : f;
  return h * up + f * h + (m.bias ? up + h : 0);
}

std::int64_t attention_parameters(const Model& m) {
  const std::int64_t q = m.heads * m.head_dim;
  const std::int64_t kv = m.kv_heads * m.head_dim;
  const std::int64_t qkv = m.hidden * (q + 2 * kv) + (m.bias ? q + 2 * kv : 0);
  const std::int64_t proj = q * m.hidden + (m.bias ? m.hidden : 0);
  return qkv + proj;
}

Error invalid(const std::string& key, const std::string& message, std::int64_t value,
              const std::string& expected) {
  return Error::input(message, {.key = key, .value = std::to_string(value), .expected = expected});
}

}  // namespace

ParameterCount count_parameters(const Model& m) {
  ParameterCount c;
  const std::int64_t h = m.hidden;
  c.embedding = m.vocabulary * h + m.token_types * h;
  if (m.position == PositionEmbedding::kLearned) c.embedding += m.max_positions * h;
  if (m.embedding_norm) c.embedding += norm_parameters(m);

  const std::int64_t dense_part = attention_parameters(m) + 2 * norm_parameters(m);
  std::int64_t ffn = expert_parameters(m);
  std::int64_t active_ffn = ffn;
  if (m.is_moe()) {
    const std::int64_t router = h * m.experts;
    ffn = m.experts * expert_parameters(m) + router;
    active_ffn = m.top_k * expert_parameters(m) + router;
  }
  c.block = dense_part + ffn;

  if (m.final_norm) c.head += norm_parameters(m);
  if (m.pooler) c.head += h * h + h;
  if (!m.tied_embeddings) c.head += m.vocabulary * h;

  c.total = c.embedding + m.layers * c.block + c.head;
  c.active = c.embedding + m.layers * (dense_part + active_ffn) + c.head;
  return c;
}

void validate_model(const Model& m) {
  const auto positive = [](const char* key, std::int64_t v) {
    if (v < 1 || v > kMaxDimension) {
      throw invalid(key, "must be positive", v,
                    fmt::format("an integer in [1, {}]", kMaxDimension));
    }
  };
  positive("layers", m.layers);
  positive("hidden", m.hidden);
  positive("heads", m.heads);
  positive("kv_heads", m.kv_heads);
  positive("head_dim", m.head_dim);
  positive("ffn_hidden", m.ffn_hidden);
  positive("vocabulary", m.vocabulary);
  positive("vocabulary_padding", m.vocabulary_padding);
  positive("sequence_length", m.sequence_length);
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
  if (m.token_types < 0) throw invalid("token_types", "negative", m.token_types, "0 or more");
  if (m.global_batch < 0) throw invalid("global_batch", "negative", m.global_batch, "0 or more");
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
  const auto dimension = [&](std::string_view key) {
    return root.at(key).as_int(1, kMaxDimension);
  };
  Model m;
  m.name = root.at("name").as_string();
  m.layers = dimension("layers");
  m.hidden = dimension("hidden");
  m.heads = dimension("heads");
  m.kv_heads = m.heads;
  if (auto n = root.find("kv_heads")) m.kv_heads = n->as_int(1, m.heads);
  m.head_dim = m.hidden / m.heads;
  if (auto n = root.find("head_dim")) {
    m.head_dim = n->as_int(1, kMaxDimension);
  } else if (m.hidden % m.heads != 0) {
    throw root.at("heads").error("hidden size not divisible by heads",
                                 "a divisor of hidden, or an explicit head_dim");
  }
  m.ffn_hidden = dimension("ffn_hidden");
  m.activation = root.at("activation").as_choice({"gelu", "swiglu"}) == "gelu"
                     ? FfnActivation::kGelu
                     : FfnActivation::kSwiglu;
  m.norm = root.at("norm").as_choice({"layernorm", "rmsnorm"}) == "layernorm" ? NormKind::kLayerNorm
                                                                              : NormKind::kRmsNorm;
  m.position = root.at("position_embedding").as_choice({"learned", "rotary"}) == "learned"
                   ? PositionEmbedding::kLearned
                   : PositionEmbedding::kRotary;
  m.vocabulary = dimension("vocabulary");
  if (auto n = root.find("vocabulary_padding")) m.vocabulary_padding = n->as_int(1, 1 << 20);
  m.tied_embeddings = root.at("tied_embeddings").as_bool();
  m.bias = root.at("bias").as_bool();
  m.dropout = root.at("dropout").as_bool();
  if (auto n = root.find("embedding_norm")) m.embedding_norm = n->as_bool();
  if (auto n = root.find("final_norm")) m.final_norm = n->as_bool();
  if (auto n = root.find("pooler")) m.pooler = n->as_bool();
  if (auto n = root.find("causal")) m.causal = n->as_bool();
  if (auto n = root.find("token_types")) m.token_types = n->as_int(0, kMaxDimension);
  m.sequence_length = dimension("sequence_length");
  m.max_positions = m.sequence_length;
  if (auto n = root.find("max_positions")) {
    if (m.position != PositionEmbedding::kLearned) {
      throw n->error("max_positions without a learned position table",
                     "no max_positions with position_embedding: rotary");
    }
    m.max_positions = n->as_int(m.sequence_length, kMaxDimension);
  }
  if (auto n = root.find("experts")) m.experts = n->as_int(1, 1 << 20);
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
  if (auto n = root.find("global_batch")) m.global_batch = n->as_int(1);
  validate_model(m);
  return m;
}

}  // namespace

Model load_model(const std::string& path) { return parse_root(Node::load_file(path)); }

Model parse_model(std::string_view text, const std::string& name) {
  return parse_root(Node::load_string(text, name));
}

}  // namespace nest::workload
