#include "nest/workload/model_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "nest/core/error.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/roofline.h"

namespace nest::workload {
namespace {

const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

Model model(const std::string& name) { return load_model(kDir + "models/" + name + ".yaml"); }
Accelerator h100() { return load_accelerator(kDir + "accelerators/h100-sxm.yaml"); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Published totals (tests/validation/reference/README.md, from the official configurations).
TEST(ModelParameters, MatchPublishedCounts) {
  EXPECT_EQ(count_parameters(model("gpt3-175b")).total, 174'604'259'328);
  EXPECT_EQ(count_parameters(model("llama2-7b")).total, 6'738'415'616);
  EXPECT_EQ(count_parameters(model("llama3-70b")).total, 70'553'706'496);
  EXPECT_EQ(count_parameters(model("llama3.1-405b")).total, 405'853'388'800);
  EXPECT_EQ(count_parameters(model("bert-large")).total, 335'141'888);
}

TEST(ModelParameters, MixtralTotalAndActiveWithinHalfAPercent) {
  const ParameterCount c = count_parameters(model("mixtral-8x7b"));
  EXPECT_NEAR(static_cast<double>(c.total), 46.70e9, 0.005 * 46.70e9);
  EXPECT_NEAR(static_cast<double>(c.active), 12.88e9, 0.005 * 12.88e9);
  // By hand: 32 layers × (attention 41,943,040 + norms 8,192 + router 32,768 + k experts of
  // 176,160,768) + embeddings 2 × 131,072,000 + final norm 4,096.
  EXPECT_EQ(c.total, 46'702'792'704);
  EXPECT_EQ(c.active, 12'879'925'248);
}

// Σ parameters of the layer chain equals the model's count when nothing is padded or tied.
TEST(ModelParameters, LayerChainSumsToTheModelCount) {
  const Model m = model("llama2-7b");
  const Variant v = build_variant(m, h100(), ParallelConfig{}, BuildOptions{});
  ASSERT_EQ(v.layers.size(), 34u);
  std::int64_t sum = 0;
  for (const Layer& l : v.layers) {
    sum += l.parameters;
    EXPECT_EQ(l.parameter_bytes.count(), 2 * l.parameters);
  }
  EXPECT_EQ(sum, count_parameters(m).total);
}

// The NEST artifact's GPT-3 embedding holds Megatron's padded vocabulary (a multiple of 128·t)
// and the learned positions: 361,758,720 bytes at t = 4, 207,618,048 at t = 8.
TEST(ModelParameters, EmbeddingPaddingMatchesTheArtifactProfile) {
  const Model m = model("gpt3-175b");
  EXPECT_EQ(build_variant(m, h100(), {.tensor = 4}, {}).layers[0].parameter_bytes.count(),
            361'758'720);
  EXPECT_EQ(build_variant(m, h100(), {.tensor = 8}, {}).layers[0].parameter_bytes.count(),
            207'618'048);
}

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// §4.1 and Table 2, fp16, per layer: sbh(34 + 5as/h) without parallelism,
// sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, sbh/t (34 + 5as/h) with sequence
// parallelism; full recomputation keeps 2sbh (2sbh/t with sequence parallelism).
struct Korthikanti {
  double s, b, h, a;
  [[nodiscard]] double none() const { return s * b * h * (34 + 5 * a * s / h); }
  [[nodiscard]] double tensor(double t) const {
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  }
  [[nodiscard]] double sequence(double t) const { return none() / t; }
};

Bytes block_activations(const Model& m, const ParallelConfig& p) {
  return build_variant(m, h100(), p, {}).layers[1].activation_bytes;
}

TEST(Activations, Gpt3BlockEqualsKorthikantiExactly) {
  const Model m = model("gpt3-175b");
  for (int b : {1, 2}) {
    const Korthikanti k{2048, static_cast<double>(b), 12288, 96};
    EXPECT_EQ(block_activations(m, {.micro_batch = b}).as_double(), k.none());
    for (int t : {2, 4, 8}) {
      EXPECT_EQ(block_activations(m, {.tensor = t, .micro_batch = b}).as_double(), k.tensor(t));
      EXPECT_EQ(block_activations(m, {.tensor = t, .sequence = true, .micro_batch = b}).as_double(),
                k.sequence(t));
    }
  }
  // sbh(34 + 80) for s = 2048, h = 12288, a = 96, b = 1.
  EXPECT_EQ(block_activations(m, {}).count(), 2'868'903'936);
}

TEST(Activations, BertLargeBlockEqualsKorthikantiExactly) {
  const Model m = model("bert-large");
  const Korthikanti k{512, 4, 1024, 16};
  EXPECT_EQ(block_activations(m, {.micro_batch = 4}).as_double(), k.none());
  EXPECT_EQ(block_activations(m, {.tensor = 4, .micro_batch = 4}).as_double(), k.tensor(4));
  EXPECT_EQ(block_activations(m, {.tensor = 4, .sequence = true, .micro_batch = 4}).as_double(),
            k.sequence(4));
}

TEST(Activations, RecomputationKeepsTheBlockInput) {
  const Model m = model("gpt3-175b");
  const double sbh = 2048.0 * 12288;
  EXPECT_EQ(build_variant(m, h100(), {.tensor = 8}, {}).layers[5].input_bytes.as_double(), 2 * sbh);
  const Variant sp = build_variant(m, h100(), {.tensor = 8, .sequence = true}, {});
  EXPECT_EQ(sp.layers[5].input_bytes.as_double(), 2 * sbh / 8);
  EXPECT_EQ(sp.layers[5].output_bytes.as_double(), 2 * sbh / 8);
  EXPECT_EQ(sp.layers[0].output_bytes.as_double(), 2 * sbh / 8);
}

// Korthikanti et al. 2022 §4.2 (selective activation recomputation): recomputing the attention
// core leaves sbh·34 per layer (sbh·34/t with sequence parallelism, sbh(10 + 24/t) with tensor
// parallelism alone); Table 2's "selective" rows.
TEST(Activations, SelectiveRecomputationKeepsKorthikantisThirtyFour) {
  const Model m = model("gpt3-175b");
  const double sbh = 2048.0 * 12288;
  EXPECT_EQ(build_variant(m, h100(), {}, {}).layers[1].selective_activation_bytes.as_double(),
            sbh * 34);
  for (int t : {2, 8}) {
    const Variant sp = build_variant(m, h100(), {.tensor = t, .sequence = true}, {});
    EXPECT_EQ(sp.layers[1].selective_activation_bytes.as_double(), sbh * 34 / t);
    const Variant tp = build_variant(m, h100(), {.tensor = t}, {});
    EXPECT_EQ(tp.layers[1].selective_activation_bytes.as_double(), sbh * (10 + 24.0 / t));
  }
  // The embedding and head have no attention core; flash attention keeps no s×s tensor.
  const Variant v = build_variant(m, h100(), {.tensor = 8, .sequence = true}, {});
  EXPECT_EQ(v.layers[0].selective_activation_bytes, v.layers[0].activation_bytes);
  EXPECT_EQ(v.layers[0].selective_recompute, Time::zero());
  EXPECT_EQ(v.layers.back().selective_recompute, Time::zero());
  const Variant flash = build_variant(m, h100(), {}, {.flash_attention = true});
  EXPECT_EQ(flash.layers[1].selective_activation_bytes, flash.layers[1].activation_bytes);
  EXPECT_EQ(flash.layers[1].selective_recompute, Time::zero());
}

// Selective recomputation reruns the attention core's forward: its two GEMMs, the softmax and
// the dropout, each at its own roofline time.
TEST(Activations, SelectiveRecomputationTimeIsTheAttentionCoresForward) {
  const Model m = model("gpt3-175b");
  const auto graphs = layer_graphs(m, h100(), {.tensor = 8, .sequence = true}, {});
  Time core;
  for (const Operator& op : graphs[1].operators) {
    if (op.name == "attention_scores" || op.name == "softmax" || op.name == "attention_dropout" ||
        op.name == "attention_values") {
      core += op.forward;
    }
  }
  const Variant v = build_variant(m, h100(), {.tensor = 8, .sequence = true}, {});
  EXPECT_EQ(v.layers[1].selective_recompute, core);
  EXPECT_GT(core, Time::zero());
  EXPECT_LT(core, v.layers[1].forward);
}

// Flash attention keeps Q, K, V and fp32 log-sum-exp (4·a·s·b) instead of 5as²b.
TEST(Activations, FlashAttentionDropsTheQuadraticTerm) {
  const Model m = model("gpt3-175b");
  const Variant v = build_variant(m, h100(), {}, {.flash_attention = true});
  EXPECT_EQ(v.layers[1].activation_bytes.as_double(), 2048.0 * 12288 * 34 + 4.0 * 96 * 2048);
}

// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", §5.1: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per iteration with full
// activation recomputation.
double narayanan(double B, double s, double l, double h, double V) {
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

TEST(Flops, IterationWithRecomputationWithinOnePercentOfNarayanan) {
  for (const char* name : {"gpt3-175b", "llama2-7b"}) {
    const Model m = model(name);
    for (int t : {1, 8}) {
      const Variant v = build_variant(m, h100(), {.tensor = t, .micro_batch = 2}, {});
      double per_device = 0;
      for (const Layer& l : v.layers) {
        per_device += l.flops.count();
        if (l.recompute > Time::zero()) per_device += l.flops.count() / 3;  // forward again
      }
      const double total = per_device * t * static_cast<double>(v.microbatches);
      const double expected =
          narayanan(static_cast<double>(m.global_batch), static_cast<double>(m.sequence_length),
                    static_cast<double>(m.layers), static_cast<double>(m.hidden),
                    static_cast<double>(m.vocabulary));
      if (m.activation == FfnActivation::kGelu) {
        EXPECT_NEAR(total / expected, 1.0, 0.01) << name << " t=" << t;
      } else {
        // Narayanan's formula assumes a 4h GeLU MLP; Llama's SwiGLU MLP (3 matrices of
        // h × 11008) has 3·11008/(8·4096) = 1.0078 times its FLOPs, so only check the order.
        EXPECT_NEAR(total / expected, 1.0, 0.05) << name << " t=" << t;
      }
    }
  }
}

TEST(Flops, ProfileModelFlopsAreThreeTimesTheForward) {
  const Model m = model("gpt3-175b");
  const LayerProfile p = build_profile(m, h100(), {{.tensor = 8}}, {});
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 50304;  // padded to 128
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
  EXPECT_NEAR(p.flops_per_iteration.count() / expected, 1.0, 1e-12);
  EXPECT_EQ(p.total_parameters, 174'604'259'328);
  EXPECT_EQ(p.global_batch, 1536);
  EXPECT_DOUBLE_EQ(p.peak_flop_rate.flops_per_s(), 989e12);
  EXPECT_EQ(p.hbm.count(), 80LL << 30);
}

// Counts of one operation over a layer's entries (entries differ by what they overlap).
struct Counted {
  int count = 0;
  int recompute = 0;
  int overlapped = 0;  // runs beside a backward GEMM
};
Counted counted(const Layer& l, CollectiveOp op) {
  Counted c;
  for (const LayerCollective& x : l.collectives) {
    if (x.op != op) continue;
    c.count += x.count;
    c.recompute += x.recompute_count;
    if (x.overlap > Time::zero()) c.overlapped += x.count;
  }
  return c;
}

TEST(Collectives, TensorParallelAllReducesTwicePerHalfBlock) {
  const Model m = model("gpt3-175b");
  const Variant v = build_variant(m, h100(), {.tensor = 8}, {});
  for (const LayerCollective& c : v.layers[1].collectives) {
    EXPECT_EQ(c.op, CollectiveOp::kAllReduce);
    EXPECT_EQ(c.axis, ParallelAxis::kTensor);
    EXPECT_EQ(c.size.count(), 2LL * 2048 * 12288);
  }
  const Counted c = counted(v.layers[1], CollectiveOp::kAllReduce);
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.recompute, 2);
  // The backward all-reduces of the QKV and first MLP GEMMs' input gradients run beside their
  // weight-gradient GEMMs (Megatron-LM's asynchronous tensor-parallel communication).
  EXPECT_EQ(c.overlapped, 2);
  const std::vector<LayerGraph> g = layer_graphs(m, h100(), {.tensor = 8}, {});
  Time wgrad;
  for (const Operator& op : g[1].operators) {
    if (op.name == "qkv_projection") wgrad = op.weight_gradient;
  }
  bool found = false;
  for (const LayerCollective& x : v.layers[1].collectives) found = found || x.overlap == wgrad;
  EXPECT_TRUE(found);
  const Variant older = build_variant(m, h100(), {.tensor = 8}, {.tp_comm_overlap = false});
  EXPECT_EQ(counted(older.layers[1], CollectiveOp::kAllReduce).overlapped, 0);
  ASSERT_EQ(older.layers[1].collectives.size(), 1u);
  EXPECT_EQ(v.devices_per_replica, 8);
  EXPECT_EQ(v.microbatches, 1536);
}

TEST(Collectives, SequenceParallelGathersAndScatters) {
  const Model m = model("gpt3-175b");
  const Variant v = build_variant(m, h100(), {.tensor = 8, .sequence = true}, {});
  for (const LayerCollective& c : v.layers[1].collectives) {
    EXPECT_EQ(c.size.count(), 2LL * 2048 * 12288);
  }
  const Counted gathers = counted(v.layers[1], CollectiveOp::kAllGather);
  EXPECT_EQ(gathers.count, 6);  // 2 forward, 2 backward (of the reduce-scatters), 2 re-gathers
  EXPECT_EQ(gathers.recompute, 2);
  EXPECT_EQ(gathers.overlapped, 2);  // the re-gathers, beside the input-gradient GEMMs
  const Counted scatters = counted(v.layers[1], CollectiveOp::kReduceScatter);
  EXPECT_EQ(scatters.count, 4);
  EXPECT_EQ(scatters.recompute, 2);
  EXPECT_EQ(scatters.overlapped, 2);  // beside the weight-gradient GEMMs
  // The embedding reduce-scatters its vocabulary-parallel lookup, once forward and never again.
  ASSERT_EQ(v.layers[0].collectives.size(), 2u);
  EXPECT_EQ(v.layers[0].collectives[0].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(v.layers[0].collectives[0].recompute_count, 0);
}

TEST(Collectives, NoneWithoutParallelism) {
  const Variant v = build_variant(model("gpt3-175b"), h100(), {}, {});
  for (const Layer& l : v.layers) EXPECT_TRUE(l.collectives.empty()) << l.name;
}

TEST(Collectives, ExpertParallelAllToAll) {
  const Model m = model("mixtral-8x7b");
  const Variant v = build_variant(m, h100(), {.expert = 8}, {});
  EXPECT_EQ(v.devices_per_replica, 8);
  EXPECT_EQ(v.microbatches, 1024 / 8);
  const Layer& block = v.layers[1];
  ASSERT_EQ(block.collectives.size(), 1u);
  EXPECT_EQ(block.collectives[0].op, CollectiveOp::kAllToAll);
  EXPECT_EQ(block.collectives[0].axis, ParallelAxis::kExpert);
  EXPECT_EQ(block.collectives[0].size.count(), 2LL * 4096 * 2 * 4096);  // s·b·k·h bf16
  EXPECT_EQ(block.collectives[0].count, 4);
  EXPECT_EQ(block.collectives[0].recompute_count, 2);
  EXPECT_EQ(block.expert_parameters, 3LL * 4096 * 14336);  // one expert per device
}

TEST(Collectives, ContextParallelExchangesKeysAndValues) {
  const Model m = model("llama3-70b");
  const Variant v = build_variant(m, h100(), {.tensor = 8, .context = 2}, {});
  EXPECT_EQ(v.devices_per_replica, 16);
  // K and V of the whole sequence, one KV head of 128 per device: 2·2·8192·128 bytes; gathered
  // forward (and again when recomputed), gathered again backward with their gradients
  // reduce-scattered.
  int gathers = 0;
  int scatters = 0;
  for (const LayerCollective& c : v.layers[1].collectives) {
    if (c.axis != ParallelAxis::kContext) continue;
    EXPECT_EQ(c.size.count(), 2LL * 2 * 8192 * 128);
    if (c.op == CollectiveOp::kAllGather) {
      gathers += c.count;
      EXPECT_EQ(c.recompute_count, 1);
    }
    if (c.op == CollectiveOp::kReduceScatter) scatters += c.count;
  }
  EXPECT_EQ(gathers, 2);
  EXPECT_EQ(scatters, 1);
}

TEST(LayerChain, EmbeddingBlocksHeadWithRecomputeOnlyOnBlocks) {
  const Variant v = build_variant(model("gpt3-175b"), h100(), {.tensor = 8}, {});
  ASSERT_EQ(v.layers.size(), 98u);
  EXPECT_EQ(v.layers[0].name, "embedding");
  EXPECT_EQ(v.layers[1].name, "transformer_block");
  EXPECT_EQ(v.layers[97].name, "head");
  EXPECT_EQ(v.layers[0].recompute, Time::zero());
  EXPECT_EQ(v.layers[97].recompute, Time::zero());
  EXPECT_EQ(v.layers[1].recompute, v.layers[1].forward);

  // The head's loss keeps fp32 logits: 4·s·V/t plus its input 2sbh (no SP) and the norm's.
  EXPECT_EQ(v.layers[97].activation_bytes.count(),
            4LL * 2048 * (51200 / 8) + 2 * (2LL * 2048 * 12288));
}

TEST(OperatorGraph, GptBlockIsATopologicallyOrderedDag) {
  const std::vector<LayerGraph> g = layer_graphs(model("gpt3-175b"), h100(), {}, {});
  std::vector<std::string> names;
  for (const Operator& op : g[1].operators) names.push_back(op.name);
  // Megatron-LM's fusions: bias + dropout + residual add, bias + GeLU.
  EXPECT_EQ(names, (std::vector<std::string>{"attention_norm", "qkv_projection", "attention_scores",
                                             "softmax", "attention_dropout", "attention_values",
                                             "attention_projection", "attention_bias_dropout_add",
                                             "mlp_norm", "mlp_up", "bias_gelu", "mlp_down",
                                             "mlp_bias_dropout_add"}));
  for (const TensorEdge& e : g[1].edges) EXPECT_LT(e.from, e.to);
  // A chain of 13 operators (12 edges), V into attention_values and the residual into the
  // second add.
  EXPECT_EQ(g[1].edges.size(), 14u);
  // The largest GEMM: [2048 × 12288] · [12288 × 49152].
  EXPECT_DOUBLE_EQ(g[1].operators[9].forward_flops.count(), 2.0 * 2048 * 12288 * 49152);
}

TEST(Roofline, LargeGemmIsComputeBoundAndScalesWithItsVolume) {
  const Roofline r = Roofline::of(h100(), "bf16");
  EXPECT_DOUBLE_EQ(r.matrix.flops_per_s(), 989e12 * 0.803);
  const GemmCost small = gemm_cost(4096, 4096, 4096, 2, r);
  const GemmCost large = gemm_cost(8192, 8192, 8192, 2, r);
  EXPECT_FALSE(small.memory_bound);
  EXPECT_FALSE(large.memory_bound);
  EXPECT_NEAR(static_cast<double>(large.time.ps()) / static_cast<double>(small.time.ps()), 8.0,
              1e-6);
  // 2·4096³ FLOPs at 989 TFLOP/s × 0.803 = 173.06 us.
  EXPECT_NEAR(small.time.to_seconds(), 2.0 * 4096 * 4096 * 4096 / (989e12 * 0.803), 1e-12);
}

TEST(Roofline, ThinGemmDropsToTheMemoryBound) {
  const Roofline r = Roofline::of(h100(), "bf16");
  // A matrix-vector product: 2·8192·8192 FLOPs but 2·(8192·8192 + 2·8192) bytes.
  const GemmCost thin = gemm_cost(1, 8192, 8192, 2, r);
  EXPECT_TRUE(thin.memory_bound);
  const double bytes = 2.0 * (8192.0 * 8192 + 2 * 8192);
  EXPECT_EQ(thin.bytes.as_double(), bytes);
  EXPECT_NEAR(thin.time.to_seconds(), bytes / (3.35e12 * 0.8), 1e-12);
  // Doubling the thin dimension leaves the time (nearly) unchanged: still the weights' traffic.
  const GemmCost two = gemm_cost(2, 8192, 8192, 2, r);
  EXPECT_NEAR(two.time.to_seconds() / thin.time.to_seconds(), 1.0, 0.001);
}

TEST(Roofline, MemoryBoundOperatorsAreTimedByTraffic) {
  const std::vector<LayerGraph> g = layer_graphs(model("gpt3-175b"), h100(), {}, {});
  const Operator& softmax = g[1].operators[3];
  ASSERT_EQ(softmax.name, "softmax");
  // Reads and writes 96 × 2048 × 2048 bf16 scores.
  EXPECT_EQ(softmax.forward_bytes.count(), 2LL * 2 * 96 * 2048 * 2048);
  EXPECT_EQ(softmax.forward,
            serialization_time(softmax.forward_bytes, Bandwidth::bytes_per_second(3.35e12 * 0.8)));
}

TEST(ParallelConfigErrors, NameTheDegreeAndWhatWouldFit) {
  const Model gpt = model("gpt3-175b");
  const Model moe = model("mixtral-8x7b");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {.tensor = 7}, {}); }),
            "tensor_parallel: attention heads not divisible by the tensor-parallel degree (got "
            "\"7\"; expected a divisor of 96 (heads))");
  EXPECT_EQ(error_of([&] { (void)build_variant(moe, h100(), {.expert = 3}, {}); }),
            "expert_parallel: experts not divisible by the expert-parallel degree (got \"3\"; "
            "expected a divisor of 8 (experts))");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {.expert = 2}, {}); }),
            "expert_parallel: expert parallelism on a model without experts (got \"2\"; "
            "expected 1 for a dense model)");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {.context = 3}, {}); }),
            "context_parallel: sequence length not divisible by the context-parallel degree (got "
            "\"3\"; expected a divisor of 2048 (sequence length))");
  EXPECT_EQ(error_of([&] { (void)build_variant(moe, h100(), {.tensor = 2}, {}); }),
            "sequence_parallel: mixture of experts with tensor parallelism needs sequence "
            "parallelism (got \"false\"; expected true when tensor_parallel > 1 (as in "
            "Megatron-Core))");
  EXPECT_EQ(error_of([&] { (void)build_variant(model("llama3-70b"), h100(), {.tensor = 12}, {}); }),
            "tensor_parallel: attention heads not divisible by the tensor-parallel degree (got "
            "\"12\"; expected a divisor of 64 (heads))");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {.micro_batch = 5}, {}); }),
            "global_batch: not divisible by micro_batch × expert_parallel (got \"1536\"; "
            "expected a multiple of 5)");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {}, {.sequence_length = 4096}); }),
            "sequence_length: longer than the learned position table (got \"4096\"; expected at "
            "most 2048 (max_positions))");
  EXPECT_EQ(error_of([&] { (void)build_variant(gpt, h100(), {}, {.precision = "fp4"}); }),
            "precision: precision not offered by accelerator h100-sxm (got \"fp4\"; expected one "
            "of bf16, fp16, fp8, tf32)");
}

TEST(ParallelConfig, KvHeadsFewerThanTensorParallelAreReplicated) {
  // Llama-3.1-405B: 8 KV heads, t = 64 -> each device holds 2 query heads and 1 KV head.
  const Model m = model("llama3.1-405b");
  const Variant v = build_variant(m, h100(), {.tensor = 64, .sequence = true}, {});
  const std::int64_t h = 16384, hd = 128;
  const std::int64_t qkv = h * (2 * hd + 2 * hd);
  const std::int64_t proj = 2 * hd * h;
  const std::int64_t mlp = 3 * h * (53248 / 64);
  EXPECT_EQ(v.layers[1].parameters, qkv + proj + mlp + 2 * h);
}

}  // namespace
}  // namespace nest::workload
