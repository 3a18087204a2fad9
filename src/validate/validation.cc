#include "nest/validate/validation.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include "nest/coll/calibration.h"
#include "nest/coll/collective.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/validate/training_runs.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace nest::validate {
namespace {

constexpr const char* kReference = "tests/validation/reference/README.md";

// Integer-picosecond times round each transfer's end; a schedule of `steps` steps may differ
// from the real-valued formula by up to one picosecond per step.
double rounding_tolerance(double seconds, int steps) {
  return std::max(1e-9, steps * 1e-12 / seconds);
}

std::vector<topo::DeviceId> first_devices(int n) {
  std::vector<topo::DeviceId> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), 0U);
  return g;
}

double simulate_seconds(const topo::Topology& t, coll::Operation op, coll::Algorithm algorithm,
                        Bytes size, int n) {
  const coll::CollectiveSpec spec{.op = op, .algorithm = algorithm, .size = size};
  const std::vector<std::vector<topo::DeviceId>> groups = {first_devices(n)};
  return coll::simulate(t, spec, groups).makespan.to_seconds();
}

// n devices on one non-blocking switch: every route is device -> switch -> device.
topo::Topology star(int n, Bandwidth rate, Time latency) {
  return topo::build_spine_leaf({.leaves = 1,
                                 .spines = 1,
                                 .hosts_per_leaf = n,
                                 .host_bandwidth = rate,
                                 .host_latency = latency,
                                 .uplink_bandwidth = rate,
                                 .uplink_latency = latency},
                                "star");
}

void collective_cases(std::vector<ValidationCase>& out) {
  const Bandwidth rate = Bandwidth::gigabytes_per_second(50);
  const Time link = Time::microseconds(1);
  const double B = rate.bytes_per_s();
  const double a = 2 * link.to_seconds();  // two cables per step through the switch
  const std::string source = std::string(kReference) + ", ring and halving-doubling formulas";
  const topo::Topology star16 = star(16, rate, link);
  using coll::Algorithm;
  using coll::Operation;
  struct Case {
    Operation op;
    Algorithm algorithm;
    int n;
    Bytes size;
  };
  for (const Case& c : {
           Case{Operation::kAllReduce, Algorithm::kRing, 8, Bytes::gibibytes(1)},
           Case{Operation::kAllReduce, Algorithm::kRing, 16, Bytes::mebibytes(256)},
           Case{Operation::kAllReduce, Algorithm::kRing, 8, Bytes::kibibytes(8)},
           Case{Operation::kReduceScatter, Algorithm::kRing, 8, Bytes::gibibytes(1)},
           Case{Operation::kAllGather, Algorithm::kRing, 8, Bytes::gibibytes(1)},
           Case{Operation::kAllReduce, Algorithm::kHalvingDoubling, 8, Bytes::gibibytes(1)},
           Case{Operation::kAllReduce, Algorithm::kHalvingDoubling, 16, Bytes::mebibytes(64)},
       }) {
    const double n = c.n;
    const double S = c.size.as_double();
    double expected = 0;
    int steps = 0;
    if (c.op == Operation::kAllReduce && c.algorithm == Algorithm::kRing) {
      expected = 2 * (n - 1) * a + 2 * (n - 1) / n * S / B;
      steps = 2 * (c.n - 1);
    } else if (c.op == Operation::kAllReduce) {
      const double log2n = std::log2(n);
      expected = 2 * log2n * a + 2 * (n - 1) / n * S / B;
      steps = 2 * static_cast<int>(log2n);
    } else {
      expected = (n - 1) * a + (n - 1) / n * S / B;
      steps = c.n - 1;
    }
    out.push_back(
        {"collective",
         fmt::format("{} {} n={} S={} B on a switch (s)", coll::algorithm_name(c.algorithm),
                     coll::operation_name(c.op), c.n, c.size.count()),
         expected, simulate_seconds(star16, c.op, c.algorithm, c.size, c.n),
         rounding_tolerance(expected, steps), source});
  }
  // A direct-link ring (1-D torus): one cable per step.
  const Bandwidth ring_rate = Bandwidth::gigabytes_per_second(100);
  const Time ring_link = Time::nanoseconds(500);
  const topo::Topology ring =
      topo::build_torus({.dims = {8}, .link_bandwidth = ring_rate, .link_latency = ring_link});
  const double S = Bytes::gibibytes(1).as_double();
  const double expected =
      2 * 7 * ring_link.to_seconds() + 2 * 7.0 / 8 * S / ring_rate.bytes_per_s();
  out.push_back(
      {"collective",
       fmt::format("ring allreduce n=8 S={} B on a 1-D torus (s)", Bytes::gibibytes(1).count()),
       expected,
       simulate_seconds(ring, Operation::kAllReduce, Algorithm::kRing, Bytes::gibibytes(1), 8),
       rounding_tolerance(expected, 14), source});
}

void nccl_cases(std::vector<ValidationCase>& out) {
  const std::string source =
      "NCCL-tests doc/PERFORMANCE.md (bus bandwidth), via " + std::string(kReference);
  using coll::Operation;
  for (const int n : {2, 8, 64}) {
    const double f = n;
    out.push_back({"nccl", fmt::format("allreduce bus-bandwidth factor n={}", n), 2 * (f - 1) / f,
                   coll::bus_bandwidth_factor(Operation::kAllReduce, n), 0, source});
    out.push_back({"nccl", fmt::format("all_gather bus-bandwidth factor n={}", n), (f - 1) / f,
                   coll::bus_bandwidth_factor(Operation::kAllGather, n), 0, source});
    out.push_back({"nccl", fmt::format("reduce_scatter bus-bandwidth factor n={}", n), (f - 1) / f,
                   coll::bus_bandwidth_factor(Operation::kReduceScatter, n), 0, source});
  }
  // "A perfect ring shows bus bandwidth = link bandwidth": up to the latency share of the
  // time, 2(n-1)·a / t = 28 us / 37.6 ms < 1e-3 here.
  const Bandwidth rate = Bandwidth::gigabytes_per_second(50);
  const topo::Topology t = star(8, rate, Time::microseconds(1));
  const Bytes size = Bytes::gibibytes(1);
  for (const Operation op : {Operation::kAllReduce, Operation::kAllGather}) {
    const double seconds = simulate_seconds(t, op, coll::Algorithm::kRing, size, 8);
    const double busbw = size.as_double() / seconds * coll::bus_bandwidth_factor(op, 8);
    out.push_back(
        {"nccl",
         fmt::format("ring {} bus bandwidth n=8 on 50 GB/s links (B/s)", coll::operation_name(op)),
         rate.bytes_per_s(), busbw, 1e-3, source});
  }
}

// One row of a measured nccl-tests table: size and time.
struct MeasuredPoint {
  std::int64_t bytes = 0;
  double seconds = 0;
};

std::vector<MeasuredPoint> read_measured_curve(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    throw Error::input(
        "cannot open the measured NCCL curve",
        {.file = file.string(), .expected = "nccl-allreduce-dgx-h100.tsv (see --reference)"});
  }
  std::vector<MeasuredPoint> points;
  std::string line;
  int number = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line.rfind("size_bytes\ttime_us", 0) != 0) {
        throw Error::input("unexpected header", {.file = file.string(),
                                                 .line = number,
                                                 .value = line,
                                                 .expected = "size_bytes, time_us, ..."});
      }
      header = true;
      continue;
    }
    std::istringstream fields(line);
    MeasuredPoint p;
    double us = 0;
    if (!(fields >> p.bytes >> us) || p.bytes < 1 || !(us > 0)) {
      throw Error::input("malformed row", {.file = file.string(),
                                           .line = number,
                                           .value = line,
                                           .expected = "size_bytes and time_us > 0"});
    }
    p.seconds = us * 1e-6;
    points.push_back(p);
  }
  if (points.empty()) {
    throw Error::input("no measurements", {.file = file.string(), .expected = "rows of sizes"});
  }
  return points;
}

// The collective as NCCL runs it under the topology's model: the tuner's choice, with chunks
// and channels left to resolve.
coll::TunedRun tuned_allreduce(const coll::CalibratedNetwork& network, Bytes size, int n,
                               std::optional<coll::Algorithm> fixed = std::nullopt) {
  coll::CollectiveSpec spec{.op = coll::Operation::kAllReduce,
                            .algorithm = fixed.value_or(coll::Algorithm::kRing),
                            .size = size,
                            .chunks = 0};
  spec.channels = 0;
  const std::vector<std::vector<topo::DeviceId>> groups = {first_devices(n)};
  if (fixed) {
    return {coll::resolve(spec, network, groups.front()), coll::simulate(network, spec, groups)};
  }
  return coll::simulate_fastest(network, spec, groups);
}

double busbw_of(const coll::TunedRun& run, int n) {
  return run.spec.size.as_double() / run.result.makespan.to_seconds() *
         coll::bus_bandwidth_factor(coll::Operation::kAllReduce, n);
}

void measured_collective_cases(std::vector<ValidationCase>& out, const ValidationInputs& inputs) {
  const std::filesystem::path topologies = inputs.workloads_root / "topologies";
  const std::filesystem::path curve_file = inputs.measured / "nccl-allreduce-dgx-h100.tsv";
  const std::string curve_source =
      "NVIDIA/dgxc-benchmarking nccl-tests all_reduce_perf, via " + curve_file.filename().string();
  const std::string figures =
      "NCCL bus bandwidths of NVIDIA engineers (NCCL issues), via measured/README.md";
  const topo::Topology dgx = topo::load_topology((topologies / "dgx_h100.yaml").string());
  const coll::CalibratedNetwork h100(dgx);
  // Each size within 10% from 64 KiB up, 25% below; then the worst size of each range.
  struct Worst {
    ValidationCase c;
    double ratio = -1;  // error / tolerance
  };
  Worst above;
  Worst below;
  for (const MeasuredPoint& p : read_measured_curve(curve_file)) {
    const coll::TunedRun run = tuned_allreduce(h100, Bytes(p.bytes), 8);
    const bool large = p.bytes >= 64 * 1024;
    ValidationCase c{"collective-measured",
                     fmt::format("dgx-h100 allreduce {} B (us, {} {})", p.bytes,
                                 coll::algorithm_name(run.spec.algorithm),
                                 topo::protocol_name(run.result.protocol)),
                     p.seconds * 1e6,
                     run.result.makespan.to_seconds() * 1e6,
                     large ? 0.10 : 0.25,
                     curve_source};
    Worst& w = large ? above : below;
    if (c.error() / c.tolerance > w.ratio) w = {c, c.error() / c.tolerance};
    out.push_back(std::move(c));
  }
  for (Worst* w : {&below, &above}) {
    if (w->ratio < 0) continue;
    w->c.name = fmt::format("dgx-h100 allreduce curve {}, worst size: {}",
                            w == &above ? "from 64 KiB" : "below 64 KiB", w->c.name);
    out.push_back(w->c);
  }
  // Ring bus bandwidth inside one node at 16 GiB (nccl-tests' largest sizes).
  const Bytes large = Bytes::gibibytes(16);
  out.push_back({"collective-measured", "dgx-h100 ring allreduce bus bandwidth, 16 GiB (B/s)",
                 370e9, busbw_of(tuned_allreduce(h100, large, 8, coll::Algorithm::kRing), 8), 0.05,
                 figures});
  const topo::Topology a100 = topo::load_topology((topologies / "dgx_a100.yaml").string());
  const coll::CalibratedNetwork a100_network(a100);
  out.push_back({"collective-measured", "dgx-a100 ring allreduce bus bandwidth, 16 GiB (B/s)",
                 230e9,
                 busbw_of(tuned_allreduce(a100_network, large, 8, coll::Algorithm::kRing), 8), 0.05,
                 figures});
  // Eight nodes: the tuner's allreduce over all 64 GPUs reaches 8 NICs' worth (46-49 GB/s each).
  const topo::Topology rail = topo::load_topology((topologies / "h100_rail_64.yaml").string());
  const coll::CalibratedNetwork rail_network(rail);
  const coll::TunedRun cluster = tuned_allreduce(rail_network, large, 64);
  out.push_back({"collective-measured",
                 fmt::format("h100-rail-64 allreduce bus bandwidth, 16 GiB, {} x{} (B/s)",
                             coll::algorithm_name(cluster.spec.algorithm), cluster.spec.channels),
                 8 * 47.5e9, busbw_of(cluster, 64), 0.10, figures});
}

void parameter_cases(std::vector<ValidationCase>& out, const std::filesystem::path& models) {
  const std::string source = std::string(kReference) + ", parameter counts (official configs)";
  auto load = [&](const std::string& name) {
    return workload::count_parameters(workload::load_model((models / (name + ".yaml")).string()));
  };
  struct Published {
    const char* model;
    double total;
  };
  for (const Published& p :
       {Published{"gpt3-175b", 174'604'259'328.0}, Published{"llama2-7b", 6'738'415'616.0},
        Published{"llama3-70b", 70'553'706'496.0}, Published{"llama3.1-405b", 405'853'388'800.0},
        Published{"bert-large", 335'141'888.0}}) {
    out.push_back({"parameters", fmt::format("{} total parameters", p.model), p.total,
                   static_cast<double>(load(p.model).total), 0, source});
  }
  // Published to four significant digits: half a unit of the last digit is the tolerance.
  const workload::ParameterCount mixtral = load("mixtral-8x7b");
  out.push_back({"parameters", "mixtral-8x7b total parameters", 46.70e9,
                 static_cast<double>(mixtral.total), 0.005e9 / 46.70e9, source});
  out.push_back({"parameters", "mixtral-8x7b active parameters per token", 12.88e9,
                 static_cast<double>(mixtral.active), 0.005e9 / 12.88e9, source});
}

void activation_and_flops_cases(std::vector<ValidationCase>& out,
                                const std::filesystem::path& workloads) {
  const workload::Accelerator h100 =
      workload::load_accelerator((workloads / "accelerators" / "h100-sxm.yaml").string());
  const std::string korthikanti =
      "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, "
      "Table 2";
  struct Shape {
    const char* model;
    double s, b, h, a;
  };
  for (const Shape& m :
       {Shape{"gpt3-175b", 2048, 1, 12288, 96}, Shape{"bert-large", 512, 4, 1024, 16}}) {
    const workload::Model model =
        workload::load_model((workloads / "models" / (std::string(m.model) + ".yaml")).string());
    const int b = static_cast<int>(m.b);
    auto block = [&](const workload::ParallelConfig& config) {
      return workload::build_variant(model, h100, config, {}).layers[1];
    };
    const double sbh = m.s * m.b * m.h;
    const double none = sbh * (34 + 5 * m.a * m.s / m.h);
    out.push_back({"activation",
                   fmt::format("{} block, no parallelism: sbh(34+5as/h) (B)", m.model), none,
                   block({.micro_batch = b}).activation_bytes.as_double(), 0, korthikanti});
    for (const int t : {2, 8}) {
      const double tp = sbh * (10 + 24.0 / t + 5 * m.a * m.s / (m.h * t));
      out.push_back(
          {"activation",
           fmt::format("{} block, tensor parallel {}: sbh(10+24/t+5as/(ht)) (B)", m.model, t), tp,
           block({.tensor = t, .micro_batch = b}).activation_bytes.as_double(), 0, korthikanti});
      out.push_back(
          {"activation",
           fmt::format("{} block, sequence parallel {}: sbh/t(34+5as/h) (B)", m.model, t), none / t,
           block({.tensor = t, .sequence = true, .micro_batch = b}).activation_bytes.as_double(), 0,
           korthikanti});
      out.push_back({"activation",
                     fmt::format("{} block, sequence parallel {} + selective recomputation: "
                                 "sbh·34/t (B)",
                                 m.model, t),
                     sbh * 34 / t,
                     block({.tensor = t, .sequence = true, .micro_batch = b})
                         .selective_activation_bytes.as_double(),
                     0, korthikanti + " and §4.2"});
    }
    out.push_back({"activation",
                   fmt::format("{} block, full recomputation keeps its input: 2sbh (B)", m.model),
                   2 * sbh, block({.tensor = 8, .micro_batch = b}).input_bytes.as_double(), 0,
                   korthikanti});
  }

  // Narayanan et al. 2021 §5.1: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per iteration with
  // full recomputation. The formula drops the small terms (norms, softmax, biases), so 1%.
  const workload::Model gpt3 =
      workload::load_model((workloads / "models" / "gpt3-175b.yaml").string());
  for (const int t : {1, 8}) {
    const workload::Variant v =
        workload::build_variant(gpt3, h100, {.tensor = t, .micro_batch = 2}, {});
    double per_device = 0;
    for (const workload::Layer& l : v.layers) {
      per_device += l.flops.count();
      if (l.recompute > Time::zero()) per_device += l.flops.count() / 3;  // the forward again
    }
    const double B = static_cast<double>(gpt3.global_batch);
    const double s = static_cast<double>(gpt3.sequence_length);
    const double l = static_cast<double>(gpt3.layers);
    const double h = static_cast<double>(gpt3.hidden);
    const double V = static_cast<double>(gpt3.vocabulary);
    out.push_back({"flops", fmt::format("gpt3-175b iteration with recomputation, t={} (FLOP)", t),
                   96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)),
                   per_device * t * static_cast<double>(v.microbatches), 1e-2,
                   "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU "
                   "Clusters Using Megatron-LM, §5.1"});
  }
}

void nest_cases(std::vector<ValidationCase>& out, const ValidationInputs& inputs) {
  std::ifstream in(inputs.nest_table);
  if (!in) {
    throw Error::input(
        "cannot open the published NEST table",
        {.file = inputs.nest_table.string(), .expected = "expected-nest.tsv (see --reference)"});
  }
  std::string line;
  std::getline(in, line);
  if (line != "profile\tdevices\titeration_ms\tstages\tdata_parallel\ttensor_parallel") {
    throw Error::input("unexpected header", {.file = inputs.nest_table.string(),
                                             .line = 1,
                                             .value = line,
                                             .expected = "the columns of expected-nest.tsv"});
  }
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string profile;
    std::int64_t devices = 0;
    double iteration_ms = 0;
    if (!(fields >> profile >> devices >> iteration_ms) || devices < 1 || iteration_ms <= 0) {
      throw Error::input("malformed row", {.file = inputs.nest_table.string(),
                                           .line = number,
                                           .value = line,
                                           .expected = "profile, devices, iteration_ms, ..."});
    }
    const workload::LayerProfile p =
        workload::load_layer_profile((inputs.nest_profiles / profile).string());
    placer::ZeroCommCost zero;
    placer::SearchOptions options;
    options.cost = {.rules = workload::MemoryRules::kNestArtifact, .devices = devices};
    const placer::SearchResult result = placer::search(p, zero, options);
    const double got = result.best ? result.best->iteration_time.to_milliseconds() : 0.0;
    out.push_back({"nest", fmt::format("{} on {} devices, best iteration (ms)", profile, devices),
                   iteration_ms, got, 1e-3,
                   "NEST artifact (arXiv 2603.06798), nest-artifact/expected-nest.tsv"});
  }
}

}  // namespace

double ValidationCase::error() const noexcept {
  const double diff = std::abs(got - expected);
  return expected == 0 ? diff : diff / std::abs(expected);
}

bool ValidationCase::passed() const noexcept { return std::isfinite(got) && error() <= tolerance; }

std::vector<ValidationCase> run_validation(const ValidationInputs& inputs) {
  std::vector<ValidationCase> out;
  collective_cases(out);
  nccl_cases(out);
  const std::filesystem::path workloads = inputs.workloads_root / "workloads";
  parameter_cases(out, workloads / "models");
  activation_and_flops_cases(out, workloads);
  nest_cases(out, inputs);
  measured_collective_cases(out, inputs);
  if (!inputs.training_runs.empty()) {
    const workload::Accelerator accelerator =
        workload::load_accelerator(inputs.training_accelerator.string());
    const topo::Topology topology = topo::load_topology(inputs.training_topology.string());
    placer::OracleCommCost oracle(topology);
    for (ValidationCase& c : layer_cases(accelerator, oracle)) out.push_back(std::move(c));
    const auto predictions = predict_training_runs(load_training_runs(inputs.training_runs),
                                                   accelerator, topology, oracle);
    for (ValidationCase& c : training_cases(predictions, inputs.training_runs.string())) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace nest::validate
