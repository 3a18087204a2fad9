// Ranges of the workload inputs (issue 17, defect 3): each of these gave wrong numbers with
// exit status 0 before — an efficiency or a peak of 1e-300 (MFU 2745.5% and negative times,
// MFU inf%), hidden: 2^32 (4.8e15 parameters instead of ~7e21), layers: 2^32 (out of memory),
// --seq 2^32 (overflowing tensor sizes), huge times in a profile file.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>

#include "nest/core/error.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"
#include "nest/workload/roofline.h"
#include "workload/layers.h"
#include "workload/size_check.h"

namespace nest::workload {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << e.what();
    return e.what();
  }
  return "(no error)";
}

const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

std::string accelerator_yaml(const std::string& peak, const std::string& gemm) {
  return "kind: accelerator\nname: a\npeak_flop_rate:\n  bf16: " + peak + "\nhbm: 80 GiB\n" +
         "hbm_bandwidth: 3.35 TB/s\nefficiency:\n  gemm: " + gemm + "\n  memory: 0.8\n";
}

TEST(AcceleratorRanges, TinyEfficienciesAndPeaksAreRefused) {
  EXPECT_EQ(error_of([] {
              (void)parse_accelerator(accelerator_yaml("989 TFLOP/s", "1e-300"), "a.yaml");
            }),
            "a.yaml:8: efficiency.gemm: out of range (got \"1e-300\"; expected a number in "
            "[0.001, 1])");
  EXPECT_EQ(
      error_of([] { (void)parse_accelerator(accelerator_yaml("1e-300 FLOP/s", "0.8"), "a.yaml"); }),
      "a.yaml:4: peak_flop_rate.bf16: out of range (got \"1e-300 FLOP/s\"; expected a "
      "compute rate in [1e6 FLOP/s, 1e21 FLOP/s])");
  EXPECT_NO_THROW((void)parse_accelerator(accelerator_yaml("1e6 FLOP/s", "0.001"), "a.yaml"));
}

std::string model_yaml(const std::string& extra, std::int64_t layers = 2,
                       std::int64_t hidden = 64) {
  return "kind: model\nname: m\nlayers: " + std::to_string(layers) +
         "\nhidden: " + std::to_string(hidden) +
         "\nheads: 16\nffn_hidden: 256\nactivation: gelu\nnorm: layernorm\n"
         "position_embedding: rotary\nvocabulary: 1024\ntied_embeddings: false\nbias: false\n"
         "dropout: false\nsequence_length: 128\n" +
         extra;
}

TEST(ModelRanges, DimensionsPastTheirRangesAreRefused) {
  EXPECT_EQ(error_of([] { (void)parse_model(model_yaml("", 2, std::int64_t{1} << 32), "m.yaml"); }),
            "m.yaml:4: hidden: out of range (got \"4294967296\"; expected an integer in [1, "
            "1048576])");
  EXPECT_EQ(error_of([] { (void)parse_model(model_yaml("", std::int64_t{1} << 32), "m.yaml"); }),
            "m.yaml:3: layers: out of range (got \"4294967296\"; expected an integer in [1, "
            "4096])");
  EXPECT_EQ(error_of([] { (void)parse_model(model_yaml("global_batch: 2147483648\n"), "m.yaml"); }),
            "m.yaml:15: global_batch: out of range (got \"2147483648\"; expected an integer in "
            "[1, 1073741824])");
}

// Closed form of the model below: embedding V·h, head 2h (final layernorm) + V·h (untied);
// per block 4h^2 (Q, K, V, output with 16 heads of h/16) + E·2·h·f (gelu MLP per expert) +
// E·h (router, with E experts) + 4h (two layernorms). h = 2^20, f = 2^22, V = 2^20.
TEST(ModelRanges, ParameterCountsOfHugeModelsAreExactOrRefused) {
  const std::string extra = "";
  const auto huge = [](const std::string& experts) {
    return "kind: model\nname: huge\nlayers: 4096\nhidden: 1048576\nheads: 16\n"
           "ffn_hidden: 4194304\nactivation: gelu\nnorm: layernorm\n"
           "position_embedding: rotary\nvocabulary: 1048576\ntied_embeddings: false\n"
           "bias: false\ndropout: false\nsequence_length: 128\n" +
           experts;
  };
  const Model m = parse_model(huge(""), "huge.yaml");
  const ParameterCount c = count_parameters(m);
  EXPECT_EQ(c.block, 13'194'143'727'616);
  EXPECT_EQ(c.total, 54'045'411'733'667'840);  // 5.4e16: under 2^56, exact
  // 8 experts: 4096 · (2^42 + 8 · 2^43 + 2^23 + 2^22) + 2^41 + 2^21 = 306,247,025,226,153,984.
  EXPECT_EQ(error_of([&] { (void)parse_model(huge("experts: 8\ntop_k: 2\n"), "huge.yaml"); }),
            "huge.yaml:4: hidden: too many parameters (got \"3.062e+17 parameters\"; expected at "
            "most 72057594037927936 (7.21e+16: 16 bytes of weights, gradients and optimizer "
            "state per parameter must fit a 64-bit byte count))");
  Model moe = m;
  moe.experts = 8;
  moe.top_k = 2;
  EXPECT_DOUBLE_EQ(approximate_parameters(moe), 306'247'025'226'153'984.0);
}

TEST(ModelRanges, SequenceAndBatchOverridesHaveRanges) {
  const Model m = load_model(kDir + "models/llama2-7b.yaml");
  EXPECT_EQ(
      error_of([&] { check_parallel_config(m, {}, {.sequence_length = std::int64_t{1} << 32}); }),
      "sequence_length: out of range (got \"4294967296\"; expected an integer in [1, "
      "16777216] (0: the model's))");
  EXPECT_EQ(error_of([&] { check_parallel_config(m, {}, {.global_batch = -1}); }),
            "global_batch: out of range (got \"-1\"; expected an integer in [1, 1073741824] (0: "
            "the model's))");
}

TEST(ModelRanges, LayersTooLargeForTheirTypesAreRefusedBeforeBuilding) {
  const Model m = load_model(kDir + "models/llama2-7b.yaml");
  const Accelerator h100 = load_accelerator(kDir + "accelerators/h100-sxm.yaml");
  // 2^24 tokens without flash attention: 32 heads x 2^48 scores per layer.
  EXPECT_EQ(error_of([&] {
              (void)build_variant(m, h100, {}, {.sequence_length = std::int64_t{1} << 24});
            }).rfind("sequence_length: the layers of this configuration are too large", 0),
            0U);
  // On the slowest accepted device one microbatch of GPT-3 takes years.
  const Accelerator slow = parse_accelerator(accelerator_yaml("1e6 FLOP/s", "0.001"), "a.yaml");
  EXPECT_EQ(error_of([&] {
              (void)build_variant(load_model(kDir + "models/gpt3-175b.yaml"), slow, {}, {});
            }).rfind("peak_flop_rate: one microbatch of this configuration would take too long", 0),
            0U);
}

// The estimate the checks use must bound what the graphs compute (else the overflow happens
// before the check) and stay within a small factor of it (else it refuses real workloads).
TEST(SizeEstimate, BoundsEveryBundledModelWithinAFactor) {
  const Accelerator h100 = load_accelerator(kDir + "accelerators/h100-sxm.yaml");
  const Roofline r = Roofline::of(h100, "bf16");
  double worst_time = 0, worst_bytes = 0;
  for (const char* name :
       {"gpt3-175b", "llama2-7b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b", "bert-large"}) {
    const Model m = load_model(kDir + "models/" + name + ".yaml");
    for (const int t : {1, 8}) {
      for (const int b : {1, 4}) {
        for (const bool flash : {false, true}) {
          const ParallelConfig c{.tensor = t, .sequence = m.is_moe(), .micro_batch = b};
          const BuildOptions o{.flash_attention = flash};
          const Variant v = build_variant(m, h100, c, o);
          const detail::LayerEstimate e = detail::estimate_layers(m, detail::make_dims(m, c, o), r);
          const auto check = [&](const Layer& l, long double est_ps, long double est_bytes) {
            const double ps =
                static_cast<double>(l.forward.ps() + l.backward.ps() + l.recompute.ps());
            const double bytes = l.activation_bytes.as_double() + l.parameter_bytes.as_double();
            EXPECT_LE(ps, static_cast<double>(est_ps)) << name << " " << l.name;
            EXPECT_LE(bytes, static_cast<double>(est_bytes)) << name << " " << l.name;
            worst_time = std::max(worst_time, static_cast<double>(est_ps) / ps);
            worst_bytes = std::max(worst_bytes, static_cast<double>(est_bytes) / bytes);
          };
          check(v.layers[1], e.block_ps, e.block_bytes);
          check(v.layers.back(), e.head_ps, e.head_bytes);
        }
      }
    }
  }
  std::printf("estimate / actual, largest: time %.2f, bytes %.2f\n", worst_time, worst_bytes);
  EXPECT_LT(worst_time, 20);
  EXPECT_LT(worst_bytes, 40);
}

std::string profile_yaml(const std::string& forward, int repeat, int variants = 1,
                         const std::string& microbatches = "4096") {
  std::string y =
      "kind: layer_profile\nmodel: m\naccelerator: a\nsequence_length: 2048\nmicro_batch: 1\n"
      "global_batch: 4096\ntime_unit: s\nhbm: 80 GiB\nactivation_recomputation: true\n"
      "variants:\n";
  for (int i = 0; i < variants; ++i) {
    y += "  - tensor_parallel: 1\n    microbatches: " + microbatches +
         "\n    layers:\n      - {name: block, repeat: " + std::to_string(repeat) +
         ", forward: " + forward +
         ", backward: 0, parameter_bytes: 2, activation_bytes: 1, input_bytes: 1}\n";
  }
  return y;
}

TEST(ProfileRanges, AnIterationPastTheTimeRangeIsRefused) {
  // 100 layers of 1e4 s forward (and as long recomputed) x 4096 microbatches: 260 years.
  EXPECT_EQ(
      error_of([] { (void)parse_layer_profile(profile_yaml("1e4", 100), "p.yaml"); }),
      "p.yaml:14: variants[0].layers: one iteration would take too long (got \"9.48e+04 days on "
      "one device\"; expected at most "
      "26.7 days (2^61 ps) for all layers' forward, backward and recompute times 4096 "
      "microbatches)");
  EXPECT_NO_THROW((void)parse_layer_profile(profile_yaml("0.001", 100), "p.yaml"));
}

// 1,000 variants of a million layers each was a few kilobytes of text and 150 GB of memory.
TEST(ProfileRanges, LayersOfAVariantAndOfAllVariantsTogetherAreBounded) {
  EXPECT_EQ(error_of([] { (void)parse_layer_profile(profile_yaml("0", 4099), "p.yaml"); }),
            "p.yaml:14: variants[0].layers[0].repeat: out of range (got \"4099\"; expected an "
            "integer in [1, 4098])");
  // 245 variants of 4,098 layers: 1,004,010 in all.
  EXPECT_EQ(error_of([] { (void)parse_layer_profile(profile_yaml("0", 4098, 245), "p.yaml"); }),
            "p.yaml:990: variants[244].layers[0]: too many layers (expected at most 1000000 "
            "layers in all variants together)");
}

}  // namespace
}  // namespace nest::workload
