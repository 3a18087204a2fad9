#include "nest/coll/simulate.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "coll/fastest.h"
#include "coll/private_rings.h"
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

// The run of `programs` on `topology` (contention-free evaluation, else events), `result` holding
// the flow count already; nullopt when a group has not finished by `until` (its last arrival is
// later), as `net::Simulator::run_within` stops.
std::optional<SimulationResult> run(const topo::Topology& topology,
                                    const std::vector<std::shared_ptr<const Program>>& programs,
                                    std::span<const std::vector<topo::DeviceId>> groups,
                                    const SimulationOptions& options, SimulationResult result,
                                    Time until = Time::max());

}  // namespace

namespace {

// hierarchy_levels, with the index in topology.domain_sizes() of the domain each level spans.
// With `fits`, a group the domains do not split evenly sets *fits = false and returns no levels
// instead of throwing.
std::vector<int> levels_of(const topo::Topology& topology, std::span<const topo::DeviceId> group,
                           std::vector<std::size_t>* domain_of_level, bool* fits = nullptr) {
  if (fits != nullptr) *fits = true;
  const auto misfit = [&] {
    *fits = false;
    if (domain_of_level != nullptr) domain_of_level->clear();
    return std::vector<int>{};
  };
  const auto n = static_cast<int>(group.size());
  std::size_t domain_index = 0;
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
        if (fits != nullptr) return misfit();
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
      if (fits != nullptr) return misfit();
      throw Error::input("hierarchical: the group does not list the devices of each domain of " +
                             std::to_string(size) + " devices together",
                         {.key = "--group", .expected = "the devices of one domain consecutively"});
    }
    if (count / below > 1) {
      levels.push_back(count / below);
      if (domain_of_level != nullptr) domain_of_level->push_back(domain_index);
    }
    below = count;
    ++domain_index;
  }
  const std::size_t last = topology.domain_sizes().size() - 1;
  if (below != n || levels.empty()) {
    levels.push_back(below != n ? n / below : n);
    if (domain_of_level != nullptr) domain_of_level->push_back(last);
  }
  return levels;
}

// The algorithm of each level of `op` on a `kind: dimensions` topology: that of the outermost
// dimension the level spans (its domain's); empty on other topologies. A dimension's algorithm
// that cannot run on its level of this group falls back to ring (a partial group of a
// dimension need not be a power of two, nor its level the last): halving_doubling on a level
// whose size is not a power of two, double_binary_tree on a level that is not the last of an
// allreduce. (An explicit --level-algorithms is validated as given.)
std::vector<Algorithm> dimension_algorithms(const topo::Topology& topology,
                                            std::span<const topo::DeviceId> group, Operation op) {
  const auto* p = std::get_if<topo::DimensionsParams>(&topology.params());
  if (p == nullptr) return {};
  std::vector<std::size_t> domains;
  const std::vector<int> levels = levels_of(topology, group, &domains);
  // Domain j is the j-th dimension with more than one device (set_domain_sizes drops 1s).
  std::vector<std::size_t> dimension_of_domain;
  for (std::size_t i = 0; i < p->npus_count.size(); ++i) {
    if (p->npus_count[i] > 1) dimension_of_domain.push_back(i);
  }
  std::vector<Algorithm> out;
  for (std::size_t l = 0; l < domains.size(); ++l) {
    const std::size_t j = domains[l];
    const std::size_t i = dimension_of_domain.empty() ? 0 : dimension_of_domain[j];
    const topo::DimensionAlgorithm a =
        p->algorithms.empty() ? topo::default_dimension_algorithm(p->kinds[i]) : p->algorithms[i];
    switch (a) {
      case topo::DimensionAlgorithm::kRing:
        out.push_back(Algorithm::kRing);
        break;
      case topo::DimensionAlgorithm::kDirect:
        out.push_back(Algorithm::kDirect);
        break;
      case topo::DimensionAlgorithm::kHalvingDoubling:
        out.push_back(std::has_single_bit(static_cast<unsigned>(levels[l]))
                          ? Algorithm::kHalvingDoubling
                          : Algorithm::kRing);
        break;
      case topo::DimensionAlgorithm::kDoubleBinaryTree:
        out.push_back(op == Operation::kAllReduce && l + 1 == levels.size() ? Algorithm::kTree
                                                                            : Algorithm::kRing);
        break;
    }
  }
  return out;
}

}  // namespace

std::vector<int> hierarchy_levels(const topo::Topology& topology,
                                  std::span<const topo::DeviceId> group) {
  return levels_of(topology, group, nullptr);
}

bool has_hierarchy_levels(const topo::Topology& topology, std::span<const topo::DeviceId> group) {
  bool fits = true;
  (void)levels_of(topology, group, nullptr, &fits);
  return fits;
}

Algorithm default_algorithm(const topo::Topology& topology, Operation op,
                            std::span<const std::vector<topo::DeviceId>> groups) {
  const bool leveled =
      op == Operation::kAllReduce || op == Operation::kReduceScatter || op == Operation::kAllGather;
  if (!leveled || topology.family() != topo::Family::kDimensions) return default_algorithm(op);
  for (const auto& g : groups) {
    if (!g.empty() && !has_hierarchy_levels(topology, g)) return default_algorithm(op);
  }
  return Algorithm::kHierarchical;
}

int rail_block(const topo::Topology& topology, std::span<const topo::DeviceId> group) {
  const auto d0 = static_cast<std::uint32_t>(topology.domain_sizes().front());
  if (group.empty()) return 0;
  std::size_t k = 1;
  while (k < group.size() && group[k] / d0 == group[0] / d0) ++k;
  if (k == group.size() || group.size() % k != 0) return 0;
  std::vector<std::uint32_t> domains;
  for (std::size_t b = 0; b < group.size(); b += k) {
    const std::uint32_t domain = group[b] / d0;
    for (std::size_t i = 0; i < k; ++i) {
      if (group[b + i] / d0 != domain || group[b + i] % d0 != group[i] % d0) return 0;
    }
    domains.push_back(domain);
  }
  std::sort(domains.begin(), domains.end());
  if (std::adjacent_find(domains.begin(), domains.end()) != domains.end()) return 0;
  return static_cast<int>(k);
}

std::optional<topo::NodeId> nvls_switch(const topo::Topology& topology,
                                        std::span<const topo::DeviceId> group) {
  if (!topology.nvlink_sharp() || group.empty()) return std::nullopt;
  const auto links_to = [&](topo::NodeId w, topo::DeviceId d) {
    return topology.find_link(d, w).has_value();
  };
  for (const topo::LinkId l : topology.out_links(group.front())) {
    const topo::NodeId w = topology.link(l).dst;
    if (topology.is_device(w)) continue;
    const auto out = topology.out_links(w);
    const bool scale_up = std::all_of(out.begin(), out.end(), [&](topo::LinkId x) {
      return topology.is_device(topology.link(x).dst);
    });
    if (!scale_up) continue;
    if (std::all_of(group.begin(), group.end(), [&](topo::DeviceId d) { return links_to(w, d); })) {
      return w;
    }
  }
  return std::nullopt;
}

namespace {

// NCCL's Simple protocol moves a channel's data in steps of its buffer over NCCL_STEPS:
// 4 MiB / 8 (src/include/device.h, NCCL_STEPS 8; default NCCL_BUFFSIZE 4 MiB).
constexpr std::int64_t kPipelinePiece = 512 * 1024;
constexpr std::int64_t kMaxPieces = 16;

int auto_chunks(const CollectiveSpec& spec, bool calibrated) {
  if (!calibrated) return 1;
  const bool chain = spec.algorithm == Algorithm::kRing &&
                     (spec.op == Operation::kBroadcast || spec.op == Operation::kReduce);
  if (!chain && spec.algorithm != Algorithm::kTree) return 1;
  // A tree allreduce sends half the buffer down each of its two trees.
  const std::int64_t per_path =
      spec.algorithm == Algorithm::kTree && spec.op == Operation::kAllReduce ? spec.size.count() / 2
                                                                             : spec.size.count();
  return static_cast<int>(
      std::clamp<std::int64_t>((per_path + kPipelinePiece - 1) / kPipelinePiece, 1, kMaxPieces));
}

}  // namespace

CollectiveSpec resolve(const CollectiveSpec& spec, const CalibratedNetwork& network,
                       std::span<const topo::DeviceId> group) {
  const topo::Topology& topology = network.physical();
  check_group(topology, group);
  CollectiveSpec out = spec;
  if ((spec.algorithm == Algorithm::kHierarchical || spec.algorithm == Algorithm::kTorus) &&
      spec.levels.empty()) {
    out.levels = hierarchy_levels(topology, group);
    if (spec.algorithm == Algorithm::kHierarchical && spec.level_algorithms.empty()) {
      out.level_algorithms = dimension_algorithms(topology, group, spec.op);
    }
  }
  if (out.chunks == 0) out.chunks = auto_chunks(out, network.calibrated());
  const bool ring = spec.algorithm == Algorithm::kRing &&
                    (spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter ||
                     spec.op == Operation::kAllGather);
  const int block = ring ? rail_block(topology, group) : 0;
  if (out.channels == 0) {
    out.channels = network.calibrated() && block > 0 ? std::min(network.channels(), block) : 1;
  }
  // Rings follow the rails whenever they run several, and always under a model (NCCL's rings
  // never leave a rail between nodes).
  out.ranks_per_node = out.channels > 1 || network.calibrated() ? block : 0;
  const bool ring_family =
      (out.algorithm == Algorithm::kRing || out.algorithm == Algorithm::kHierarchical ||
       out.algorithm == Algorithm::kTorus) &&
      (out.op == Operation::kAllReduce || out.op == Operation::kReduceScatter ||
       out.op == Operation::kAllGather) &&
      std::all_of(out.level_algorithms.begin(), out.level_algorithms.end(),
                  [](Algorithm a) { return a == Algorithm::kRing; });
  if (network.calibrated() && ring_family) out.forward_on_arrival = true;
  if (out.algorithm == Algorithm::kNvls && group.size() > 1 && !nvls_switch(topology, group)) {
    throw Error::input(
        "nvls needs the whole group on one NVLink SHARP switch",
        {.key = "--algorithm",
         .value = "nvls",
         .expected = topology.nvlink_sharp()
                         ? "a group inside one scale-up domain"
                         : "a topology with nvlink_sharp: true (in-switch reduction)"});
  }
  validate(out, static_cast<int>(group.size()));
  return out;
}

CollectiveSpec resolve(const CollectiveSpec& spec, const topo::Topology& topology,
                       std::span<const topo::DeviceId> group) {
  return resolve(spec, CalibratedNetwork(topology, true), group);
}

SimulationResult simulate(const topo::Topology& topology, const CollectiveSpec& spec,
                          std::span<const std::vector<topo::DeviceId>> groups,
                          const SimulationOptions& options) {
  return simulate(CalibratedNetwork(topology, options.ideal), spec, groups, options);
}

// Routers by the topology copy they route.
struct ClosedFormPricer::Routers {
  std::map<const topo::Topology*, std::unique_ptr<topo::Router>> by_topology;
};

ClosedFormPricer::ClosedFormPricer(const CalibratedNetwork& network, std::uint64_t seed)
    : network_(network), seed_(seed), routers_(std::make_unique<Routers>()) {}

ClosedFormPricer::~ClosedFormPricer() = default;

ClosedForm ClosedFormPricer::price(const CollectiveSpec& spec,
                                   std::span<const topo::DeviceId> group) {
  const CollectiveSpec resolved = resolve(spec, network_, group);
  const topo::Protocol protocol = network_.protocol(resolved.algorithm, resolved.size);
  const topo::Topology& topology =
      network_.topology(protocol, resolved.algorithm == Algorithm::kNvls);
  std::unique_ptr<topo::Router>& router = routers_->by_topology[&topology];
  if (!router) router = std::make_unique<topo::Router>(topology, seed_);
  ClosedForm cf =
      closed_form(*lower_program(resolved, static_cast<int>(group.size())), group, *router, seed_);
  if (group.size() > 1) {
    cf.base_latency_seconds =
        network_.base_latency(resolved.op, resolved.algorithm, protocol).to_seconds();
    cf.seconds += cf.base_latency_seconds;
  }
  return cf;
}

ClosedForm closed_form(const CalibratedNetwork& network, const CollectiveSpec& spec,
                       std::span<const topo::DeviceId> group, std::uint64_t seed) {
  return ClosedFormPricer(network, seed).price(spec, group);
}

namespace {

// `simulate`'s groups resolved and their programs lowered, on the copy of the topology the
// collective's protocol runs on.
struct Lowered {
  const topo::Topology* topology = nullptr;
  std::vector<std::shared_ptr<const Program>> programs;
  SimulationResult result;  // the flow count, protocol, base latency and calibration
};

Lowered lower(const CalibratedNetwork& network, const CollectiveSpec& spec,
              std::span<const std::vector<topo::DeviceId>> groups) {
  const topo::Topology& physical = network.physical();
  std::vector<bool> used(physical.num_devices(), false);
  std::vector<CollectiveSpec> resolved;
  for (const auto& group : groups) {
    resolved.push_back(resolve(spec, network, group));
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

  // One schedule per distinct (group size, levels, chunks, channels): concurrent copies share it.
  std::map<std::pair<int, std::string>, std::shared_ptr<const Program>> schedules;
  Lowered out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const int n = static_cast<int>(groups[g].size());
    const CollectiveSpec& r = resolved[g];
    auto& schedule =
        schedules[{n, levels_text(r.levels) + "/" + std::to_string(r.chunks) + "/" +
                          std::to_string(r.channels) + "/" + std::to_string(r.ranks_per_node) +
                          "/" + level_algorithms_text(r.level_algorithms)}];
    if (!schedule) schedule = lower_program(resolved[g], n);
    out.result.flows += schedule->transfer_count();
    out.programs.push_back(schedule);
  }
  out.result.calibrated = network.calibrated();
  out.result.protocol = network.protocol(spec.algorithm, spec.size);
  out.result.base_latency = network.base_latency(spec.op, spec.algorithm, out.result.protocol);
  out.topology = &network.topology(out.result.protocol, spec.algorithm == Algorithm::kNvls);
  return out;
}

// The run of a lowered collective, stopped as `run` stops at `until` (simulated time, before the
// base latency is added).
std::optional<SimulationResult> run_lowered(Lowered lowered,
                                            std::span<const std::vector<topo::DeviceId>> groups,
                                            const SimulationOptions& options, Time until) {
  const Time base_latency = lowered.result.base_latency;
  std::optional<SimulationResult> out =
      run(*lowered.topology, lowered.programs, groups, options, std::move(lowered.result), until);
  if (!out) return std::nullopt;
  // A group of one device runs nothing and pays nothing.
  out->makespan = Time::zero();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].size() > 1) out->durations[g] += base_latency;
    out->makespan = std::max(out->makespan, out->durations[g]);
  }
  return out;
}

}  // namespace

SimulationResult simulate(const CalibratedNetwork& network, const CollectiveSpec& spec,
                          std::span<const std::vector<topo::DeviceId>> groups,
                          const SimulationOptions& options) {
  return *run_lowered(lower(network, spec, groups), groups, options, Time::max());
}

std::vector<Algorithm> tuner_candidates(const CalibratedNetwork& network, Operation op, Bytes size,
                                        std::span<const topo::DeviceId> group) {
  const topo::Topology& topology = network.physical();
  const bool torus = topology.family() == topo::Family::kTorus;
  // Hierarchical runs only on a group that spans domains evenly (and so has two levels or more).
  const auto leveled = [&] {
    try {
      return hierarchy_levels(topology, group).size() >= 2;
    } catch (const Error&) {
      return false;
    }
  };
  // NCCL's tree is a chain through the GPUs of a node with a double binary tree between nodes:
  // inside one domain it is no faster than the ring, so it only competes across domains.
  const auto d0 = static_cast<std::uint32_t>(topology.domain_sizes().front());
  const bool spans = !group.empty() && std::any_of(group.begin(), group.end(), [&](auto d) {
    return d / d0 != group.front() / d0;
  });
  std::vector<Algorithm> out;
  switch (op) {
    case Operation::kAllReduce:
      out = {Algorithm::kRing};
      if (spans) out.push_back(Algorithm::kTree);
      if (network.protocol(size) == topo::Protocol::kSimple && nvls_switch(topology, group)) {
        out.push_back(Algorithm::kNvls);
      }
      if (leveled()) out.push_back(Algorithm::kHierarchical);
      if (torus) out.push_back(Algorithm::kTorus);
      break;
    case Operation::kReduceScatter:
    case Operation::kAllGather:
      out = {Algorithm::kRing};
      if (leveled()) out.push_back(Algorithm::kHierarchical);
      if (torus) out.push_back(Algorithm::kTorus);
      break;
    case Operation::kAllToAll:
      out = {Algorithm::kPairwise, Algorithm::kDirect};
      break;
    case Operation::kBroadcast:
      out = {Algorithm::kRing};
      if (spans) out.push_back(Algorithm::kTree);
      break;
    case Operation::kReduce:
      out = {Algorithm::kRing};
      break;
    case Operation::kSend:
    case Operation::kGather:
    case Operation::kScatter:
    case Operation::kSendRecv:
      out = {Algorithm::kDirect};
      break;
  }
  return out;
}

// Why the order and the early stops leave the choice as one run of every candidate to the end
// in turn would make it (the smallest makespan, ties to the earlier candidate). A candidate's
// makespan is at least its bound. One is skipped when its bound passes the best so far, or
// equals it and the best is an earlier candidate: it cannot be kept. One that may still win runs
// until its simulated time passes what it must beat: the best's makespan less its base, or a
// picosecond less when the best is an earlier candidate (a tie loses then); a run stopped there
// ends later, so it loses, and one that ends has its makespan, compared as one by one. So the
// kept candidate is the same in whatever order they run: the order of their bounds, so that a
// fast candidate sets the time to beat before a slow one runs.
std::size_t detail::fastest_candidate(
    std::span<const Time> bounds, std::span<const Time> bases,
    const std::function<std::optional<Time>(std::size_t, Time)>& run) {
  std::vector<std::size_t> order(bounds.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return bounds[x] < bounds[y]; });
  std::optional<Time> best;
  std::size_t chosen = 0;
  for (const std::size_t i : order) {
    Time until = Time::max();
    if (best) {
      const bool earlier = i < chosen;
      if (bounds[i] > *best || (bounds[i] == *best && !earlier)) continue;
      until = *best - bases[i] - Time::picoseconds(earlier ? 0 : 1);
      if (until < Time::zero()) continue;
    }
    const std::optional<Time> makespan = run(i, until);
    if (!makespan) continue;  // it ends later than the best so far
    if (!best || *makespan < *best || (*makespan == *best && i < chosen)) {
      best = makespan;
      chosen = i;
    }
  }
  if (!best) throw Error::internal("fastest_candidate: no candidate ran");
  return chosen;
}

// Every group has two devices or more, so a candidate's makespan is its slowest group's last
// arrival plus its base latency, at least its event-free lower bound
// (`UncontendedEvaluator::lower_bound`, below the event simulation and so below the
// contention-free and private rings' answers, which are the simulation's) plus it: the bounds
// `detail::fastest_candidate` needs (zero with a group of one device). On 4,096 rail GPUs a 1 GiB
// allreduce's 8-channel rings take 537 M events when simulated in full; their bound loses to the
// hierarchical ring's 19.6 ms.
TunedRun simulate_fastest(const CalibratedNetwork& network, const CollectiveSpec& spec,
                          std::span<const std::vector<topo::DeviceId>> groups,
                          const SimulationOptions& options) {
  if (groups.empty()) throw Error::internal("simulate_fastest: no group");
  struct Candidate {
    CollectiveSpec spec;
    Lowered lowered;
    Time bound;  // <= its makespan
  };
  std::vector<Candidate> candidates;
  const std::vector<Algorithm> algorithms =
      tuner_candidates(network, spec.op, spec.size, groups.front());
  // A lone candidate runs in full whatever its bound: none is priced.
  const bool bounded =
      algorithms.size() > 1 && std::all_of(groups.begin(), groups.end(),
                                           [](const auto& group) { return group.size() >= 2; });
  for (const Algorithm a : algorithms) {
    Candidate c{.spec = spec, .lowered = {}, .bound = Time::zero()};
    c.spec.algorithm = a;
    c.spec.levels.clear();
    if (a != Algorithm::kRing) c.spec.channels = std::min(c.spec.channels, 1);
    const bool pipelines = a == Algorithm::kRing || a == Algorithm::kTree ||
                           a == Algorithm::kHierarchical || a == Algorithm::kTorus;
    if (!pipelines) c.spec.chunks = 1;
    c.lowered = lower(network, c.spec, groups);
    if (bounded) {
      std::vector<detail::GroupProgram> parts;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        parts.push_back({c.lowered.programs[g].get(), groups[g]});
      }
      topo::Router router(*c.lowered.topology, options.seed);
      detail::UncontendedEvaluator evaluator(*c.lowered.topology);
      if (const auto bound = evaluator.lower_bound(router, parts, options.seed)) {
        const Time base = c.lowered.result.base_latency;
        c.bound = bound->slowest.ps() < net::kHorizon.ps() - base.ps() ? bound->slowest + base
                                                                       : net::kHorizon;
      }
    }
    candidates.push_back(std::move(c));
  }
  std::vector<Time> bounds;
  std::vector<Time> bases;
  for (const Candidate& c : candidates) {
    bounds.push_back(c.bound);
    bases.push_back(c.lowered.result.base_latency);
  }
  std::vector<std::optional<SimulationResult>> results(candidates.size());
  const std::size_t chosen = detail::fastest_candidate(
      bounds, bases, [&](std::size_t i, Time until) -> std::optional<Time> {
        results[i] = run_lowered(std::move(candidates[i].lowered), groups, options, until);
        if (!results[i]) return std::nullopt;
        return results[i]->makespan;
      });
  return TunedRun{resolve(candidates[chosen].spec, network, groups.front()),
                  std::move(*results[chosen])};
}

namespace {

std::optional<SimulationResult> run(const topo::Topology& topology,
                                    const std::vector<std::shared_ptr<const Program>>& programs,
                                    std::span<const std::vector<topo::DeviceId>> groups,
                                    const SimulationOptions& options, SimulationResult result,
                                    Time until) {
  topo::Router router(topology, options.seed);

  if (!options.events_only) {
    std::vector<detail::GroupProgram> parts;
    for (std::size_t g = 0; g < groups.size(); ++g) parts.push_back({programs[g].get(), groups[g]});
    detail::UncontendedEvaluator evaluator(topology);
    // A run answered without the simulator: its durations, events and busiest links.
    const auto answered = [&](std::vector<Time> durations, std::uint64_t events,
                              std::vector<LinkUse> links) {
      result.durations = std::move(durations);
      for (const Time d : result.durations) result.makespan = std::max(result.makespan, d);
      result.events = events;
      result.busiest = busiest(std::move(links), options.busiest_links);
      return result;
    };
    if (auto run = evaluator.evaluate(router, parts, options.seed)) {
      result.contention_free = true;
      return answered(std::move(run->durations), run->events, std::move(run->links));
    }
    // Rings whose senders share no link: the event simulation's run without its max-min
    // machinery (coll/private_rings.h), event for event.
    detail::PrivateRingSimulator private_rings(topology);
    if (auto run = private_rings.run(router, parts, options.seed, until)) {
      if (!run->finished) return std::nullopt;
      return answered(std::move(run->durations), run->events, std::move(run->links));
    }
  }

  net::Simulator simulator(topology);
  std::vector<std::unique_ptr<Execution>> runs;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    runs.push_back(
        std::make_unique<Execution>(simulator, router, programs[g], groups[g], options.seed));
  }
  for (auto& run : runs) run->start();
  if (until == Time::max()) {
    simulator.run();
  } else if (!simulator.run_within(std::numeric_limits<std::uint64_t>::max(), until)) {
    simulator.reset();  // drops the callbacks into the runs about to be destroyed
    return std::nullopt;
  }

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

}  // namespace

ContentionFreeEvaluator::ContentionFreeEvaluator(const topo::Topology& topology)
    : impl_(std::make_unique<detail::UncontendedEvaluator>(topology)) {}

ContentionFreeEvaluator::~ContentionFreeEvaluator() = default;

std::optional<AloneRun> ContentionFreeEvaluator::evaluate(topo::Router& router,
                                                          const Program& program,
                                                          std::span<const topo::DeviceId> group,
                                                          std::uint64_t salt) {
  const std::array<detail::GroupProgram, 1> one{detail::GroupProgram{&program, group}};
  std::optional<detail::UncontendedRun> run = impl_->evaluate(router, one, salt);
  if (!run) return std::nullopt;
  return AloneRun{run->durations.at(0), std::move(run->links)};
}

AloneSimulator::AloneSimulator(const topo::Topology& topology)
    : sim_(std::make_unique<net::Simulator>(topology)) {}

AloneSimulator::~AloneSimulator() = default;

AloneRun AloneSimulator::run(topo::Router& router, const std::shared_ptr<const Program>& program,
                             std::span<const topo::DeviceId> group, std::uint64_t salt,
                             std::span<const topo::LinkId> links) {
  sim_->reset();
  Execution execution(*sim_, router, program,
                      std::vector<topo::DeviceId>(group.begin(), group.end()), salt);
  execution.start();
  sim_->run();
  if (!execution.finished()) throw Error::internal("coll: a collective alone did not finish");
  AloneRun out;
  out.duration = execution.duration();
  for (const topo::LinkId link : links) {
    const net::LinkStats& stats = sim_->link_stats(link);
    if (stats.peak_flows == 0) continue;
    out.links.push_back({link, stats.bytes, stats.busy, stats.peak_flows});
  }
  return out;
}

}  // namespace nest::coll
