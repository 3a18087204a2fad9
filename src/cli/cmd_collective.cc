// `nest collective`: simulates one collective (and optional concurrent copies of it) on a
// topology and reports the simulated time, the alpha-beta closed form, their difference (the
// contention), NCCL's algorithm and bus bandwidths, and the busiest links.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/coll/calibration.h"
#include "nest/coll/closed_form.h"
#include "nest/coll/collective.h"
#include "nest/coll/group.h"
#include "nest/coll/measure.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

namespace nest::cli {
namespace {

constexpr const char* kUsage =
    "nest collective --topology FILE --op OP (--size SIZE | --sizes MIN:MAX[:FACTOR]) "
    "[--algorithm ALG|auto] [--group GROUP] [--chunks N] [--channels N] [--levels A,B,...] "
    "[--level-algorithms A,B,...] "
    "[--concurrent stride:S[:K]] [--ideal] [--seed N] [--links K] [--events] [--json | --csv]";

// A time with six significant digits in a unit that suits it.
std::string precise_time(double seconds) {
  const double a = std::abs(seconds);
  if (a >= 1.0 || a == 0.0) return fmt::format("{:.6g} s", seconds);
  if (a >= 1e-3) return fmt::format("{:.6g} ms", seconds * 1e3);
  if (a >= 1e-6) return fmt::format("{:.6g} us", seconds * 1e6);
  if (a >= 1e-9) return fmt::format("{:.6g} ns", seconds * 1e9);
  return fmt::format("{:.6g} ps", seconds * 1e12);
}

// "ring,direct,double_binary_tree": ASTRA-sim's names of the per-dimension algorithms.
std::vector<coll::Algorithm> parse_level_algorithms(const std::string& text) {
  std::vector<coll::Algorithm> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    if (name == "ring") {
      out.push_back(coll::Algorithm::kRing);
    } else if (name == "direct") {
      out.push_back(coll::Algorithm::kDirect);
    } else if (name == "halving_doubling") {
      out.push_back(coll::Algorithm::kHalvingDoubling);
    } else if (name == "double_binary_tree" || name == "tree") {
      out.push_back(coll::Algorithm::kTree);
    } else {
      throw Error::input("unknown level algorithm",
                         {.key = "--level-algorithms",
                          .value = name,
                          .expected = "ring, direct, halving_doubling or double_binary_tree, "
                                      "comma-separated, e.g. ring,direct,ring"});
    }
    start = comma + 1;
  }
  return out;
}

// The per-level algorithms with ASTRA-sim's names (double_binary_tree for NEST's tree).
std::vector<std::string> level_algorithm_names(const coll::CollectiveSpec& spec) {
  std::vector<std::string> out;
  for (const coll::Algorithm a : spec.level_algorithms) {
    out.emplace_back(a == coll::Algorithm::kTree ? "double_binary_tree" : coll::algorithm_name(a));
  }
  return out;
}

std::vector<int> parse_levels(const std::string& text) {
  std::vector<int> levels;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 1) {
      throw Error::input("malformed level sizes",
                         {.key = "--levels", .value = text, .expected = "sizes >= 1, e.g. 8,4"});
    }
    levels.push_back(value);
    pos = comma + 1;
  }
  return levels;
}

std::string link_name(const topo::Topology& t, topo::LinkId id) {
  const topo::Link& l = t.link(id);
  return t.node(l.src).name + " -> " + t.node(l.dst).name;
}

using coll::nccl_count;

// One simulated size: what the report prints.
using Row = coll::Measurement;

struct RunInputs {
  const coll::CalibratedNetwork& network;
  bool tuned = false;  // --algorithm auto: the fastest candidate
  const std::vector<std::vector<topo::DeviceId>>& groups;
  coll::SimulationOptions simulation;
  std::string size_key;   // the option that names the size, for simulator range errors
  std::string size_text;  // its value
};

Row run_row(const RunInputs& in, const coll::CollectiveSpec& spec) {
  try {
    return coll::measure(
        in.network,
        {.spec = spec, .tuned = in.tuned, .groups = in.groups, .simulation = in.simulation});
  } catch (const Error& e) {
    // The simulator names no input when its times leave its range: the size is what does it.
    if (e.kind() != ErrorKind::kInput || !e.context().key.empty()) throw;
    throw Error::input(
        e.message(), {.key = in.size_key, .value = in.size_text, .expected = e.context().expected});
  }
}

// The sweep as nccl-tests prints it (size, count, time, algbw, busbw), with the closed form and
// the difference beside.
// The protocol a calibrated run used; "-" on the ideal network, which has none.
std::string protocol_text(const coll::SimulationResult& r) {
  return r.calibrated ? topo::protocol_name(r.protocol) : "-";
}

std::string model_text(const coll::CalibratedNetwork& network) {
  return network.calibrated() ? network.model()->name
                              : "ideal (line rates and latencies of the topology)";
}

void print_sweep_text(const coll::CalibratedNetwork& network, const std::string& algorithm,
                      const std::string& group_text, int n, const std::string& sizes_text,
                      const std::vector<Row>& rows) {
  const topo::Topology& topology = network.physical();
  const coll::CollectiveSpec& first = rows.front().spec;
  std::cout << fmt::format("collective:  {} {}, {} ranks ({}), sizes {} ({} sizes)\n",
                           coll::operation_name(first.op), algorithm, n, group_text, sizes_text,
                           rows.size());
  std::cout << fmt::format("topology:    {} ({}, {} devices)\n", topology.name(),
                           topo::family_name(topology.family()), topology.num_devices());
  std::cout << fmt::format("model:       {}\n", model_text(network));
  std::cout << fmt::format("{:>14} {:>12} {:>16} {:>6} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
                           "size (B)", "count", "algorithm", "proto", "time (us)", "algbw (GB/s)",
                           "busbw (GB/s)", "closed (us)", "difference");
  for (const Row& r : rows) {
    std::cout << fmt::format(
        "{:>14} {:>12} {:>16} {:>6} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>+9.2f}%\n",
        r.spec.size.count(), nccl_count(r.spec.op, r.spec.size, n),
        coll::algorithm_name(r.spec.algorithm), protocol_text(r.result), r.simulated_s * 1e6,
        r.algbw_bytes_per_s / 1e9, r.busbw_bytes_per_s / 1e9, r.closed.seconds * 1e6,
        r.closed.seconds > 0 ? 100 * r.difference_s / r.closed.seconds : 0.0);
  }
}

void print_sweep_csv(int n, const std::vector<Row>& rows) {
  std::cout << "size_bytes,count,op,algorithm,protocol,channels,time_s,algbw_bytes_per_s,"
               "busbw_bytes_per_s,closed_form_s,difference_s,base_latency_s,method\n";
  for (const Row& r : rows) {
    std::cout << fmt::format(
        "{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{}\n", r.spec.size.count(),
        nccl_count(r.spec.op, r.spec.size, n), coll::operation_name(r.spec.op),
        coll::algorithm_name(r.spec.algorithm), protocol_text(r.result), r.spec.channels,
        r.simulated_s, r.algbw_bytes_per_s, r.busbw_bytes_per_s, r.closed.seconds, r.difference_s,
        r.result.base_latency.to_seconds(),
        r.result.contention_free ? "contention-free" : "events");
  }
}

nlohmann::ordered_json sweep_row_json(int n, const Row& r) {
  return {{"size_bytes", r.spec.size.count()},
          {"count", nccl_count(r.spec.op, r.spec.size, n)},
          {"algorithm", coll::algorithm_name(r.spec.algorithm)},
          {"protocol", protocol_text(r.result)},
          {"channels", r.spec.channels},
          {"base_latency_s", r.result.base_latency.to_seconds()},
          {"time_s", r.simulated_s},
          {"algbw_bytes_per_s", r.algbw_bytes_per_s},
          {"busbw_bytes_per_s", r.busbw_bytes_per_s},
          {"closed_form_s", r.closed.seconds},
          {"difference_s", r.difference_s},
          {"flows", r.result.flows},
          {"events", r.result.events},
          {"method", r.result.contention_free ? "contention-free evaluation" : "event simulation"}};
}

}  // namespace

int run_collective(std::span<char* const> args, const Context&) {
  std::string file;
  std::string op_text;
  std::string algorithm_text;
  std::string group_text;
  std::string size_text;
  std::string sizes_text;
  std::string levels_text;
  std::string level_algorithms_text;
  std::string concurrent_text = "none";
  int chunks = 0;
  int channels = 0;
  std::uint64_t seed = 0;
  int links = 5;
  bool ideal = false;
  bool events = false;
  bool json = false;
  bool csv = false;
  Options o(kUsage);
  o.add("topology", &file, "topology YAML file or name (topologies/)")
      .add("op", &op_text,
           "allreduce, reduce_scatter, all_gather, all_to_all, broadcast, send, reduce, gather, "
           "scatter or sendrecv")
      .add("size", &size_text,
           "message size with its unit (1GiB), as nccl-tests counts it: allreduce and broadcast "
           "the buffer, all_gather and reduce_scatter the full gathered buffer, all_to_all what "
           "each rank sends")
      .add("sizes", &sizes_text,
           "a sweep in nccl-tests' -b/-e/-f notation, MIN:MAX[:FACTOR] (binary K, M, G; factor 2 "
           "by default), e.g. 8:4G or 1K:1G:4: one row per size")
      .add("algorithm", &algorithm_text,
           "ring, tree, halving_doubling, direct, pairwise, hierarchical, torus, nvls, or auto "
           "(the fastest of what NCCL's tuner weighs on the group; the default under a collective "
           "model; ideal default: ring, hierarchical on a kind: dimensions topology; pairwise for "
           "all_to_all; direct for send, gather, scatter, sendrecv)")
      .add("group", &group_text,
           "devices in rank order, ids and inclusive ranges: 0-7,16-23 (default: every device); "
           "the first is the broadcast root and the sender of send")
      .add("chunks", &chunks,
           "pipeline pieces per step (ring, tree, hierarchical, torus; 0: pieces of 512 KiB for "
           "trees and chains under a collective model, else 1)")
      .add("channels", &channels,
           "rings of a ring allreduce, reduce_scatter or all_gather (0: the collective model's, "
           "at most the group's devices per node, when the group spans nodes rail by rail; else "
           "1)")
      .add("ideal", &ideal,
           "ignore the topology's collective model: line rates, the topology's latencies")
      .add("levels", &levels_text,
           "hierarchical/torus level sizes, innermost first (default: from the topology's "
           "domains)")
      .add("level-algorithms", &level_algorithms_text,
           "hierarchical: the algorithm of each level, innermost first: ring, direct, "
           "halving_doubling, double_binary_tree (last level of an allreduce) (default: ring, "
           "or on a kind: dimensions topology each dimension's)")
      .add("concurrent", &concurrent_text,
           "copies running at the same time: none (default), stride:S (the group shifted by S, "
           "2S, ... while devices last) or stride:S:K (K groups in all)")
      .add("seed", &seed, "ECMP seed")
      .add("links", &links, "how many of the busiest links to list")
      .add("events", &events,
           "always run the event simulation (by default a run in which every link carries its "
           "flows one after another is evaluated without events, with the same result)")
      .add("json", &json, "print one JSON object instead of text")
      .add("csv", &csv, "print the rows as CSV (with --sizes)");
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  const config::Limits limits = limits_of(limit_args);
  if (file.empty()) throw Error::input("missing --topology", {.key = "--topology"});
  if (op_text.empty()) throw Error::input("missing --op", {.key = "--op"});

  if (size_text.empty() == sizes_text.empty()) {
    throw Error::input("give exactly one of --size and --sizes",
                       {.key = size_text.empty() ? "--size" : "--sizes",
                        .expected = "--size SIZE (one collective) or --sizes MIN:MAX[:FACTOR]"});
  }
  const bool sweep = !sizes_text.empty();
  if (csv && !sweep) {
    throw Error::input("--csv prints a sweep",
                       {.key = "--csv", .expected = "--sizes MIN:MAX[:FACTOR] with --csv"});
  }
  if (csv && json) {
    throw Error::input("choose one output format", {.key = "--csv", .expected = "--csv or --json"});
  }
  coll::CollectiveSpec spec;
  spec.op = coll::parse_operation(op_text);
  const bool auto_algorithm = algorithm_text == "auto";
  spec.algorithm = algorithm_text.empty() || auto_algorithm ? coll::default_algorithm(spec.op)
                                                            : coll::parse_algorithm(algorithm_text);
  std::vector<Bytes> sizes;
  if (sweep) {
    sizes = coll::parse_size_sweep(sizes_text);
  } else {
    try {
      sizes.push_back(parse_bytes(size_text));
    } catch (const Error& e) {
      throw e.at_key("--size");
    }
  }
  spec.size = sizes.front();
  spec.chunks = chunks;
  spec.channels = channels;
  if (o.given("chunks") && chunks < 1) {
    throw Error::input(
        "bad chunk count",
        {.key = "--chunks", .value = std::to_string(chunks), .expected = "an integer >= 1"});
  }
  if (o.given("channels") && channels < 1) {
    throw Error::input(
        "bad channel count",
        {.key = "--channels", .value = std::to_string(channels), .expected = "an integer >= 1"});
  }
  if (!levels_text.empty()) spec.levels = parse_levels(levels_text);
  if (!level_algorithms_text.empty()) {
    spec.level_algorithms = parse_level_algorithms(level_algorithms_text);
  }
  if (links < 0) {
    throw Error::input("must not be negative",
                       {.key = "--links", .value = std::to_string(links), .expected = ">= 0"});
  }

  const topo::Topology topology = topo::load_topology(find_topology(file), limits);
  const std::size_t n_devices = topology.num_devices();
  if (!o.given("group")) {
    group_text = "0-" + std::to_string(n_devices - 1);
  } else if (group_text.empty()) {
    throw Error::input("empty group",
                       {.key = "--group", .expected = "device ids and ranges, e.g. 0-7"});
  }
  const std::vector<topo::DeviceId> group = coll::parse_group(group_text, n_devices);
  const auto groups = coll::concurrent_groups(group, concurrent_text, n_devices);
  const int n = static_cast<int>(group.size());

  const coll::CalibratedNetwork network(topology, ideal);
  // ASTRA-sim runs a collective dimension by dimension: so does NEST on its networks.
  if (algorithm_text.empty() && !network.calibrated() &&
      topology.family() == topo::Family::kDimensions) {
    spec.algorithm = coll::default_algorithm(topology, spec.op, groups);
  }
  // Under a collective model the default is what NCCL does: the fastest algorithm for the group.
  const bool tuned = auto_algorithm || (algorithm_text.empty() && network.calibrated());
  if (tuned && !levels_text.empty()) {
    throw Error::input("--levels fixes a hierarchical algorithm",
                       {.key = "--levels",
                        .value = levels_text,
                        .expected = "--algorithm hierarchical or torus with --levels"});
  }
  RunInputs inputs{network,
                   tuned,
                   groups,
                   {.seed = seed, .busiest_links = sweep ? 0 : links, .events_only = events},
                   sweep ? "--sizes" : "--size",
                   sweep ? sizes_text : size_text};
  if (sweep) {
    std::vector<Row> rows;
    rows.reserve(sizes.size());
    for (const Bytes size : sizes) {
      spec.size = size;
      inputs.size_text = std::to_string(size.count()) + " B";
      rows.push_back(run_row(inputs, spec));
    }
    if (csv) {
      print_sweep_csv(n, rows);
    } else if (json) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Row& r : rows) list.push_back(sweep_row_json(n, r));
      const nlohmann::ordered_json j = {{"topology", topology.name()},
                                        {"model", model_text(network)},
                                        {"op", coll::operation_name(spec.op)},
                                        {"ranks", n},
                                        {"groups", groups.size()},
                                        {"sizes", sizes_text},
                                        {"rows", list}};
      std::cout << j.dump() << "\n";
    } else {
      print_sweep_text(network, tuned ? "auto" : std::string(coll::algorithm_name(spec.algorithm)),
                       group_text, n, sizes_text, rows);
    }
    return 0;
  }

  const Row row = run_row(inputs, spec);
  const coll::CollectiveSpec& resolved = row.spec;
  const coll::SimulationResult& result = row.result;
  const coll::ClosedForm& closed = row.closed;
  const double simulated = row.simulated_s;
  const double difference = row.difference_s;
  const double algbw = row.algbw_bytes_per_s;
  const double busbw = row.busbw_bytes_per_s;
  const Time fastest = row.fastest;
  const char* method = result.contention_free ? "contention-free evaluation" : "event simulation";

  const bool leveled = resolved.algorithm == coll::Algorithm::kHierarchical ||
                       resolved.algorithm == coll::Algorithm::kTorus;

  if (json) {
    nlohmann::ordered_json busiest = nlohmann::ordered_json::array();
    for (const coll::LinkUse& u : result.busiest) {
      const topo::Link& l = topology.link(u.link);
      busiest.push_back({{"link", u.link},
                         {"src", topology.node(l.src).name},
                         {"dst", topology.node(l.dst).name},
                         {"bytes", u.bytes},
                         {"busy_s", u.busy.to_seconds()},
                         {"peak_flows", u.peak_flows}});
    }
    const nlohmann::ordered_json j = {
        {"topology", topology.name()},
        {"model", model_text(network)},
        {"op", coll::operation_name(spec.op)},
        {"algorithm", coll::algorithm_name(resolved.algorithm)},
        {"tuned", tuned},
        {"protocol", protocol_text(result)},
        {"base_latency_s", result.base_latency.to_seconds()},
        {"ranks", n},
        {"groups", groups.size()},
        {"size_bytes", spec.size.count()},
        {"chunks", resolved.chunks},
        {"channels", resolved.channels},
        {"levels", leveled ? resolved.levels : std::vector<int>{}},
        {"level_algorithms", level_algorithm_names(resolved)},
        {"simulated_s", simulated},
        {"fastest_group_s", fastest.to_seconds()},
        {"closed_form_s", closed.seconds},
        {"closed_form_latency_s", closed.latency_seconds},
        {"closed_form_bandwidth_s", closed.bandwidth_seconds},
        {"closed_form_steps", closed.steps},
        {"difference_s", difference},
        {"algbw_bytes_per_s", algbw},
        {"busbw_bytes_per_s", busbw},
        {"flows", result.flows},
        {"events", result.events},
        {"method", method},
        {"busiest_links", busiest},
    };
    std::cout << j.dump() << "\n";
    return 0;
  }

  std::string levels;
  for (int l : leveled ? resolved.levels : std::vector<int>{}) {
    levels += (levels.empty() ? "" : "x") + std::to_string(l);
  }
  const std::vector<std::string> per_level = level_algorithm_names(resolved);
  if (!per_level.empty()) {
    std::string names;
    for (const std::string& a : per_level) names += (names.empty() ? "" : ", ") + a;
    levels += " (" + names + ")";
  }
  std::cout << fmt::format(
      "collective:  {} {}{}, {} ranks ({}), {}{}{}{}\n", coll::operation_name(spec.op),
      coll::algorithm_name(resolved.algorithm), levels.empty() ? "" : " " + levels, n, group_text,
      format_bytes(spec.size),
      resolved.chunks > 1 ? fmt::format(", {} chunks", resolved.chunks) : "",
      resolved.channels > 1 ? fmt::format(", {} channels", resolved.channels) : "",
      tuned ? " (fastest of the tuner's candidates)" : "");
  std::cout << fmt::format("topology:    {} ({}, {} devices)\n", topology.name(),
                           topo::family_name(topology.family()), n_devices);
  if (network.calibrated()) {
    std::cout << fmt::format("model:       {}: protocol {}, base latency {}\n", model_text(network),
                             topo::protocol_name(result.protocol),
                             precise_time(result.base_latency.to_seconds()));
  }
  if (groups.size() > 1) {
    std::cout << fmt::format("concurrent:  {} groups ({}); fastest group {}\n", groups.size(),
                             concurrent_text, precise_time(fastest.to_seconds()));
  }
  std::cout << fmt::format("simulated:   {}\n", precise_time(simulated));
  std::cout << fmt::format(
      "closed form: {} ({} steps: {}latency {} + bandwidth {}; bottleneck {})\n",
      precise_time(closed.seconds), closed.steps,
      closed.base_latency_seconds > 0 ? "base " + precise_time(closed.base_latency_seconds) + " + "
                                      : std::string(),
      precise_time(closed.latency_seconds), precise_time(closed.bandwidth_seconds),
      format_bandwidth(closed.bottleneck));
  // Each step's closed form rounds on its own: a picosecond per step is rounding, not a cause.
  const double rounding = 1e-12 * std::max<std::uint32_t>(1, closed.steps);
  const char* cause = difference > rounding    ? "contention"
                      : difference < -rounding ? "ranks ahead of the step-by-step form"
                                               : "equal within rounding";
  std::cout << fmt::format("difference:  {}{} ({:+.2f}%, {})\n", difference >= 0 ? "+" : "",
                           precise_time(difference),
                           closed.seconds > 0 ? 100 * difference / closed.seconds : 0.0, cause);
  std::cout << fmt::format("algbw:       {}\n",
                           format_bandwidth(Bandwidth::bytes_per_second(algbw)));
  std::cout << fmt::format("busbw:       {}\n",
                           format_bandwidth(Bandwidth::bytes_per_second(busbw)));
  std::cout << fmt::format("flows:       {} ({} events, {})\n", result.flows, result.events,
                           method);
  if (!result.busiest.empty()) {
    std::cout << "busiest links:\n";
    for (const coll::LinkUse& u : result.busiest) {
      std::cout << fmt::format(
          "  {:<32} {:>12}  busy {}  peak {} flows\n", link_name(topology, u.link),
          format_bytes(Bytes(static_cast<std::int64_t>(std::llround(u.bytes)))),
          precise_time(u.busy.to_seconds()), u.peak_flows);
    }
  }
  return 0;
}

}  // namespace nest::cli
