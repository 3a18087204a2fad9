#include "nest/coll/oracle.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "coll/private_rings.h"
#include "coll/uncontended.h"
#include "nest/coll/calibration.h"
#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/net/simulator.h"
#include "nest/topo/router.h"

namespace nest::coll {
namespace {

// Two independent 64-bit streams make a 128-bit digest.
struct Digest {
  std::uint64_t a = 0x6a09e667f3bcc908ULL;
  std::uint64_t b = 0xbb67ae8584caa73bULL;
  void add(std::uint64_t x) {
    a = hash_mix(a, x);
    b = hash_mix(b ^ 0x3c6ef372fe94f82bULL, x + 0x9e3779b97f4a7c15ULL);
  }
  friend bool operator==(const Digest&, const Digest&) = default;
};

struct DigestHash {
  std::size_t operator()(const Digest& d) const noexcept { return d.a ^ (d.b << 1); }
};

struct PairHash {
  std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& p) const noexcept {
    return hash_mix(p.first, p.second);
  }
};

// Layouts whose routes `structure` keeps per engine (~58 bytes each with the map's buckets):
// ~30 MB at most per engine, and an oracle of a calibrated network has up to four engines (its
// protocols and NVLS). A search on 16,384 GPUs meets ~240,000 layouts (GPT-3 175B, --verify 4),
// nearly all on one engine.
constexpr std::size_t kLayoutsKept = std::size_t{1} << 19;

// What `link_components` keeps per engine, in words of 4 bytes: a part's set is one, an entry
// (its node with the digest and the vector, its bucket, the vector's block with malloc's
// overhead: ~104 bytes) 26. 32 MB at most.
constexpr std::uint64_t kSetsEntryWeight = 26;
constexpr std::uint64_t kSetsWeight = std::uint64_t{1} << 23;

// What the oracle keeps of lowered programs for reuse, in transfers of explicit schedules (24
// bytes each, and their gates) and ranks x channels of implicit ones: tens of MB at most.
constexpr std::uint64_t kLoweredWeight = std::uint64_t{1} << 20;

// The exact query, word by word (`words`, every device of every group), and its hash, computed
// once (`seal`): libstdc++ keeps no hash codes beside the nodes of a table whose hasher cannot
// throw, so the memo would hash a key of every device again for each node its lookups walk past
// and for every node at each rehash.
struct QueryKey {
  std::vector<std::uint64_t> words;
  std::uint64_t hash = 0;
  void push_back(std::uint64_t w) { words.push_back(w); }
  void seal() {
    hash = words.size();
    for (std::uint64_t w : words) hash = hash_mix(hash, w);
  }
  friend bool operator==(const QueryKey& x, const QueryKey& y) {
    return x.hash == y.hash && x.words == y.words;
  }
};
struct QueryKeyHash {
  std::size_t operator()(const QueryKey& k) const noexcept { return k.hash; }
};

using Pair = RankPair;

// The (src rank, dst rank, channel) pairs of a schedule, in order of first use: the program's
// own list when it has one (rings), else its transfers visited.
std::vector<Pair> distinct_pairs(const Program& program) {
  if (auto listed = program.distinct_pairs()) return std::move(*listed);
  std::vector<Pair> pairs;
  std::unordered_map<std::uint64_t, bool> seen;
  program.for_each_transfer([&](const Transfer& t) {
    const std::uint64_t key = (static_cast<std::uint64_t>(t.channel) << 48) ^
                              (static_cast<std::uint64_t>(t.src) << 24) ^ t.dst;
    if (seen.emplace(key, true).second) pairs.push_back(Pair{t.src, t.dst, t.channel});
  });
  return pairs;
}

// One group's part of a query: its resolved spec, schedule identity and devices.
struct Part {
  std::uint64_t shape = 0;  // digest of what the schedule is in rank space (size-independent)
  std::uint64_t size = 0;   // bytes (the parts of `transfers` come lowered, keyed by shape)
  std::shared_ptr<const Program> schedule;  // lowered lazily
  CollectiveSpec spec;
  std::vector<topo::DeviceId> group;
};

// The machinery of one topology (the physical one, or a calibrated copy): its router, the
// contention-free evaluator, a simulator reset between runs, and the link labels of a digest.
struct Engine {
  Engine(const topo::Topology& t, std::uint64_t seed)
      : topology(t), router(t, seed), evaluator(t), private_rings(t) {}
  const topo::Topology& topology;
  topo::Router router;
  detail::UncontendedEvaluator evaluator;
  detail::PrivateRingSimulator private_rings;
  // One simulator for every query, reset in between: a fresh one would allocate and clear the
  // whole link table each time (12.5 MB on a 16,384-GPU rail cluster).
  std::unique_ptr<net::Simulator> simulator;
  std::vector<std::uint32_t> label;  // per link: order of first use in a digest, or max
  std::vector<std::uint32_t> owner;  // per link: the first part routed over it, or max
  // Scratch of the passes that route every pair (`structure`, `waited`, `link_components`):
  // routed afresh into it rather than through the router's cache of every pair ever asked,
  // which at 8,192 GPUs had grown past the caches (13.6% of a search in its lookups).
  std::vector<topo::LinkId> route;
  // `structure`'s routes part by layout (see there), emptied past kLayoutsKept entries.
  std::unordered_map<Digest, Digest, DigestHash> routes_by_layout;
  // `link_components` by layout: each part's set. Emptied past kSetsWeight.
  std::unordered_map<Digest, std::vector<std::uint32_t>, DigestHash> sets_by_layout;
  std::uint64_t sets_weight = 0;
  std::vector<detail::LinkLoad> loads;  // the link loads of a run stopped by its progress bound
  // Engines of the same topology for the other threads of `CollectiveOracle::Impl::priced_sets`.
  std::vector<std::unique_ptr<Engine>> twins;
};

// The root of `i` in a union-find forest (with path halving).
std::size_t find_root(std::vector<std::size_t>& parent, std::size_t i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

// A query's parts in link-connected sets (`CollectiveOracle::Impl::link_components`), flat: one
// vector of members and one of where each set starts, so that a query of many sets (a group per
// node) allocates a few vectors, not one per set. Set s holds the parts `(*this)[s]`.
class LinkSets {
 public:
  // The sets of `set_of` (each part's set, sets numbered in order of their first part), each in
  // part order.
  explicit LinkSets(std::span<const std::uint32_t> set_of) {
    std::uint32_t count = 0;
    for (const std::uint32_t s : set_of) count = std::max(count, s + 1);
    start_.assign(count + std::size_t{1}, 0);
    for (const std::uint32_t s : set_of) ++start_[s + 1];
    for (std::size_t s = 1; s < start_.size(); ++s) start_[s] += start_[s - 1];
    members_.resize(set_of.size());
    std::vector<std::uint32_t> next(start_.begin(), start_.end() - 1);
    for (std::size_t i = 0; i < set_of.size(); ++i) {
      members_[next[set_of[i]]++] = static_cast<std::uint32_t>(i);
    }
  }
  [[nodiscard]] std::size_t size() const noexcept { return start_.size() - 1; }
  [[nodiscard]] std::span<const std::uint32_t> operator[](std::size_t s) const noexcept {
    return std::span<const std::uint32_t>(members_).subspan(start_[s], start_[s + 1] - start_[s]);
  }
  // The sets in the order `order` (a permutation of the set indices).
  [[nodiscard]] LinkSets reordered(std::span<const std::size_t> order) const {
    LinkSets out;
    out.members_.reserve(members_.size());
    out.start_.reserve(start_.size());
    out.start_.push_back(0);
    for (const std::size_t s : order) {
      const auto members = (*this)[s];
      out.members_.insert(out.members_.end(), members.begin(), members.end());
      out.start_.push_back(static_cast<std::uint32_t>(out.members_.size()));
    }
    return out;
  }

 private:
  LinkSets() = default;
  std::vector<std::uint32_t> members_;
  std::vector<std::uint32_t> start_;
};

// Ends a run of `CollectiveOracle::Impl::priced_sets` early once the run of an earlier set of
// the query has stopped at its time to beat: the query is then ruled out and this set skipped,
// its answer dropped.
struct Cancel {
  const std::atomic<std::size_t>* stopped;  // the least job stopped so far (max: none)
  std::size_t job;                          // the run's own
  [[nodiscard]] bool operator()() const noexcept {
    return stopped->load(std::memory_order_relaxed) < job;
  }
};

}  // namespace

struct OracleFacts::Impl {
  // What an oracle proved of a structure: its answer (without the base), or a time it ends
  // after (zero: none).
  struct Fact {
    std::optional<OracleAnswer> answer;
    Time after;
  };
  // A structure an oracle that publishes here is simulating (`claim`), to time `until`.
  struct Claim {
    const void* by;
    Time until;
  };
  mutable std::shared_mutex mutex;
  std::unordered_map<Digest, Fact, DigestHash> facts;
  std::unordered_map<Digest, std::vector<Claim>, DigestHash> claims;
  // Notified whenever a claim is dropped.
  mutable std::condition_variable_any dropped;
  // The topology and settings of the oracles that share these facts (set by the first).
  const topo::Topology* topology = nullptr;
  std::uint64_t seed = 0;
  bool ideal = false;

  void attach(const topo::Topology& t, std::uint64_t s, bool i) {
    const std::unique_lock lock(mutex);
    if (topology == nullptr) {
      topology = &t;
      seed = s;
      ideal = i;
    } else if (topology != &t || seed != s || ideal != i) {
      throw Error::internal("oracle: facts of another topology or other settings");
    }
  }
  void record_answer(const Digest& digest, const OracleAnswer& answer) {
    const std::unique_lock lock(mutex);
    facts[digest].answer = answer;
  }
  void record_after(const Digest& digest, Time after) {
    const std::unique_lock lock(mutex);
    Fact& f = facts[digest];
    f.after = std::max(f.after, after);
  }
  // Oracle `by` simulates `digest` to `until` and will record what it shows (`drop` after).
  void claim(const Digest& digest, const void* by, Time until) {
    const std::unique_lock lock(mutex);
    claims[digest].push_back({by, until});
  }
  // `by`'s claim of `digest` is over: what its run showed is recorded, or nothing will be.
  void drop(const Digest& digest, const void* by) {
    {
      const std::unique_lock lock(mutex);
      const auto it = claims.find(digest);
      if (it == claims.end()) return;
      auto& list = it->second;
      const auto at =
          std::find_if(list.begin(), list.end(), [&](const Claim& c) { return c.by == by; });
      if (at == list.end()) return;
      list.erase(at);
      if (list.empty()) claims.erase(it);
    }
    dropped.notify_all();
  }
  // Waits while another oracle than `by` simulates `digest` to `until` or later (what it
  // records then settles a run to `until`); true when it waited, or when a fact of `digest`
  // is recorded (one may have been since the caller last looked).
  bool wait_for(const Digest& digest, const void* by, Time until) const {
    std::unique_lock lock(mutex);
    const auto busy = [&] {
      const auto it = claims.find(digest);
      return it != claims.end() &&
             std::any_of(it->second.begin(), it->second.end(),
                         [&](const Claim& c) { return c.by != by && c.until >= until; });
    };
    if (!busy()) return facts.contains(digest);
    dropped.wait(lock, [&] { return !busy(); });
    return true;
  }
  [[nodiscard]] std::optional<Fact> find(const Digest& digest) const {
    const std::shared_lock lock(mutex);
    const auto it = facts.find(digest);
    if (it == facts.end()) return std::nullopt;
    return it->second;
  }
};

OracleFacts::OracleFacts() : impl_(std::make_unique<Impl>()) {}
OracleFacts::~OracleFacts() = default;

std::size_t OracleFacts::claimed() const {
  const std::shared_lock lock(impl_->mutex);
  return impl_->claims.size();
}

std::size_t OracleFacts::size() const {
  const std::shared_lock lock(impl_->mutex);
  return impl_->facts.size();
}

struct CollectiveOracle::Impl {
  Impl(const topo::Topology& t, OracleSettings s)
      : topology(t),
        seed(s.seed),
        ideal(s.ideal),
        threads(checked_threads(s.threads)),
        network(t, s.ideal) {}

  static int checked_threads(int n) {
    constexpr int kMaxThreads = 64;
    if (n < 1 || n > kMaxThreads) throw Error::internal("oracle: threads out of range");
    return n;
  }

  const topo::Topology& topology;
  std::uint64_t seed;
  bool ideal;
  // `OracleSettings::threads`; `set_threads` may change it from another thread.
  std::atomic<int> threads;
  CalibratedNetwork network;
  // By protocol, and NVLS last; only slot 0 on the ideal network (every slot is the topology).
  std::array<std::unique_ptr<Engine>, topo::kProtocols + 1> engines;
  OracleStats stats;
  // `limit_events`: stats.events no simulation may take past (0: none).
  std::uint64_t event_limit = 0;
  std::unordered_map<QueryKey, OracleAnswer, QueryKeyHash> by_query;
  // Answers without the base latency: calibrated copies may coincide link for link.
  std::unordered_map<Digest, OracleAnswer, DigestHash> by_structure;
  // Structures bounded and not simulated (`priced_set`): the bound without the base (zero: no
  // bound; raised by a simulation stopped at a time), the events a simulation would process,
  // whether they were counted in `stats.events`, and how many of those as avoided.
  struct Bounded {
    Time slowest;
    std::uint64_t events = 0;
    bool counted = false;
    std::uint64_t avoided = 0;
  };
  std::unordered_map<Digest, Bounded, DigestHash> bound_by_structure;
  std::unordered_map<std::uint64_t, std::vector<Pair>> pairs_by_shape;
  // Programs by (shape, size): a layout's groups (and later queries' of the same shape and
  // size) share one lowered program instead of lowering it per group. A part's spec is its
  // shape's fields and its size, and lowering depends on nothing else, so a shared program is
  // the one each part would have lowered. Bounded by the transfers of the explicit schedules it
  // holds and the rank orders of the implicit ones: emptied past kLoweredWeight.
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<const Program>,
                     PairHash>
      lowered;
  // The last explicit schedule lowered per shape (any size), kept in `lowered`: a part of the
  // same shape at another size is lowered like it (`lower_program`'s `like`, which checks that
  // its transfers match and shares its dependencies: the same schedule, built in one pass).
  std::unordered_map<std::uint64_t, std::shared_ptr<const Program>> like_by_shape;
  std::uint64_t lowered_weight = 0;
  // Grouped transfers (`waited`) by structure, without the base latency.
  std::unordered_map<Digest, Time, DigestHash> waited_by_structure;
  // `publish_to`, `consult`.
  std::shared_ptr<OracleFacts> published;
  std::shared_ptr<const OracleFacts> consulted;

  Engine& engine(topo::Protocol protocol, bool nvls) {
    const std::size_t slot = !network.calibrated() ? 0
                             : nvls                ? topo::kProtocols
                                                   : static_cast<std::size_t>(protocol);
    auto& e = engines[slot];
    if (!e) e = std::make_unique<Engine>(network.topology(protocol, nvls), seed);
    return *e;
  }

  std::uint64_t shape_of(const CollectiveSpec& spec, std::size_t n) const {
    std::uint64_t h = hash_mix(0xC0111EC7ULL, static_cast<std::uint64_t>(spec.op));
    h = hash_mix(h, static_cast<std::uint64_t>(spec.algorithm));
    h = hash_mix(h, static_cast<std::uint64_t>(spec.chunks));
    h = hash_mix(h, static_cast<std::uint64_t>(spec.channels));
    h = hash_mix(h, static_cast<std::uint64_t>(spec.ranks_per_node));
    h = hash_mix(h, spec.forward_on_arrival ? 1U : 0U);
    h = hash_mix(h, n);
    h = hash_mix(h, spec.levels.size());
    for (int l : spec.levels) h = hash_mix(h, static_cast<std::uint64_t>(l));
    h = hash_mix(h, spec.level_algorithms.size());
    for (Algorithm a : spec.level_algorithms) h = hash_mix(h, static_cast<std::uint64_t>(a) + 1);
    return h;
  }

  const std::vector<Pair>& pairs(Part& part) {
    auto it = pairs_by_shape.find(part.shape);
    if (it != pairs_by_shape.end()) return it->second;
    lower_part(part);
    return pairs_by_shape.emplace(part.shape, distinct_pairs(*part.schedule)).first->second;
  }

  void lower_part(Part& part) {
    if (part.schedule) return;
    const std::pair key{part.shape, part.size};
    if (const auto it = lowered.find(key); it != lowered.end()) {
      part.schedule = it->second;
      return;
    }
    const auto like = like_by_shape.find(part.shape);
    part.schedule = lower_program(part.spec, static_cast<int>(part.group.size()), kImplicitAbove,
                                  like != like_by_shape.end() ? like->second.get() : nullptr);
    ++stats.lowered;
    // Explicit schedules hold their transfers; implicit programs a rank order per channel.
    const bool stored = dynamic_cast<const Schedule*>(part.schedule.get()) != nullptr;
    const std::uint64_t weight =
        stored ? part.schedule->transfer_count()
               : part.group.size() * static_cast<std::uint64_t>(std::max(1, part.spec.channels));
    if (weight > kLoweredWeight) return;  // not kept, and nothing dropped for it
    if (lowered_weight + weight > kLoweredWeight) {
      lowered.clear();
      like_by_shape.clear();
      lowered_weight = 0;
    }
    lowered.emplace(key, part.schedule);
    if (stored) like_by_shape.insert_or_assign(part.shape, part.schedule);
    lowered_weight += weight;
  }

  // The layout as the simulator sees it: schedules, routes with links renamed in order of first
  // use, the renamed links' rates and latencies, and the parts' sizes. All but the sizes is a
  // function of the parts' shapes and devices and the engine (its topology, router and seed),
  // so it is kept by those (`Engine::routes_by_layout`): a layout met again, at any size, is not
  // routed again. Every shape kept there was met by `pairs` since the last `clear` (which
  // empties it), and `pairs` keeps a shape's pairs until then, so skipping `pairs` on a kept
  // layout skips no lowering: the oracle's counters are as if it were routed.
  Digest structure(std::vector<Part>& parts, Engine& e) {
    const Digest layout = layout_of(parts);
    auto it = e.routes_by_layout.find(layout);
    if (it == e.routes_by_layout.end()) {
      if (e.routes_by_layout.size() >= kLayoutsKept) e.routes_by_layout.clear();
      it = e.routes_by_layout.emplace(layout, routes_of(parts, e)).first;
    }
    Digest d = it->second;
    for (const Part& part : parts) d.add(part.size);
    return d;
  }

  // The parts' shapes and devices: with the engine, what fixes their routes (`structure`) and
  // their link-connected sets (`link_components`).
  static Digest layout_of(const std::vector<Part>& parts) {
    Digest layout;
    layout.add(parts.size());
    for (const Part& part : parts) {
      layout.add(part.shape);
      layout.add(part.group.size());
      // Two devices per word (the group's size fixes how many words follow).
      const std::size_t n = part.group.size();
      for (std::size_t i = 0; i + 1 < n; i += 2) {
        layout.add(std::uint64_t{part.group[i]} | std::uint64_t{part.group[i + 1]} << 32U);
      }
      if (n % 2 == 1) layout.add(part.group[n - 1]);
    }
    return layout;
  }

  // `structure` but for the sizes: the parts' shapes, routes with links renamed in order of
  // first use, and the renamed links' rates and latencies.
  Digest routes_of(std::vector<Part>& parts, Engine& e) {
    if (e.label.size() != e.topology.num_links()) {
      e.label.assign(e.topology.num_links(), std::numeric_limits<std::uint32_t>::max());
    }
    std::vector<topo::LinkId> used;
    Digest d;
    d.add(parts.size());
    for (Part& part : parts) {
      d.add(part.shape);
      for (const Pair& p : pairs(part)) {
        const topo::DeviceId src = part.group[p.src];
        const topo::DeviceId dst = part.group[p.dst];
        e.router.route_into(src, dst, flow_key(src, dst, p.channel, seed), e.route);
        const auto& route = e.route;
        d.add(route.size());
        for (topo::LinkId l : route) {
          if (e.label[l] == std::numeric_limits<std::uint32_t>::max()) {
            e.label[l] = static_cast<std::uint32_t>(used.size());
            used.push_back(l);
          }
          d.add(e.label[l]);
        }
      }
    }
    for (topo::LinkId l : used) {
      const topo::Link& link = e.topology.link(l);
      d.add(std::bit_cast<std::uint64_t>(link.bandwidth.bytes_per_s()));
      d.add(static_cast<std::uint64_t>(link.latency.ps()));
      e.label[l] = std::numeric_limits<std::uint32_t>::max();
    }
    return d;
  }

  // `contended`: the contention-free evaluation already stepped aside for these parts. With
  // `until`, nullopt when a part has not finished by then (see `part_durations`).
  std::optional<OracleAnswer> simulate_parts(std::vector<Part>& parts, Engine& e,
                                             bool contended = false, Time until = Time::max()) {
    return simulate_parts(parts, e, contended, until, stats);
  }
  // The same, counting in `counts` (`stats`, or a thread's own in `priced_sets`), and ending
  // early (nullopt) once `cancel` says so.
  std::optional<OracleAnswer> simulate_parts(std::vector<Part>& parts, Engine& e, bool contended,
                                             Time until, OracleStats& counts,
                                             const Cancel* cancel = nullptr) {
    const auto durations = part_durations(parts, e, contended, until, counts, cancel);
    if (!durations) return std::nullopt;
    return OracleAnswer{durations->front(),
                        *std::max_element(durations->begin(), durations->end())};
  }

  // Each part's duration, all parts run at once (contention-free evaluation, else events). The
  // event simulation stops after the events at `until`: nullopt when a part has not finished
  // by then (it ends later); its events are counted.
  std::optional<std::vector<Time>> part_durations(std::vector<Part>& parts, Engine& e,
                                                  bool contended = false,
                                                  Time until = Time::max()) {
    return part_durations(parts, e, contended, until, stats);
  }
  // The same, counting in `counts`; with parts lowered and no event limit, it touches nothing
  // of the oracle but `e` and `counts` (so threads may run it on engines of their own). A run
  // with `until` ends early (nullopt) once `cancel` says so, between its progress checks.
  std::optional<std::vector<Time>> part_durations(std::vector<Part>& parts, Engine& e,
                                                  bool contended, Time until, OracleStats& counts,
                                                  const Cancel* cancel = nullptr) {
    std::vector<detail::GroupProgram> programs;
    for (Part& part : parts) {
      lower_part(part);
      programs.push_back(
          {part.schedule.get(), part.group, detail::ProgramKey{part.shape, part.size}});
    }
    if (auto run = contended ? std::nullopt : e.evaluator.evaluate(e.router, programs, seed)) {
      ++counts.simulations;
      ++counts.contention_free;
      return std::move(run->durations);
    }
    // The events the simulation may still process (the budget's rest), as below.
    constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t budget = event_limit == 0              ? kNoLimit
                                 : event_limit > counts.events ? event_limit - counts.events
                                                               : 0;
    if (budget > 0) {
      if (auto run = e.private_rings.run(e.router, programs, seed, until, budget)) {
        // The simulator's run, event for event (coll/private_rings.h).
        counts.events += run->events;
        if (!run->finished) {
          if (run->events >= budget) throw EventLimitReached();
          return std::nullopt;  // a part ends after `until`
        }
        ++counts.simulations;
        ++counts.private_rings;
        return std::move(run->durations);
      }
    }
    if (e.simulator) {
      e.simulator->reset();
    } else {
      e.simulator = std::make_unique<net::Simulator>(e.topology);
    }
    std::vector<std::unique_ptr<Execution>> runs;
    for (Part& part : parts) {
      runs.push_back(
          std::make_unique<Execution>(*e.simulator, e.router, part.schedule, part.group, seed));
    }
    for (auto& run : runs) run->start();
    const std::uint64_t events_before = e.simulator->events_processed();
    if (event_limit == 0 && until == Time::max()) {
      e.simulator->run();
      counts.events += e.simulator->events_processed() - events_before;
    } else {
      // Stops where the limit is reached (nothing of the query is memoized) or after `until`,
      // or before, when the run's progress shows that it ends after `until`.
      const std::uint64_t left = event_limit == 0 ? kNoLimit - events_before : budget;
      const bool done =
          left > 0 && run_checked(e, programs, events_before + left, until, counts, cancel);
      const std::uint64_t processed = e.simulator->events_processed() - events_before;
      counts.events += processed;
      const bool finished =
          std::all_of(runs.begin(), runs.end(), [](const auto& run) { return run->finished(); });
      if (!done && !finished) {
        e.simulator->reset();  // drops the callbacks into the runs about to be destroyed
        if (left == 0 || processed >= left) throw EventLimitReached();
        return std::nullopt;  // a part ends after `until`
      }
    }
    std::vector<Time> durations;
    durations.reserve(runs.size());
    for (const auto& run : runs) {
      if (!run->finished()) throw Error::internal("oracle: collective did not finish");
      durations.push_back(run->duration());
    }
    ++counts.simulations;
    return durations;
  }

  // `e.simulator->run_within(max_events, until)` for the runs of `programs`, started at time
  // zero, but returning early (false, events left) once their progress bound
  // (`detail::progress_bound`) passes `until`: they end after it, so the caller's answer is the
  // one the run to `until` gives. Only for runs of enough transfers to pay for the bound's pass,
  // and only when `max_events` covers the whole run (the bound's event count, the simulator's):
  // a run that would have reached the limit before `until` throws as before. The bound rises no
  // faster than the clock, so the next check comes no sooner than the clock can bring it to
  // `until`, and at least a 32nd of `until` later. The run's events are the same: it is only
  // paused.
  bool run_checked(Engine& e, std::span<const detail::GroupProgram> programs,
                   std::uint64_t max_events, Time until, OracleStats& counts,
                   const Cancel* cancel = nullptr) {
    net::Simulator& sim = *e.simulator;
    constexpr std::uint64_t kCheckedTransfers = 1024;
    std::uint64_t transfers = 0;
    for (const detail::GroupProgram& p : programs) transfers += p.program->transfer_count();
    std::optional<detail::RunBound> bound;
    if (until != Time::max() && transfers >= kCheckedTransfers) {
      bound = e.evaluator.lower_bound(e.router, programs, seed, &e.loads);
    }
    if (!bound || max_events - sim.events_processed() < bound->events) {
      return sim.run_within(max_events, until);
    }
    const Time margin = Time::picoseconds(static_cast<std::int64_t>(4 * transfers));
    const Time step = Time::picoseconds(std::max<std::int64_t>(1, until.ps() / 32));
    Time at = std::clamp(Time::picoseconds(until.ps() - bound->slowest.ps()), Time::zero(), until);
    for (;;) {
      if (sim.run_within(max_events, at)) return true;
      if (at >= until || sim.events_processed() >= max_events) return false;
      if (cancel != nullptr && (*cancel)()) return false;
      const Time progress = detail::progress_bound(sim, e.loads, margin);
      if (progress > until) {
        ++counts.progress_stops;
        return false;
      }
      at = std::min(until, std::max(at + step, sim.now() + (until - progress)));
    }
  }

  // `transfers` in groups: the largest, over classes of alike parts (pairs routed over links of
  // equal rates and latencies, pair by pair), of the class's mean duration, all parts run at
  // once; memoized by structure. Parts that share no link run as they would alone, so the parts
  // of a class take equal times and the answer is the slowest part's.
  Time waited(std::vector<Part>& parts, Engine& e) {
    const Digest digest = structure(parts, e);
    if (auto it = waited_by_structure.find(digest); it != waited_by_structure.end()) {
      ++stats.structural_hits;
      return it->second;
    }
    const std::vector<Time> durations = *part_durations(parts, e);
    struct Class {
      std::int64_t sum = 0;
      std::int64_t count = 0;
    };
    std::unordered_map<std::uint64_t, Class> classes;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      Part& part = parts[i];
      std::uint64_t profile = 0x9A17ED00ULL;
      for (const Pair& p : pairs(part)) {
        const topo::DeviceId src = part.group[p.src];
        const topo::DeviceId dst = part.group[p.dst];
        e.router.route_into(src, dst, flow_key(src, dst, p.channel, seed), e.route);
        const auto& route = e.route;
        profile = hash_mix(profile, route.size());
        for (topo::LinkId l : route) {
          const topo::Link& link = e.topology.link(l);
          profile = hash_mix(profile, std::bit_cast<std::uint64_t>(link.bandwidth.bytes_per_s()));
          profile = hash_mix(profile, static_cast<std::uint64_t>(link.latency.ps()));
        }
      }
      Class& c = classes[profile];
      c.sum += durations[i].ps();
      ++c.count;
    }
    Time result;
    for (const auto& [profile, c] : classes) {
      result = std::max(result, Time::picoseconds(c.sum / c.count));
    }
    waited_by_structure.emplace(digest, result);
    return result;
  }

  // The parts in sets that share links: groups of different sets use disjoint links, so in
  // the flow model neither slows the other. Sets in order of their first part, each in part
  // order. A function of the parts' layout and the engine, so kept by layout
  // (`Engine::sets_by_layout`) as `structure` keeps routes: a layout met again, at any size, is
  // not routed again (and, as there, skipping `pairs` on a kept layout skips no lowering).
  LinkSets link_components(std::vector<Part>& parts, Engine& e) {
    const Digest layout = layout_of(parts);
    auto it = e.sets_by_layout.find(layout);
    if (it == e.sets_by_layout.end()) {
      const std::uint64_t weight = kSetsEntryWeight + parts.size();
      if (e.sets_weight + weight > kSetsWeight) {
        e.sets_by_layout.clear();
        e.sets_weight = 0;
      }
      it = e.sets_by_layout.emplace(layout, set_of_each(parts, e)).first;
      e.sets_weight += weight;
    }
    return LinkSets(it->second);
  }

  // `link_components` routed afresh: the set of each part, sets numbered in order of their first
  // part.
  std::vector<std::uint32_t> set_of_each(std::vector<Part>& parts, Engine& e) {
    constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
    if (e.owner.size() != e.topology.num_links()) e.owner.assign(e.topology.num_links(), kNone);
    std::vector<std::size_t> parent(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) parent[i] = i;
    std::vector<topo::LinkId> touched;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      Part& part = parts[i];
      for (const Pair& p : pairs(part)) {
        const topo::DeviceId src = part.group[p.src];
        const topo::DeviceId dst = part.group[p.dst];
        e.router.route_into(src, dst, flow_key(src, dst, p.channel, seed), e.route);
        for (const topo::LinkId l : e.route) {
          if (e.owner[l] == kNone) {
            e.owner[l] = static_cast<std::uint32_t>(i);
            touched.push_back(l);
          } else {
            const std::size_t a = find_root(parent, i);
            const std::size_t b = find_root(parent, e.owner[l]);
            if (a != b) parent[std::max(a, b)] = std::min(a, b);
          }
        }
      }
    }
    for (topo::LinkId l : touched) e.owner[l] = kNone;
    // A root is its set's least part (unions keep the smaller root), so it comes first.
    std::vector<std::uint32_t> set_of(parts.size());
    std::uint32_t sets = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::size_t root = find_root(parent, i);
      set_of[i] = root == i ? sets++ : set_of[root];
    }
    return set_of;
  }

  // The bound of a structure not memoized (`priced_set`), computed on first use; nullptr when
  // the contention-free evaluation answers (then memoized in `by_structure`).
  Bounded* bounded(std::vector<Part>& parts, Engine& e, const Digest& digest) {
    auto it = bound_by_structure.find(digest);
    if (it != bound_by_structure.end()) return &it->second;
    std::vector<detail::GroupProgram> programs;
    for (Part& part : parts) {
      lower_part(part);
      programs.push_back(
          {part.schedule.get(), part.group, detail::ProgramKey{part.shape, part.size}});
    }
    if (const auto run = e.evaluator.evaluate(e.router, programs, seed)) {
      // Contention-free: exact without events, as `simulate_parts` would answer (and published
      // as `settle` publishes that answer).
      ++stats.simulations;
      ++stats.contention_free;
      const OracleAnswer answer{run->durations.front(),
                                *std::max_element(run->durations.begin(), run->durations.end())};
      by_structure.emplace(digest, answer);
      if (published) published->impl_->record_answer(digest, answer);
      return nullptr;
    }
    const auto bound = e.evaluator.lower_bound(e.router, programs, seed);
    return &bound_by_structure
                .emplace(digest, bound ? Bounded{bound->slowest, bound->events} : Bounded{})
                .first->second;
  }

  // Counts the events of a structure not simulated, once (see `priced_set`).
  void count_avoided(Bounded& b) {
    if (b.counted) return;
    b.counted = true;
    b.avoided = b.events;
    stats.events += b.events;
    stats.avoided_events += b.events;
  }

  // One set of link-connected parts, memoized by its structure. With `within`, a set that
  // would be event-simulated is first bounded from below (`UncontendedEvaluator::lower_bound`,
  // plus `base`): nullopt, and no simulation, when that bound exceeds `*within`; else it is
  // simulated until its clock passes `*within` less `base`, and when a part has not finished by
  // then, nullopt too (its slowest group would take longer than `*within`), and the structure's
  // bound rises to that time. With `skip`, the set is not simulated at all (nullopt unless
  // memoized): the query was ruled out by an earlier set. The events the simulation of a set
  // not simulated (or not to its end) would have processed (the bound's count, which equals the
  // simulator's) are counted in `stats.events` once per structure, and in
  // `stats.avoided_events`, so that an event budget (`limit_events`) spends what it spent
  // when every candidate was simulated; a structure counted so and simulated later is counted once.
  // What the lookups of a set leave (`look_up`): its answer, known without a run; the query
  // ruled out by its bound (counted as avoided); its structure already being simulated for an
  // earlier set of the query (`pending`: that job); or a run, stopped at `until`, of a
  // structure bounded before when `contended` (the contention-free pass then steps aside).
  struct Lookup {
    enum class Kind : std::uint8_t { kAnswered, kRuledOut, kPending, kRun };
    Kind kind = Kind::kAnswered;
    OracleAnswer answer;       // kAnswered
    std::size_t job = 0;       // kPending
    Digest digest;             // kRuledOut, kPending, kRun
    bool contended = false;    // kRun
    Time until = Time::max();  // kRun
  };
  // `priced_set`'s steps up to its run: one-device groups, the structural memo, then with
  // `within` or `skip` the structure's bound (which may answer without events, or rule the query
  // out, counting the run avoided). With `pending`, a structure in it is not bounded.
  Lookup look_up(std::vector<Part>& parts, Engine& e, std::optional<Time> within, Time base,
                 bool skip,
                 const std::unordered_map<Digest, std::size_t, DigestHash>* pending = nullptr) {
    using Kind = Lookup::Kind;
    const bool idle =
        std::all_of(parts.begin(), parts.end(), [](const Part& p) { return p.group.size() <= 1; });
    if (idle) return {};
    const Digest digest = structure(parts, e);
    if (auto it = by_structure.find(digest); it != by_structure.end()) {
      ++stats.structural_hits;
      return {.answer = it->second};
    }
    if (const OracleAnswer* answer = consulted_answer(digest)) return {.answer = *answer};
    if (pending != nullptr) {
      if (auto it = pending->find(digest); it != pending->end()) {
        return {.kind = Kind::kPending, .job = it->second, .digest = digest};
      }
    }
    if (within || skip) {
      Bounded* b = bounded(parts, e, digest);
      if (b == nullptr) return {.answer = by_structure.find(digest)->second};
      if (!skip && b->slowest + base <= *within) {
        // A run that a consulted oracle stopped may show that the structure ends later.
        if (raise_from_facts(digest, *b) && b->slowest + base > *within) ++stats.consulted;
      }
      if (skip || b->slowest + base > *within) {
        count_avoided(*b);
        return {.kind = Kind::kRuledOut, .digest = digest};
      }
    }
    // The bound did not rule it out, so within >= base. A structure without a bound (a link
    // without bandwidth: the simulation names it) runs to its end: its events are not known.
    const auto bounded_entry = bound_by_structure.find(digest);
    const bool contended = bounded_entry != bound_by_structure.end();
    const bool stoppable = within && contended && bounded_entry->second.events > 0;
    const Time until = stoppable ? *within - base : Time::max();
    if (consulted && event_limit == 0 && consulted->impl_->wait_for(digest, this, until)) {
      // Another oracle was simulating it to `until` or later, or has recorded it since the
      // lookup above: what it recorded answers the run, or shows it to end after `until`;
      // nothing, when its run did not settle.
      if (const OracleAnswer* answer = consulted_answer(digest)) return {.answer = *answer};
      if (contended && within && raise_from_facts(digest, bounded_entry->second) &&
          bounded_entry->second.slowest + base > *within) {
        ++stats.consulted;
        count_avoided(bounded_entry->second);
        return {.kind = Kind::kRuledOut, .digest = digest};
      }
    }
    return {.kind = Kind::kRun, .digest = digest, .contended = contended, .until = until};
  }

  // The structures this oracle simulates while it lives, claimed in the facts it publishes
  // (`OracleFacts::Impl::claim`): a consulting oracle about to simulate one waits for what its
  // run records instead (`look_up`). Dropped on the way out, after `settle` has recorded them.
  struct Claims {
    OracleFacts::Impl* facts;
    const void* by;
    std::vector<Digest> held;
    void add(const Digest& digest, Time until) {
      if (facts == nullptr) return;
      held.push_back(digest);
      facts->claim(digest, by, until);
    }
    ~Claims() {
      for (const Digest& digest : held) facts->drop(digest, by);
    }
    Claims(OracleFacts::Impl* f, const void* b) : facts(f), by(b) {}
    Claims(const Claims&) = delete;
    Claims& operator=(const Claims&) = delete;
  };
  Claims claims() { return Claims(published ? published->impl_.get() : nullptr, this); }

  // A structure about to be simulated: the events of its bound, counted when a query was ruled
  // out by it, are not counted again (its run counts its own).
  void uncount(const Digest& digest) {
    const auto it = bound_by_structure.find(digest);
    if (it == bound_by_structure.end() || !it->second.counted) return;
    stats.events -= it->second.events;
    stats.avoided_events -= it->second.avoided;
    it->second.counted = false;
    it->second.avoided = 0;
  }

  // The run of `run` (a kRun lookup) answered `result` after `processed` events: memoized; or,
  // stopped at its `until` (contended, so bounded above), nullopt, its bound raised past
  // `until` and its events counted as if it ran to its end.
  std::optional<OracleAnswer> settle(const Lookup& run, const std::optional<OracleAnswer>& result,
                                     std::uint64_t processed) {
    if (!result) {
      Bounded& b = bound_by_structure.find(run.digest)->second;
      b.slowest = std::max(b.slowest, run.until + Time::picoseconds(1));
      if (published) published->impl_->record_after(run.digest, b.slowest);
      b.avoided = b.events > processed ? b.events - processed : 0;
      b.counted = true;
      stats.events += b.avoided;
      stats.avoided_events += b.avoided;
      ++stats.stopped;
      return std::nullopt;
    }
    if (run.contended) bound_by_structure.erase(run.digest);
    by_structure.emplace(run.digest, *result);
    if (published) published->impl_->record_answer(run.digest, *result);
    return result;
  }

  // The answer of a structure not memoized here that a consulted oracle published (`consult`),
  // memoized here; nullptr when none is known or an event limit is set.
  const OracleAnswer* consulted_answer(const Digest& digest) {
    if (!consulted || event_limit != 0) return nullptr;
    const auto fact = consulted->impl_->find(digest);
    if (!fact || !fact->answer) return nullptr;
    ++stats.consulted;
    return &by_structure.emplace(digest, *fact->answer).first->second;
  }

  // Raises `b`, the bound of the structure `digest`, to a time a consulted oracle showed it
  // to end after (`consult`); true when that raised it.
  bool raise_from_facts(const Digest& digest, Bounded& b) const {
    if (!consulted || event_limit != 0) return false;
    const auto fact = consulted->impl_->find(digest);
    if (!fact || fact->after <= b.slowest) return false;
    b.slowest = fact->after;
    return true;
  }

  std::optional<OracleAnswer> priced_set(std::vector<Part>& parts, Engine& e,
                                         std::optional<Time> within, Time base, bool skip = false) {
    const Lookup run = look_up(parts, e, within, base, skip);
    if (run.kind == Lookup::Kind::kAnswered) return run.answer;
    if (run.kind == Lookup::Kind::kRuledOut) return std::nullopt;
    uncount(run.digest);  // before the run: an event limit counts from what is left
    Claims claimed = claims();
    claimed.add(run.digest, run.until);
    const std::uint64_t events_before = stats.events;
    const std::optional<OracleAnswer> result = simulate_parts(parts, e, run.contended, run.until);
    return settle(run, result, stats.events - events_before);
  }

  // The parts in link-connected sets (`link_components`; one set for one part).
  LinkSets sets_of(std::vector<Part>& parts, Engine& e) {
    constexpr std::array<std::uint32_t, 1> kOne{0};
    return parts.size() > 1 ? link_components(parts, e) : LinkSets(kOne);
  }

  // `f(set)` on the parts `members` (in that order), moved out of `parts` and back.
  template <class F>
  auto on_set(std::vector<Part>& parts, std::span<const std::uint32_t> members, F f) {
    std::vector<Part> set;
    set.reserve(members.size());
    for (const std::uint32_t i : members) set.push_back(std::move(parts[i]));
    auto out = f(set);
    for (std::size_t j = 0; j < set.size(); ++j) parts[members[j]] = std::move(set[j]);
    return out;
  }

  // `sets` in the order `answer` prices them under a time to beat: the largest known time
  // (memoized, or published by a consulted oracle) or event-free bound (raised by a consulted
  // oracle's stop) first; ties in set order. So an oracle that consults facts may order a query
  // otherwise than the oracle that published them did, and read fewer of them. A set's
  // outcome is a function of its structure and of what the memo and the consulted facts hold when
  // the query starts (answered when memoized, published, contention-free or without a bound; else
  // ruled out exactly when its run, stopped at the time to beat, does not end; a set that shares an
  // earlier set's structure is answered by that set's run or ruled out with it), so the query's
  // answer does not depend on the order: only which sets are simulated before one rules the query
  // out, and so what the memo holds after a query that was ruled out (a set not simulated is not
  // memoized: a later `lower_bound` of it gives its bound, not its time). The bound is the cheapest
  // sign of which set is slow (on the 131,072-GPU rail cluster of results/placer_bench.md the rails
  // with the larger bounds were the ones that ruled the tuner's losing candidate out). Each set's
  // key is its `set_bound`, as `lower_bound` asks it: what that computes (the routes, kept by
  // layout; the memo and facts read; the bound, memoized by structure) `look_up` computes for
  // every set of such a query anyway, unless a run throws first, and a set answered there (the
  // contention-free evaluation, a fact) is then a structural hit, as after a `lower_bound`.
  LinkSets slowest_first(std::vector<Part>& parts, const LinkSets& sets, Engine& e) {
    std::vector<Time> known(sets.size());
    for (std::size_t s = 0; s < sets.size(); ++s) {
      known[s] = on_set(parts, sets[s], [&](std::vector<Part>& set) { return set_bound(set, e); });
    }
    std::vector<std::size_t> order(sets.size());
    for (std::size_t s = 0; s < order.size(); ++s) order[s] = s;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return known[a] > known[b]; });
    return sets.reordered(order);
  }

  // What `part_durations` counted in `counts` (a thread's own), added to `stats`.
  void add_counts(const OracleStats& counts) {
    stats.simulations += counts.simulations;
    stats.contention_free += counts.contention_free;
    stats.private_rings += counts.private_rings;
    stats.progress_stops += counts.progress_stops;
    stats.events += counts.events;
  }

  // `priced_set` of every set of `sets` in order, as `answer` asks it without threads (each set
  // skipped once one rules the query out), but for the event simulations: those of distinct
  // structures not memoized run on `workers` (> 1) threads at once, each on an engine of its own
  // (the same topology and seed; a run's answer depends only on its parts, an engine holds
  // scratch). Every step that reads or writes the oracle's state runs on this thread in set order,
  // as in `priced_set`: first each set's structural lookup and, with `within`, its event-free bound
  // (which `priced_set` asks before simulating, or of a skipped set, before counting it); then,
  // once the simulations are done, the bound's events uncounted, the counters, the memo, a
  // simulation stopped at `within` raising its bound and ruling the query out, and the sets after
  // it counted as skipped (their runs, if any, dropped). A set whose structure an earlier set of
  // the query simulates is answered as `priced_set` would: a structural hit once memoized, else
  // nothing more. So the answers and the memo's answers are those of the sets one by one, and so
  // are the counters, with two exceptions, both off the searches' paths: when a run throws, the
  // sets after it were already looked up (their structural hits, bounds and contention-free
  // answers counted and kept, where one by one would have stopped at the throw), and `lowered`
  // counts the programs of sets looked up as jobs (lowered here, not by the threads) that one by
  // one would skip unlowered after a stop, when the oracle does not keep them. Only time differs
  // otherwise: runs after one that stops are wasted until they end or reach a progress check
  // (`Cancel`; runs without checks, of fewer than 1,024 transfers or of private rings, end on
  // their own). Needs no event limit. The answers in set order; nullopt when a set rules the
  // query out.
  std::optional<std::vector<OracleAnswer>> priced_sets(std::vector<Part>& parts,
                                                       const LinkSets& sets, Engine& e,
                                                       std::optional<Time> within, Time base,
                                                       int workers) {
    struct Job {
      std::size_t set = 0;  // its lookup: state[set]
      std::vector<Part> parts;
      std::optional<OracleAnswer> answer;
      OracleStats counts;
      std::exception_ptr error;
      bool memoized = false;
    };
    // Each set's lookup; a kRun one is a job (`Lookup::job`, the index in `jobs`, set here).
    std::vector<Lookup> state(sets.size());
    std::vector<Job> jobs;
    std::unordered_map<Digest, std::size_t, DigestHash> pending;
    Claims claimed = claims();
    // Every job's parts go back to `parts` however this returns.
    struct GiveBack {
      std::vector<Job>& jobs;
      const LinkSets& sets;
      std::vector<Part>& parts;
      ~GiveBack() {
        for (Job& job : jobs) {
          for (std::size_t j = 0; j < job.parts.size(); ++j) {
            parts[sets[job.set][j]] = std::move(job.parts[j]);
          }
        }
      }
    } give_back_jobs{jobs, sets, parts};
    // A set's bound ruled the query out: the sets after it are skipped (`priced_set`'s `skip`).
    bool bound_out = false;
    // A lookup that throws ends the query there, once the sets before it are done (as one by
    // one).
    std::size_t looked_up = sets.size();
    std::exception_ptr lookup_error;
    for (std::size_t s = 0; s < sets.size() && !lookup_error; ++s) {
      try {
        Lookup& st = state[s];
        st = on_set(parts, sets[s], [&](std::vector<Part>& set) {
          return look_up(set, e, within, base, bound_out, &pending);
        });
        if (st.kind == Lookup::Kind::kRuledOut) bound_out = true;
        if (st.kind == Lookup::Kind::kRun) {
          st.job = jobs.size();
          pending.emplace(st.digest, jobs.size());
          Job& job = jobs.emplace_back(Job{.set = s});
          for (const std::uint32_t i : sets[s]) job.parts.push_back(std::move(parts[i]));
          for (Part& part : job.parts) lower_part(part);
        }
      } catch (...) {
        lookup_error = std::current_exception();
        looked_up = s;
      }
    }
    for (const Job& job : jobs) {
      if (job.set < looked_up) claimed.add(state[job.set].digest, state[job.set].until);
    }
    // Jobs start in set order; none starts, and a running one ends at its next progress check,
    // once a job before it has stopped at its time to beat (the query is ruled out there: the
    // sets after it are skipped, whatever their runs would say).
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> stopped{std::numeric_limits<std::size_t>::max()};
    const auto work = [&](Engine& engine) {
      for (std::size_t j = next.fetch_add(1); j < jobs.size(); j = next.fetch_add(1)) {
        Job& job = jobs[j];
        // Its lookup threw (not run, as one by one), or an earlier job stopped.
        if (job.set >= looked_up || stopped.load(std::memory_order_relaxed) < j) continue;
        try {
          const Cancel cancel{&stopped, j};
          const Lookup& run = state[job.set];
          job.answer =
              simulate_parts(job.parts, engine, run.contended, run.until, job.counts, &cancel);
          if (!job.answer) {
            std::size_t seen = stopped.load(std::memory_order_relaxed);
            while (j < seen && !stopped.compare_exchange_weak(seen, j)) {
            }
          }
        } catch (...) {
          job.error = std::current_exception();
        }
      }
    };
    // Threads beside this one: one per job past the first, within the limit.
    const std::size_t helpers =
        jobs.empty() ? 0 : std::min(static_cast<std::size_t>(workers), jobs.size()) - 1;
    {
      // Helpers that cannot be had (no memory for an engine, no thread) leave their jobs to
      // this thread: the same answers, later.
      std::vector<std::jthread> running;
      try {
        running.reserve(helpers);
        for (std::size_t h = 0; h < helpers; ++h) {
          if (e.twins.size() == h) e.twins.push_back(std::make_unique<Engine>(e.topology, seed));
          running.emplace_back(work, std::ref(*e.twins[h]));
        }
      } catch (const std::exception&) {  // std::bad_alloc, std::system_error
      }
      work(e);
    }
    // In set order, what `priced_set` does after its lookups, and `answer`'s sum.
    std::vector<OracleAnswer> answers(sets.size());
    bool out = false;
    for (std::size_t s = 0; s < looked_up; ++s) {
      const Lookup& st = state[s];
      switch (st.kind) {
        case Lookup::Kind::kAnswered:
          answers[s] = st.answer;
          break;
        case Lookup::Kind::kRuledOut:  // counted as avoided by its lookup
          out = true;
          break;
        case Lookup::Kind::kPending:  // met memoized, as one by one would
          if (jobs[st.job].memoized) {
            ++stats.structural_hits;
            answers[s] = *jobs[st.job].answer;
          }
          break;
        case Lookup::Kind::kRun: {
          Job& job = jobs[st.job];
          if (out) {  // skipped: its bound is counted instead of its run
            count_avoided(bound_by_structure.find(st.digest)->second);
            break;
          }
          uncount(st.digest);
          add_counts(job.counts);
          if (job.error) std::rethrow_exception(job.error);
          const auto answer = settle(st, job.answer, job.counts.events);
          if (!answer) {
            out = true;
            break;
          }
          job.memoized = true;
          answers[s] = *answer;
          break;
        }
      }
    }
    if (lookup_error) std::rethrow_exception(lookup_error);
    if (out) return std::nullopt;
    return answers;
  }

  // The engine that runs `spec` (its protocol's calibrated topology) and its base latency.
  std::pair<Engine*, Time> engine_of(const CollectiveSpec& spec) {
    const topo::Protocol protocol = network.protocol(spec.algorithm, spec.size);
    return {&engine(protocol, spec.algorithm == Algorithm::kNvls),
            network.base_latency(spec.op, spec.algorithm, protocol)};
  }

  // `base` is added to every group that runs something (all but one-device groups). Groups
  // that share no link are priced set by set: 128 tensor-parallel groups in 128 nodes cost
  // what one node's does, one structural lookup per set. With `within`: nullopt (and nothing
  // memoized for the query) when a set's lower bound, or its simulation stopped there, shows
  // that the answer's slowest group takes longer than `*within` (its slowest is at least every
  // set's); an answer returned may still be above `*within` (memoized, or contention-free).
  // With `within` and more than one set, the sets are priced largest bound first
  // (`slowest_first`), else in order.
  std::optional<OracleAnswer> answer(QueryKey key, std::vector<Part>& parts, Engine& e, Time base,
                                     std::optional<Time> within = std::nullopt) {
    if (auto it = by_query.find(key); it != by_query.end()) {
      ++stats.exact_hits;
      return it->second;
    }
    OracleAnswer result;
    LinkSets sets = sets_of(parts, e);
    if (within && sets.size() > 1) sets = slowest_first(parts, sets, e);
    // The set that holds the first part answers `first`.
    const auto holds_first = [&](std::size_t s) { return sets[s].front() == 0; };
    if (sets.size() == 1) {
      const auto a = priced_set(parts, e, within, base);
      if (!a) return std::nullopt;
      result = *a;
    } else if (const int n = threads.load(std::memory_order_relaxed); n > 1 && event_limit == 0) {
      const auto answers = priced_sets(parts, sets, e, within, base, n);
      if (!answers) return std::nullopt;
      for (std::size_t s = 0; s < sets.size(); ++s) {
        if (holds_first(s)) result.first = (*answers)[s].first;
        result.slowest = std::max(result.slowest, (*answers)[s].slowest);
      }
    } else {
      // Once a set rules the query out, the later ones are only counted (`priced_set`).
      bool out = false;
      for (std::size_t s = 0; s < sets.size(); ++s) {
        const auto a = on_set(parts, sets[s], [&](std::vector<Part>& set) {
          return priced_set(set, e, within, base, out);
        });
        if (!a) out = true;
        if (out) continue;
        if (holds_first(s)) result.first = a->first;
        result.slowest = std::max(result.slowest, a->slowest);
      }
      if (out) return std::nullopt;
    }
    if (parts.front().group.size() > 1) result.first += base;
    result.slowest += base;
    by_query.emplace(std::move(key), result);
    return result;
  }

  // A collective query (see `CollectiveOracle::collective`); with `within`, nullopt when its
  // slowest group takes longer than that (see `answer`).
  std::optional<OracleAnswer> query(const CollectiveSpec& spec,
                                    std::span<const std::vector<topo::DeviceId>> groups,
                                    std::optional<Time> within) {
    ++stats.queries;
    if (trivial(spec, groups)) {
      ++stats.trivial;
      return OracleAnswer{};
    }
    QueryKey key = query_key(spec, groups);
    if (auto it = by_query.find(key); it != by_query.end()) {
      ++stats.exact_hits;
      return it->second;
    }
    std::vector<Part> parts = make_parts(spec, groups);
    const auto [e, base] = engine_of(spec);
    auto result = answer(std::move(key), parts, *e, base, within);
    if (!result) ++stats.bounded;
    return result;
  }

  // `CollectiveOracle::lower_bound`: `answer`'s figure where it is known without events, else
  // the largest set's event-free bound, plus the base.
  // With `exact`, whether the bound is the answer (every set memoized, published or
  // contention-free: no event simulation would run).
  Time bound_query(const CollectiveSpec& spec, std::span<const std::vector<topo::DeviceId>> groups,
                   bool* exact = nullptr) {
    ++stats.lower_bounds;
    if (exact != nullptr) *exact = true;
    if (trivial(spec, groups)) return Time::zero();
    QueryKey key = query_key(spec, groups);
    if (auto it = by_query.find(key); it != by_query.end()) return it->second.slowest;
    std::vector<Part> parts = make_parts(spec, groups);
    // Not a structured binding: clang 14 (the sanitizer build's) cannot capture one.
    const std::pair<Engine*, Time> engine = engine_of(spec);
    Engine& e = *engine.first;
    Time slowest;
    const LinkSets sets = sets_of(parts, e);
    for (std::size_t s = 0; s < sets.size(); ++s) {
      slowest = std::max(slowest, on_set(parts, sets[s], [&](std::vector<Part>& set) {
                           return set_bound(set, e, exact);
                         }));
    }
    return slowest + engine.second;
  }

  // A lower bound of `priced_set`'s slowest group (without the base): the memoized or
  // contention-free answer, else the structure's event-free bound (then `*exact` false).
  Time set_bound(std::vector<Part>& parts, Engine& e, bool* exact = nullptr) {
    const bool idle =
        std::all_of(parts.begin(), parts.end(), [](const Part& p) { return p.group.size() <= 1; });
    if (idle) return Time::zero();
    const Digest digest = structure(parts, e);
    if (auto it = by_structure.find(digest); it != by_structure.end()) return it->second.slowest;
    if (const OracleAnswer* answer = consulted_answer(digest)) return answer->slowest;
    Bounded* b = bounded(parts, e, digest);
    if (b == nullptr) return by_structure.find(digest)->second.slowest;
    raise_from_facts(digest, *b);
    if (exact != nullptr) *exact = false;
    return b->slowest;
  }

  static bool trivial(const CollectiveSpec& spec,
                      std::span<const std::vector<topo::DeviceId>> groups) {
    return groups.empty() || spec.size.count() == 0 ||
           std::all_of(groups.begin(), groups.end(), [](const auto& g) { return g.size() <= 1; });
  }

  // The exact query, word by word.
  static QueryKey query_key(const CollectiveSpec& spec,
                            std::span<const std::vector<topo::DeviceId>> groups) {
    QueryKey key{.words = {0, static_cast<std::uint64_t>(spec.op),
                           static_cast<std::uint64_t>(spec.algorithm),
                           static_cast<std::uint64_t>(spec.chunks),
                           static_cast<std::uint64_t>(spec.channels),
                           static_cast<std::uint64_t>(spec.size.count()), spec.levels.size()}};
    std::size_t devices = 0;
    for (const auto& g : groups) devices += g.size();
    key.words.reserve(key.words.size() + spec.levels.size() + spec.level_algorithms.size() + 2 +
                      groups.size() + devices);
    for (int l : spec.levels) key.push_back(static_cast<std::uint64_t>(l));
    key.push_back(spec.level_algorithms.size());
    for (Algorithm a : spec.level_algorithms) key.push_back(static_cast<std::uint64_t>(a));
    key.push_back(groups.size());
    for (const auto& g : groups) {
      key.push_back(g.size());
      key.words.insert(key.words.end(), g.begin(), g.end());
    }
    key.seal();
    return key;
  }

  // Every group's resolved spec; throws `Error` (input) when two groups share a device, or
  // when `resolve` refuses a group.
  std::vector<Part> make_parts(const CollectiveSpec& spec,
                               std::span<const std::vector<topo::DeviceId>> groups) const {
    std::vector<bool> used(topology.num_devices(), false);
    std::vector<Part> parts;
    for (const auto& g : groups) {
      Part part;
      part.spec = resolve(spec, network, g);
      for (topo::DeviceId d : g) {
        if (used[d]) {
          throw Error::input("concurrent groups overlap",
                             {.key = "groups",
                              .value = "device " + std::to_string(d),
                              .expected = "groups with distinct devices"});
        }
        used[d] = true;
      }
      part.shape = shape_of(part.spec, g.size());
      part.size = static_cast<std::uint64_t>(spec.size.count());
      part.group = g;
      parts.push_back(std::move(part));
    }
    return parts;
  }
};

CollectiveOracle::CollectiveOracle(const topo::Topology& topology, std::uint64_t seed)
    : CollectiveOracle(topology, OracleSettings{.seed = seed}) {}
CollectiveOracle::CollectiveOracle(const topo::Topology& topology, OracleSettings settings)
    : impl_(std::make_unique<Impl>(topology, settings)) {}
CollectiveOracle::~CollectiveOracle() = default;
CollectiveOracle::CollectiveOracle(CollectiveOracle&&) noexcept = default;
CollectiveOracle& CollectiveOracle::operator=(CollectiveOracle&&) noexcept = default;

OracleAnswer CollectiveOracle::collective(const CollectiveSpec& spec,
                                          std::span<const std::vector<topo::DeviceId>> groups) {
  return *impl_->query(spec, groups, std::nullopt);
}

Time CollectiveOracle::collective(const CollectiveSpec& spec,
                                  std::span<const topo::DeviceId> group) {
  const std::vector<std::vector<topo::DeviceId>> groups{
      std::vector<topo::DeviceId>(group.begin(), group.end())};
  return collective(spec, groups).first;
}

Time CollectiveOracle::transfers(Bytes size, std::span<const topo::DeviceId> from,
                                 std::span<const topo::DeviceId> to, std::size_t group_size) {
  Impl& m = *impl_;
  ++m.stats.queries;
  if (from.size() != to.size()) {
    throw Error::internal("oracle: transfers with " + std::to_string(from.size()) +
                          " sources and " + std::to_string(to.size()) + " destinations");
  }
  const std::size_t per_group = group_size == 0 ? from.size() : group_size;
  if (per_group == 0 || from.size() % per_group != 0) {
    throw Error::internal("oracle: " + std::to_string(from.size()) + " transfers in groups of " +
                          std::to_string(group_size));
  }
  const bool grouped = per_group != from.size();
  QueryKey key{.words = {grouped ? 2U : 1U, static_cast<std::uint64_t>(size.count()), from.size()}};
  key.words.reserve(4 + 2 * from.size());
  if (grouped) key.push_back(per_group);
  bool any = false;
  for (std::size_t i = 0; i < from.size(); ++i) {
    key.push_back(from[i]);
    key.push_back(to[i]);
    any = any || from[i] != to[i];
  }
  if (size.count() == 0 || !any) {
    ++m.stats.trivial;
    return Time::zero();
  }
  key.seal();
  if (auto it = m.by_query.find(key); it != m.by_query.end()) {
    ++m.stats.exact_hits;
    return it->second.slowest;
  }

  // One schedule per group over its distinct devices, every remote pair a transfer of step 0;
  // a group whose pairs are all local waits for nothing and is left out.
  std::vector<Part> parts;
  std::unordered_map<topo::DeviceId, std::uint32_t> rank_of;
  for (std::size_t first = 0; first < from.size(); first += per_group) {
    Part part;
    rank_of.clear();
    auto rank = [&](topo::DeviceId d) {
      if (d >= m.topology.num_devices()) {
        throw Error::input(
            "device out of range",
            {.key = "transfers",
             .value = std::to_string(d),
             .expected = "devices 0-" + std::to_string(m.topology.num_devices() - 1)});
      }
      const auto [it, added] = rank_of.emplace(d, static_cast<std::uint32_t>(part.group.size()));
      if (added) part.group.push_back(d);
      return it->second;
    };
    std::vector<Transfer> list;
    std::uint64_t shape = hash_mix(0x7A45F325ULL, per_group);
    for (std::size_t i = first; i < first + per_group; ++i) {
      if (from[i] == to[i]) continue;
      const std::uint32_t s = rank(from[i]);
      const std::uint32_t t = rank(to[i]);
      list.push_back(Transfer{s, t, 0, 0, size});
      shape = hash_mix(hash_mix(shape, s), t);
    }
    if (list.empty()) continue;
    part.shape = shape;
    part.size = static_cast<std::uint64_t>(size.count());
    part.schedule =
        std::make_shared<const Schedule>(static_cast<int>(part.group.size()), std::move(list));
    parts.push_back(std::move(part));
  }
  const topo::Protocol protocol = m.network.protocol(size);
  Engine& engine = m.engine(protocol, false);
  const Time base = m.network.base_latency(Operation::kSend, Algorithm::kDirect, protocol);
  if (!grouped) return m.answer(std::move(key), parts, engine, base)->slowest;
  const Time waited = m.waited(parts, engine) + base;
  m.by_query.emplace(std::move(key), OracleAnswer{waited, waited});
  return waited;
}

CollectiveSpec tuner_candidate(CollectiveSpec spec, Algorithm algorithm) {
  spec.algorithm = algorithm;
  spec.levels.clear();
  const bool pipelines = algorithm == Algorithm::kRing || algorithm == Algorithm::kTree ||
                         algorithm == Algorithm::kHierarchical || algorithm == Algorithm::kTorus;
  spec.chunks = pipelines ? 0 : 1;
  spec.channels = algorithm == Algorithm::kRing ? 0 : 1;
  return spec;
}

OracleChoice CollectiveOracle::fastest(const CollectiveSpec& spec,
                                       std::span<const std::vector<topo::DeviceId>> groups) {
  return *fastest_within(spec, groups, std::nullopt);
}

std::optional<OracleChoice> CollectiveOracle::fastest_within(
    const CollectiveSpec& spec, std::span<const std::vector<topo::DeviceId>> groups,
    std::optional<Time> within) {
  Impl& m = *impl_;
  if (groups.empty()) throw Error::internal("oracle: fastest of no group");
  // First the candidates answered without events (memoized, published, contention-free: their
  // bound is their answer), then the others in the order of their event-free bounds (ties: the
  // tuner's order), as `simulate_fastest` runs them: the likely winner runs first and sets the
  // time the others must beat, so a slow candidate that the tuner lists first is ruled out by
  // its bound or stopped early instead of simulated to its end; an answer had for free sets that
  // time before anything is simulated (else a candidate with a weak bound could run in full
  // first). The choice does not depend on the order: a candidate is ruled out only when its
  // slowest group ends after `within` or after a candidate already priced (so it is not the
  // smallest), and the others compare by the total order below (slowest, then first, then the
  // tuner's order), whose smallest is the choice. A candidate that a group refuses (levels,
  // NVLS: an input error of its bound or query) is skipped; when none is left and none was ruled
  // out, the error of the earliest refused candidate in the tuner's order.
  struct Candidate {
    std::size_t index = 0;  // in the tuner's order
    CollectiveSpec spec;
    Time bound;
    bool exact = false;  // the bound is the answer: no event simulation to run
  };
  std::vector<Candidate> candidates;
  std::optional<Error> first_error;
  std::size_t first_error_index = 0;
  const auto refused = [&](const Error& e, std::size_t index) {
    if (e.kind() != ErrorKind::kInput) throw;  // called from the handlers below
    if (!first_error || index < first_error_index) {
      first_error = e;
      first_error_index = index;
    }
  };
  const std::vector<Algorithm> algorithms =
      tuner_candidates(m.network, spec.op, spec.size, groups.front());
  for (std::size_t i = 0; i < algorithms.size(); ++i) {
    const CollectiveSpec candidate = tuner_candidate(spec, algorithms[i]);
    try {
      bool exact = false;
      const Time bound = m.bound_query(candidate, groups, &exact);
      candidates.push_back({i, candidate, bound, exact});
    } catch (const Error& e) {
      refused(e, i);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return a.exact != b.exact ? a.exact : a.bound < b.bound;
                   });
  std::optional<OracleChoice> best;
  std::size_t best_index = 0;
  bool ruled_out = false;
  for (const Candidate& candidate : candidates) {
    OracleChoice c;
    try {
      // A candidate that takes longer than the fastest so far (or `within`) is not simulated
      // when its bound shows it, else simulated only that far (`Impl::answer`): it could be
      // neither faster nor tied.
      std::optional<Time> cap = within;
      if (best) cap = cap ? std::min(*cap, best->answer.slowest) : best->answer.slowest;
      const auto answer = m.query(candidate.spec, groups, cap);
      if (!answer) {
        ruled_out = true;
        continue;
      }
      c = chosen(candidate.spec, groups, *answer);
    } catch (const Error& e) {
      refused(e, candidate.index);
      continue;
    }
    if (!best || std::tie(c.answer.slowest, c.answer.first, candidate.index) <
                     std::tie(best->answer.slowest, best->answer.first, best_index)) {
      best = c;
      best_index = candidate.index;
    }
  }
  if (best && within && best->answer.slowest > *within) return std::nullopt;
  if (!best && !ruled_out) throw *first_error;
  return best;
}

std::optional<OracleAnswer> CollectiveOracle::collective_within(
    const CollectiveSpec& spec, std::span<const std::vector<topo::DeviceId>> groups, Time within) {
  const auto answer = impl_->query(spec, groups, within);
  if (!answer || answer->slowest > within) return std::nullopt;
  return answer;
}

Time CollectiveOracle::lower_bound(const CollectiveSpec& spec,
                                   std::span<const std::vector<topo::DeviceId>> groups) {
  return impl_->bound_query(spec, groups);
}

Time CollectiveOracle::fastest_lower_bound(const CollectiveSpec& spec,
                                           std::span<const std::vector<topo::DeviceId>> groups) {
  Impl& m = *impl_;
  if (groups.empty()) throw Error::internal("oracle: fastest of no group");
  std::optional<Time> least;
  for (const Algorithm a : tuner_candidates(m.network, spec.op, spec.size, groups.front())) {
    try {
      const Time b = m.bound_query(tuner_candidate(spec, a), groups);
      least = least ? std::min(*least, b) : b;
    } catch (const Error& e) {
      // Refused by a group: `fastest` skips the candidate too.
      if (e.kind() != ErrorKind::kInput) throw;
    }
  }
  return least.value_or(Time::zero());
}

bool CollectiveOracle::parts_apart(const CollectiveSpec& spec,
                                   std::span<const std::vector<topo::DeviceId>> groups,
                                   std::size_t per_part, bool every_candidate) {
  Impl& m = *impl_;
  if (per_part == 0) throw Error::internal("oracle: parts of no group");
  if (groups.size() <= per_part || Impl::trivial(spec, groups)) return true;
  std::vector<CollectiveSpec> specs{spec};
  if (every_candidate) {
    specs.clear();
    std::vector<Algorithm> seen;
    for (std::size_t first = 0; first < groups.size(); first += per_part) {
      for (const Algorithm a : tuner_candidates(m.network, spec.op, spec.size, groups[first])) {
        if (std::find(seen.begin(), seen.end(), a) != seen.end()) continue;
        seen.push_back(a);
        specs.push_back(tuner_candidate(spec, a));
      }
    }
  }
  for (const CollectiveSpec& s : specs) {
    std::vector<Part> parts = m.make_parts(s, groups);
    Engine& e = *m.engine_of(s).first;
    const LinkSets sets = m.link_components(parts, e);
    for (std::size_t k = 0; k < sets.size(); ++k) {
      const auto set = sets[k];
      const std::size_t part = set.front() / per_part;
      if (std::any_of(set.begin(), set.end(),
                      [&](std::uint32_t i) { return i / per_part != part; })) {
        return false;
      }
    }
  }
  return true;
}

OracleChoice CollectiveOracle::priced(const CollectiveSpec& spec,
                                      std::span<const std::vector<topo::DeviceId>> groups) {
  return chosen(spec, groups, collective(spec, groups));
}

OracleChoice CollectiveOracle::chosen(const CollectiveSpec& spec,
                                      std::span<const std::vector<topo::DeviceId>> groups,
                                      const OracleAnswer& answer) const {
  const Impl& m = *impl_;
  OracleChoice c;
  c.answer = answer;
  c.algorithm = spec.algorithm;
  c.protocol = m.network.calibrated() ? m.network.protocol(spec.algorithm, spec.size)
                                      : topo::Protocol::kSimple;
  if (!groups.empty() && groups.front().size() > 1 && spec.size.count() > 0) {
    c.channels = resolve(spec, m.network, groups.front()).channels;
  }
  return c;
}

bool CollectiveOracle::calibrated() const noexcept { return impl_->network.calibrated(); }

bool CollectiveOracle::answers_as(const topo::Topology& topology,
                                  const OracleSettings& settings) const noexcept {
  return &impl_->topology == &topology && impl_->seed == settings.seed &&
         impl_->ideal == settings.ideal && impl_->event_limit == 0;
}

const OracleStats& CollectiveOracle::stats() const noexcept { return impl_->stats; }

void CollectiveOracle::limit_events(std::uint64_t total) noexcept { impl_->event_limit = total; }

void CollectiveOracle::set_threads(int threads) {
  impl_->threads.store(Impl::checked_threads(threads), std::memory_order_relaxed);
}

void CollectiveOracle::publish_to(std::shared_ptr<OracleFacts> facts) {
  if (!facts) throw Error::internal("oracle: no facts to publish to");
  facts->impl_->attach(impl_->topology, impl_->seed, impl_->ideal);
  impl_->published = std::move(facts);
}

void CollectiveOracle::consult(std::shared_ptr<const OracleFacts> facts) {
  if (!facts) throw Error::internal("oracle: no facts to consult");
  facts->impl_->attach(impl_->topology, impl_->seed, impl_->ideal);
  impl_->consulted = std::move(facts);
}

void CollectiveOracle::clear() {
  impl_->by_query.clear();
  impl_->by_structure.clear();
  impl_->bound_by_structure.clear();
  impl_->pairs_by_shape.clear();
  for (const auto& e : impl_->engines) {
    if (e) {
      e->routes_by_layout.clear();
      e->sets_by_layout.clear();
      e->sets_weight = 0;
    }
  }
  impl_->waited_by_structure.clear();
  impl_->lowered.clear();
  impl_->like_by_shape.clear();
  impl_->lowered_weight = 0;
}

}  // namespace nest::coll
