// Speed of building layer profiles (issue 4 "Speed"): every variant of Llama-3.1-405B
// (t = 1..64, sequence parallelism off and on, micro-batch 1..8) should take well under a
// second. Also: one variant, the operator graphs alone, a profile file, and stage_memory.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "nest/workload/accelerator.h"
#include "nest/workload/memory.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace {

using namespace nest::workload;

const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

// 7 tensor degrees × 2 × 8 micro-batch sizes = 112 variants. The global batch is 1680 sequences
// (a multiple of 1..8) instead of the model's 2048, so that every micro-batch size divides it.
std::vector<ParallelConfig> all_405b_variants() {
  std::vector<ParallelConfig> configs;
  for (int t : {1, 2, 4, 8, 16, 32, 64}) {
    for (bool sp : {false, true}) {
      for (int b = 1; b <= 8; ++b) {
        configs.push_back({.tensor = t, .sequence = sp, .micro_batch = b});
      }
    }
  }
  return configs;
}

void BM_Llama405bAllVariants(benchmark::State& state) {
  const Model model = load_model(kDir + "models/llama3.1-405b.yaml");
  const Accelerator device = load_accelerator(kDir + "accelerators/h100-sxm.yaml");
  const std::vector<ParallelConfig> configs = all_405b_variants();
  const BuildOptions options{.global_batch = 1680};
  std::size_t layers = 0;
  for (auto _ : state) {
    const LayerProfile p = build_profile(model, device, configs, options);
    layers = p.variants.size() * p.variants.front().layers.size();
    benchmark::DoNotOptimize(p.variants.back().layers.back().forward);
  }
  state.counters["variants"] = static_cast<double>(configs.size());
  state.counters["layers"] = static_cast<double>(layers);
}
BENCHMARK(BM_Llama405bAllVariants)->Unit(benchmark::kMillisecond);

void BM_Llama405bOneVariant(benchmark::State& state) {
  const Model model = load_model(kDir + "models/llama3.1-405b.yaml");
  const Accelerator device = load_accelerator(kDir + "accelerators/h100-sxm.yaml");
  for (auto _ : state) {
    const Variant v = build_variant(model, device, {.tensor = 8, .sequence = true}, {});
    benchmark::DoNotOptimize(v.layers.back().forward);
  }
}
BENCHMARK(BM_Llama405bOneVariant)->Unit(benchmark::kMicrosecond);

void BM_MixtralLayerGraphs(benchmark::State& state) {
  const Model model = load_model(kDir + "models/mixtral-8x7b.yaml");
  const Accelerator device = load_accelerator(kDir + "accelerators/h100-sxm.yaml");
  for (auto _ : state) {
    const auto graphs =
        layer_graphs(model, device, {.tensor = 2, .expert = 4, .sequence = true}, {});
    benchmark::DoNotOptimize(graphs[1].operators.size());
  }
}
BENCHMARK(BM_MixtralLayerGraphs)->Unit(benchmark::kMicrosecond);

void BM_LoadArtifactProfile(benchmark::State& state) {
  const std::string path = kDir + "profiles/gpt3-175b-h100.yaml";
  for (auto _ : state) {
    const LayerProfile p = load_layer_profile(path);
    benchmark::DoNotOptimize(p.variants.size());
  }
}
BENCHMARK(BM_LoadArtifactProfile)->Unit(benchmark::kMicrosecond);

// Every contiguous layer range of the 97-layer GPT-3 chain at in-flight 8: 4753 calls.
void BM_StageMemoryAllRanges(benchmark::State& state) {
  const LayerProfile p = load_layer_profile(kDir + "profiles/gpt3-175b-h100.yaml");
  const Variant& v = p.variants.front();
  const MemoryOptions options{.rules = MemoryRules::kNestArtifact, .recompute = Recompute::kFull};
  for (auto _ : state) {
    std::int64_t total = 0;
    for (std::size_t first = 0; first < v.layers.size(); ++first) {
      for (std::size_t last = first + 1; last <= v.layers.size(); ++last) {
        total += stage_memory(v, first, last, 8, options).total().count();
      }
    }
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_StageMemoryAllRanges)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
