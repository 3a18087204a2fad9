#include "nest/replay/plan_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "nest/coll/calibration.h"
#include "nest/coll/closed_form.h"
#include "nest/coll/collective.h"
#include "nest/coll/execution.h"
#include "nest/coll/oracle.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/placer/baselines.h"
#include "nest/topo/router.h"
#include "nest/workload/memory.h"

namespace nest::replay {
namespace {

// Weight (count × size) of the collectives each pass runs, to split the stage's collective
// time between forward and backward. A collective's `count` covers forward and backward
// evenly (Megatron runs the conjugate of each forward collective in backward).
struct PassWeights {
  double forward = 0;
  double backward = 0;
};

PassWeights collective_weights(const workload::Variant& v, std::size_t first, std::size_t last,
                               bool recompute) {
  PassWeights w;
  for (std::size_t i = first; i < last; ++i) {
    for (const auto& c : v.layers[i].collectives) {
      const double size = c.size.as_double();
      w.forward += 0.5 * c.count * size;
      w.backward += (0.5 * c.count + (recompute ? c.recompute_count : 0)) * size;
    }
  }
  return w;
}

Time share(Time total, double part, double whole) {
  if (whole <= 0) return Time::zero();
  return Time::picoseconds(
      static_cast<std::int64_t>(static_cast<double>(total.ps()) * part / whole + 0.5));
}

// The times of a layer range: its backward compute (with recompute), its intra-layer
// collectives and its optimizer step, taken from the cost model.
struct RangeTimes {
  Time backward_compute;
  Time collectives;
  Time optimizer;
};

bool full_recompute(const placer::Plan& plan) {
  return plan.choice.recompute == workload::Recompute::kFull;
}

std::int64_t parameters_of(const workload::Layer& layer) {
  return layer.parameters > 0 ? layer.parameters : layer.parameter_bytes.count() / 2;
}

// The pass times of a layer range: the cost model's own split for a plan's stage or chunk, else
// the forward compute, the backward compute (with recompute) and the collectives shared by
// count × size.
struct Passes {
  Time forward;
  Time backward;
  Time collectives;
};

Passes split(const placer::Plan& plan, const workload::Variant& variant, std::size_t first,
             std::size_t last, const RangeTimes& t) {
  Time forward;
  for (std::size_t i = first; i < last; ++i) forward += variant.layers[i].forward;
  const PassWeights w = collective_weights(variant, first, last, full_recompute(plan));
  const Time forward_collectives = share(t.collectives, w.forward, w.forward + w.backward);
  return Passes{.forward = forward + forward_collectives,
                .backward = t.backward_compute + t.collectives - forward_collectives,
                .collectives = t.collectives};
}

Passes split(const placer::Plan& plan, const workload::Variant& variant,
             const placer::StageReport& rep, const placer::ChunkReport& chunk) {
  const bool none = plan.rules == workload::MemoryRules::kNestArtifact && rep.in_flight <= 1;
  const placer::PassTimes t =
      placer::pass_times(variant, chunk, none ? workload::Recompute::kNone : plan.choice.recompute);
  return Passes{
      .forward = t.forward, .backward = t.backward, .collectives = chunk.time.collectives};
}

StageSpec range_spec(const placer::Plan& plan, const workload::Variant& variant, std::size_t first,
                     std::size_t last, const Passes& t, Time optimizer) {
  StageSpec s;
  s.first_layer = static_cast<std::int32_t>(first);
  s.last_layer = static_cast<std::int32_t>(last);
  Time forward;
  Bytes gradients;
  for (std::size_t i = first; i < last; ++i) {
    forward += variant.layers[i].forward;
    gradients += variant.layers[i].parameter_bytes;
  }
  s.forward = t.forward;
  s.backward = t.backward;
  s.forward_collectives = t.forward - forward;
  s.backward_collectives = t.collectives - s.forward_collectives;
  s.activation_out = variant.layers[last - 1].output_bytes;
  // As the cost model: the gradients are as wide as the weights a device holds.
  s.gradient_sync = gradients;
  s.optimizer = optimizer;

  workload::MemoryOptions mo;
  mo.rules = plan.rules;
  mo.zero_stage = plan.choice.zero_stage;
  mo.data_parallel = plan.choice.data_parallel;
  mo.recompute = plan.choice.recompute;
  const auto one = workload::stage_memory(variant, first, last, 1, mo);
  const auto two = workload::stage_memory(variant, first, last, 2, mo);
  s.weights = one.weights;
  s.gradients = one.gradients;
  s.optimizer_state = one.optimizer;
  s.stash = two.activations - one.activations;
  s.working = one.activations - s.stash;
  return s;
}

// A plan stage: its times exactly as the cost model computed them.
StageSpec stage_spec(const placer::Plan& plan, const workload::Variant& variant, int p) {
  const placer::StageReport& rep = plan.stages[static_cast<std::size_t>(p)];
  return range_spec(plan, variant, rep.first_layer, rep.last_layer,
                    split(plan, variant, rep, rep.chunks.front()), rep.optimizer);
}

// The chunks of an interleaved plan in model order, their times exactly as the cost model
// computed them; a stage's optimizer step is shared among its chunks by their parameters.
std::vector<StageSpec> plan_chunk_specs(const placer::Plan& plan,
                                        const workload::Variant& variant) {
  const int S = plan.choice.stages();
  std::vector<StageSpec> out(static_cast<std::size_t>(plan.choice.chunks()));
  for (int p = 0; p < S; ++p) {
    const placer::StageReport& rep = plan.stages[static_cast<std::size_t>(p)];
    double params = 0;
    for (const placer::ChunkReport& c : rep.chunks) {
      for (std::size_t i = c.first_layer; i < c.last_layer; ++i) {
        params += static_cast<double>(parameters_of(variant.layers[i]));
      }
    }
    for (std::size_t j = 0; j < rep.chunks.size(); ++j) {
      const placer::ChunkReport& c = rep.chunks[j];
      double chunk_params = 0;
      for (std::size_t i = c.first_layer; i < c.last_layer; ++i) {
        chunk_params += static_cast<double>(parameters_of(variant.layers[i]));
      }
      out[static_cast<std::size_t>(p) + j * static_cast<std::size_t>(S)] =
          range_spec(plan, variant, c.first_layer, c.last_layer, split(plan, variant, rep, c),
                     share(rep.optimizer, chunk_params, params));
    }
  }
  return out;
}

// The S·v chunks of a 1F1B plan replayed interleaved: Megatron-LM's split (the blocks as evenly
// as possible, the embedding on the first chunk and the head on the last). A layer's share of its
// plan stage's collective time and optimizer step is in proportion to its collective volume (count
// x size) and its parameters; its backward compute follows the rules' recomputation (under
// nest-artifact, not in the last chunk).
std::vector<StageSpec> chunk_specs(const placer::Plan& plan, const workload::Variant& variant,
                                   int v) {
  const std::size_t n = variant.layers.size();
  std::vector<Time> collectives(n), optimizer(n);
  for (const placer::StageReport& rep : plan.stages) {
    const PassWeights w =
        collective_weights(variant, rep.first_layer, rep.last_layer, full_recompute(plan));
    std::int64_t params = 0;
    for (std::size_t i = rep.first_layer; i < rep.last_layer; ++i) {
      params += parameters_of(variant.layers[i]);
    }
    for (std::size_t i = rep.first_layer; i < rep.last_layer; ++i) {
      const PassWeights wi = collective_weights(variant, i, i + 1, full_recompute(plan));
      collectives[i] =
          share(rep.time.collectives, wi.forward + wi.backward, w.forward + w.backward);
      optimizer[i] = share(rep.optimizer, static_cast<double>(parameters_of(variant.layers[i])),
                           static_cast<double>(params));
    }
  }
  const std::size_t chunks = static_cast<std::size_t>(plan.choice.stages() * v);
  const std::vector<std::size_t> b = placer::block_partition(variant, static_cast<int>(chunks));
  if (b.empty()) {
    throw Error::input(fmt::format("{} chunks ({} stages x {} virtual stages) for fewer blocks",
                                   chunks, plan.choice.stages(), v),
                       {.key = "--virtual-stages", .expected = "at most one chunk per block"});
  }
  std::vector<StageSpec> out;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t first = b[c];
    const std::size_t last = b[c + 1];
    const bool recompute = full_recompute(plan) &&
                           (plan.rules != workload::MemoryRules::kNestArtifact || c + 1 < chunks);
    const bool selective = plan.choice.recompute == workload::Recompute::kSelective;
    RangeTimes t;
    for (std::size_t i = first; i < last; ++i) {
      const workload::Layer& layer = variant.layers[i];
      t.backward_compute += layer.backward + (recompute ? layer.recompute : Time::zero()) +
                            (selective ? layer.selective_recompute : Time::zero());
      t.collectives += collectives[i];
      t.optimizer += optimizer[i];
    }
    out.push_back(
        range_spec(plan, variant, first, last, split(plan, variant, first, last, t), t.optimizer));
  }
  return out;
}

// The record's topology table: the nodes and directed links of `topology` (the user's, as its
// file describes it).
void describe(const topo::Topology& topology, RunRecord& record) {
  record.topology.name = topology.name();
  record.topology.nodes.clear();
  record.topology.nodes.reserve(topology.num_nodes());
  for (topo::NodeId id = 0; id < topology.num_nodes(); ++id) {
    record.topology.nodes.push_back(topology.node(id));
  }
  record.topology.links.assign(topology.links().begin(), topology.links().end());
}

// The utilization over time of link `id`, from the simulator's recording.
LinkSeries series_of(const net::Simulator& sim, const topo::Topology& topology, topo::LinkId id) {
  const topo::Link& link = topology.link(id);
  LinkSeries s{id, link.src, link.dst, {}};
  const double rate = link.bandwidth.bytes_per_s();
  for (const net::UtilizationSample& p : sim.utilization(id)) {
    s.points.push_back({p.at, rate > 0 ? p.rate.bytes_per_s() / rate : 0.0});
  }
  return s;
}

}  // namespace

void validate(const PlanReplayOptions& options) {
  if (options.gradient_buckets < 1 || options.gradient_buckets > kMaxGradientBuckets) {
    throw Error::input("bucket count out of range",
                       {.key = "--buckets",
                        .value = std::to_string(options.gradient_buckets),
                        .expected = fmt::format("an integer in [1, {}]", kMaxGradientBuckets)});
  }
}

ReplayInput replay_input(const placer::Plan& plan, const workload::LayerProfile& profile,
                         const PlanReplayOptions& options) {
  if (plan.choice.variant >= profile.variants.size() ||
      plan.stages.size() != static_cast<std::size_t>(plan.choice.stages())) {
    throw Error::internal("replay_input: the plan was not evaluated on this profile");
  }
  const workload::Variant& variant = profile.variants[plan.choice.variant];
  const int stages = plan.choice.stages();
  const int d = plan.choice.data_parallel;
  ReplayInput in;
  validate(options);
  in.schedule = options.schedule;
  if (plan.choice.virtual_stages > 1) {
    // An interleaved plan replays with its own chunks; 1F1B means its schedule.
    if (options.schedule == Schedule::kGPipe ||
        (options.schedule == Schedule::kInterleaved &&
         options.virtual_stages != plan.choice.virtual_stages)) {
      throw Error::input(
          fmt::format("the plan is interleaved with {} virtual stages", plan.choice.virtual_stages),
          {.key = "--schedule",
           .expected = fmt::format("1f1b (the plan's schedule) or interleaved with "
                                   "--virtual-stages {}",
                                   plan.choice.virtual_stages)});
    }
    in.stages = plan_chunk_specs(plan, variant);
    in.schedule = Schedule::kInterleaved;
  } else if (options.schedule == Schedule::kInterleaved) {
    if (options.virtual_stages < 2) {
      throw Error::input("the interleaved schedule needs at least 2 virtual stages",
                         {.key = "--virtual-stages",
                          .value = std::to_string(options.virtual_stages),
                          .expected = "an integer >= 2"});
    }
    if (static_cast<std::size_t>(options.virtual_stages) > variant.layers.size()) {
      throw Error::input(fmt::format("{} virtual stages for {} layers", options.virtual_stages,
                                     variant.layers.size()),
                         {.key = "--virtual-stages", .expected = "at most one layer per chunk"});
    }
    in.stages = chunk_specs(plan, variant, options.virtual_stages);
  } else {
    for (int p = 0; p < stages; ++p) in.stages.push_back(stage_spec(plan, variant, p));
  }
  for (std::size_t c = 1; c < in.stages.size(); ++c) {
    in.stages[c].gradient_out = in.stages[c - 1].activation_out;
  }
  const placer::DeviceMap map = plan.device_map();
  in.devices.resize(static_cast<std::size_t>(d));
  for (int r = 0; r < d; ++r) {
    for (int p = 0; p < stages; ++p) {
      std::vector<topo::DeviceId> shards;
      for (int k = 0; k < plan.degrees.devices_per_replica; ++k) {
        shards.push_back(map.device(p, r, k));
      }
      in.devices[static_cast<std::size_t>(r)].push_back(std::move(shards));
    }
  }
  const std::int64_t m = plan.microbatches;
  for (int r = 0; r < d; ++r) in.microbatches.push_back(m / d + (r < m % d ? 1 : 0));
  in.gradient_buckets = options.gradient_buckets;
  in.overlap_gradient_sync = options.overlap_gradient_sync;
  in.overlap_boundary_transfers = options.overlap_boundary_transfers;
  in.estimate = plan.iteration_time;
  const double sequences =
      static_cast<double>(m) * plan.degrees.micro_batch * plan.degrees.expert_parallel;
  in.sequences_per_iteration =
      profile.global_batch > 0 ? static_cast<double>(profile.global_batch) : sequences;
  in.tokens_per_iteration =
      in.sequences_per_iteration * static_cast<double>(profile.sequence_length);
  in.flops_per_iteration = profile.flops_per_iteration;
  in.peak_flop_rate = profile.peak_flop_rate;
  return in;
}

namespace {

// A program whose every transfer carries `factor` times the bytes (rounded up): NVLS in a
// network calibrated for Simple (its routes are scale-up only, where the NVLS rate is the
// Simple rate x the NVLS efficiency).
class ScaledProgram final : public coll::Program {
 public:
  ScaledProgram(std::shared_ptr<const coll::Program> inner, double factor)
      : inner_(std::move(inner)), factor_(factor) {}
  int ranks() const noexcept override { return inner_->ranks(); }
  std::uint64_t transfer_count() const noexcept override { return inner_->transfer_count(); }
  std::uint32_t steps() const noexcept override { return inner_->steps(); }
  std::uint64_t dense_gates() const noexcept override { return inner_->dense_gates(); }
  void initial_gates(std::vector<coll::GateId>& out) const override { inner_->initial_gates(out); }
  std::uint32_t waits(coll::GateId gate) const override { return inner_->waits(gate); }
  void sends(coll::GateId gate, std::vector<coll::TransferId>& out) const override {
    inner_->sends(gate, out);
  }
  coll::Transfer transfer(coll::TransferId id) const override {
    coll::Transfer t = inner_->transfer(id);
    t.bytes = Bytes(static_cast<std::int64_t>(std::ceil(t.bytes.as_double() * factor_)));
    return t;
  }
  std::array<coll::GateId, 2> successors(coll::TransferId id) const override {
    return inner_->successors(id);
  }
  bool waits_for_own_sends() const noexcept override { return inner_->waits_for_own_sends(); }
  // Scaling changes the bytes, not who sends to whom (`uniform_ring` stays empty: its pieces
  // would be the inner program's).
  std::optional<std::vector<coll::RankPair>> distinct_pairs() const override {
    return inner_->distinct_pairs();
  }
  void for_each_transfer(const std::function<void(const coll::Transfer&)>& visit) const override {
    for (std::uint64_t id = 0; id < transfer_count(); ++id) visit(transfer(id));
  }

 private:
  std::shared_ptr<const coll::Program> inner_;
  double factor_;
};

// One bucket's collective, as it runs on every launch of its (group, size).
struct Bucket {
  coll::CollectiveSpec spec;  // resolved for the group
  std::shared_ptr<const coll::Program> program;
  Time base_latency;
  // With `alone_reductions`: its run alone, when the contention-free evaluation or its event
  // simulation alone times it (the condition below), and the links of its group's reductions
  // (every bucket's routes).
  std::optional<coll::AloneRun> alone;
  const std::vector<topo::LinkId>* links = nullptr;
};

// Reductions timed alone (`PlanReplayOptions::alone_reductions`).
//
// Condition. A reduction R (one bucket of the data-parallel group of one stage's shard k,
// launched when the replicas have produced it) is timed by the contention-free evaluation, or
// where that declines (its own flows share links) and (c) and (d) below hold for its group from
// the start, by its event simulation alone (`coll::AloneSimulator`, once per bucket), instead
// of flow by flow when, at the instant it starts, every link of L(R) (the links of the
// routes of every (source, destination, channel) that any bucket of R's group sends over)
//  (a) has no flow draining on it,
//  (b) has no stage-to-stage transfer flow left to start over it in the iteration (the replay
//      counts every transfer flow it will start, routed as it routes it, and takes each off as
//      it starts: `ReplayOptions::transfers_ahead`),
//  (c) is crossed by the routes of no other reduction group (counted before the run over
//      every group the replay will reduce), and
//  (d) has no utilization series recorded.
// Why the record is the flow-by-flow replay's. The flows that cross a link of L(R) after R
// starts are R's and, by (b) and (c), those of no transfer and no other group's reduction; the
// later buckets of R's own group start only when R has ended (a stage reduces its buckets one
// after another), and by (a) nothing from before R is still draining. So while R runs, its
// flows share links only with one another. The contention-free evaluation then computes what
// the simulator computes for them, whenever they run: each flow alone on its links drains at
// its slowest link's rate and arrives drain time + route latency after its gate opened, and the
// evaluation checks that its own flows never overlap on a link (else it declines). The event
// simulation alone runs R's flows with no other flow in the simulator: max-min rates are those
// of each connected group of flows that share links, and R's flows form such groups by
// themselves in the replay too, so they get the same rates (up to caveat (1), which then
// reaches R's own flows). A run started at t instead of 0 drains and arrives exactly t later, a
// drain time depending only on bytes and rate, in whole picoseconds. What the replay reads of R is
// its end (the `done` callback, now an event at t + duration; what it does touches only R's stage:
// its next bucket, its optimizer step, its rows) and its links' statistics (added at its end,
// `net::Simulator::add_link_use`: byte counts are integral, so their sums are exact in any
// order, and each link's busy time is the sum of its flows' drains, which never touch).
// Where this is not a proof to the last bit, as for the shard planes below: (1) max-min rates
// depend only on the flows that share links, but the simulator takes two choices per timestamp
// rather than per such group, the level below which it keeps rates (the smallest rate that
// departed, where R's flows counted) and whether the verified refilling takes the timestamp
// (its limits count R's changes too); other flows' rates are then the same up to floating
// rounding (`net::Simulator::reuse_lower_levels`), which a drain end rounded to the picosecond
// almost always absorbs. (2) `done` is inserted when R starts, not when its last flow drains,
// so it runs before the same picosecond's events inserted in between; only the order of rows
// with the same end (collectives) or the same device and start could follow. Both need an event
// of R in the very picosecond of an unrelated one. Tested against the flow-by-flow replay
// (tests/unit/replay/plan_replay_test.cc, AloneReductions*, ReductionsWhoseFlowsShareLinks*,
// ReductionsThatShareLinks*: rows, links, collectives and summary the same), and the same run.h5
// on GPT-3's 16,384-GPU plan (rings, contention-free) and 131,072-GPU plan (double binary
// trees, event-simulated alone).

// Shard planes: when the replay may simulate shard 0 only (`ReplayOptions::one_shard_plane`).
//
// Exactness condition. The replay's network carries two kinds of flows, both launched for every
// shard k of a stage replica at the same instant (its shards compute in lockstep): stage-to-stage
// transfers, shard k of one stage to shard k of the next (ECMP key from the microbatch, chunk
// and replica), and the data-parallel reduction of shard k's gradients over the replicas (one
// collective per shard and bucket). Call plane k the set of every flow of shard k in the
// iteration, each with its route. The shards may share one simulation when, for every k > 0,
// there is a map phi_k from the links of plane 0 to the links of plane k such that
//  (a) every flow of plane 0 has its counterpart in plane k (the same transfer or the same
//      collective transfer, with the same bytes and the same start) whose route is the image
//      of its route under phi_k, hop by hop;
//  (b) phi_k is one-to-one and keeps each link's bandwidth and latency;
//  (c) no link carries flows of two planes.
// Then the planes share no link, so under max-min fair sharing (computed per connected group of
// flows that share links) and per-flow latencies, no flow's rate or arrival depends on another
// plane's flows; and plane k is plane 0 relabelled by phi_k, so its flows start, get the same
// rates and end at the same picoseconds as plane 0's, by induction over the events (a shard's
// next flows start when its stage replica's previous ones end, which is the same instant in
// every plane). Every shard's transfer and reduction therefore ends when plane 0's does, and
// link k's statistics are those of its preimage. (a) needs each collective's algorithm and
// program to be equal for all shards (the tuner picks per group: it may choose differently for
// groups that sit differently in the network); (c) fails where shards' flows meet on a link,
// e.g. the uplinks of a fat-tree, and the full replay runs. Tested against the full replay to
// the picosecond (tests/replay/plan_replay_test.cc, ShardPlanes*).
//
// Returns, when the condition holds, for every directed link the plane-0 link whose statistics
// it has (itself for plane 0 and idle links); otherwise nothing.
class PlaneCheck {
 public:
  // `fabric`: the simulated network; `given`: the topology the link table reports against.
  PlaneCheck(const topo::Topology& fabric, const topo::Topology& given, std::size_t planes)
      : fabric_(fabric),
        given_(given),
        links_(fabric.num_links()),
        owner_(links_, kFree),
        image_(links_ * planes, kNone),
        source_(links_) {
    for (std::size_t l = 0; l < links_; ++l) source_[l] = static_cast<topo::LinkId>(l);
  }

  // Route `route` of plane k is the counterpart of `base` of plane 0.
  bool match(std::span<const topo::LinkId> base, std::span<const topo::LinkId> route,
             std::size_t k) {
    if (base.size() != route.size()) return false;
    for (std::size_t i = 0; i < base.size(); ++i) {
      const topo::LinkId a = base[i];
      const topo::LinkId b = route[i];
      if (!claim(a, 0) || !claim(b, k)) return false;
      topo::LinkId& img = image_[k * links_ + a];
      if (img == kNone) {
        if (source_[b] != b || !alike(a, b)) return false;  // b: another link's image
        img = b;
        source_[b] = a;
      } else if (img != b) {
        return false;
      }
    }
    return true;
  }

  std::vector<topo::LinkId> take() { return std::move(source_); }

 private:
  static constexpr std::uint32_t kFree = std::numeric_limits<std::uint32_t>::max();
  static constexpr topo::LinkId kNone = std::numeric_limits<topo::LinkId>::max();
  bool alike(topo::LinkId a, topo::LinkId b) const {
    for (const topo::Topology* t : {&fabric_, &given_}) {
      const topo::Link& la = t->link(a);
      const topo::Link& lb = t->link(b);
      if (la.bandwidth != lb.bandwidth || la.latency != lb.latency) return false;
    }
    return true;
  }
  bool claim(topo::LinkId l, std::size_t plane) {
    if (owner_[l] == kFree) owner_[l] = static_cast<std::uint32_t>(plane);
    return owner_[l] == plane;
  }
  const topo::Topology& fabric_;
  const topo::Topology& given_;
  std::size_t links_;
  std::vector<std::uint32_t> owner_;
  std::vector<topo::LinkId> image_;   // image_[k * links + l]: phi_k(l)
  std::vector<topo::LinkId> source_;  // source_[phi_k(l)] = l
};

}  // namespace

RunRecord replay_plan(const placer::Plan& plan, const workload::LayerProfile& profile,
                      const topo::Topology& topology, const PlanReplayOptions& options,
                      coll::CollectiveOracle* shared_tuner, const std::atomic<bool>* stop) {
  const ReplayInput input = replay_input(plan, profile, options);
  const coll::CalibratedNetwork network(topology, options.ideal);
  // The replay's network: the Simple protocol's calibrated copy (the topology when ideal).
  const topo::Topology& fabric = network.topology(topo::Protocol::kSimple);
  net::Simulator sim(fabric);
  sim.stop_when(stop);
  topo::Router router(fabric, options.seed);
  const coll::OracleSettings settings{.seed = options.seed, .ideal = options.ideal};
  std::optional<coll::CollectiveOracle> own_tuner;
  if (shared_tuner == nullptr) {
    own_tuner.emplace(topology, settings);
  } else if (!shared_tuner->answers_as(topology, settings)) {
    throw Error::internal("replay: the tuner given prices another network");
  }
  coll::CollectiveOracle& tuner = shared_tuner != nullptr ? *shared_tuner : *own_tuner;
  // Each bucket (group, size) is lowered once and shared by every execution.
  std::map<std::pair<std::vector<topo::DeviceId>, std::int64_t>, Bucket> buckets;
  std::vector<std::unique_ptr<coll::Execution>> running;
  auto bucket_for = [&](std::span<const topo::DeviceId> group, Bytes size) -> Bucket& {
    std::vector<topo::DeviceId> devices(group.begin(), group.end());
    auto [it, fresh] = buckets.try_emplace({devices, size.count()});
    if (!fresh) return it->second;
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw net::Stopped{};
    coll::CollectiveSpec spec;
    spec.op = coll::Operation::kAllReduce;
    spec.size = size;
    if (network.calibrated()) {
      spec.chunks = 0;
      spec.channels = 0;
    }
    if (options.data_parallel_algorithm) {
      spec.algorithm = *options.data_parallel_algorithm;
    } else {
      const std::vector<std::vector<topo::DeviceId>> alone{devices};
      // Under a model the tuner's choice; else ring, or hierarchical with the dimensions'
      // algorithms on a `kind: dimensions` topology (as the placer priced it).
      spec.algorithm = network.calibrated() ? tuner.fastest(spec, alone).algorithm
                                            : coll::default_algorithm(topology, spec.op, alone);
    }
    Bucket& b = it->second;
    b.spec = coll::resolve(spec, network, devices);
    b.program = coll::lower_program(b.spec, static_cast<int>(devices.size()));
    const topo::Protocol protocol = network.protocol(b.spec.algorithm, size);
    b.base_latency = network.base_latency(b.spec.op, b.spec.algorithm, protocol);
    if (b.spec.algorithm == coll::Algorithm::kNvls && network.model()->nvls) {
      b.program = std::make_shared<ScaledProgram>(b.program, 1 / network.model()->nvls->efficiency);
    }
    return b;
  };
  // Reductions timed alone (the condition above): per link, the transfers still to start over it
  // (kept by the replay) and the reductions whose routes cross it; per reduction, its links.
  std::vector<std::uint32_t> transfers_ahead;
  std::vector<std::uint32_t> reductions_on;
  std::vector<char> recorded;
  std::deque<std::vector<topo::LinkId>> reduction_links;  // stable: buckets point into it
  std::int32_t alone_count = 0;
  std::int32_t simulated_count = 0;
  // True when `b` runs alone from now until it ends: then `done` is scheduled at its end and its
  // links' statistics added there.
  auto run_alone = [&](const Bucket& b, const std::function<void()>& done) {
    if (!b.alone || b.links == nullptr || transfers_ahead.empty()) return false;
    for (const topo::LinkId link : *b.links) {
      if (reductions_on[link] != 1 || transfers_ahead[link] != 0 || recorded[link] != 0 ||
          !sim.link_idle(link)) {
        return false;
      }
    }
    ++alone_count;
    sim.schedule(net::later(sim.now(), b.alone->duration), [&sim, &b, done] {
      for (const coll::LinkUse& use : b.alone->links) {
        sim.add_link_use(use.link, use.bytes, use.busy, use.peak_flows);
      }
      done();
    });
    return true;
  };
  const AllreduceLauncher allreduce = [&](std::span<const topo::DeviceId> group, Bytes size,
                                          std::function<void()> done) {
    const Bucket& b = bucket_for(group, size);
    auto start = [&sim, &router, &running, &options, &run_alone, &simulated_count, &b,
                  devices = std::vector<topo::DeviceId>(group.begin(), group.end()),
                  done = std::move(done)]() mutable {
      if (run_alone(b, done)) return;
      ++simulated_count;
      auto exec = std::make_unique<coll::Execution>(sim, router, b.program, std::move(devices),
                                                    options.seed);
      coll::Execution* e = exec.get();
      running.push_back(std::move(exec));
      e->start([done](Time) { done(); });
    };
    if (b.base_latency > Time::zero()) {
      sim.schedule(sim.now() + b.base_latency, std::move(start));
    } else {
      start();
    }
    return std::string(coll::algorithm_name(b.spec.algorithm));
  };
  // The condition above, checked on every flow the iteration will launch.
  auto shard_planes = [&]() -> std::optional<std::vector<topo::LinkId>> {
    const std::size_t groups = input.devices[0].size();
    const std::size_t replicas = input.devices.size();
    const std::size_t planes = input.devices[0][0].size();
    const std::size_t chunks = input.stages.size();
    if (planes < 2 || !options.merge_shards) return std::nullopt;
    PlaneCheck check(fabric, topology, planes);
    std::vector<topo::LinkId> base;
    std::vector<topo::LinkId> route;
    // Plane k's flow against plane 0's, routed into `base` by the caller.
    auto pair = [&](topo::DeviceId sk, topo::DeviceId dk, std::uint64_t key_k, std::size_t k) {
      router.route_into(sk, dk, key_k, route);
      return check.match(base, route, k);
    };
    // Stage-to-stage transfers (the keys of Engine::transfer).
    const bool transfers_match = for_each_send(input, [&](const Send& send) {
      router.route_into(send.from[0], send.to[0], send.key, base);
      for (std::size_t k = 1; k < planes; ++k) {
        if (!pair(send.from[k], send.to[k], send.key, k)) return false;
      }
      return true;
    });
    if (!transfers_match) return std::nullopt;
    // Data-parallel reductions: per group and bucket size, the same algorithm and program for
    // every shard, and each (source, destination, channel) of the program routed alike.
    if (replicas < 2) return check.take();
    const int k_buckets = std::max(1, input.gradient_buckets);
    for (std::size_t g = 0; g < groups; ++g) {
      Bytes total;
      for (std::size_t c = g; c < chunks; c += groups) total += input.stages[c].gradient_sync;
      if (total == Bytes(0)) continue;
      std::vector<Bytes> sizes;
      for (int b = 0; b < k_buckets; ++b) {
        const Bytes size = bucket_size(total, b, k_buckets);
        if (size > Bytes(0) && std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
          sizes.push_back(size);
        }
      }
      std::vector<std::vector<topo::DeviceId>> members(planes);
      for (std::size_t k = 0; k < planes; ++k) {
        for (std::size_t r = 0; r < replicas; ++r) members[k].push_back(input.devices[r][g][k]);
      }
      for (const Bytes size : sizes) {
        const Bucket& b0 = bucket_for(members[0], size);
        std::vector<std::array<std::uint32_t, 3>> hops;  // (src rank, dst rank, channel)
        b0.program->for_each_transfer([&](const coll::Transfer& t) {
          hops.push_back({t.src, t.dst, t.channel});
        });
        std::sort(hops.begin(), hops.end());
        hops.erase(std::unique(hops.begin(), hops.end()), hops.end());
        for (std::size_t k = 1; k < planes; ++k) {
          const Bucket& bk = bucket_for(members[k], size);
          if (!(bk.spec == b0.spec) || bk.base_latency != b0.base_latency) return std::nullopt;
        }
        for (const auto& [src, dst, channel] : hops) {
          const topo::DeviceId s0 = members[0][src];
          const topo::DeviceId d0 = members[0][dst];
          const auto ch = static_cast<std::uint16_t>(channel);
          router.route_into(s0, d0, coll::flow_key(s0, d0, ch, options.seed), base);
          for (std::size_t k = 1; k < planes; ++k) {
            const topo::DeviceId sk = members[k][src];
            const topo::DeviceId dk = members[k][dst];
            if (!pair(sk, dk, coll::flow_key(sk, dk, ch, options.seed), k)) return std::nullopt;
          }
        }
      }
    }
    return check.take();
  };
  const std::optional<std::vector<topo::LinkId>> plane_source = shard_planes();
  ReplayOptions ro;
  ro.one_shard_plane = plane_source.has_value();
  // A link's statistics: its plane-0 preimage's when one plane stood for all.
  auto stats_of = [&](topo::LinkId id) -> const net::LinkStats& {
    return sim.link_stats(plane_source ? (*plane_source)[id] : id);
  };
  // Only the links asked for: the recording costs memory and an append per rate change.
  if (plane_source) {
    std::vector<topo::LinkId> sources;
    for (const topo::LinkId id : options.series_links) sources.push_back((*plane_source)[id]);
    sim.record_utilization(sources);
  } else {
    sim.record_utilization(options.series_links);
  }
  // Every reduction the replay will launch, the links its routes cross (all its buckets') and its
  // run alone; the transfers are counted only when some reduction may run alone.
  if (options.alone_reductions && input.devices.size() >= 2) {
    const std::size_t links = fabric.num_links();
    reductions_on.assign(links, 0);
    recorded.assign(links, 0);
    for (const topo::LinkId id : options.series_links) {
      recorded[plane_source ? (*plane_source)[id] : id] = 1;
    }
    const std::size_t groups = input.devices[0].size();
    const std::size_t shards = ro.one_shard_plane ? 1 : input.devices[0][0].size();
    const int k_buckets = std::max(1, input.gradient_buckets);
    coll::ContentionFreeEvaluator alone(fabric);
    bool any_alone = false;
    std::vector<topo::LinkId> route;
    std::vector<coll::RankPair> pairs;
    for (std::size_t g = 0; g < groups; ++g) {
      Bytes total;
      for (std::size_t c = g; c < input.stages.size(); c += groups) {
        total += input.stages[c].gradient_sync;
      }
      for (std::size_t k = 0; k < shards; ++k) {
        std::vector<topo::DeviceId> members;
        for (const auto& replica : input.devices) members.push_back(replica[g][k]);
        std::vector<Bucket*> launched;
        std::vector<topo::LinkId> used;
        for (int bucket = 0; bucket < k_buckets; ++bucket) {
          const Bytes size = bucket_size(total, bucket, k_buckets);
          if (size == Bytes(0)) continue;
          Bucket& b = bucket_for(members, size);
          if (std::find(launched.begin(), launched.end(), &b) != launched.end()) continue;
          launched.push_back(&b);
          b.alone = alone.evaluate(router, *b.program, members, options.seed);
          any_alone = any_alone || b.alone.has_value();
          pairs.clear();
          if (auto listed = b.program->distinct_pairs()) {
            pairs = std::move(*listed);
          } else {
            b.program->for_each_transfer([&](const coll::Transfer& t) {
              pairs.push_back({t.src, t.dst, t.channel});
            });
          }
          for (const coll::RankPair& p : pairs) {
            const topo::DeviceId src = members[p.src];
            const topo::DeviceId dst = members[p.dst];
            router.route_into(src, dst, coll::flow_key(src, dst, p.channel, options.seed), route);
            used.insert(used.end(), route.begin(), route.end());
          }
        }
        std::sort(used.begin(), used.end());
        used.erase(std::unique(used.begin(), used.end()), used.end());
        for (const topo::LinkId link : used) ++reductions_on[link];
        const auto& kept = reduction_links.emplace_back(std::move(used));
        for (Bucket* b : launched) b->links = &kept;
      }
    }
    // The others whose group's links no other group crosses (and no series records) are run
    // alone once in a simulator of their own (their flows share links among themselves).
    std::optional<coll::AloneSimulator> event_alone;  // made on first use: a whole link table
    for (auto& [key, b] : buckets) {
      if (b.alone || b.links == nullptr) continue;
      const bool apart = std::all_of(b.links->begin(), b.links->end(), [&](topo::LinkId link) {
        return reductions_on[link] == 1 && recorded[link] == 0;
      });
      if (!apart) continue;
      if (!event_alone) event_alone.emplace(fabric);
      b.alone = event_alone->run(router, b.program, key.first, options.seed, *b.links);
      any_alone = true;
    }
    if (any_alone) ro.transfers_ahead = &transfers_ahead;
  }
  ro.seed = options.seed;
  if (network.calibrated()) {
    ro.transfer_latency = [&network](Bytes size) {
      return network.base_latency(coll::Operation::kSend, coll::Algorithm::kDirect,
                                  network.protocol(size));
    };
  }
  RunRecord record = replay(input, sim, allreduce, ro);
  record.alone_reductions = alone_count;
  record.simulated_reductions = simulated_count;
  record.simulated_shards =
      ro.one_shard_plane ? 1 : static_cast<std::int32_t>(input.devices[0][0].size());

  // Buckets repeat the same (group, size) every iteration step: price each pair once.
  std::map<std::pair<std::vector<topo::DeviceId>, std::int64_t>, Time> closed_forms;
  coll::ClosedFormPricer pricer(network, options.seed);
  for (auto& c : record.collectives) {
    auto [it, fresh] = closed_forms.try_emplace({c.group, c.size.count()});
    if (fresh) {
      const Bucket& b = bucket_for(c.group, c.size);
      it->second = Time::seconds(pricer.price(b.spec, c.group).seconds);
    }
    c.closed_form = it->second;
  }
  const double seconds = record.summary.iteration_time.to_seconds();
  for (topo::LinkId id = 0; id < topology.num_links(); ++id) {
    const net::LinkStats& st = stats_of(id);
    if (st.bytes <= 0) continue;
    const topo::Link& link = topology.link(id);
    const double capacity = link.bandwidth.bytes_per_s() * seconds;
    record.links.push_back(
        {link.src, link.dst, st.bytes, st.busy, capacity > 0 ? st.bytes / capacity : 0.0, id});
  }
  describe(topology, record);
  for (const topo::LinkId id : options.series_links) {
    LinkSeries series = series_of(sim, topology, plane_source ? (*plane_source)[id] : id);
    const topo::Link& link = topology.link(id);
    series.link = id;
    series.src = link.src;
    series.dst = link.dst;
    record.link_series.push_back(std::move(series));
  }
  add_busiest_series(record, plan, profile, topology, options);
  return record;
}

// The busiest links' series come from a second replay recording them, so that the first one
// runs exactly as without them. `run.links` lists every link that carried bytes, in link id
// order, with the simulator's byte counts, so the busiest are those of the run's statistics.
void add_busiest_series(RunRecord& run, const placer::Plan& plan,
                        const workload::LayerProfile& profile, const topo::Topology& topology,
                        const PlanReplayOptions& options, const std::atomic<bool>* stop) {
  if (options.utilization_links <= 0) return;
  std::vector<std::pair<double, topo::LinkId>> used;
  for (const LinkRow& row : run.links) {
    const double rate = topology.link(row.link).bandwidth.bytes_per_s();
    if (row.bytes > 0 && rate > 0) used.emplace_back(row.bytes / rate, row.link);
  }
  std::stable_sort(used.begin(), used.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  PlanReplayOptions again = options;
  again.utilization_links = 0;
  again.series_links.clear();
  for (std::size_t i = 0;
       i < used.size() && i < static_cast<std::size_t>(options.utilization_links); ++i) {
    again.series_links.push_back(used[i].second);
  }
  if (again.series_links.empty()) return;
  run.link_series = replay_plan(plan, profile, topology, again, nullptr, stop).link_series;
}

}  // namespace nest::replay
