// The compute model: GEMM efficiency by shape, backward passes from each operator's own kernels,
// Megatron-LM's fused memory-bound operators, causal flash attention and fp8. Every expected
// figure is computed here by hand from the formulas in nest/workload/accelerator.h and
// src/workload/layers.cc, on an accelerator written in the test (not the fitted files).

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "nest/core/error.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/roofline.h"

namespace nest::workload {
namespace {

const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

// A100-like: 108 SMs, tiles 256 x 128 and 128 x 256, 192 steps of k per tile.
constexpr const char* kDevice = R"(kind: accelerator
name: test-gpu
peak_flop_rate: {fp16: 312 TFLOP/s, bf16: 312 TFLOP/s, fp8: 624 TFLOP/s}
hbm: 80 GiB
hbm_bandwidth: 2000 GB/s
efficiency:
  gemm: {fp16: 0.75, bf16: 0.75, fp8: 0.5}
  memory: 0.75
gemm_shape:
  streaming_multiprocessors: 108
  tiles: [[256, 128], [128, 256]]
  k_overhead: 192
)";

Accelerator device() { return parse_accelerator(kDevice, "test.yaml"); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const Operator& op(const LayerGraph& g, const std::string& name) {
  for (const Operator& o : g.operators) {
    if (o.name == name) return o;
  }
  throw Error::internal("no operator " + name);
}

TEST(GemmShape, TileAndWaveQuantizationAndTheInnerDimension) {
  const Roofline r = Roofline::of(device(), "fp16");
  EXPECT_DOUBLE_EQ(r.matrix.flops_per_s(), 312e12 * 0.75);
  // [8192 x 6144]·[6144 x 2304] (the QKV GEMM of a 22B layer at t = 8): 32 x 18 = 576 tiles of
  // 256 x 128 in ceil(576/108) = 6 waves: utilization 8192·2304 / (6·108·256·128).
  const GemmShape qkv{.m = 8192, .n = 2304, .k = 6144};
  const double u = 8192.0 * 2304 / (6.0 * 108 * 256 * 128);
  EXPECT_DOUBLE_EQ(r.shape_factor(qkv), u * 6144 / (6144 + 192));
  // A batched GEMM whose n = 96 fills 96 of a tile's 128 columns (scores' gradient, 32 heads).
  const GemmShape thin{.m = 2048, .n = 96, .k = 2048, .batch = 32};
  const double tiles = 16.0 * 1 * 32;  // 2048/128 rows of the 128 x 256 tile beat 256 x 128
  const double waves = std::ceil(tiles / 108);
  const double best = std::max(2048.0 * 96 * 32 / (waves * 108 * 128 * 256),
                               2048.0 * 96 * 32 / (std::ceil(8.0 * 32 / 108) * 108 * 256 * 128));
  EXPECT_DOUBLE_EQ(r.shape_factor(thin), best * 2048 / (2048 + 192));
  // Without a shape model every GEMM runs at the plateau.
  Accelerator flat = device();
  flat.gemm_shape = {};
  EXPECT_DOUBLE_EQ(Roofline::of(flat, "fp16").shape_factor(thin), 1.0);
  // The time: its FLOPs at 312 TFLOP/s × 0.75 × the shape factor.
  EXPECT_EQ(r.gemm_time(qkv, r.matrix, Bytes(0)),
            compute_time(Flops(qkv.flops()), r.matrix * r.shape_factor(qkv)));
}

TEST(GemmShape, BackwardRunsTheInputAndWeightGradientsAtTheirOwnShapes) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const Roofline r = Roofline::of(device(), "fp16");
  const auto graphs = layer_graphs(gpt, device(), {.tensor = 8}, {.precision = "fp16"});
  const Operator& fc1 = op(graphs[1], "mlp_up");
  // Forward [2048 x 12288]·[12288 x 6144]; input gradient [2048 x 6144]·[6144 x 12288], weight
  // gradient [12288 x 2048]·[2048 x 6144], each reading and writing its operands once.
  const GemmShape dgrad{.m = 2048, .n = 12288, .k = 6144};
  const GemmShape wgrad{.m = 12288, .n = 6144, .k = 2048};
  const auto bytes = [](const GemmShape& g) {
    return Bytes(2 * (g.m * g.k + g.k * g.n + g.m * g.n));
  };
  EXPECT_EQ(fc1.input_gradient, r.gemm_time(dgrad, r.matrix, bytes(dgrad)));
  EXPECT_EQ(fc1.weight_gradient, r.gemm_time(wgrad, r.matrix, bytes(wgrad)));
  EXPECT_EQ(fc1.backward, fc1.input_gradient + fc1.weight_gradient);
  EXPECT_EQ(fc1.backward_bytes, bytes(dgrad) + bytes(wgrad));
  // Not twice the forward: the three shapes have their own efficiencies.
  EXPECT_NE(fc1.backward, fc1.forward * 2);
  EXPECT_DOUBLE_EQ(fc1.backward_factor, 2.0);  // the FLOPs are twice
}

TEST(Fusion, BiasDropoutAddIsOneKernelWithItsOwnBackward) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const auto graphs = layer_graphs(gpt, device(), {.tensor = 8, .sequence = true}, {});
  const Operator& fused = op(graphs[1], "attention_bias_dropout_add");
  // Per element of the s·h/t sequence-parallel slice: reads the GEMM output and the residual,
  // writes the sum (2 bytes each) and the 1-byte mask; plus the 2-byte bias of h.
  const std::int64_t elements = 2048LL * 12288 / 8;
  EXPECT_EQ(fused.forward_bytes.count(), 7 * elements + 2 * 12288);
  EXPECT_EQ(fused.saved_bytes.count(), elements);  // the mask (Korthikanti et al.'s sbh)
  EXPECT_EQ(fused.backward_bytes.count(),
            static_cast<std::int64_t>(static_cast<double>(fused.forward_bytes.count()) * 11 / 7));
  const Bandwidth memory = Bandwidth::bytes_per_second(2000e9 * 0.75);
  EXPECT_EQ(fused.forward, serialization_time(fused.forward_bytes, memory));
  EXPECT_EQ(fused.backward, serialization_time(fused.backward_bytes, memory));
  // The norm's backward reads x and dy and writes dx: 1.5 times its forward traffic.
  const Operator& norm = op(graphs[1], "mlp_norm");
  EXPECT_EQ(norm.backward_bytes.count(),
            static_cast<std::int64_t>(static_cast<double>(norm.forward_bytes.count()) * 1.5));
}

TEST(FlashAttention, CausalMaskingSkipsTheBlocksAboveTheDiagonal) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const auto causal = layer_graphs(gpt, device(), {}, {.flash_attention = true});
  // 2048 / 128 = 16 key blocks per query block row: 16·17/2 of 256 run.
  const double full = 4.0 * 96 * 2048 * 2048 * 128;
  EXPECT_DOUBLE_EQ(op(causal[1], "flash_attention").forward_flops.count(),
                   full * (16.0 + 1) / (2 * 16));
  Model encoder = gpt;
  encoder.causal = false;
  const auto bidirectional = layer_graphs(encoder, device(), {}, {.flash_attention = true});
  EXPECT_DOUBLE_EQ(op(bidirectional[1], "flash_attention").forward_flops.count(), full);
}

TEST(Fp8, LinearGemmsAtTheFp8RateTheAttentionCoreInBf16) {
  const Roofline r = Roofline::of(device(), "fp8");
  EXPECT_DOUBLE_EQ(r.matrix.flops_per_s(), 624e12 * 0.5);
  EXPECT_DOUBLE_EQ(r.attention.flops_per_s(), 312e12 * 0.75);
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const auto fp8 = layer_graphs(gpt, device(), {.tensor = 8}, {.precision = "fp8"});
  const auto bf16 = layer_graphs(gpt, device(), {.tensor = 8}, {.precision = "bf16"});
  EXPECT_EQ(op(fp8[1], "attention_scores").forward, op(bf16[1], "attention_scores").forward);
  // The QKV GEMM is compute-bound: 624 × 0.5 against 312 × 0.75, 4/3 the rate.
  const double speedup = static_cast<double>(op(bf16[1], "qkv_projection").forward.ps()) /
                         static_cast<double>(op(fp8[1], "qkv_projection").forward.ps());
  EXPECT_NEAR(speedup, 4.0 / 3, 1e-6);
}

// Narayanan et al. 2021 §4.1: without sequence parallelism a block's output is replicated over
// the tensor-parallel group; a stage boundary sends one 1/t slice per shard and gathers them.
TEST(ScatterGather, ReplicatedOutputsCrossStagesAsSlices) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const Variant tp = build_variant(gpt, device(), {.tensor = 8}, {});
  const double sbh2 = 2.0 * 2048 * 12288;
  EXPECT_EQ(tp.layers[1].output_bytes.as_double(), sbh2 / 8);
  EXPECT_EQ(tp.layers[1].output_gather.as_double(), sbh2);
  const Variant sp = build_variant(gpt, device(), {.tensor = 8, .sequence = true}, {});
  EXPECT_EQ(sp.layers[1].output_bytes.as_double(), sbh2 / 8);  // already a slice
  EXPECT_EQ(sp.layers[1].output_gather, Bytes(0));
}

// Megatron-LM's local DDP before gradient-accumulation fusion adds each microbatch's fp16
// gradients to the fp32 main_grad in a pass of 10 bytes per parameter.
TEST(GradientAccumulation, APassOverTheLayersParametersInItsBackward) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const Variant fused = build_variant(gpt, device(), {.tensor = 8}, {});
  const Variant unfused =
      build_variant(gpt, device(), {.tensor = 8}, {.gradient_accumulation_bytes = 10});
  const Bandwidth memory = Bandwidth::bytes_per_second(2000e9 * 0.75);
  for (const std::size_t i : {std::size_t{0}, std::size_t{1}, fused.layers.size() - 1}) {
    EXPECT_EQ(unfused.layers[i].forward, fused.layers[i].forward);
    EXPECT_EQ(unfused.layers[i].backward - fused.layers[i].backward,
              serialization_time(Bytes(fused.layers[i].parameters * 10), memory))
        << i;
  }
}

// A layer whose parameters times the bytes would pass 64 bits is refused, naming the key:
// GPT-3's block at t = 8 (h = 12,288) holds 12 h^2 / 8 weights, the column-parallel biases 3h/8
// + 4h/8, the replicated biases 2h and two layer norms 4h: 226,576,896 parameters, and
// (2^63 - 1) / them = 40,707,469,294 bytes each at most.
TEST(GradientAccumulation, TrafficBeyond64BitsIsAnInputError) {
  const Model gpt = load_model(kDir + "models/gpt3-175b.yaml");
  const Variant fused = build_variant(gpt, device(), {.tensor = 8}, {});
  EXPECT_EQ(fused.layers[1].parameters, 226'576'896);
  EXPECT_EQ(error_of([&] {
              (void)build_variant(gpt, device(), {.tensor = 8},
                                  {.gradient_accumulation_bytes = 50'000'000'000});
            }),
            "gradient_accumulation_bytes: gradient accumulation traffic out of range: 226576896 "
            "parameters in the transformer_block layer (got \"50000000000\"; expected at most "
            "40707469294 bytes per parameter)");
}

TEST(AcceleratorShape, MapsAndShapesAreCheckedNamingTheKey) {
  EXPECT_DOUBLE_EQ(device().gemm_efficiency_for("fp8"), 0.5);
  std::string text = kDevice;
  EXPECT_EQ(error_of([&] {
              (void)parse_accelerator(
                  std::string(kDevice).replace(text.find("fp8: 0.5"), 8, "int4: 0.5"), "a.yaml");
            }),
            "a.yaml:7: efficiency.gemm.int4: not a precision of peak_flop_rate (got \"0.5\"; "
            "expected a key of peak_flop_rate)");
  EXPECT_EQ(error_of([&] {
              (void)parse_accelerator(
                  std::string(kDevice).replace(text.find("[128, 256]"), 10, "[128]"), "a.yaml");
            }),
            "a.yaml:11: gemm_shape.tiles[1]: not a tile (expected [rows, columns])");
  Accelerator a = device();
  a.gemm_efficiency_by_precision.pop_back();
  EXPECT_EQ(error_of([&] { (void)Roofline::of(a, "fp8"); }),
            "precision: no GEMM efficiency for this precision on accelerator test-gpu (got "
            "\"fp8\"; expected one of fp16, bf16 (efficiency.gemm))");
}

}  // namespace
}  // namespace nest::workload
