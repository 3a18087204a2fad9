#include "workload/size_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "nest/core/error.h"

namespace nest::workload::detail {
namespace {

using Wide = long double;

// A term of the estimate and the input to blame when it dominates.
struct Term {
  Wide value = 0;
  std::string_view key;
};

std::string_view largest(std::initializer_list<Term> terms) {
  const Term* best = terms.begin();
  for (const Term& t : terms) {
    if (t.value > best->value) best = &t;
  }
  return best->key;
}

std::string days(Wide ps) { return fmt::format("{:.3g} days", static_cast<double>(ps / 8.64e16L)); }

}  // namespace

LayerEstimate estimate_layers(const Model& m, const Dims& d, const Roofline& r) {
  const Wide s = d.s, S = d.S, b = d.b, T = Wide(d.S) * d.b, h = d.h;
  const Wide heads = d.heads, hd = d.hd, q = heads * hd, kv = Wide(d.kv) * hd;
  const Wide up = d.up, ffn = d.ffn, vocab = d.vocab, eb = d.act_bytes, pb = d.param_bytes;
  const Wide experts = std::max<std::int64_t>(d.experts, 1);
  const Wide E = m.is_moe() ? Wide(m.experts) : 0;
  const Wide tokens = m.is_moe() ? T * Wide(std::max<std::int64_t>(d.top_k, 1)) : T;
  // Flash attention keeps no s x s tensor: its softmax statistics instead.
  const Wide scores = d.flash ? heads * S * b : heads * S * s * b;
  // Elements of the tensors each layer writes and reads, with room to spare: every operator's
  // output, its reads, saved copies and masks.
  const Wide block_elements =
      6 * scores + 4 * T * (q + 2 * kv) + 16 * T * h + 6 * tokens * (up + h) + 4 * T * E;
  const Wide block_weights =
      h * (q + 2 * kv) + q * h + experts * (h * up + ffn * h + up + h) + h * E + 3 * q + 12 * h;
  const Wide head_elements = 6 * T * vocab + 8 * T * h + 8 * b * h;
  const Wide head_weights = vocab * h + h * h + 4 * h;
  const Wide embedding_elements = 12 * T * h + 8 * T;
  const Wide embedding_weights = (vocab + Wide(m.max_positions) + Wide(m.token_types) + 4) * h;
  LayerEstimate e;
  e.block_bytes = 2 * (eb * block_elements + pb * block_weights);
  e.head_bytes = 2 * (4 * head_elements + pb * head_weights);
  e.embedding_bytes = 2 * (eb * embedding_elements + pb * embedding_weights);
  // Forward GEMM FLOPs; backward up to 2.5 times them, recompute once more: 4.5 in all. Up to
  // 8 vector FLOPs per element; memory traffic 4 times the bytes (forward, backward twice,
  // recompute).
  const Wide block_matmul = 2 * T * h * (q + 2 * kv) + 4 * heads * S * s * hd * b + 2 * T * q * h +
                            2 * tokens * (h * up + ffn * h) + 2 * T * h * E;
  const Wide head_matmul = 2 * T * h * vocab + 2 * b * h * h;
  const Wide to_ps = 1e12L;
  const auto layer_ps = [&](Wide matmul, Wide elements, Wide bytes) {
    return to_ps *
           (4.5L * matmul / r.matrix.flops_per_s() + 4.5L * 8 * elements / r.vector.flops_per_s() +
            4 * bytes / r.memory.bytes_per_s());
  };
  e.block_ps = layer_ps(block_matmul, block_elements, e.block_bytes);
  e.head_ps = layer_ps(head_matmul, head_elements, e.head_bytes);
  e.embedding_ps = layer_ps(0, embedding_elements, e.embedding_bytes);
  const Wide L = m.layers;
  e.matrix_ps = to_ps * 4.5L * (L * block_matmul + head_matmul) / r.matrix.flops_per_s();
  e.vector_ps = to_ps * 4.5L * 8 * (L * block_elements + head_elements + embedding_elements) /
                r.vector.flops_per_s();
  e.memory_ps =
      to_ps * 4 * (L * e.block_bytes + e.head_bytes + e.embedding_bytes) / r.memory.bytes_per_s();
  return e;
}

void check_layer_sizes(const Model& m, const Dims& d, const Roofline& r) {
  const LayerEstimate e = estimate_layers(m, d, r);
  const Wide layers = Wide(m.layers) + 2;
  const Wide largest_bytes = std::max({e.block_bytes, e.head_bytes, e.embedding_bytes});
  if (!(largest_bytes * layers * layers < kMaxStageBytes)) {
    const Wide T = Wide(d.S) * d.b;
    const Wide scores = d.flash ? 0 : Wide(d.heads) * d.S * d.s * d.b;
    const std::string_view key =
        largest({{scores, "sequence_length"},
                 {T * (Wide(d.h) + d.up), "micro_batch"},
                 {e.head_bytes, "vocabulary"},
                 {Wide(d.h) * (Wide(d.heads) * d.hd + d.experts * Wide(d.up)), "hidden"}});
    throw Error::input(
        "the layers of this configuration are too large",
        {.key = std::string(key),
         .value = fmt::format("an estimated {:.3g} bytes per layer and device",
                              static_cast<double>(largest_bytes)),
         .expected = fmt::format("at most {:.3g} bytes ((layers + 2)^2 times it below 2^62)",
                                 static_cast<double>(kMaxStageBytes / (layers * layers)))});
  }
  const Wide per_microbatch = Wide(m.layers) * e.block_ps + e.head_ps + e.embedding_ps;
  if (!(per_microbatch < kMaxIterationPs)) {
    const std::string_view key = largest({{e.matrix_ps, "peak_flop_rate"},
                                          {e.vector_ps, "vector_flop_rate"},
                                          {e.memory_ps, "hbm_bandwidth"}});
    throw Error::input("one microbatch of this configuration would take too long",
                       {.key = std::string(key),
                        .value = fmt::format("an estimated {} on one device", days(per_microbatch)),
                        .expected = fmt::format("at most {} (2^61 ps): faster rates, or fewer "
                                                "layers or tokens",
                                                days(kMaxIterationPs))});
  }
}

void check_variant_totals(const Variant& v) {
  Wide time = 0;
  Wide bytes = 0;
  Wide parameters = 0;
  for (const Layer& l : v.layers) {
    time += Wide(l.forward.ps()) + Wide(l.backward.ps()) + Wide(l.recompute.ps());
    bytes += Wide(l.activation_bytes.count()) + Wide(l.input_bytes.count()) +
             Wide(l.output_bytes.count()) + Wide(l.parameter_bytes.count());
    for (const LayerCollective& c : l.collectives) {
      bytes += Wide(c.size.count()) * (Wide(c.count) + Wide(c.recompute_count));
    }
    parameters += std::max<Wide>(Wide(l.parameters), Wide(l.parameter_bytes.count()) / 2);
  }
  const Wide n = Wide(v.layers.size());
  const Wide iteration = time * Wide(std::max<std::int64_t>(v.microbatches, 1));
  if (!(iteration < kMaxIterationPs)) {
    throw Error::input(
        "one iteration would take too long",
        {.key = "layers",
         .value = fmt::format("{} on one device", days(iteration)),
         .expected = fmt::format("at most {} (2^61 ps) for all layers' forward, backward and "
                                 "recompute times {} microbatches",
                                 days(kMaxIterationPs), v.microbatches)});
  }
  const Wide stage = bytes * n + 16 * parameters;
  if (!(stage < kMaxStageBytes)) {
    throw Error::input("the layers are too large",
                       {.key = "layers",
                        .value = fmt::format("{:.3g} bytes of tensors and weights, times {} layers",
                                             static_cast<double>(bytes), v.layers.size()),
                        .expected = "below 2^62 bytes (4.6e18) with 16 bytes per parameter"});
  }
}

}  // namespace nest::workload::detail
