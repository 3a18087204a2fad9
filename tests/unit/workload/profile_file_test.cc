#include "nest/workload/profile_file.h"

#include <gtest/gtest.h>

#include <functional>

#include "nest/core/error.h"
#include "nest/workload/memory.h"

namespace nest::workload {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kH100 = std::string(NEST_SOURCE_DIR) + "/workloads/profiles/gpt3-175b-h100.yaml";
const std::string kTpu = std::string(NEST_SOURCE_DIR) + "/workloads/profiles/gpt3-175b-tpuv4.yaml";

TEST(ProfileFile, LoadsTheArtifactH100ProfileWithRepeatedLayers) {
  const LayerProfile p = load_layer_profile(kH100);
  EXPECT_EQ(p.model, "gpt3-175b");
  EXPECT_EQ(p.accelerator, "h100");
  EXPECT_EQ(p.sequence_length, 2048);
  EXPECT_EQ(p.global_batch, 4096);
  EXPECT_EQ(p.hbm.count(), 90LL << 30);
  EXPECT_TRUE(p.recompute_allowed);
  ASSERT_EQ(p.variants.size(), 2u);
  const Variant& v = p.variants[0];
  EXPECT_EQ(v.tensor_parallel, 4);
  EXPECT_EQ(v.devices_per_replica, 4);
  EXPECT_EQ(v.microbatches, 4096);
  EXPECT_EQ(v.micro_batch, 1);
  ASSERT_EQ(v.layers.size(), 97u);  // embedding + 96 blocks
  EXPECT_EQ(v.layers[0].name, "embedding");
  EXPECT_EQ(v.layers[0].forward.ps(), 2'830'400'000);  // 2.8304 ms
  EXPECT_EQ(v.layers[0].backward.ps(), 0);
  EXPECT_EQ(v.layers[0].output_bytes.count(), 50331648);  // the next layer's input
  const Layer& last = v.layers[96];
  EXPECT_EQ(last.name, "transformer_block");
  EXPECT_EQ(last.forward.ps(), 8'342'300'000);
  EXPECT_EQ(last.backward.ps(), 5'737'700'000);
  EXPECT_EQ(last.recompute.ps(), 5'737'700'000);
  EXPECT_EQ(last.parameter_bytes.count(), 906209280);
  EXPECT_EQ(last.parameters, 453104640);
  EXPECT_EQ(last.activation_bytes.count(), 5447034934);
  EXPECT_EQ(last.input_bytes.count(), 50331648);
  EXPECT_EQ(last.output_bytes.count(), 50331648);  // last layer: its own input
  EXPECT_TRUE(last.collectives.empty());
  EXPECT_EQ(p.variants[1].layers[5].parameter_bytes.count(), 453202944);
}

// Largest in-flight count s with const + (s-1)·stash <= HBM, straight from the rule.
int largest_in_flight(const Variant& v, std::size_t first, std::size_t last, Bytes hbm,
                      bool recompute) {
  const MemoryOptions o{.rules = MemoryRules::kNestArtifact,
                        .recompute = recompute ? Recompute::kFull : Recompute::kNone};
  int s = 0;
  while (s < 100000 && stage_memory(v, first, last, s + 1, o).total() <= hbm) ++s;
  return s;
}

// Hand-computed from the profile figures (HBM 90 GiB = 96636764160 B on H100, 64 GiB =
// 68719476736 B on TPUv4). E.g. 12 tp-4 blocks: const = 2·12·906209280 + 12·5447034934 =
// 87113441928; (96636764160 − 87113441928) / 50331648 = 189.2, so s − 1 <= 189.
TEST(ProfileFile, NestArtifactFeasibleInFlightCountsMatchHandComputedOnes) {
  const LayerProfile h100 = load_layer_profile(kH100);
  const Variant& t4 = h100.variants[0];
  const Variant& t8 = h100.variants[1];
  EXPECT_EQ(largest_in_flight(t4, 1, 13, h100.hbm, true), 190);
  // 13 blocks: const = 94372895422; 2263868738 / 50331648 = 44.98.
  EXPECT_EQ(largest_in_flight(t4, 1, 14, h100.hbm, true), 45);
  // 14 blocks: const = 101632348916 > HBM.
  EXPECT_EQ(largest_in_flight(t4, 1, 15, h100.hbm, true), 0);
  // 16 tp-8 blocks: const = 67001369440; 29635394720 / 50331648 = 588.8.
  EXPECT_EQ(largest_in_flight(t8, 1, 17, h100.hbm, true), 589);
  // Without recomputation 4 tp-8 blocks stash all A = 13124718808: 79886421800 / A = 6.09.
  EXPECT_EQ(largest_in_flight(t8, 1, 5, h100.hbm, false), 7);
  // A stage starting at the embedding stashes the embedding's input, 0 bytes: const =
  // 81291622994 fits, and then every in-flight count fits (the artifact's quirk).
  EXPECT_EQ(largest_in_flight(t4, 0, 12, h100.hbm, true), 100000);

  const LayerProfile tpu = load_layer_profile(kTpu);
  EXPECT_EQ(tpu.hbm.count(), 64LL << 30);
  // 9 tp-4 blocks: const = 65335081446; 3384395290 / 50331648 = 67.2.
  EXPECT_EQ(largest_in_flight(tpu.variants[0], 1, 10, tpu.hbm, true), 68);
}

constexpr const char* kMinimal = R"(kind: layer_profile
model: m
accelerator: a
sequence_length: 8
micro_batch: 2
global_batch: 64
time_unit: us
hbm: 1 GiB
activation_recomputation: false
variants:
  - tensor_parallel: 2
    sequence_parallel: true
    layers:
      - name: x
        forward: 1.5
        backward: 3
        parameter_bytes: 1 KiB
        activation_bytes: 100
        input_bytes: 10
        output_bytes: 7
        collectives:
          - {op: reducescatter, axis: tensor, size: 64 KiB, count: 2, recompute_count: 1}
      - name: y
        repeat: 2
        forward: 2
        backward: 4
        recompute: 1
        parameter_bytes: 10
        activation_bytes: 20
        input_bytes: 30
        parameters: 3
        flops: 1e9
)";

TEST(ProfileFile, OptionalKeysAndDefaults) {
  const LayerProfile p = parse_layer_profile(kMinimal, "min.yaml");
  ASSERT_EQ(p.variants.size(), 1u);
  const Variant& v = p.variants[0];
  EXPECT_TRUE(v.sequence_parallel);
  EXPECT_EQ(v.devices_per_replica, 2);
  EXPECT_EQ(v.microbatches, 32);
  EXPECT_EQ(v.micro_batch, 2);
  ASSERT_EQ(v.layers.size(), 3u);
  EXPECT_EQ(v.layers[0].forward.ps(), 1'500'000);
  EXPECT_EQ(v.layers[0].recompute.ps(), 1'500'000);  // defaults to forward
  EXPECT_EQ(v.layers[0].parameter_bytes.count(), 1024);
  EXPECT_EQ(v.layers[0].parameters, 512);
  EXPECT_EQ(v.layers[0].output_bytes.count(), 7);
  ASSERT_EQ(v.layers[0].collectives.size(), 1u);
  EXPECT_EQ(v.layers[0].collectives[0].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(v.layers[0].collectives[0].axis, ParallelAxis::kTensor);
  EXPECT_EQ(v.layers[0].collectives[0].size.count(), 65536);
  EXPECT_EQ(v.layers[0].collectives[0].count, 2);
  EXPECT_EQ(v.layers[0].collectives[0].recompute_count, 1);
  EXPECT_EQ(v.layers[1].recompute.ps(), 1'000'000);
  EXPECT_EQ(v.layers[1].parameters, 3);
  EXPECT_DOUBLE_EQ(v.layers[1].flops.count(), 1e9);
  EXPECT_EQ(v.layers[1].output_bytes.count(), 30);
  EXPECT_EQ(v.layers[2].output_bytes.count(), 30);
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) return "(pattern not found)";
  return text.replace(at, from.size(), to);
}

TEST(ProfileFile, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(with(kMinimal, "time_unit: us", "time_unit: min"),
                                        "p.yaml");
            }),
            "p.yaml:7: time_unit: unknown value (got \"min\"; expected one of ps, ns, us, ms, s)");
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(with(kMinimal, "repeat: 2", "repeats: 2"), "p.yaml");
            }),
            "p.yaml:24: variants[0].layers[1].repeats: unknown key \"repeats\" (expected one of "
            "name, repeat, forward, backward, recompute, selective_recompute, parameter_bytes, "
            "activation_bytes, selective_activation_bytes, input_bytes, output_bytes, parameters, "
            "flops, collectives)");
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(with(kMinimal, "forward: 2", "forward: -2"), "p.yaml");
            }),
            "p.yaml:25: variants[0].layers[1].forward: negative duration (got \"-2\"; expected a "
            "number of us in [0, 9.2e+12])");
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(with(kMinimal, "global_batch: 64", "global_batch: 63"),
                                        "p.yaml");
            }),
            "p.yaml:6: global_batch: not a multiple of micro_batch (got \"63\"; expected a "
            "multiple of 2)");
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(with(kMinimal, "op: reducescatter", "op: gather"),
                                        "p.yaml");
            }),
            "p.yaml:22: variants[0].layers[0].collectives[0].op: unknown value (got \"gather\"; "
            "expected one of allreduce, allgather, reducescatter, alltoall)");
  EXPECT_EQ(
      error_of([] { (void)load_layer_profile("/nonexistent/p.yaml"); }),
      "/nonexistent/p.yaml: cannot open file: No such file or directory (expected a readable YAML "
      "file)");
}

TEST(ProfileFile, SelectiveRecomputationFiguresAreOptionalAndChecked) {
  const LayerProfile none = parse_layer_profile(kMinimal, "min.yaml");
  EXPECT_FALSE(none.selective_recompute_allowed);
  EXPECT_EQ(none.variants[0].layers[0].selective_activation_bytes.count(), 100);  // as A
  EXPECT_EQ(none.variants[0].layers[0].selective_recompute, Time::zero());
  const LayerProfile some =
      parse_layer_profile(with(kMinimal, "activation_bytes: 20",
                               "activation_bytes: 20\n        selective_recompute: 0.5\n"
                               "        selective_activation_bytes: 12"),
                          "sel.yaml");
  EXPECT_TRUE(some.selective_recompute_allowed);
  EXPECT_EQ(some.variants[0].layers[1].selective_recompute.ps(), 500'000);
  EXPECT_EQ(some.variants[0].layers[2].selective_activation_bytes.count(), 12);
  EXPECT_EQ(error_of([] {
              (void)parse_layer_profile(
                  with(kMinimal, "activation_bytes: 20",
                       "activation_bytes: 20\n        selective_activation_bytes: 21"),
                  "p.yaml");
            }),
            "p.yaml:30: variants[0].layers[1].selective_activation_bytes: more than "
            "activation_bytes (got \"21\"; expected at most the layer's activation_bytes)");
}

}  // namespace
}  // namespace nest::workload
