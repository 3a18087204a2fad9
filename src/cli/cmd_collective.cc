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
#include "nest/coll/closed_form.h"
#include "nest/coll/collective.h"
#include "nest/coll/group.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

namespace nest::cli {
namespace {

constexpr const char* kUsage =
    "nest collective --topology FILE --op OP --size SIZE [--algorithm ALG] [--group GROUP] "
    "[--chunks N] [--levels A,B,...] [--concurrent stride:S[:K]] [--seed N] [--links K] [--events] "
    "[--json]";

// A time with six significant digits in a unit that suits it.
std::string precise_time(double seconds) {
  const double a = std::abs(seconds);
  if (a >= 1.0 || a == 0.0) return fmt::format("{:.6g} s", seconds);
  if (a >= 1e-3) return fmt::format("{:.6g} ms", seconds * 1e3);
  if (a >= 1e-6) return fmt::format("{:.6g} us", seconds * 1e6);
  if (a >= 1e-9) return fmt::format("{:.6g} ns", seconds * 1e9);
  return fmt::format("{:.6g} ps", seconds * 1e12);
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

}  // namespace

int run_collective(std::span<char* const> args) {
  po::options_description options("options");
  std::string file;
  std::string op_text;
  std::string algorithm_text;
  std::string group_text;
  std::string size_text;
  std::string levels_text;
  std::string concurrent_text = "none";
  int chunks = 1;
  std::uint64_t seed = 0;
  int links = 5;
  options.add_options()("topology", po::value(&file)->required(), "topology YAML file")(
      "op", po::value(&op_text)->required(),
      "allreduce, reduce_scatter, all_gather, all_to_all, broadcast or send")(
      "size", po::value(&size_text)->required(),
      "message size with its unit (1GiB), as nccl-tests counts it: allreduce and broadcast the "
      "buffer, all_gather and reduce_scatter the full gathered buffer, all_to_all what each "
      "rank sends")(
      "algorithm", po::value(&algorithm_text),
      "ring, tree, halving_doubling, direct, pairwise, hierarchical or torus (default: ring; "
      "pairwise for all_to_all; direct for send)")(
      "group", po::value(&group_text),
      "devices in rank order, ids and inclusive ranges: 0-7,16-23 (default: every device); the "
      "first is the broadcast root and the sender of send")(
      "chunks", po::value(&chunks), "pipeline pieces per step (ring, tree, hierarchical, torus)")(
      "levels", po::value(&levels_text),
      "hierarchical/torus level sizes, innermost first (default: from the topology's domains)")(
      "concurrent", po::value(&concurrent_text),
      "copies running at the same time: none (default), stride:S (the group shifted by S, 2S, "
      "... while devices last) or stride:S:K (K groups in all)")("seed", po::value(&seed),
                                                                 "ECMP seed (default 0)")(
      "links", po::value(&links), "how many of the busiest links to list (default 5)")(
      "events",
      "always run the event simulation (by default a run in which every link carries its flows "
      "one after another is evaluated without events, with the same result)")(
      "json", "print one JSON object instead of text");
  add_limit_options(options);
  po::positional_options_description positional;
  po::variables_map vm;
  if (!parse_options(args, kUsage, options, positional, vm)) return 0;

  coll::CollectiveSpec spec;
  spec.op = coll::parse_operation(op_text);
  spec.algorithm = algorithm_text.empty() ? coll::default_algorithm(spec.op)
                                          : coll::parse_algorithm(algorithm_text);
  try {
    spec.size = parse_bytes(size_text);
  } catch (const Error& e) {
    throw e.at_key("--size");
  }
  spec.chunks = chunks;
  if (!levels_text.empty()) spec.levels = parse_levels(levels_text);
  if (links < 0) {
    throw Error::input("must not be negative",
                       {.key = "--links", .value = std::to_string(links), .expected = ">= 0"});
  }

  const topo::Topology topology = topo::load_topology(find_topology(file), limits_of(vm));
  const std::size_t n_devices = topology.num_devices();
  if (vm.count("group") == 0) {
    group_text = "0-" + std::to_string(n_devices - 1);
  } else if (group_text.empty()) {
    throw Error::input("empty group",
                       {.key = "--group", .expected = "device ids and ranges, e.g. 0-7"});
  }
  const std::vector<topo::DeviceId> group = coll::parse_group(group_text, n_devices);
  const auto groups = coll::concurrent_groups(group, concurrent_text, n_devices);
  const coll::CollectiveSpec resolved = coll::resolve(spec, topology, group);
  const int n = static_cast<int>(group.size());

  coll::SimulationResult result;
  try {
    result = coll::simulate(
        topology, resolved, groups,
        {.seed = seed, .busiest_links = links, .events_only = vm.count("events") != 0});
  } catch (const Error& e) {
    // The simulator names no input when its times leave its range: the size is what does it.
    if (e.kind() != ErrorKind::kInput || !e.context().key.empty()) throw;
    throw Error::input(e.message(),
                       {.key = "--size", .value = size_text, .expected = e.context().expected});
  }
  const char* method = result.contention_free ? "contention-free evaluation" : "event simulation";

  // Closed form: each group alone (no contention); the layout's is the slowest group's.
  topo::Router router(topology, seed);
  coll::ClosedForm closed;
  for (const auto& g : groups) {
    const coll::CollectiveSpec r = coll::resolve(spec, topology, g);
    const coll::ClosedForm cf =
        coll::closed_form(*coll::lower_program(r, static_cast<int>(g.size())), g, router, seed);
    if (cf.seconds >= closed.seconds) closed = cf;
  }

  const double simulated = result.makespan.to_seconds();
  // The simulator keeps whole picoseconds: a difference below that is the closed form's rounding.
  const double difference =
      static_cast<double>(result.makespan.ps() - std::llround(closed.seconds * 1e12)) * 1e-12;
  const double algbw = simulated > 0 ? spec.size.as_double() / simulated : 0;
  const double busbw = algbw * coll::bus_bandwidth_factor(spec.op, n);
  const Time fastest = *std::min_element(result.durations.begin(), result.durations.end());

  const bool leveled =
      spec.algorithm == coll::Algorithm::kHierarchical || spec.algorithm == coll::Algorithm::kTorus;

  if (vm.count("json") != 0) {
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
        {"op", coll::operation_name(spec.op)},
        {"algorithm", coll::algorithm_name(spec.algorithm)},
        {"ranks", n},
        {"groups", groups.size()},
        {"size_bytes", spec.size.count()},
        {"chunks", spec.chunks},
        {"levels", leveled ? resolved.levels : std::vector<int>{}},
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
  std::cout << fmt::format(
      "collective:  {} {}{}, {} ranks ({}), {}{}\n", coll::operation_name(spec.op),
      coll::algorithm_name(spec.algorithm), levels.empty() ? "" : " " + levels, n, group_text,
      format_bytes(spec.size), spec.chunks > 1 ? fmt::format(", {} chunks", spec.chunks) : "");
  std::cout << fmt::format("topology:    {} ({}, {} devices)\n", topology.name(),
                           topo::family_name(topology.family()), n_devices);
  if (groups.size() > 1) {
    std::cout << fmt::format("concurrent:  {} groups ({}); fastest group {}\n", groups.size(),
                             concurrent_text, precise_time(fastest.to_seconds()));
  }
  std::cout << fmt::format("simulated:   {}\n", precise_time(simulated));
  std::cout << fmt::format(
      "closed form: {} ({} steps: latency {} + bandwidth {}; bottleneck {})\n",
      precise_time(closed.seconds), closed.steps, precise_time(closed.latency_seconds),
      precise_time(closed.bandwidth_seconds), format_bandwidth(closed.bottleneck));
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
