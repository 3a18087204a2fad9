// `nest._nest`: the C++ half of the Python module (python/nest/ is the other half). It binds the
// job API (nest/job/job.h), topologies and replayed runs; the Python package turns its columns
// into numpy structured arrays and pandas DataFrames. Every search, replay and sweep releases
// the GIL; `nest::Error` becomes `nest.InputError` / `nest.InternalError` with the same message
// and fields as the command line prints.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nest/coll/calibration.h"
#include "nest/coll/collective.h"
#include "nest/coll/group.h"
#include "nest/coll/measure.h"
#include "nest/core/catalog.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/io/plan_file.h"
#include "nest/io/run_writers.h"
#include "nest/job/job.h"
#include "nest/placer/plan.h"
#include "nest/replay/plan_replay.h"
#include "nest/sweep/evaluate.h"
#include "nest/sweep/runner.h"
#include "nest/sweep/study.h"
#include "nest/topo/loader.h"
#include "nest/topo/metrics.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace nest::python {
namespace {

// The data roots of the module: the ones the package gives (its installation's share/nest, the
// source tree of a build-tree module) before the standard ones.
Catalog catalog_of(const std::vector<fs::path>& roots) {
  std::vector<fs::path> all = roots;
  const Catalog standard = Catalog::standard();
  all.insert(all.end(), standard.roots().begin(), standard.roots().end());
  return Catalog(std::move(all));
}

template <typename T>
py::array_t<T> column(std::size_t n, const auto& get) {
  py::array_t<T> out(static_cast<py::ssize_t>(n));
  auto v = out.template mutable_unchecked<1>();
  for (std::size_t i = 0; i < n; ++i) v(static_cast<py::ssize_t>(i)) = get(i);
  return out;
}

// --- Topology -------------------------------------------------------------------------------

struct PyTopology {
  std::shared_ptr<const topo::Topology> topology;
  std::string file;  // empty for one built from parameters
};

py::dict describe(const PyTopology& t) {
  const topo::Topology& topology = *t.topology;
  const topo::TopologySummary s = topo::summarize(topology);
  py::dict d;
  d["name"] = topology.name();
  d["kind"] = topo::family_name(topology.family());
  d["devices"] = s.devices;
  d["switches"] = s.switches;
  d["links"] = s.cables;
  d["directed_links"] = topology.num_links();
  d["diameter_hops"] = s.diameter_hops;
  d["injection_bytes_per_s"] = s.injection.bytes_per_s();
  d["bisection_bytes_per_s"] = s.bisection.bytes_per_s();
  d["bisection_method"] = s.bisection_exact_form ? "closed_form" : "max_flow";
  d["domain_sizes"] = topology.domain_sizes();
  return d;
}

py::dict node_columns(const PyTopology& t) {
  const topo::Topology& topology = *t.topology;
  const std::size_t n = topology.num_nodes();
  py::list names;
  for (std::size_t i = 0; i < n; ++i)
    names.append(topology.node(static_cast<topo::NodeId>(i)).name);
  py::dict d;
  d["id"] = column<std::uint32_t>(n, [](std::size_t i) { return static_cast<std::uint32_t>(i); });
  d["name"] = names;
  d["kind"] = column<std::uint8_t>(n, [&](std::size_t i) {
    return static_cast<std::uint8_t>(topology.node(static_cast<topo::NodeId>(i)).kind);
  });
  d["tier"] = column<std::int32_t>(
      n, [&](std::size_t i) { return topology.node(static_cast<topo::NodeId>(i)).tier; });
  return d;
}

py::dict link_columns(const PyTopology& t) {
  const auto links = t.topology->links();
  const std::size_t n = links.size();
  py::dict d;
  d["src"] = column<std::uint32_t>(n, [&](std::size_t i) { return links[i].src; });
  d["dst"] = column<std::uint32_t>(n, [&](std::size_t i) { return links[i].dst; });
  d["bandwidth_bytes_per_s"] =
      column<double>(n, [&](std::size_t i) { return links[i].bandwidth.bytes_per_s(); });
  d["latency_s"] = column<double>(n, [&](std::size_t i) { return links[i].latency.to_seconds(); });
  return d;
}

// --- Job, Plan, Run -------------------------------------------------------------------------

std::optional<std::string> text_of(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return py::str(d[key]).cast<std::string>();
}

template <typename T>
std::optional<T> number_of(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<T>();
}

// A quantity given as a string with its unit ("50 GB/s") or as a plain SI float.
std::optional<Bandwidth> rate_of(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  if (py::isinstance<py::str>(d[key])) {
    try {
      return parse_bandwidth(d[key].cast<std::string>());
    } catch (const Error& e) {
      throw e.at_key(key);
    }
  }
  return Bandwidth::bytes_per_second(d[key].cast<double>());
}

std::optional<Time> time_of(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  if (py::isinstance<py::str>(d[key])) {
    try {
      return parse_time(d[key].cast<std::string>());
    } catch (const Error& e) {
      throw e.at_key(key);
    }
  }
  return Time::seconds(d[key].cast<double>());
}

// The keyword arguments of `nest.Job(...)` (already checked against the known names by the
// Python side) as a spec.
job::JobSpec spec_of(const py::dict& kw) {
  job::JobSpec s;
  if (auto v = text_of(kw, "profile")) s.workload.profile = *v;
  if (auto v = text_of(kw, "model")) s.workload.model = *v;
  if (auto v = text_of(kw, "accelerator")) s.workload.accelerator = *v;
  if (auto v = text_of(kw, "topology")) s.topology = *v;
  if (auto v = number_of<std::int64_t>(kw, "devices")) s.devices = *v;
  if (auto v = text_of(kw, "rules")) s.rules = placer::parse_rules(*v);
  if (auto v = text_of(kw, "network")) s.network = job::parse_network_model(*v);
  s.flat_bandwidth = rate_of(kw, "flat_bandwidth");
  s.flat_latency = time_of(kw, "flat_latency");
  s.memory_bandwidth = rate_of(kw, "memory_bandwidth");
  if (auto v = number_of<std::uint64_t>(kw, "seed")) s.seed = *v;
  if (auto v = number_of<bool>(kw, "ideal")) s.ideal = *v;
  if (auto v = text_of(kw, "algorithm")) s.algorithm = coll::parse_algorithm(*v);
  if (auto v = number_of<std::uint64_t>(kw, "anneal_seed")) s.anneal_seed = *v;
  if (auto v = number_of<int>(kw, "anneal_steps")) s.anneal_steps = *v;
  if (auto v = number_of<int>(kw, "verify")) s.verify = *v;
  if (auto v = number_of<int>(kw, "threads")) s.threads = *v;
  if (auto v = text_of(kw, "fixed_plan")) s.fixed_plan = *v;
  if (kw.contains("baselines") && !kw["baselines"].is_none()) {
    s.baselines = kw["baselines"].cast<std::vector<std::string>>();
  }
  workload::BuildOptions& b = s.workload.build;
  if (auto v = text_of(kw, "precision")) b.precision = *v;
  if (auto v = number_of<bool>(kw, "flash_attention")) b.flash_attention = *v;
  if (auto v = number_of<std::int64_t>(kw, "seq")) b.sequence_length = *v;
  if (auto v = number_of<std::int64_t>(kw, "global_batch")) b.global_batch = *v;
  placer::CandidateOptions& c = s.workload.candidates;
  if (auto v = number_of<int>(kw, "max_tp")) c.max_tensor_parallel = *v;
  if (kw.contains("micro_batches") && !kw["micro_batches"].is_none()) {
    c.micro_batches = kw["micro_batches"].cast<std::vector<int>>();
  }
  if (kw.contains("orders") && !kw["orders"].is_none()) {
    s.search.orders.clear();
    for (const auto& o : kw["orders"].cast<std::vector<std::string>>()) {
      s.search.orders.push_back(placer::parse_placement_order(o));
    }
  }
  // The dimensions a configuration fixes (`nest place --tp --pp ...`).
  const auto one = [&](const char* key) {
    const auto v = number_of<int>(kw, key);
    return v ? std::vector<int>{*v} : std::vector<int>{};
  };
  if (auto v = number_of<int>(kw, "tp")) c.tensor_parallel = {*v};
  if (auto v = number_of<int>(kw, "ep")) c.expert_parallel = {*v};
  if (auto v = number_of<int>(kw, "cp")) c.context_parallel = {*v};
  if (auto v = number_of<int>(kw, "mb")) c.micro_batches = {*v};
  if (auto v = number_of<bool>(kw, "sp")) c.sequence_parallel = *v;
  placer::SearchOptions& search = s.search;
  search.stages = one("pp");
  search.data_parallel = one("dp");
  search.virtual_stages = one("vp");
  if (auto v = number_of<int>(kw, "zero")) search.zero_stages = {*v};
  if (auto v = text_of(kw, "recompute")) search.recompute_modes = {workload::parse_recompute(*v)};
  if (auto v = text_of(kw, "order")) search.orders = {placer::parse_placement_order(*v)};
  if (auto v = text_of(kw, "partition")) {
    if (*v != "balanced" && *v != "uniform") {
      throw Error::input("unknown partition",
                         {.key = "partition", .value = *v, .expected = "balanced or uniform"});
    }
    search.uniform_partition = *v == "uniform";
  }
  if (auto v = number_of<bool>(kw, "ignore_memory")) search.ignore_memory = *v;
  if (auto v = number_of<bool>(kw, "tp_overlap")) b.tp_comm_overlap = *v;
  if (auto v = number_of<std::int64_t>(kw, "grad_accumulation_bytes")) {
    b.gradient_accumulation_bytes = *v;
  }
  if (auto v = number_of<int>(kw, "grad_buckets")) search.cost.gradient_buckets = *v;
  if (auto v = number_of<bool>(kw, "grad_overlap")) search.cost.overlap_gradient_sync = *v;
  if (auto v = number_of<bool>(kw, "p2p_overlap")) search.cost.overlap_boundary_transfers = *v;
  return s;
}

// An error of the job's spec under the keyword argument that set the field.
Error as_keyword(const Error& e) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"tensor_parallel", "tp"},
      {"expert_parallel", "ep"},
      {"context_parallel", "cp"},
      {"micro_batch", "mb"},
      {"sequence_parallel", "sp"},
      {"search.stages", "pp"},
      {"search.data_parallel", "dp"},
      {"search.virtual_stages", "vp"},
      {"zero_stages", "zero"},
      {"recompute_modes", "recompute"},
      {"search.uniform_partition", "partition"},
      {"gradient_buckets", "grad_buckets"},
      {"gradient_accumulation_bytes", "grad_accumulation_bytes"}};
  const ErrorContext& c = e.context();
  if (!c.file.empty()) return e;
  for (const auto& [field, name] : kNames) {
    if (c.key != field) continue;
    ErrorContext renamed = c;
    renamed.key = std::string(name);
    return Error(e.kind(), e.message(), renamed);
  }
  return e;
}

// Runs `f`, rethrowing an error of the job's spec under the keyword argument that set the field
// (the search's and the baselines' as well as the constructor's).
template <class F>
auto keyword_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw as_keyword(e);
  }
}

struct PyJob {
  std::shared_ptr<job::Job> job;
};

struct PyPlan {
  std::shared_ptr<job::Job> job;  // the job that priced it
  placer::Plan plan;
  std::vector<placer::BaselineResult> baselines;
};

struct PyRun {
  replay::RunRecord record;
};

std::string plan_json(const PyPlan& p, const fs::path& where) {
  return io::plan_to_json(p.job->plan_inputs(where), p.plan, p.baselines);
}

py::dict summary_of(const replay::Summary& s) {
  py::dict d;
  d["iteration_time_s"] = s.iteration_time.to_seconds();
  d["estimate_s"] = s.estimate.to_seconds();
  d["replay_error"] =
      s.estimate.ps() > 0
          ? (s.iteration_time.to_seconds() - s.estimate.to_seconds()) / s.estimate.to_seconds()
          : 0.0;
  d["sequences_per_second"] = s.sequences_per_s;
  d["tokens_per_second"] = s.tokens_per_s;
  d["mfu"] = s.model_flops_utilization > 0 ? py::object(py::float_(s.model_flops_utilization))
                                           : py::object(py::none());
  d["bubble_fraction"] = s.bubble_fraction;
  d["exposed_communication_s"] = s.exposed_communication.to_seconds();
  d["peak_memory_bytes"] = s.peak_memory.count();
  return d;
}

py::dict timeline_columns(const replay::RunRecord& r) {
  const auto& t = r.timeline;
  const std::size_t n = t.size();
  py::dict d;
  d["device"] = column<std::uint32_t>(n, [&](std::size_t i) { return t[i].device; });
  d["stream"] = column<std::uint8_t>(
      n, [&](std::size_t i) { return static_cast<std::uint8_t>(t[i].stream); });
  d["kind"] =
      column<std::uint8_t>(n, [&](std::size_t i) { return static_cast<std::uint8_t>(t[i].kind); });
  d["stage"] = column<std::int32_t>(n, [&](std::size_t i) { return t[i].stage; });
  d["microbatch"] = column<std::int32_t>(n, [&](std::size_t i) { return t[i].microbatch; });
  d["first_layer"] = column<std::int32_t>(n, [&](std::size_t i) { return t[i].first_layer; });
  d["last_layer"] = column<std::int32_t>(n, [&](std::size_t i) { return t[i].last_layer; });
  d["start_s"] = column<double>(n, [&](std::size_t i) { return t[i].start.to_seconds(); });
  d["end_s"] = column<double>(n, [&](std::size_t i) { return t[i].end.to_seconds(); });
  return d;
}

py::dict memory_columns(const replay::RunRecord& r) {
  const auto& m = r.memory;
  const std::size_t n = m.size();
  py::dict d;
  d["device"] = column<std::uint32_t>(n, [&](std::size_t i) { return m[i].device; });
  d["time_s"] = column<double>(n, [&](std::size_t i) { return m[i].at.to_seconds(); });
  d["bytes"] = column<std::int64_t>(n, [&](std::size_t i) { return m[i].bytes.count(); });
  d["category"] = column<std::uint8_t>(
      n, [&](std::size_t i) { return static_cast<std::uint8_t>(m[i].category); });
  return d;
}

py::dict link_use_columns(const replay::RunRecord& r) {
  const auto& l = r.links;
  const std::size_t n = l.size();
  py::dict d;
  d["src"] = column<std::uint32_t>(n, [&](std::size_t i) { return l[i].src; });
  d["dst"] = column<std::uint32_t>(n, [&](std::size_t i) { return l[i].dst; });
  d["bytes"] = column<double>(n, [&](std::size_t i) { return l[i].bytes; });
  d["busy_s"] = column<double>(n, [&](std::size_t i) { return l[i].busy.to_seconds(); });
  d["utilization"] = column<double>(n, [&](std::size_t i) { return l[i].utilization; });
  return d;
}

py::dict collective_columns(const replay::RunRecord& r) {
  const auto& c = r.collectives;
  const std::size_t n = c.size();
  py::list op;
  py::list algorithm;
  py::list group;
  for (const auto& row : c) {
    op.append(row.op);
    algorithm.append(row.algorithm);
    group.append(
        py::array_t<std::uint32_t>(static_cast<py::ssize_t>(row.group.size()), row.group.data()));
  }
  py::dict d;
  d["op"] = op;
  d["algorithm"] = algorithm;
  d["group"] = group;
  d["bytes"] = column<std::int64_t>(n, [&](std::size_t i) { return c[i].size.count(); });
  d["start_s"] = column<double>(n, [&](std::size_t i) { return c[i].start.to_seconds(); });
  d["end_s"] = column<double>(n, [&](std::size_t i) { return c[i].end.to_seconds(); });
  d["closed_form_s"] =
      column<double>(n, [&](std::size_t i) { return c[i].closed_form.to_seconds(); });
  return d;
}

std::vector<std::string> enum_names(const char* (*name)(int), int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.emplace_back(name(i));
  return out;
}

// --- Collectives ----------------------------------------------------------------------------

// The figures of one size, with the keys of `nest collective --json`.
py::dict measurement_dict(const coll::Measurement& m, const coll::CollectiveSpec& asked, int ranks,
                          std::size_t groups, bool tuned, const coll::CalibratedNetwork& network,
                          const topo::Topology& topology) {
  const bool leveled = m.spec.algorithm == coll::Algorithm::kHierarchical ||
                       m.spec.algorithm == coll::Algorithm::kTorus;
  py::list busiest;
  for (const coll::LinkUse& u : m.result.busiest) {
    const topo::Link& l = topology.link(u.link);
    py::dict link;
    link["link"] = u.link;
    link["src"] = topology.node(l.src).name;
    link["dst"] = topology.node(l.dst).name;
    link["bytes"] = u.bytes;
    link["busy_s"] = u.busy.to_seconds();
    link["peak_flows"] = u.peak_flows;
    busiest.append(link);
  }
  py::dict d;
  d["topology"] = topology.name();
  d["model"] = network.calibrated()
                   ? network.model()->name
                   : std::string("ideal (line rates and latencies of the topology)");
  d["op"] = std::string(coll::operation_name(asked.op));
  d["algorithm"] = std::string(coll::algorithm_name(m.spec.algorithm));
  d["tuned"] = tuned;
  d["protocol"] = m.result.calibrated ? std::string(topo::protocol_name(m.result.protocol)) : "-";
  d["base_latency_s"] = m.result.base_latency.to_seconds();
  d["ranks"] = ranks;
  d["groups"] = groups;
  d["size_bytes"] = asked.size.count();
  d["count"] = coll::nccl_count(asked.op, asked.size, ranks);
  d["chunks"] = m.spec.chunks;
  d["channels"] = m.spec.channels;
  d["levels"] = leveled ? m.spec.levels : std::vector<int>{};
  // ASTRA-sim's names, as `nest collective --json` prints them.
  std::vector<std::string> level_algorithms;
  for (const coll::Algorithm a : m.spec.level_algorithms) {
    level_algorithms.emplace_back(a == coll::Algorithm::kTree ? "double_binary_tree"
                                                              : coll::algorithm_name(a));
  }
  d["level_algorithms"] = level_algorithms;
  d["simulated_s"] = m.simulated_s;
  d["fastest_group_s"] = m.fastest.to_seconds();
  d["closed_form_s"] = m.closed.seconds;
  d["closed_form_latency_s"] = m.closed.latency_seconds;
  d["closed_form_bandwidth_s"] = m.closed.bandwidth_seconds;
  d["closed_form_steps"] = m.closed.steps;
  d["difference_s"] = m.difference_s;
  d["algbw_bytes_per_s"] = m.algbw_bytes_per_s;
  d["busbw_bytes_per_s"] = m.busbw_bytes_per_s;
  d["flows"] = m.result.flows;
  d["events"] = m.result.events;
  d["method"] = m.result.contention_free ? "contention-free evaluation" : "event simulation";
  d["busiest_links"] = busiest;
  return d;
}

py::list collectives(const PyTopology& t, const std::string& op,
                     const std::vector<std::int64_t>& sizes, const std::string& algorithm,
                     const std::vector<topo::DeviceId>& group_given, const std::string& concurrent,
                     int chunks, int channels, const std::vector<int>& levels, std::uint64_t seed,
                     bool ideal, int links, bool events) {
  const topo::Topology& topology = *t.topology;
  coll::CollectiveSpec spec;
  spec.op = coll::parse_operation(op);
  const bool auto_algorithm = algorithm == "auto";
  spec.algorithm = algorithm.empty() || auto_algorithm ? coll::default_algorithm(spec.op)
                                                       : coll::parse_algorithm(algorithm);
  spec.chunks = chunks;
  spec.channels = channels;
  spec.levels = levels;
  if (links < 0) {
    throw Error::input("must not be negative",
                       {.key = "links", .value = std::to_string(links), .expected = ">= 0"});
  }
  std::vector<topo::DeviceId> group = group_given;
  if (group.empty()) {
    group.resize(topology.num_devices());
    for (std::size_t i = 0; i < group.size(); ++i) group[i] = static_cast<topo::DeviceId>(i);
  }
  const auto groups = coll::concurrent_groups(group, concurrent, topology.num_devices());
  const int n = static_cast<int>(group.size());
  py::list out;
  std::vector<coll::Measurement> measured;
  {
    py::gil_scoped_release release;
    const coll::CalibratedNetwork network(topology, ideal);
    // As `nest collective`: hierarchical by default on ASTRA-sim's dimension networks.
    if (algorithm.empty() && !network.calibrated() &&
        topology.family() == topo::Family::kDimensions) {
      spec.algorithm = coll::default_algorithm(topology, spec.op, groups);
    }
    const bool tuned = auto_algorithm || (algorithm.empty() && network.calibrated());
    if (tuned && !levels.empty()) {
      throw Error::input(
          "levels fixes a hierarchical algorithm",
          {.key = "levels", .expected = "algorithm hierarchical or torus with levels"});
    }
    const coll::SimulationOptions simulation{
        .seed = seed, .busiest_links = sizes.size() > 1 ? 0 : links, .events_only = events};
    for (const std::int64_t size : sizes) {
      spec.size = Bytes(size);
      measured.push_back(coll::measure(
          network, {.spec = spec, .tuned = tuned, .groups = groups, .simulation = simulation}));
    }
    py::gil_scoped_acquire acquire;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      spec.size = Bytes(sizes[i]);
      out.append(measurement_dict(measured[i], spec, n, groups.size(), tuned, network, topology));
    }
  }
  return out;
}

// --- Errors ---------------------------------------------------------------------------------

// The exception types live in the module (no static state); the translator finds them there.
void register_errors(py::module_& m) {
  (void)py::exception<Error>(m, "InputError", PyExc_ValueError);
  (void)py::exception<Error>(m, "InternalError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const py::object module = py::module_::import("nest._nest");
      const py::object type =
          module.attr(e.kind() == ErrorKind::kInput ? "InputError" : "InternalError");
      const py::object error = type(e.what());
      const ErrorContext& c = e.context();
      error.attr("message") = e.message();
      error.attr("file") = c.file;
      error.attr("line") = c.line;
      error.attr("key") = c.key;
      error.attr("value") = c.value;
      error.attr("expected") = c.expected;
      PyErr_SetObject(type.ptr(), error.ptr());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_nest, m) {
  m.doc() = "NEST's C++ core (use the `nest` package)";
  m.attr("__version__") = NEST_VERSION;
  register_errors(m);

  py::class_<PyTopology>(m, "Topology")
      .def_static(
          "load",
          [](const std::string& path_or_name, const std::vector<fs::path>& roots) {
            const std::string file =
                catalog_of(roots).find(DataKind::kTopology, path_or_name, "topology");
            return PyTopology{std::make_shared<const topo::Topology>(topo::load_topology(file)),
                              file};
          },
          py::arg("path_or_name"), py::arg("roots"))
      .def_static(
          "from_yaml",
          [](const std::string& text, const std::string& name) {
            return PyTopology{
                std::make_shared<const topo::Topology>(topo::load_topology_string(text, name)), ""};
          },
          py::arg("text"), py::arg("name"))
      .def_property_readonly("name", [](const PyTopology& t) { return t.topology->name(); })
      .def_property_readonly("file", [](const PyTopology& t) { return t.file; })
      .def_property_readonly("devices",
                             [](const PyTopology& t) { return t.topology->num_devices(); })
      .def_property_readonly("switches",
                             [](const PyTopology& t) { return t.topology->num_switches(); })
      .def("describe", &describe)
      .def("node_columns", &node_columns)
      .def("link_columns", &link_columns);

  py::class_<PyJob>(m, "Job")
      .def(py::init([](const py::dict& kw, const std::vector<fs::path>& roots,
                       const PyTopology* topology) {
             job::JobSpec spec = spec_of(kw);
             const Catalog catalog = catalog_of(roots);
             job::Prebuilt prebuilt;
             if (topology != nullptr) {
               prebuilt.topology = topology->topology;
               prebuilt.topology_name = topology->topology->name();
             }
             py::gil_scoped_release release;
             try {
               return PyJob{
                   std::make_shared<job::Job>(std::move(spec), std::move(prebuilt), catalog)};
             } catch (const Error& e) {
               throw as_keyword(e);
             }
           }),
           py::arg("options"), py::arg("roots"), py::arg("topology") = nullptr)
      .def("place",
           [](PyJob& j) {
             py::gil_scoped_release release;
             return keyword_errors([&] { return PyPlan{j.job, j.job->place(), {}}; });
           })
      .def("baselines",
           [](PyJob& j) {
             std::vector<placer::BaselineResult> found;
             {
               py::gil_scoped_release release;
               found = keyword_errors([&] { return j.job->baselines(); });
             }
             py::dict out;
             for (auto& b : found) {
               out[py::str(b.name)] =
                   b.plan ? py::cast(PyPlan{j.job, std::move(*b.plan), {}}) : py::none();
             }
             return out;
           })
      .def("place_with_baselines",
           [](PyJob& j) {
             py::gil_scoped_release release;
             return keyword_errors([&] {
               j.job->start_baselines();
               placer::Plan plan = j.job->place();
               return PyPlan{j.job, std::move(plan), j.job->baselines()};
             });
           })
      .def("evaluate",
           [](PyJob& j, const PyPlan& p) {
             py::gil_scoped_release release;
             placer::PlanChoice choice = p.plan.choice;
             choice.variant = placer::find_variant(j.job->profile(), p.plan.degrees);
             return keyword_errors([&] { return PyPlan{j.job, j.job->evaluate(choice), {}}; });
           })
      .def(
          "simulate",
          [](PyJob& j, const PyPlan& p, const std::string& schedule, int virtual_stages,
             int buckets) {
            // 0 (None in Python): the job's buckets, as the plan was priced.
            replay::PlanReplayOptions options{
                .virtual_stages = virtual_stages,
                .gradient_buckets =
                    buckets == 0 ? j.job->search_options().cost.gradient_buckets : buckets};
            if (schedule == "gpipe") {
              options.schedule = replay::Schedule::kGPipe;
            } else if (schedule == "interleaved") {
              options.schedule = replay::Schedule::kInterleaved;
            } else if (schedule != "1f1b") {
              throw Error::input(
                  "unknown schedule",
                  {.key = "schedule", .value = schedule, .expected = "1f1b, gpipe or interleaved"});
            }
            if (options.gradient_buckets < 1 ||
                options.gradient_buckets > replay::kMaxGradientBuckets) {
              throw Error::input(
                  "bucket count out of range",
                  {.key = "buckets",
                   .value = std::to_string(buckets),
                   .expected = "an integer in 1.." + std::to_string(replay::kMaxGradientBuckets)});
            }
            py::gil_scoped_release release;
            return PyRun{j.job->simulate(
                p.plan, {.replay = options, .command_line = "python: nest.Job.simulate"})};
          },
          py::arg("plan"), py::arg("schedule"), py::arg("virtual_stages"), py::arg("buckets"))
      .def_property_readonly("topology",
                             [](const PyJob& j) -> py::object {
                               if (j.job->topology() == nullptr) return py::none();
                               // Shares the job's topology without copying it.
                               auto shared =
                                   std::shared_ptr<const topo::Topology>(j.job, j.job->topology());
                               return py::cast(PyTopology{shared, j.job->topology_name()});
                             })
      .def_property_readonly("oracle_simulations",
                             [](const PyJob& j) { return j.job->oracle_stats().simulations; })
      .def("spec_json", [](const PyJob& j) {
        const job::JobSpec& s = j.job->spec();
        py::dict d;
        d["profile"] = s.workload.profile;
        d["model"] = s.workload.model;
        d["accelerator"] = s.workload.accelerator;
        d["topology"] = s.topology;
        d["devices"] = s.devices;
        d["rules"] = std::string(placer::to_string(s.rules));
        d["network"] = std::string(job::to_string(*s.network));
        d["seed"] = s.seed;
        return d;
      });

  py::class_<PyPlan>(m, "Plan")
      .def_static(
          "load",
          [](const fs::path& path, const std::vector<fs::path>& roots) {
            const Catalog catalog = catalog_of(roots);
            py::gil_scoped_release release;
            job::PlannedJob planned = job::load_plan(path, {}, catalog);
            auto owner = std::make_shared<job::Job>(std::move(planned.job));
            return PyPlan{owner, std::move(planned.plan), {}};
          },
          py::arg("path"), py::arg("roots"))
      .def(
          "to_json", [](const PyPlan& p, const fs::path& where) { return plan_json(p, where); },
          py::arg("where"))
      .def(
          "to_yaml",
          [](const PyPlan& p, const fs::path& where) {
            return p.job->plan_yaml(p.plan, p.baselines, where);
          },
          py::arg("where"))
      .def("job", [](const PyPlan& p) { return PyJob{p.job}; })
      // Integer picoseconds divided: the double nearest the exact decimal, as in the plan file
      // and `nest place --json`.
      .def_property_readonly(
          "iteration_time_s",
          [](const PyPlan& p) { return static_cast<double>(p.plan.iteration_time.ps()) / 1e12; })
      .def_property_readonly("fits", [](const PyPlan& p) { return p.plan.fits(); });

  py::class_<PyRun>(m, "Run")
      .def_property_readonly("summary", [](const PyRun& r) { return summary_of(r.record.summary); })
      .def("timeline_columns", [](const PyRun& r) { return timeline_columns(r.record); })
      .def("memory_columns", [](const PyRun& r) { return memory_columns(r.record); })
      .def("link_columns", [](const PyRun& r) { return link_use_columns(r.record); })
      .def("collective_columns", [](const PyRun& r) { return collective_columns(r.record); })
      .def_property_readonly("plan_yaml", [](const PyRun& r) { return r.record.meta.plan_yaml; })
      .def(
          "write_hdf5",
          [](const PyRun& r, const fs::path& path, bool all_devices) {
            py::gil_scoped_release release;
            io::write_hdf5(r.record, path, {.all_devices = all_devices});
          },
          py::arg("path"), py::kw_only(), py::arg("all_devices") = false)
      .def("write_trace",
           [](const PyRun& r, const fs::path& path) {
             py::gil_scoped_release release;
             io::write_trace_json(r.record, path);
           })
      .def("write_csv", [](const PyRun& r, const fs::path& path) {
        io::write_summary_csv(r.record.summary, path);
      });

  m.def("collectives", &collectives, py::arg("topology"), py::arg("op"), py::arg("sizes"),
        py::arg("algorithm"), py::arg("group"), py::arg("concurrent"), py::arg("chunks"),
        py::arg("channels"), py::arg("levels"), py::arg("seed"), py::arg("ideal"), py::arg("links"),
        py::arg("events"),
        "One dict per size, with the keys of `nest collective --json` (and `count`)");
  m.def("parse_sizes", [](const std::string& text) {
    std::vector<std::int64_t> out;
    for (const Bytes b : coll::parse_size_sweep(text)) out.push_back(b.count());
    return out;
  });
  m.def("parse_bytes", [](const std::string& text) { return parse_bytes(text).count(); });

  m.def(
      "names",
      [] {
        py::dict d;
        d["stream"] = enum_names([](int i) { return replay::to_string(replay::Stream(i)); }, 2);
        d["kind"] = enum_names([](int i) { return replay::to_string(replay::TaskKind(i)); }, 8);
        d["category"] =
            enum_names([](int i) { return replay::to_string(replay::MemoryCategory(i)); }, 4);
        d["node_kind"] = std::vector<std::string>{"device", "switch"};
        return d;
      },
      "The names of the enumerated columns, by value");

  m.def(
      "list",
      [](const std::string& kind, const std::vector<fs::path>& roots) {
        const Catalog catalog = catalog_of(roots);
        for (const DataKind k : {DataKind::kTopology, DataKind::kModel, DataKind::kAccelerator,
                                 DataKind::kProfile, DataKind::kStudy}) {
          if (to_string(k) == kind) return catalog.list(k);
        }
        throw Error::input("unknown kind",
                           {.key = "kind",
                            .value = kind,
                            .expected = "topology, model, accelerator, profile or study"});
      },
      py::arg("kind"), py::arg("roots"));

  m.def(
      "sweep",
      [](const fs::path& study_file, const fs::path& output, int threads,
         const std::vector<fs::path>& roots) {
        const sweep::Study study = sweep::load_study(study_file.string(), {}, catalog_of(roots));
        const sweep::StudyEvaluator evaluator(study);
        sweep::SweepOptions options{.output = output,
                                    .overwrite = true,
                                    .threads = threads,
                                    .progress = Progress::Mode::kNever};
        py::gil_scoped_release release;
        const sweep::SweepReport r = sweep::run_sweep(study, evaluator, options);
        return r.csv.string();
      },
      py::arg("study"), py::arg("output"), py::arg("threads"), py::arg("roots"),
      "Runs a study into `output` and returns the path of its results.csv");
}

}  // namespace nest::python
