#pragma once
/// \file
/// `CollectiveOracle`: the cost service of the placer. "How long does this collective take on
/// these devices while these other groups run the same collective at the same time?" It
/// simulates all the groups together on the flow-level simulator and remembers the answer.
///
/// Memo, two levels, both exact for the flow model:
/// 1. by the query itself: (operation, algorithm, chunks, levels, size, the groups' devices) ->
///    O(devices) per repeated query (hashing the key), no routing;
/// 2. by structure: the query's flows are routed and the links renamed in order of first use;
///    two layouts whose renamed routes, link rates and latencies coincide (a layout shifted to
///    another pod of a fat-tree, another node of a rail-optimized cluster, ...) are the same
///    simulation, so the second one costs routing (one route per distinct device pair) but no
///    simulation. The structural key is a 128-bit hash.
/// So no symmetry of the topology is assumed: only layouts the router sees as identical share
/// an answer.
///
/// Under a collective model (the topology's, unless `OracleSettings::ideal`) every answer is
/// calibrated as `simulate` calibrates (nest/coll/calibration.h): the query runs on the copy of
/// the topology for its protocol and pays the base latency once; `fastest` picks, per query,
/// the fastest of the tuner's candidates (`tuner_candidates`), as NCCL's tuner does per
/// communicator. Times are not interpolated in size: every size is simulated. A simulation is
/// first tried without events, as in `simulate` (exact when every link carries its flows one after
/// another).
///
/// Not thread-safe (owns a router and memo tables); use one oracle per thread. Oracles of the
/// same topology and settings on different threads may share what they simulate through an
/// `OracleFacts` (`publish_to`, `consult`).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/core/units.h"
#include "nest/topo/collective_model.h"
#include "nest/topo/topology.h"

namespace nest::coll {

/// The answer to a collective query.
struct OracleAnswer {
  Time first;    ///< duration of the first group's collective
  Time slowest;  ///< time until every group has finished (the layout's collective time)
};

/// `spec` as the tuner (`CollectiveOracle::fastest`) runs `algorithm`: no explicit levels,
/// chunks and channels left to `resolve` (0) where the algorithm pipelines (ring, tree,
/// hierarchical, torus) and has channels (ring), else 1.
[[nodiscard]] CollectiveSpec tuner_candidate(CollectiveSpec spec, Algorithm algorithm);

/// How the oracle answered so far.
struct OracleStats {
  std::uint64_t queries = 0;          ///< all queries
  std::uint64_t exact_hits = 0;       ///< answered by the query memo
  std::uint64_t structural_hits = 0;  ///< answered by the structure memo (routing, no sim)
  std::uint64_t simulations = 0;      ///< simulated (both ways below)
  std::uint64_t contention_free = 0;  ///< of those, answered by the contention-free evaluation
                                      ///< (see `simulate`), the others by the event simulation
  std::uint64_t private_rings = 0;    ///< of the event simulations, of rings whose senders
                                      ///< share no link, run without the max-min machinery
                                      ///< (the same events; coll/private_rings.h)
  std::uint64_t trivial = 0;          ///< zero size or one-device groups: answered 0
  std::uint64_t events = 0;           ///< events the event simulations processed, and those
                                      ///< the candidates `fastest` ruled out would have (once
                                      ///< per structure): what `limit_events` counts
  std::uint64_t avoided_events = 0;   ///< of `events`, those of ruled-out candidates
  std::uint64_t bounded = 0;          ///< queries ruled out (`fastest` candidates, `*_within`):
                                      ///< by their lower bound, not simulated, or by a simulation
                                      ///< stopped part way (`stopped`)
  std::uint64_t stopped = 0;  ///< event simulations stopped once their clock passed what the
                              ///< query had to beat, or earlier by their progress (not in
                              ///< `simulations`; their events counted as if they ran to the end)
  std::uint64_t progress_stops = 0;  ///< of `stopped`, those stopped earlier, once the bytes
                                     ///< their links still had to carry showed that they end
                                     ///< after that time (`detail::progress_bound`)
  std::uint64_t lower_bounds = 0;    ///< event-free bounds asked (`lower_bound`, and one per
                                     ///< candidate of `fastest_lower_bound` and of `fastest`)
  std::uint64_t lowered = 0;    ///< programs lowered: once per (resolved spec, size, group size)
                                ///< while the oracle keeps it, shared by every group of that kind
  std::uint64_t consulted = 0;  ///< structures answered, or ruled out, by what another oracle
                                ///< published (`CollectiveOracle::consult`; not simulated here)
};

/// Thrown by a query whose event simulation reached `CollectiveOracle::limit_events`: the query
/// has no answer and nothing of it is memoized (the oracle stays usable). Not an `Error`: it is
/// a budget running out, not a failure, and the `catch (const Error&)` of callers that skip
/// invalid candidates must let it through to whoever set the limit.
class EventLimitReached : public std::exception {
 public:
  [[nodiscard]] const char* what() const noexcept override {
    return "the oracle's event limit was reached";
  }
};

/// How an oracle prices.
struct OracleSettings {
  std::uint64_t seed = 0;  ///< ECMP seed (as in `SimulationOptions`)
  bool ideal = false;      ///< ignore the topology's collective model
  /// Threads that simulate the link-disjoint sets of one query at once (1..64; a query's
  /// sets of distinct new structures, e.g. a data-parallel sync's rails, each run on a
  /// simulator of its own thread). The same answers with any count, and the same counters but
  /// after a run that throws and for `lowered` (see `priced_sets` in the source).
  int threads = 1;
};

/// Exact facts that collective oracles of one topology and settings share across threads: the
/// answer of every structure an oracle simulated to its end or answered by the contention-free
/// evaluation (also while bounding a query), and for a simulation stopped at a
/// time to beat, that its structure ends after that time (`CollectiveOracle::publish_to`,
/// `CollectiveOracle::consult`). Both are facts of the structure alone (its routes, link rates
/// and latencies, the programs of its groups), whoever simulated it, so an oracle that reads
/// them answers as if it had simulated them itself. Thread-safe: oracles may publish while
/// others consult, and an oracle may do both. While a publishing oracle simulates a structure
/// it claims it here: a consulting oracle about to simulate a structure that another oracle
/// is simulating to the same time to beat or a later one waits for what that run records
/// instead, and simulates it only when nothing settles its query (the run stopped earlier, or
/// threw). No wait can close a cycle: an oracle waits only before its runs start, never while
/// it holds a claim. Grows by one entry per structure published, never shrinks.
class OracleFacts {
 public:
  OracleFacts();
  ~OracleFacts();
  OracleFacts(const OracleFacts&) = delete;
  OracleFacts& operator=(const OracleFacts&) = delete;

  /// Structures recorded so far.
  [[nodiscard]] std::size_t size() const;
  /// Structures that oracles publishing here are simulating now.
  [[nodiscard]] std::size_t claimed() const;

 private:
  friend class CollectiveOracle;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What `fastest` chose.
struct OracleChoice {
  Algorithm algorithm = Algorithm::kRing;
  topo::Protocol protocol = topo::Protocol::kSimple;  ///< Simple on the ideal network
  int channels = 1;                                   ///< rings of a ring (resolved, group 0)
  OracleAnswer answer;
};

class CollectiveOracle {
 public:
  /// `topology` must outlive the oracle. `seed` is the ECMP seed (as in `SimulationOptions`).
  /// Prices under the topology's collective model when it has one.
  explicit CollectiveOracle(const topo::Topology& topology, std::uint64_t seed = 0);
  CollectiveOracle(const topo::Topology& topology, OracleSettings settings);
  ~CollectiveOracle();
  CollectiveOracle(CollectiveOracle&&) noexcept;
  CollectiveOracle& operator=(CollectiveOracle&&) noexcept;

  /// Runs `spec` on all `groups` at once (disjoint, equal or different sizes; each resolved as
  /// in `simulate`). Zero size or groups of one device: zero. Throws `Error` (input) for bad
  /// groups or specs. Repeated queries: O(key); new structure: one simulation.
  [[nodiscard]] OracleAnswer collective(const CollectiveSpec& spec,
                                        std::span<const std::vector<topo::DeviceId>> groups);
  /// `spec` on one group alone.
  [[nodiscard]] Time collective(const CollectiveSpec& spec, std::span<const topo::DeviceId> group);

  /// `collective(spec, groups)` with what it ran: the algorithm, its protocol and the channels
  /// `resolve` gave the first group.
  [[nodiscard]] OracleChoice priced(const CollectiveSpec& spec,
                                    std::span<const std::vector<topo::DeviceId>> groups);

  /// The fastest (slowest group first, then the first group; ties: the earlier in the tuner's
  /// order) of
  /// `tuner_candidates` for `spec.op` and `spec.size` on the first group, each run on all
  /// `groups` as `collective` runs it (spec.algorithm and levels are ignored; chunks and
  /// channels 0 let `resolve` choose). Every candidate is first bounded from below without
  /// events (`lower_bound`); those whose bound is their answer (memoized, published,
  /// contention-free) are priced first, then the others in the order of their bounds (ties: the
  /// tuner's order). One query per candidate, memoized like any other: a candidate whose bound
  /// exceeds the fastest so far could not be chosen and is not simulated
  /// (`OracleStats::bounded`), else it is simulated until its clock passes the fastest so far (a
  /// stopped simulation rules it out and raises its bound). The choice is the same as with every
  /// candidate simulated, in any order.
  [[nodiscard]] OracleChoice fastest(const CollectiveSpec& spec,
                                     std::span<const std::vector<topo::DeviceId>> groups);
  /// `fastest(spec, groups)` when its slowest group takes at most `*within`, else nullopt; every
  /// candidate is priced as a later candidate of `fastest` is, against the smaller of `*within`
  /// and the fastest so far, so no simulation runs past `*within`. nullopt `within`: `fastest`.
  [[nodiscard]] std::optional<OracleChoice> fastest_within(
      const CollectiveSpec& spec, std::span<const std::vector<topo::DeviceId>> groups,
      std::optional<Time> within);
  /// `collective(spec, groups)` when its slowest group takes at most `within`, else nullopt:
  /// the query is bounded first, then simulated no further than `within` (see `fastest`). The
  /// link-disjoint sets of the groups are simulated largest known time (memoized, published)
  /// or event-free bound first, so that a set that rules the query out tends to run before those
  /// that would not (as for the candidates `fastest` prices against the fastest so far). The
  /// answer does not depend on that order; what the memo holds after a query ruled out does.
  [[nodiscard]] std::optional<OracleAnswer> collective_within(
      const CollectiveSpec& spec, std::span<const std::vector<topo::DeviceId>> groups, Time within);

  /// A lower bound of `collective(spec, groups).slowest`, computed without an event simulation:
  /// the answer itself where the query, or the structure of each link-connected set of its
  /// groups, is memoized or contention-free (the contention-free evaluation answers those
  /// exactly, memoizes them and publishes them to `publish_to`'s facts); else, per set, the
  /// event-free bound of
  /// `UncontendedEvaluator::lower_bound` (memoized by structure), the largest set's plus the base
  /// latency. O(transfers + route hops) for a structure seen first, O(key) for a memoized query.
  /// Throws what `collective` throws for bad groups or specs. Events are neither run nor counted.
  [[nodiscard]] Time lower_bound(const CollectiveSpec& spec,
                                 std::span<const std::vector<topo::DeviceId>> groups);
  /// A lower bound of `fastest(spec, groups).answer.slowest`: the smallest `lower_bound` of the
  /// tuner's candidates (those the groups refuse, as `fastest` skips them, left out; zero when
  /// every one is refused). The fastest candidate's time is at least its own bound.
  [[nodiscard]] Time fastest_lower_bound(const CollectiveSpec& spec,
                                         std::span<const std::vector<topo::DeviceId>> groups);

  /// Whether no link carries flows of groups of two different parts when every group of
  /// `groups` runs `spec` at once, group g being in part g / `per_part` (> 0): the oracle would
  /// then simulate each part's groups apart from the others'. With `every_candidate`, for each
  /// algorithm the tuner may choose for any part (`tuner_candidates` on the part's first group,
  /// run as `fastest` runs it) instead of `spec`'s. Routing only (the link-connected sets of
  /// `collective`), no simulation. Throws as `collective` does for groups a spec cannot run or
  /// that overlap.
  [[nodiscard]] bool parts_apart(const CollectiveSpec& spec,
                                 std::span<const std::vector<topo::DeviceId>> groups,
                                 std::size_t per_part, bool every_candidate = false);

  /// True when a collective model calibrates the answers.
  [[nodiscard]] bool calibrated() const noexcept;
  /// True when this oracle prices `topology` (the same object) with `settings` and no event
  /// limit (`limit_events`): its answers are then those of a fresh oracle made so (answers are
  /// exact; the memo only saves work).
  [[nodiscard]] bool answers_as(const topo::Topology& topology,
                                const OracleSettings& settings) const noexcept;

  /// Time until every from[i] has sent `size` bytes to to[i], all pairs started at once (pairs
  /// with from[i] == to[i] are local and cost nothing). from and to have equal lengths; a device
  /// may appear in several pairs. Memoized like `collective`.
  ///
  /// With `group_size` g (0: all pairs one group) the pairs form groups of g consecutive pairs,
  /// each waiting for its own slowest pair (a pipeline replica's shards sending to the next
  /// stage: that replica's next stage waits for them, no other replica does). Groups whose pairs
  /// route over links of equal rates and latencies, pair by pair, are alike; the answer is the
  /// largest, over classes of alike groups, of the class's mean wait, all pairs run at once.
  /// Where groups share no link it is the slowest group's wait, as with one group. Where they
  /// share links under ECMP it is the wait of a typical group of the class: the replay hashes
  /// every send of a pipeline afresh, so which group collides moves from send to send, and a
  /// replica's pipeline accumulates the class's mean, not its worst, collision.
  [[nodiscard]] Time transfers(Bytes size, std::span<const topo::DeviceId> from,
                               std::span<const topo::DeviceId> to, std::size_t group_size = 0);

  /// Counters since construction.
  [[nodiscard]] const OracleStats& stats() const noexcept;
  /// From now on no event simulation takes `stats().events` past `total` (0: no limit): one
  /// that would is stopped there (at the end of a timestamp, so a few more events may run) and
  /// its query throws `EventLimitReached`. Answers memoized before keep answering. The events of
  /// candidates `fastest` rules out by their bound, or by a simulation stopped at the time to
  /// beat, are counted in full without being run and are not stopped, so `stats().events` may
  /// pass the limit by those. A deterministic budget: the same queries stop at the same event.
  /// Which query a tight budget stops depends on the order a query's sets run in (see
  /// `collective_within`) and on the order `fastest` prices its candidates in.
  void limit_events(std::uint64_t total) noexcept;

  /// Sets `OracleSettings::threads` for the queries that start from now on: safe to call from
  /// another thread while a query runs (the owner's thread asks it once per query). The answers
  /// do not depend on it (see `OracleSettings::threads`). Throws `Error` (internal) outside
  /// 1..64.
  void set_threads(int threads);
  /// From now on every structure this oracle simulates (events or the contention-free
  /// evaluation, also while bounding) is also recorded in `facts`: its answer, or, when the run
  /// stopped at its time to beat, that it ends after that time; while
  /// it runs, the structure is claimed there (see `OracleFacts`).
  /// Nothing else of this oracle changes (its answers, memo and counters are those it would
  /// have without). Throws `Error` (internal) when `facts` holds facts of another topology
  /// object, seed or `ideal` setting.
  void publish_to(std::shared_ptr<OracleFacts> facts);
  /// From now on a structure that this oracle's memo does not hold is first looked up in
  /// `facts`: a recorded answer answers it (as the structural memo would, and is memoized
  /// here), a recorded time it ends after raises its event-free bound (so a query that must
  /// beat that time is ruled out unsimulated, as if this oracle had stopped that run itself).
  /// A structure that another oracle publishing to `facts` is simulating at that moment is
  /// waited for (see `OracleFacts`).
  /// The answers are those without `facts` (both exact); what changes is the work and the
  /// counters (`OracleStats::consulted`), which then depend on what the publisher had recorded
  /// by then: an oracle whose counters must not depend on timing does not consult. While an
  /// event limit is set (`limit_events`) the facts are not read, so that the budget counts what
  /// this oracle simulates; what was read before the limit stays memoized here like the
  /// oracle's own answers (a budget set later counts from what the oracle holds, as it always
  /// does). Throws as `publish_to`.
  void consult(std::shared_ptr<const OracleFacts> facts);

  /// Forgets every memoized answer (the counters stay).
  void clear();

 private:
  // `answer` with what was run for `spec` on `groups`.
  [[nodiscard]] OracleChoice chosen(const CollectiveSpec& spec,
                                    std::span<const std::vector<topo::DeviceId>> groups,
                                    const OracleAnswer& answer) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::coll
