#include "nest/validate/training_runs.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "nest/core/error.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/replay/plan_replay.h"
#include "nest/workload/model_profile.h"

namespace nest::validate {
namespace {

// PyTorch DistributedDataParallel's default bucket_cap_mb.
constexpr Bytes kTorchDdpBucket = Bytes::mebibytes(25);

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

// The measured seconds per iteration of a row (see TrainingRun::measured_seconds).
double measured_of(const TrainingRun& r) {
  if (r.unit.rfind("TFLOP/s", 0) != 0) return r.published;
  const double B = static_cast<double>(r.global_batch);
  const double s = static_cast<double>(r.sequence);
  const double l = static_cast<double>(r.layers);
  const double h = static_cast<double>(r.hidden);
  const double V = static_cast<double>(r.vocabulary);
  const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return flops / (static_cast<double>(r.gpus) * r.published * 1e12);
}

}  // namespace

std::vector<TrainingRun> load_training_runs(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw Error::input("cannot read the measured training runs",
                       {.file = path.string(), .expected = "training-runs.tsv"});
  }
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_tabs(line);
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  for (const char* name :
       {"id", "source", "layers", "hidden", "heads", "vocabulary", "sequence", "gpus", "tensor",
        "pipeline", "data", "micro_batch", "global_batch", "virtual_stages", "recompute",
        "sequence_parallel", "precision", "published", "unit"}) {
    if (column.count(name) == 0) {
      throw Error::input("missing column",
                         {.file = path.string(), .line = 1, .key = name, .value = line});
    }
  }
  std::vector<TrainingRun> runs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != header.size()) {
      throw Error::input("wrong number of columns",
                         {.file = path.string(),
                          .line = number,
                          .value = std::to_string(f.size()),
                          .expected = std::to_string(header.size()) + " tab-separated fields"});
    }
    auto text = [&](const char* key) { return f[column.at(key)]; };
    auto integer = [&](const char* key, std::int64_t min) {
      const std::string& v = text(key);
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < min || x > (std::int64_t{1} << 40)) {
        throw Error::input("not an integer in range",
                           {.file = path.string(),
                            .line = number,
                            .key = key,
                            .value = v,
                            .expected = fmt::format("an integer >= {}", min)});
      }
      return static_cast<std::int64_t>(x);
    };
    TrainingRun r;
    r.id = text("id");
    r.source = text("source");
    r.layers = integer("layers", 1);
    r.hidden = integer("hidden", 1);
    r.heads = integer("heads", 1);
    r.vocabulary = integer("vocabulary", 1);
    r.sequence = integer("sequence", 1);
    r.gpus = integer("gpus", 1);
    r.tensor = static_cast<int>(integer("tensor", 1));
    r.pipeline = static_cast<int>(integer("pipeline", 1));
    r.data = static_cast<int>(integer("data", 1));
    r.micro_batch = static_cast<int>(integer("micro_batch", 1));
    r.global_batch = integer("global_batch", 1);
    r.virtual_stages = static_cast<int>(integer("virtual_stages", 1));
    try {
      r.recompute = workload::parse_recompute(text("recompute"));
    } catch (const Error& e) {
      throw Error::input(e.message(), {.file = path.string(),
                                       .line = number,
                                       .key = "recompute",
                                       .value = text("recompute"),
                                       .expected = e.context().expected});
    }
    r.sequence_parallel = integer("sequence_parallel", 0) != 0;
    r.precision = text("precision");
    r.unit = text("unit");
    const std::string published = text("published");  // `end` points into it
    char* end = nullptr;
    r.published = std::strtod(published.c_str(), &end);
    if (*end != '\0' || !(r.published > 0)) {
      throw Error::input("not a positive number", {.file = path.string(),
                                                   .line = number,
                                                   .key = "published",
                                                   .value = published,
                                                   .expected = "seconds or TFLOP/s > 0"});
    }
    if (static_cast<std::int64_t>(r.tensor) * r.pipeline * r.data != r.gpus) {
      throw Error::input(
          "tensor x pipeline x data is not the GPU count",
          {.file = path.string(),
           .line = number,
           .key = "gpus",
           .value = std::to_string(r.gpus),
           .expected = std::to_string(static_cast<std::int64_t>(r.tensor) * r.pipeline * r.data)});
    }
    r.table = r.source.rfind("Narayanan", 0) == 0 ? "narayanan" : "korthikanti";
    r.measured_seconds = measured_of(r);
    runs.push_back(std::move(r));
  }
  return runs;
}

Software software_of(const TrainingRun& run) {
  Software s;
  if (run.table == "narayanan") {
    // Megatron-LM of early 2021: no asynchronous TP communication (added 2021-09); PyTorch DDP
    // without a pipeline, Megatron's local DDP with one (examples/sc21/run_table_1.sh: DDP=torch
    // for p = 1, local otherwise).
    s.tp_comm_overlap = false;
    s.overlap_gradient_sync = run.pipeline == 1;
    s.gradient_bucket = run.pipeline == 1 ? kTorchDdpBucket : Bytes(0);
    s.gradient_accumulation_bytes = run.pipeline == 1 ? 6 : 10;
  } else {
    s.tp_comm_overlap = true;
    s.overlap_gradient_sync = false;
  }
  return s;
}

workload::Model gpt_model(const TrainingRun& run) {
  workload::Model m;
  m.name = run.id;
  m.layers = run.layers;
  m.hidden = run.hidden;
  m.heads = run.heads;
  m.kv_heads = run.heads;
  m.head_dim = run.hidden / run.heads;
  m.ffn_hidden = 4 * run.hidden;
  m.activation = workload::FfnActivation::kGelu;
  m.norm = workload::NormKind::kLayerNorm;
  m.position = workload::PositionEmbedding::kLearned;
  m.max_positions = run.sequence;
  m.vocabulary = run.vocabulary;
  m.tied_embeddings = true;
  m.bias = true;
  m.dropout = true;
  m.sequence_length = run.sequence;
  m.global_batch = run.global_batch;
  workload::validate_model(m);
  return m;
}

double TrainingPrediction::error() const noexcept {
  return (predicted_seconds - run.measured_seconds) / run.measured_seconds;
}

double TrainingPrediction::replay_error() const noexcept {
  return predicted_seconds > 0 ? (replayed_seconds - predicted_seconds) / predicted_seconds : 0;
}

std::vector<TrainingPrediction> predict_training_runs(const std::vector<TrainingRun>& runs,
                                                      const workload::Accelerator& accelerator,
                                                      const topo::Topology& topology,
                                                      const TrainingValidationOptions& options) {
  placer::OracleCommCost oracle(topology, {.seed = options.seed});
  return predict_training_runs(runs, accelerator, topology, oracle, options);
}

std::vector<TrainingPrediction> predict_training_runs(const std::vector<TrainingRun>& runs,
                                                      const workload::Accelerator& accelerator,
                                                      const topo::Topology& topology,
                                                      placer::CommCost& oracle,
                                                      const TrainingValidationOptions& options) {
  std::vector<TrainingPrediction> out;
  for (const TrainingRun& run : runs) {
    TrainingPrediction p{.run = run};
    const Software software = software_of(run);
    const workload::Model model = gpt_model(run);
    const workload::BuildOptions build{
        .precision = run.precision,
        .sequence_length = run.sequence,
        .global_batch = run.global_batch,
        .tp_comm_overlap = software.tp_comm_overlap,
        .gradient_accumulation_bytes = software.gradient_accumulation_bytes};
    const workload::ParallelConfig config{
        .tensor = run.tensor, .sequence = run.sequence_parallel, .micro_batch = run.micro_batch};
    const workload::LayerProfile profile =
        workload::build_profile(model, accelerator, {config}, build);
    placer::SearchOptions search;
    // DDP buckets of the stage's gradients (2 bytes per parameter held).
    int buckets = 1;
    if (software.gradient_bucket.count() > 0) {
      double bytes = 0;
      for (const auto& layer : profile.variants[0].layers)
        bytes += layer.parameter_bytes.as_double();
      bytes /= run.pipeline;
      buckets =
          std::max(1, static_cast<int>(std::ceil(bytes / software.gradient_bucket.as_double())));
    }
    search.cost = {.rules = workload::MemoryRules::kMegatron,
                   .devices = run.gpus,
                   .memory_bandwidth = accelerator.hbm_bandwidth * accelerator.memory_efficiency,
                   .gradient_buckets = buckets,
                   .overlap_gradient_sync = software.overlap_gradient_sync,
                   .overlap_boundary_transfers = software.overlap_boundary_transfers};
    search.orders = {placer::PlacementOrder::kTensorDataPipeline};
    search.zero_stages = {0};
    search.recompute_modes = {run.recompute};
    search.stages = {run.pipeline};
    search.data_parallel = {run.data};
    search.virtual_stages = {run.virtual_stages};
    search.uniform_partition = true;
    search.ignore_memory = options.ignore_memory;
    const placer::SearchResult found = placer::search(profile, oracle, search);
    if (!found.best) {
      p.note = found.infeasible_reason;
      out.push_back(std::move(p));
      continue;
    }
    p.plan = *found.best;
    p.predicted_seconds = p.plan->iteration_time.to_seconds();
    if (options.replay) {
      replay::PlanReplayOptions replay;
      replay.gradient_buckets = buckets;
      replay.overlap_gradient_sync = software.overlap_gradient_sync;
      replay.overlap_boundary_transfers = software.overlap_boundary_transfers;
      replay.seed = options.seed;
      const replay::RunRecord record = replay::replay_plan(*p.plan, profile, topology, replay);
      p.replayed_seconds = record.summary.iteration_time.to_seconds();
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ValidationCase> training_cases(const std::vector<TrainingPrediction>& predictions,
                                           const std::string& source) {
  std::vector<ValidationCase> out;
  std::map<std::string, std::pair<double, int>> mean;
  for (const TrainingPrediction& p : predictions) {
    const std::string where = source + ", " + p.run.id;
    out.push_back({"training", p.run.id + ": iteration time, predicted (s)", p.run.measured_seconds,
                   p.plan ? p.predicted_seconds : 0, 0.08, p.run.source + " (" + p.run.id + ")"});
    if (p.plan && p.replayed_seconds > 0) {
      out.push_back({"training", p.run.id + ": iteration time, replayed against predicted (s)",
                     p.predicted_seconds, p.replayed_seconds, 0.05,
                     "the cost model's estimate of the same plan"});
    }
    const double e = p.plan ? std::abs(p.error()) : 1;
    for (const std::string& key : {p.run.table, std::string("all")}) {
      mean[key].first += e;
      mean[key].second += 1;
    }
  }
  for (const auto& [key, sum] : mean) {
    out.push_back({"training",
                   fmt::format("mean |error| of the iteration time, {} ({} rows)",
                               key == "all" ? "all tables" : key + " table", sum.second),
                   0, sum.first / sum.second, 0.03,
                   "Calculon (SC'23) reports 3.65% on Korthikanti et al.'s Table 5"});
  }
  return out;
}

std::vector<ValidationCase> layer_cases(const workload::Accelerator& accelerator,
                                        placer::CommCost& network) {
  TrainingRun run;
  run.id = "22b";
  run.layers = 48;
  run.hidden = 6144;
  run.heads = 64;
  run.vocabulary = 51200;
  run.sequence = 2048;
  run.global_batch = 4;
  const workload::Model model = gpt_model(run);
  const std::string source =
      "Korthikanti et al. 2022 (arXiv 2205.05198) Table 4, 22B layer, via "
      "tests/validation/reference/measured/README.md";
  std::vector<ValidationCase> out;
  for (const bool sp : {false, true}) {
    const workload::Variant v =
        workload::build_variant(model, accelerator, {.tensor = 8, .sequence = sp, .micro_batch = 4},
                                {.precision = "fp16", .sequence_length = 2048, .global_batch = 4});
    const workload::Layer& l = v.layers[1];
    const placer::GroupLayout node{.member = {8, 1}};
    Time forward = l.forward;
    Time backward = l.backward;
    for (const workload::LayerCollective& c : l.collectives) {
      const Time t = network.collective(c.op, c.size, node);
      forward += t * c.recompute_count;  // the forward runs are those recomputation reruns
      const Time excess = t > c.overlap ? t - c.overlap : Time::zero();
      backward += excess * (c.count - c.recompute_count);
    }
    const std::string what = sp ? "sequence parallel" : "baseline";
    const auto add = [&](const std::string& name, double ms, Time got) {
      out.push_back({"layer", "22B layer, " + what + ", " + name + " (ms)", ms,
                     got.to_milliseconds(), 0.1, source});
    };
    add("forward", sp ? 7.2 : 7.7, forward);
    add("backward", sp ? 11.8 : 11.9, backward);
    if (!sp) add("backward with full recomputation", 19.5, backward + forward);
    add("backward with selective recomputation", sp ? 13.1 : 13.2,
        backward + l.selective_recompute);
  }
  return out;
}

}  // namespace nest::validate
