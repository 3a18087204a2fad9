#include "workload/layers.h"

#include <optional>
#include <utility>

#include "workload/graph_builder.h"

namespace nest::workload::detail {
namespace {

using std::int64_t;

// Approximate FLOPs per element of the memory-bound operators; they are timed by their traffic
// on every shipped accelerator, so these only matter on a device with a tiny vector rate.
constexpr double kNormFlops = 5;     // mean, variance, normalize, scale, shift
constexpr double kSoftmaxFlops = 5;  // max, subtract, exp, sum, divide
constexpr double kGeluFlops = 8;     // tanh approximation
constexpr double kSwigluFlops = 5;   // silu(gate) · up
constexpr double kDropoutFlops = 2;
constexpr double kAddFlops = 1;
constexpr double kCrossEntropyFlops = 5;
constexpr int64_t kTokenIdBytes = 8;  // int64 token ids
constexpr int64_t kFp32 = 4;

double f(int64_t v) { return static_cast<double>(v); }

int64_t norm_parameters(const Model& m) {
  return m.norm == NormKind::kLayerNorm ? 2 * m.hidden : m.hidden;
}

// Backward traffic of the memory-bound operators as a multiple of their forward's, from what
// each backward kernel reads and writes (per element, 2-byte activations, 1-byte masks):
// - a norm reads x and dy and writes dx (3 tensors against the forward's x, y);
// - the fused softmax reads y and dy and writes dx (Megatron's scaled masked softmax);
// - dropout reads dy and the mask and writes dx (as its forward: x, y and the mask);
// - the fused bias + dropout + residual add reads dy and the mask and writes dx (5 bytes against
//   the forward's x, residual, out and mask, 7), and autograd sums the residual's gradient with
//   the norm's at the branch (read 2, write 1 tensors: 6 bytes): 11/7;
// - the fused bias + GeLU reads dy and x and writes dx; SwiGLU reads dy, gate and up and writes
//   both gradients (5 tensors against 3);
// - a residual add: the gradients' sum at the branch (read 2, write 1, as the forward);
// - lookups, cross entropy, routing: as their forward.
constexpr double kNormBackward = 1.5;
constexpr double kSoftmaxBackward = 1.5;
constexpr double kDropoutBackward = 1;
constexpr double kBiasDropoutAddBackward = 11.0 / 7.0;
constexpr double kGeluBackward = 1.5;
constexpr double kSwigluBackward = 5.0 / 3.0;

// Megatron's communication entering the tensor-parallel region (before a column-parallel
// GEMM): f (identity forward, all-reduce backward) or, with sequence parallelism, an all-gather
// whose backward reduce-scatters the gradient and all-gathers the saved input again. With
// Megatron-LM's asynchronous tensor-parallel communication
// (LinearWithGradAccumulationAndAsyncCommunication, since 2021-09) the backward all-reduce of
// the input gradient runs beside the weight-gradient GEMM; with sequence parallelism the
// re-gather beside the input-gradient GEMM and the reduce-scatter beside the weight gradient.
std::vector<Comm> enter_tp(const Dims& d, int64_t full_bytes) {
  if (d.t == 1) return {};
  if (d.sp) {
    Comm c{ParallelAxis::kTensor,
           Bytes(full_bytes),
           {CollectiveOp::kAllGather},
           {CollectiveOp::kReduceScatter, CollectiveOp::kAllGather},
           {}};
    if (d.tp_overlap) c.backward_overlap = {Overlap::kWgrad, Overlap::kDgrad};
    return {c};
  }
  Comm c{ParallelAxis::kTensor, Bytes(full_bytes), {}, {CollectiveOp::kAllReduce}, {}};
  if (d.tp_overlap) c.backward_overlap = {Overlap::kWgrad};
  return {c};
}

// Leaving the region (after a row-parallel GEMM): g (all-reduce forward) or a reduce-scatter
// whose backward all-gathers.
std::vector<Comm> leave_tp(const Dims& d, int64_t full_bytes) {
  if (d.t == 1) return {};
  if (d.sp) {
    return {Comm{ParallelAxis::kTensor,
                 Bytes(full_bytes),
                 {CollectiveOp::kReduceScatter},
                 {CollectiveOp::kAllGather}}};
  }
  return {Comm{ParallelAxis::kTensor, Bytes(full_bytes), {CollectiveOp::kAllReduce}, {}}};
}

OpSpec norm_op(std::string name, const Model& m, const Dims& d, int64_t external_read) {
  const int64_t act = d.act_bytes * d.Tr * d.h;
  return OpSpec{.name = std::move(name),
                .kind = OperatorKind::kMemory,
                .flops = kNormFlops * f(d.Tr * d.h),
                .weight_bytes = d.param_bytes * norm_parameters(m),
                .external_read = external_read,
                .output_bytes = act,
                .saved_bytes = act,  // its input
                .backward_traffic = kNormBackward};
}

OpSpec dropout_op(std::string name, int64_t elements, int64_t element_bytes) {
  return OpSpec{.name = std::move(name),
                .kind = OperatorKind::kMemory,
                .flops = kDropoutFlops * f(elements),
                .output_bytes = element_bytes * elements,
                .extra_write = elements,  // the 1-byte mask
                .saved_bytes = elements,
                .backward_traffic = kDropoutBackward};
}

// Megatron-LM's fused bias + dropout + residual add (bias_dropout_add_fused_train, a TorchScript
// fusion since 2020-09): reads the row-parallel GEMM's output (through the edge), the bias and
// the residual, writes the sum and the 1-byte mask, keeps the mask.
OpSpec bias_dropout_add_op(std::string name, const Dims& d, int64_t residual_read) {
  const int64_t elements = d.Tr * d.h;
  return OpSpec{.name = std::move(name),
                .kind = OperatorKind::kMemory,
                .flops = (kDropoutFlops + 2 * kAddFlops) * f(elements),
                .weight_bytes = d.param_bytes * d.h,
                .external_read = residual_read,
                .output_bytes = d.act_bytes * elements,
                .extra_write = elements,
                .saved_bytes = elements,
                .backward_traffic = kBiasDropoutAddBackward};
}

OpSpec add_op(std::string name, const Dims& d, int64_t external_read) {
  return OpSpec{.name = std::move(name),
                .kind = OperatorKind::kMemory,
                .flops = kAddFlops * f(d.Tr * d.h),
                .external_read = external_read,
                .output_bytes = d.act_bytes * d.Tr * d.h};
}

// Attention from the QKV output to the context (input of the output projection).
// Returns the operator that produces the context.
Vertex attention(GraphBuilder& g, const Dims& d, bool dropout, Vertex qkv) {
  const int64_t eb = d.act_bytes;
  const int64_t q = d.heads * d.hd;
  const int64_t kv = d.kv * d.hd;
  // Context parallelism: K and V of the whole sequence are gathered (forward) and gathered
  // again with their gradients reduce-scattered (backward).
  std::vector<Comm> kv_exchange;
  if (d.c > 1) {
    kv_exchange.push_back(Comm{ParallelAxis::kContext,
                               Bytes(eb * 2 * d.s * d.b * kv),
                               {CollectiveOp::kAllGather},
                               {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}});
  }
  const double core_flops = 2 * f(d.heads) * f(d.S) * f(d.s) * f(d.hd) * f(d.b);
  // Per head: scores[S×s] = Q[S×hd]·Kᵀ[hd×s], context[S×hd] = P[S×s]·V[s×hd].
  const GemmShape scores_gemm{.m = d.S, .n = d.s, .k = d.hd, .batch = d.b * d.heads};
  const GemmShape values_gemm{.m = d.S, .n = d.hd, .k = d.s, .batch = d.b * d.heads};
  if (d.flash) {
    // FlashAttention skips the key blocks above a causal mask's diagonal (Dao 2023,
    // FlashAttention-2 §3.1.1): of nb × nb blocks of 128, nb(nb + 1)/2 run. Without flash
    // attention Megatron computes every score and masks them in the softmax.
    double fraction = 1;
    if (d.causal && d.c == 1) {
      const double blocks = std::max(1.0, f(d.s) / 128);
      fraction = (blocks + 1) / (2 * blocks);
    }
    const int64_t lse = kFp32 * d.heads * d.S * d.b;
    const Vertex fa = g.add(OpSpec{.name = "flash_attention",
                                   .kind = OperatorKind::kMatmul,
                                   .flops = 2 * core_flops * fraction,
                                   .output_bytes = eb * d.T * q,
                                   .extra_write = lse,
                                   .saved_bytes = eb * d.T * (q + 2 * kv) + lse,
                                   .backward_factor = 2.5,
                                   .gemms = {scores_gemm, values_gemm},
                                   .attention_gemm = true,
                                   .gemm_work = fraction,
                                   .fused_backward = true});
    g.connect(qkv, fa, eb * d.b * (d.S * q + 2 * d.s * kv), std::move(kv_exchange));
    return fa;
  }
  const int64_t scores = d.heads * d.S * d.s * d.b;
  // Selective recomputation keeps Q, K and V (the core's inputs) and recomputes the rest.
  const Vertex qk = g.add(OpSpec{.name = "attention_scores",
                                 .kind = OperatorKind::kMatmul,
                                 .flops = core_flops,
                                 .output_bytes = eb * scores,
                                 .saved_bytes = eb * d.T * (q + kv),  // Q and K
                                 .gemms = {scores_gemm},
                                 .attention_gemm = true,
                                 .attention_core = true});
  g.connect(qkv, qk, eb * d.b * (d.S * q + d.s * kv), std::move(kv_exchange));
  const Vertex softmax = g.add(OpSpec{.name = "softmax",
                                      .kind = OperatorKind::kMemory,
                                      .flops = kSoftmaxFlops * f(scores),
                                      .output_bytes = eb * scores,
                                      .saved_bytes = eb * scores,  // its output
                                      .backward_traffic = kSoftmaxBackward,
                                      .attention_core = true,
                                      .recomputed_bytes = eb * scores});
  g.connect(qk, softmax, eb * scores);
  Vertex probs = softmax;
  if (dropout) {
    OpSpec drop = dropout_op("attention_dropout", scores, eb);
    drop.attention_core = true;
    drop.recomputed_bytes = drop.saved_bytes;  // the mask
    probs = g.add(std::move(drop));
    g.connect(softmax, probs, eb * scores);
  }
  const Vertex av = g.add(OpSpec{.name = "attention_values",
                                 .kind = OperatorKind::kMatmul,
                                 .flops = core_flops,
                                 .output_bytes = eb * d.T * q,
                                 .saved_bytes = eb * scores + eb * d.T * kv,  // probs and V
                                 .gemms = {values_gemm},
                                 .attention_gemm = true,
                                 .attention_core = true,
                                 .recomputed_bytes = eb * scores});
  g.connect(probs, av, eb * scores);
  g.connect(qkv, av, eb * d.b * d.s * kv);
  return av;
}

// What a stage boundary after the layer sends: without sequence parallelism its output is
// replicated over the t shards, so each sends its 1/t slice and the next stage all-gathers them
// over its NVLink group (Narayanan et al. 2021 §4.1, the scatter-gather optimization).
void set_output(LayerGraph& graph, const Dims& d, int64_t act) {
  if (d.t > 1 && !d.sp && act % d.t == 0) {
    graph.output_bytes = Bytes(act / d.t);
    graph.output_gather = Bytes(act);
  } else {
    graph.output_bytes = Bytes(act);
  }
}

int64_t ffn_parameters(const Model& m, const Dims& d) {
  return d.h * d.up + d.ffn * d.h + (m.bias ? d.up + d.h : 0);
}

// Dense MLP from `norm` (its input) to the operator whose output the residual adds.
Vertex dense_mlp(GraphBuilder& g, const Model& m, const Dims& d, Vertex norm) {
  const int64_t eb = d.act_bytes;
  const int64_t pb = d.param_bytes;
  const int64_t full = eb * d.T * d.h;
  const Vertex fc1 = g.add(OpSpec{.name = "mlp_up",
                                  .kind = OperatorKind::kMatmul,
                                  .flops = 2 * f(d.T) * f(d.h) * f(d.up),
                                  .weight_bytes = pb * (d.h * d.up + (m.bias ? d.up : 0)),
                                  .output_bytes = eb * d.T * d.up,
                                  .saved_bytes = eb * d.Tr * d.h,
                                  .gemms = {{.m = d.T, .n = d.up, .k = d.h}},
                                  .gemm_element_bytes = d.gemm_bytes});
  g.connect(norm, fc1, full, enter_tp(d, full));
  const bool swiglu = m.activation == FfnActivation::kSwiglu;
  // Megatron-LM's fused bias + GeLU (bias_gelu_impl) adds fc1's bias on the way.
  const Vertex act = g.add(OpSpec{.name = swiglu ? "swiglu" : "bias_gelu",
                                  .kind = OperatorKind::kMemory,
                                  .flops = (swiglu ? kSwigluFlops : kGeluFlops) * f(d.T * d.ffn),
                                  .output_bytes = eb * d.T * d.ffn,
                                  .saved_bytes = eb * d.T * d.up,
                                  .backward_traffic = swiglu ? kSwigluBackward : kGeluBackward});
  g.connect(fc1, act, eb * d.T * d.up);
  const Vertex fc2 = g.add(OpSpec{.name = "mlp_down",
                                  .kind = OperatorKind::kMatmul,
                                  .flops = 2 * f(d.T) * f(d.ffn) * f(d.h),
                                  .weight_bytes = pb * (d.ffn * d.h + (m.bias ? d.h : 0)),
                                  .output_bytes = full,
                                  .saved_bytes = eb * d.T * d.ffn,
                                  .gemms = {{.m = d.T, .n = d.h, .k = d.ffn}},
                                  .gemm_element_bytes = d.gemm_bytes});
  g.connect(act, fc2, eb * d.T * d.ffn);
  return fc2;
}

// Router, dispatch, experts and combine. Under t > 1 sequence parallelism holds (checked), so
// each device routes its Tr = T/t tokens.
Vertex moe_mlp(GraphBuilder& g, const Model& m, const Dims& d, Vertex norm) {
  const int64_t eb = d.act_bytes;
  const int64_t pb = d.param_bytes;
  const int64_t E = m.experts;
  const int64_t routed = d.Tr * d.top_k;  // token copies this device sends
  const int64_t tokens = d.T * d.top_k;   // token copies this device's experts process
  const Vertex router = g.add(OpSpec{.name = "router",
                                     .kind = OperatorKind::kMatmul,
                                     .flops = 2 * f(d.Tr) * f(d.h) * f(E),
                                     .weight_bytes = pb * d.h * E,
                                     .output_bytes = kFp32 * d.Tr * E,
                                     .saved_bytes = eb * d.Tr * d.h + kFp32 * d.Tr * E,
                                     .gemms = {{.m = d.Tr, .n = E, .k = d.h}}});
  g.connect(norm, router, eb * d.Tr * d.h);
  const Vertex dispatch = g.add(
      OpSpec{.name = "dispatch", .kind = OperatorKind::kMemory, .output_bytes = eb * routed * d.h});
  g.connect(norm, dispatch, eb * d.Tr * d.h);
  g.connect(router, dispatch, kFp32 * d.Tr * E);

  std::vector<Comm> in_comms;
  std::vector<Comm> out_comms;
  if (d.e > 1) {
    const Comm a2a{ParallelAxis::kExpert,
                   Bytes(eb * routed * d.h),
                   {CollectiveOp::kAllToAll},
                   {CollectiveOp::kAllToAll}};
    in_comms.push_back(a2a);
    out_comms.push_back(a2a);
  }
  if (d.t > 1) {
    in_comms.push_back(Comm{ParallelAxis::kTensor,
                            Bytes(eb * tokens * d.h),
                            {CollectiveOp::kAllGather},
                            {CollectiveOp::kReduceScatter}});
    out_comms.insert(out_comms.begin(), Comm{ParallelAxis::kTensor,
                                             Bytes(eb * tokens * d.h),
                                             {CollectiveOp::kReduceScatter},
                                             {CollectiveOp::kAllGather}});
  }
  // Tokens spread evenly over this device's experts: one GEMM per expert.
  const int64_t per_expert = (tokens + d.experts - 1) / d.experts;
  const Vertex fc1 =
      g.add(OpSpec{.name = "expert_up",
                   .kind = OperatorKind::kMatmul,
                   .flops = 2 * f(tokens) * f(d.h) * f(d.up),
                   .weight_bytes = pb * d.experts * (d.h * d.up + (m.bias ? d.up : 0)),
                   .output_bytes = eb * tokens * d.up,
                   .saved_bytes = eb * tokens * d.h,
                   .gemms = {{.m = per_expert, .n = d.up, .k = d.h, .batch = d.experts}},
                   .gemm_element_bytes = d.gemm_bytes});
  g.connect(dispatch, fc1, eb * tokens * d.h, std::move(in_comms));
  const bool swiglu = m.activation == FfnActivation::kSwiglu;
  const Vertex act = g.add(OpSpec{.name = swiglu ? "expert_swiglu" : "expert_gelu",
                                  .kind = OperatorKind::kMemory,
                                  .flops = (swiglu ? kSwigluFlops : kGeluFlops) * f(tokens * d.ffn),
                                  .output_bytes = eb * tokens * d.ffn,
                                  .saved_bytes = eb * tokens * d.up,
                                  .backward_traffic = swiglu ? kSwigluBackward : kGeluBackward});
  g.connect(fc1, act, eb * tokens * d.up);
  const Vertex fc2 =
      g.add(OpSpec{.name = "expert_down",
                   .kind = OperatorKind::kMatmul,
                   .flops = 2 * f(tokens) * f(d.ffn) * f(d.h),
                   .weight_bytes = pb * d.experts * (d.ffn * d.h + (m.bias ? d.h : 0)),
                   .output_bytes = eb * tokens * d.h,
                   .gemms = {{.m = per_expert, .n = d.h, .k = d.ffn, .batch = d.experts}},
                   .gemm_element_bytes = d.gemm_bytes});
  g.connect(act, fc2, eb * tokens * d.ffn);
  const Vertex combine = g.add(OpSpec{.name = "combine",
                                      .kind = OperatorKind::kMemory,
                                      .flops = 2 * f(routed * d.h),
                                      .output_bytes = eb * d.Tr * d.h,
                                      .saved_bytes = eb * routed * d.h});  // expert outputs
  g.connect(fc2, combine, eb * routed * d.h, std::move(out_comms));
  g.connect(router, combine, kFp32 * d.Tr * E);
  return combine;
}

}  // namespace

Dims make_dims(const Model& m, const ParallelConfig& config, const BuildOptions& options) {
  Dims d;
  d.t = config.tensor;
  d.c = config.context;
  d.e = config.expert;
  d.sp = config.sequence && config.tensor > 1;
  d.flash = options.flash_attention;
  d.causal = m.causal;
  d.tp_overlap = options.tp_comm_overlap;
  d.s = options.sequence_length > 0 ? options.sequence_length : m.sequence_length;
  d.S = d.s / d.c;
  d.Sr = d.sp ? d.S / d.t : d.S;
  d.b = config.micro_batch;
  d.T = d.S * d.b;
  d.Tr = d.Sr * d.b;
  d.h = m.hidden;
  d.heads = m.heads / d.t;
  d.kv = m.kv_heads >= d.t ? m.kv_heads / d.t : 1;
  d.hd = m.head_dim;
  d.ffn = m.ffn_hidden / d.t;
  d.up = m.activation == FfnActivation::kSwiglu ? 2 * d.ffn : d.ffn;
  const int64_t multiple = m.vocabulary_padding * d.t;
  d.vocab = (m.vocabulary + multiple - 1) / multiple * multiple / d.t;
  d.experts = m.is_moe() ? m.experts / d.e : 0;
  d.top_k = m.top_k;
  const bool wide = options.precision == "fp32" || options.precision == "tf32";
  d.act_bytes = wide ? 4 : 2;
  d.param_bytes = wide ? 4 : 2;
  d.gemm_bytes = options.precision == "fp8" ? 1 : d.act_bytes;
  return d;
}

LayerGraph block_graph(const Model& m, const Dims& d, const Roofline& r) {
  GraphBuilder g(r);
  const int64_t eb = d.act_bytes;
  const int64_t pb = d.param_bytes;
  const int64_t act = eb * d.Tr * d.h;
  const int64_t full = eb * d.T * d.h;
  const int64_t q = d.heads * d.hd;
  const int64_t kv = d.kv * d.hd;

  const Vertex ln1 = g.add(norm_op("attention_norm", m, d, act));
  const Vertex qkv =
      g.add(OpSpec{.name = "qkv_projection",
                   .kind = OperatorKind::kMatmul,
                   .flops = 2 * f(d.T) * f(d.h) * f(q + 2 * kv),
                   .weight_bytes = pb * (d.h * (q + 2 * kv) + (m.bias ? q + 2 * kv : 0)),
                   .output_bytes = eb * d.T * (q + 2 * kv),
                   .saved_bytes = act,
                   .gemms = {{.m = d.T, .n = q + 2 * kv, .k = d.h}},
                   .gemm_element_bytes = d.gemm_bytes});
  g.connect(ln1, qkv, full, enter_tp(d, full));
  const Vertex context = attention(g, d, m.dropout, qkv);
  const Vertex proj = g.add(OpSpec{.name = "attention_projection",
                                   .kind = OperatorKind::kMatmul,
                                   .flops = 2 * f(d.T) * f(q) * f(d.h),
                                   .weight_bytes = pb * (q * d.h + (m.bias ? d.h : 0)),
                                   .output_bytes = full,
                                   .saved_bytes = eb * d.T * q,
                                   .gemms = {{.m = d.T, .n = d.h, .k = q}},
                                   .gemm_element_bytes = d.gemm_bytes});
  g.connect(context, proj, eb * d.T * q);
  // The residual adds the layer input: with dropout in one fused kernel with the bias.
  const Vertex add1 = g.add(m.dropout ? bias_dropout_add_op("attention_bias_dropout_add", d, act)
                                      : add_op("attention_residual", d, act));
  g.connect(proj, add1, act, leave_tp(d, full));

  const Vertex ln2 = g.add(norm_op("mlp_norm", m, d, 0));
  g.connect(add1, ln2, act);
  const Vertex mlp = m.is_moe() ? moe_mlp(g, m, d, ln2) : dense_mlp(g, m, d, ln2);
  // The dense MLP's last GEMM leaves the tensor-parallel region; the MoE combine already did.
  const std::vector<Comm> mlp_exit = m.is_moe() ? std::vector<Comm>{} : leave_tp(d, full);
  const Vertex add2 = g.add(m.dropout ? bias_dropout_add_op("mlp_bias_dropout_add", d, 0)
                                      : add_op("mlp_residual", d, 0));
  g.connect(mlp, add2, act, mlp_exit);
  g.connect(add1, add2, act);

  LayerGraph graph = g.finish("transformer_block", /*recomputed=*/true);
  graph.input_bytes = Bytes(act);
  set_output(graph, d, act);
  const int64_t attention_params =
      d.h * (q + 2 * kv) + (m.bias ? q + 2 * kv : 0) + q * d.h + (m.bias ? d.h : 0);
  graph.expert_parameters = m.is_moe() ? d.experts * ffn_parameters(m, d) : 0;
  const int64_t mlp_params =
      m.is_moe() ? graph.expert_parameters + d.h * m.experts : ffn_parameters(m, d);
  graph.parameters = 2 * norm_parameters(m) + attention_params + mlp_params;
  return graph;
}

LayerGraph embedding_graph(const Model& m, const Dims& d, const Roofline& r) {
  GraphBuilder g(r);
  const int64_t eb = d.act_bytes;
  const int64_t act = eb * d.Tr * d.h;
  const int64_t full = eb * d.T * d.h;
  // Vocabulary-parallel lookup: each device reads the rows of its shard and writes a partial
  // [S, b, h] that the tensor-parallel group sums.
  const Vertex word = g.add(OpSpec{.name = "word_embedding",
                                   .kind = OperatorKind::kMemory,
                                   .external_read = kTokenIdBytes * d.T + full / d.t,
                                   .output_bytes = full});
  std::vector<Vertex> parts;
  std::vector<int64_t> table_rows;
  if (m.position == PositionEmbedding::kLearned) {
    parts.push_back(g.add(OpSpec{.name = "position_embedding",
                                 .kind = OperatorKind::kMemory,
                                 .external_read = act,
                                 .output_bytes = act}));
    table_rows.push_back(m.max_positions);
  }
  if (m.token_types > 0) {
    parts.push_back(g.add(OpSpec{.name = "token_type_embedding",
                                 .kind = OperatorKind::kMemory,
                                 .external_read = kTokenIdBytes * d.Tr + act,
                                 .output_bytes = act}));
    table_rows.push_back(m.token_types);
  }
  Vertex last = word;
  bool word_comm_placed = false;
  if (!parts.empty()) {
    const Vertex sum = g.add(add_op("embedding_sum", d, 0));
    g.connect(word, sum, act, leave_tp(d, full));
    word_comm_placed = true;
    for (Vertex p : parts) g.connect(p, sum, act);
    last = sum;
  }
  if (m.embedding_norm) {
    const Vertex norm = g.add(norm_op("embedding_norm", m, d, 0));
    g.connect(last, norm, act, word_comm_placed ? std::vector<Comm>{} : leave_tp(d, full));
    word_comm_placed = true;
    last = norm;
  }
  if (m.dropout) {
    const Vertex drop = g.add(dropout_op("embedding_dropout", d.Tr * d.h, eb));
    g.connect(last, drop, act, word_comm_placed ? std::vector<Comm>{} : leave_tp(d, full));
    word_comm_placed = true;
  }
  if (!word_comm_placed) {
    for (Comm& c : leave_tp(d, full)) g.add_boundary_comm(std::move(c));
  }
  LayerGraph graph = g.finish("embedding", /*recomputed=*/false);
  graph.input_bytes = Bytes(kTokenIdBytes * d.T);
  set_output(graph, d, act);
  graph.parameters = d.vocab * d.h + (m.embedding_norm ? norm_parameters(m) : 0);
  for (int64_t rows : table_rows) graph.parameters += rows * d.h;
  return graph;
}

LayerGraph head_graph(const Model& m, const Dims& d, const Roofline& r) {
  GraphBuilder g(r);
  const int64_t eb = d.act_bytes;
  const int64_t pb = d.param_bytes;
  const int64_t act = eb * d.Tr * d.h;
  const int64_t full = eb * d.T * d.h;
  int64_t params = d.vocab * d.h;  // the output projection (a copy when tied)

  std::optional<Vertex> norm;
  if (m.final_norm) {
    norm = g.add(norm_op("final_norm", m, d, act));
    params += norm_parameters(m);
  }
  if (m.pooler) {
    // BERT's pooler: a dense layer on each sequence's first token, not split by t.
    g.add(OpSpec{.name = "pooler",
                 .kind = OperatorKind::kMatmul,
                 .flops = 2 * f(d.b) * f(d.h) * f(d.h),
                 .weight_bytes = pb * (d.h * d.h + d.h),
                 .external_read = eb * d.b * d.h,
                 .output_bytes = eb * d.b * d.h,
                 .saved_bytes = eb * d.b * d.h,
                 .gemms = {{.m = d.b, .n = d.h, .k = d.h}}});
    params += d.h * d.h + d.h;
  }
  const int64_t logits = d.T * d.vocab;
  const Vertex proj = g.add(OpSpec{.name = "output_projection",
                                   .kind = OperatorKind::kMatmul,
                                   .flops = 2 * f(d.T) * f(d.h) * f(d.vocab),
                                   .weight_bytes = pb * d.vocab * d.h,
                                   .external_read = norm ? 0 : full,
                                   .output_bytes = eb * logits,
                                   .saved_bytes = act,
                                   .gemms = {{.m = d.T, .n = d.vocab, .k = d.h}},
                                   .gemm_element_bytes = d.gemm_bytes});
  if (norm) {
    g.connect(*norm, proj, full, enter_tp(d, full));
  } else {
    for (Comm& c : enter_tp(d, full)) g.add_boundary_comm(std::move(c));
  }
  // Vocabulary-parallel cross entropy keeps fp32 softmax of its logits and all-reduces three
  // per-token scalars (max, sum of exponentials, target logit) across the group. Megatron-LM
  // (mpu/cross_entropy.py, the logits cast to fp32) runs it as separate kernels: per logit the
  // cast writes 4 bytes, the max reads 4, the shift reads and writes 8, exp 8, the sum reads 4,
  // the division 8 (36 beyond reading the fp16 logits); its backward reads the saved softmax,
  // subtracts 1 at the target and scales by the loss gradient (16) and casts to fp16 (6).
  constexpr int64_t kLossForwardBytes = 36;
  constexpr double kLossBackward = 22.0 / 38.0;
  std::vector<Comm> loss_comms;
  if (d.t > 1) {
    loss_comms.push_back(
        Comm{ParallelAxis::kTensor,
             Bytes(kFp32 * d.T),
             {CollectiveOp::kAllReduce, CollectiveOp::kAllReduce, CollectiveOp::kAllReduce},
             {}});
  }
  const Vertex loss = g.add(OpSpec{.name = "cross_entropy",
                                   .kind = OperatorKind::kMemory,
                                   .flops = kCrossEntropyFlops * f(logits),
                                   .output_bytes = kFp32 * d.T,
                                   .extra_write = kLossForwardBytes * logits,
                                   .saved_bytes = kFp32 * logits,
                                   .backward_traffic = kLossBackward});
  g.connect(proj, loss, eb * logits, std::move(loss_comms));
  LayerGraph graph = g.finish("head", /*recomputed=*/false);
  graph.input_bytes = Bytes(act);
  graph.output_bytes = Bytes(0);
  graph.parameters = params;
  return graph;
}

}  // namespace nest::workload::detail
