#include "nest/coll/simulate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "coll/uncontended.h"
#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/topo/router.h"

namespace nest::coll {
namespace {

void check_group(const topo::Topology& topology, std::span<const topo::DeviceId> group) {
  if (group.empty()) {
    throw Error::input("empty group", {.key = "--group", .expected = "at least 1 device"});
  }
  std::vector<topo::DeviceId> sorted(group.begin(), group.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.back() >= topology.num_devices()) {
    throw Error::input("device out of range",
                       {.key = "--group",
                        .value = std::to_string(sorted.back()),
                        .expected = "devices 0-" + std::to_string(topology.num_devices() - 1)});
  }
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    throw Error::input(
        "device listed twice",
        {.key = "--group", .value = std::to_string(*dup), .expected = "distinct devices"});
  }
}

// The `count` links with the most bytes (ties: lower id first), in that order.
std::vector<LinkUse> busiest(std::vector<LinkUse> uses, int count) {
  const auto k = std::min<std::size_t>(uses.size(), static_cast<std::size_t>(std::max(count, 0)));
  std::partial_sort(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(k), uses.end(),
                    [](const LinkUse& a, const LinkUse& b) {
                      return a.bytes != b.bytes ? a.bytes > b.bytes : a.link < b.link;
                    });
  uses.resize(k);
  return uses;
}

}  // namespace

std::vector<int> hierarchy_levels(const topo::Topology& topology,
                                  std::span<const topo::DeviceId> group) {
  const auto n = static_cast<int>(group.size());
  std::vector<int> levels;
  int below = 1;
  for (int size : topology.domain_sizes()) {
    const auto domain_of = [size](topo::DeviceId d) {
      return d / static_cast<std::uint32_t>(size);
    };
    // The group must list each domain's devices as one run, and every run be equally long.
    std::vector<std::uint32_t> domains;
    int count = 0;
    for (std::size_t i = 0; i < group.size();) {
      std::size_t j = i;
      while (j < group.size() && domain_of(group[j]) == domain_of(group[i])) ++j;
      const auto run = static_cast<int>(j - i);
      if (count == 0) count = run;
      if (run != count || count % below != 0) {
        throw Error::input("hierarchical: unequal numbers of group devices in the domains of " +
                               std::to_string(size) + " devices",
                           {.key = "--group",
                            .value = std::to_string(run) + " devices in the domain of device " +
                                     std::to_string(group[i]),
                            .expected = std::to_string(count) + " in every domain"});
      }
      domains.push_back(domain_of(group[i]));
      i = j;
    }
    std::sort(domains.begin(), domains.end());
    if (std::adjacent_find(domains.begin(), domains.end()) != domains.end()) {
      throw Error::input("hierarchical: the group does not list the devices of each domain of " +
                             std::to_string(size) + " devices together",
                         {.key = "--group", .expected = "the devices of one domain consecutively"});
    }
    if (count / below > 1) levels.push_back(count / below);
    below = count;
  }
  if (below != n) levels.push_back(n / below);
  if (levels.empty()) levels.push_back(n);
  return levels;
}

CollectiveSpec resolve(const CollectiveSpec& spec, const topo::Topology& topology,
                       std::span<const topo::DeviceId> group) {
  check_group(topology, group);
  CollectiveSpec out = spec;
  if ((spec.algorithm == Algorithm::kHierarchical || spec.algorithm == Algorithm::kTorus) &&
      spec.levels.empty()) {
    out.levels = hierarchy_levels(topology, group);
  }
  validate(out, static_cast<int>(group.size()));
  return out;
}

SimulationResult simulate(const topo::Topology& topology, const CollectiveSpec& spec,
                          std::span<const std::vector<topo::DeviceId>> groups,
                          const SimulationOptions& options) {
  std::vector<bool> used(topology.num_devices(), false);
  std::vector<CollectiveSpec> resolved;
  for (const auto& group : groups) {
    resolved.push_back(resolve(spec, topology, group));
    for (topo::DeviceId d : group) {
      if (used[d]) {
        throw Error::input("concurrent groups overlap",
                           {.key = "--concurrent",
                            .value = "device " + std::to_string(d),
                            .expected = "groups with distinct devices"});
      }
      used[d] = true;
    }
  }

  // One schedule per distinct (group size, levels): concurrent copies share it.
  std::map<std::pair<int, std::string>, std::shared_ptr<const Program>> schedules;
  std::vector<std::shared_ptr<const Program>> programs;
  SimulationResult result;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const int n = static_cast<int>(groups[g].size());
    auto& schedule = schedules[{n, levels_text(resolved[g].levels)}];
    if (!schedule) schedule = lower_program(resolved[g], n);
    result.flows += schedule->transfer_count();
    programs.push_back(schedule);
  }
  topo::Router router(topology, options.seed);

  if (!options.events_only) {
    std::vector<detail::GroupProgram> parts;
    for (std::size_t g = 0; g < groups.size(); ++g) parts.push_back({programs[g].get(), groups[g]});
    detail::UncontendedEvaluator evaluator(topology);
    if (auto run = evaluator.evaluate(router, parts, options.seed)) {
      result.durations = std::move(run->durations);
      for (const Time d : result.durations) result.makespan = std::max(result.makespan, d);
      result.events = run->events;
      result.busiest = busiest(std::move(run->links), options.busiest_links);
      result.contention_free = true;
      return result;
    }
  }

  net::Simulator simulator(topology);
  std::vector<std::unique_ptr<Execution>> runs;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    runs.push_back(
        std::make_unique<Execution>(simulator, router, programs[g], groups[g], options.seed));
  }
  for (auto& run : runs) run->start();
  simulator.run();

  for (const auto& run : runs) {
    if (!run->finished()) throw Error::internal("collective did not finish");
    result.durations.push_back(run->duration());
    result.makespan = std::max(result.makespan, run->duration());
  }
  result.events = simulator.events_processed();

  if (options.busiest_links > 0) {
    std::vector<LinkUse> uses;
    for (std::size_t l = 0; l < topology.num_links(); ++l) {
      const net::LinkStats& s = simulator.link_stats(static_cast<topo::LinkId>(l));
      if (s.bytes > 0) {
        uses.push_back(LinkUse{static_cast<topo::LinkId>(l), s.bytes, s.busy, s.peak_flows});
      }
    }
    result.busiest = busiest(std::move(uses), options.busiest_links);
  }
  return result;
}

}  // namespace nest::coll
