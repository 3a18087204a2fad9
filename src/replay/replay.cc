#include "nest/replay/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "nest/core/error.h"
#include "nest/placer/cost_model.h"
#include "nest/topo/router.h"

namespace nest::replay {
namespace {

// floor(total * i / k) without forming total * i (which overflows for large totals): exact
// for 0 <= i <= k and k <= 2^31, since (total % k) * i < k^2 fits 64 bits.
std::int64_t share_of(std::int64_t total, std::int64_t i, std::int64_t k) {
  return total / k * i + total % k * i / k;
}

struct Op {
  bool forward = true;
  std::int64_t microbatch = 0;
  std::size_t chunk = 0;  // the (virtual) stage: chunk c runs on device group c mod S
};

// The order in which device group `group` (of `groups`) runs its microbatches, `chunks` =
// groups x v virtual stages (v = 1 without interleaving; group g holds chunks g, g + S, ...).
std::vector<Op> stage_order(Schedule schedule, std::size_t group, std::size_t groups,
                            std::size_t chunks, std::int64_t microbatches) {
  std::vector<Op> ops;
  const auto v = static_cast<std::int64_t>(chunks / groups);
  ops.reserve(static_cast<std::size_t>(2 * microbatches * v));
  if (schedule == Schedule::kGPipe) {
    for (std::int64_t i = 0; i < microbatches; ++i) ops.push_back({true, i, group});
    for (std::int64_t i = 0; i < microbatches; ++i) ops.push_back({false, i, group});
    return ops;
  }
  // 1F1B, and its interleaved form: the cost model's order (`placer::pipeline_op`).
  const auto s = static_cast<std::int64_t>(groups);
  const auto g = static_cast<std::int64_t>(group);
  for (std::int64_t i = 0; i < 2 * microbatches * v; ++i) {
    const placer::PipelineOp op = placer::pipeline_op(s, g, v, microbatches, i);
    ops.push_back({op.forward, op.microbatch, static_cast<std::size_t>(op.chunk)});
  }
  return ops;
}

// Sends that leave one after another: whether one is on the network, and the launches waiting
// behind it, oldest at `head` (a vector, emptied whenever it drains: no allocation per stream
// until a send has to wait).
struct SendQueue {
  bool busy = false;
  std::size_t head = 0;
  std::vector<std::function<void()>> waiting;
};

// The compute stream of one stage replica (all its shards run in lockstep).
struct ComputeStream {
  std::size_t group = 0;
  std::size_t replica = 0;
  std::vector<Op> ops;
  std::size_t next = 0;
  bool busy = false;
  // Per (local chunk, microbatch): its input activation / its output gradient has arrived.
  std::vector<char> input_ready;
  std::vector<char> grad_ready;
  Bytes activations;  // current activation level of each shard
  Time compute_busy;
  // Its sends to one peer stage leave one after another, each once the one before it has
  // arrived, as the cost model's `pipeline_makespan` has them (NCCL runs the p2p operations of
  // one peer pair in the order they were issued): to the next stage (0) and to the previous one
  // (1); with two stages both are the other stage, queue 0.
  std::array<SendQueue, 2> sends;
};

// Gradient reduction of one stage across replicas, bucket by bucket.
struct SyncState {
  std::vector<int> bucket_ready;  // replicas whose backward produced bucket i
  int next_bucket = 0;
  bool running = false;
};

class Engine {
 public:
  // `rows`: false keeps no timeline or memory rows (the exposed-communication reference, whose
  // iteration time alone is read).
  Engine(const ReplayInput& in, net::Simulator& sim, const AllreduceLauncher& allreduce,
         const ReplayOptions& options, bool rows = true)
      : in_(in),
        sim_(sim),
        allreduce_(allreduce),
        options_(options),
        rows_(rows),
        router_(sim.topology(), options.seed),
        chunks_(in.stages.size()),
        groups_(in.devices.empty() ? 0 : in.devices[0].size()),
        replicas_(in.devices.size()) {}

  RunRecord run();

 private:
  ComputeStream& stream(std::size_t g, std::size_t r) { return streams_[r * groups_ + g]; }
  // The devices of device group g (a plan stage) in replica r.
  std::span<const topo::DeviceId> shards(std::size_t g, std::size_t r) const {
    return in_.devices[r][g];
  }
  // The shard plane of device group g in replica r: its devices run the same tasks at the same
  // times, so their rows are kept once per plane (`plane_timeline_`).
  std::uint32_t plane(std::size_t g, std::size_t r) const {
    return static_cast<std::uint32_t>(r * groups_ + g);
  }
  // The planes' rows as every device's, sorted by device, then by time (`by_device`).
  template <class Row, class TimeOf>
  std::vector<Row> by_device(std::vector<Row>& rows, TimeOf time_of) const;
  // Index of (chunk c, microbatch) in its group's readiness vectors.
  std::size_t slot(std::size_t c, std::int64_t mb, std::int64_t m) const {
    return (c / groups_) * static_cast<std::size_t>(m) + static_cast<std::size_t>(mb);
  }
  bool ready(const ComputeStream& st, const Op& op) const;
  void try_start(std::size_t s, std::size_t r);
  void finish(std::size_t s, std::size_t r, Op op, Time start);
  void transfer(std::size_t r, Op op, std::size_t to_chunk);
  void bucket_ready(std::size_t s, int bucket);
  void start_bucket(std::size_t s);
  void start_optimizer(std::size_t s);
  void row(std::size_t g, std::size_t r, std::size_t chunk, Stream kind_stream, TaskKind kind,
           std::int64_t mb, Time start, Time end);
  void memory(std::size_t s, std::size_t r, Time at, Bytes level);
  std::uint32_t add_pending(std::size_t flows, std::function<void()> arrived);
  void flow_arrived(std::uint32_t pending);
  void count_transfers();
  void take_off(std::span<const topo::LinkId> route);
  void at(Time t, std::function<void()> action) { sim_.schedule(t, std::move(action)); }

  const ReplayInput& in_;
  net::Simulator& sim_;
  const AllreduceLauncher& allreduce_;
  ReplayOptions options_;
  bool rows_;
  topo::Router router_;
  // A transfer's route, routed afresh per flow: the router's cache would keep every (pair,
  // path) that the per-microbatch flow keys pick, which no later flow reuses.
  std::vector<topo::LinkId> route_;
  // The transfers in flight: their shards' flows still to arrive and what runs when the last has,
  // by a slot that each flow's callback holds (a callback small enough to need no allocation),
  // and the free slots.
  struct PendingTransfer {
    std::size_t flows = 0;
    std::function<void()> arrived;
  };
  std::vector<PendingTransfer> pending_;
  std::vector<std::uint32_t> free_pending_;
  std::size_t chunks_;
  std::size_t groups_;
  std::size_t replicas_;
  std::vector<ComputeStream> streams_;
  std::vector<SyncState> sync_;
  std::vector<Bytes> group_sync_;      // per group: gradient bytes of its chunks
  std::vector<Time> group_optimizer_;  // per group: optimizer step of its chunks
  RunRecord record_;
  // Timeline and memory rows per shard plane (`plane`, in the rows' `device`), in the order the
  // run made them; each device's rows are its plane's (`by_device`).
  std::vector<TimelineRow> plane_timeline_;
  std::vector<MemoryRow> plane_memory_;
  Time end_;
};

bool Engine::ready(const ComputeStream& st, const Op& op) const {
  const std::size_t i = slot(op.chunk, op.microbatch, in_.microbatches[st.replica]);
  if (op.forward) return op.chunk == 0 || st.input_ready[i] != 0;
  return op.chunk + 1 == chunks_ || st.grad_ready[i] != 0;
}

void Engine::try_start(std::size_t s, std::size_t r) {
  ComputeStream& st = stream(s, r);
  if (st.busy || st.next >= st.ops.size() || !ready(st, st.ops[st.next])) return;
  const Op op = st.ops[st.next];
  const StageSpec& spec = in_.stages[op.chunk];
  const Time start = sim_.now();
  st.busy = true;
  if (op.forward) {
    st.activations += spec.stash;
  } else {
    st.activations += spec.working;
  }
  memory(s, r, start, st.activations);
  const Time duration = op.forward ? spec.forward : spec.backward;
  const bool last_backward = !op.forward && st.next + 1 == st.ops.size();
  if (last_backward && replicas_ > 1 && group_sync_[s] > Bytes(0)) {
    // Buckets become ready as the last backward pass works back through the stage's layers
    // (without overlap, when it ends).
    const int k = std::max(1, in_.gradient_buckets);
    for (int i = 0; i < k; ++i) {
      const Time ready_at = in_.overlap_gradient_sync
                                ? start + Time::picoseconds(share_of(duration.ps(), i + 1, k))
                                : start + duration;
      at(ready_at, [this, s, i] { bucket_ready(s, i); });
    }
  }
  at(start + duration, [this, s, r, op, start] { finish(s, r, op, start); });
}

void Engine::finish(std::size_t s, std::size_t r, Op op, Time start) {
  ComputeStream& st = stream(s, r);
  const StageSpec& spec = in_.stages[op.chunk];
  const Time now = sim_.now();
  st.busy = false;
  st.compute_busy += now - start;
  row(s, r, op.chunk, Stream::kCompute, op.forward ? TaskKind::kForward : TaskKind::kBackward,
      op.microbatch, start, now);
  if (!op.forward) {
    st.activations -= spec.stash + spec.working;
    memory(s, r, now, st.activations);
  }
  const bool sends = op.forward ? op.chunk + 1 < chunks_ : op.chunk > 0;
  // Without overlap the stream waits for its send (`transfer` releases it on arrival).
  if (sends && !in_.overlap_boundary_transfers) st.busy = true;
  if (sends) transfer(r, op, op.forward ? op.chunk + 1 : op.chunk - 1);
  ++st.next;
  end_ = std::max(end_, now);
  if (st.next == st.ops.size() && (replicas_ == 1 || group_sync_[s] == Bytes(0))) {
    // No reduction to wait for: this replica's optimizer step follows at once.
    const Time t1 = now + group_optimizer_[s];
    at(t1, [this, s, r, now, t1] {
      row(s, r, s, Stream::kCompute, TaskKind::kOptimizer, -1, now, t1);
      stream(s, r).compute_busy += t1 - now;
      end_ = std::max(end_, t1);
    });
  }
  try_start(s, r);
}

void Engine::transfer(std::size_t r, Op op, std::size_t to_chunk) {
  const StageSpec& spec = in_.stages[op.chunk];
  const Bytes size = op.forward ? spec.activation_out : spec.gradient_out;
  const TaskKind kind = op.forward ? TaskKind::kSendActivation : TaskKind::kSendGradient;
  const std::size_t from = op.chunk % groups_;
  const std::size_t to = to_chunk % groups_;
  // One queue per peer stage: the next (0), else the previous (1); with two stages both are 0.
  const std::size_t way = to == (from + 1) % groups_ ? 0 : 1;
  // Runs when the send reaches the head of its stage's queue: its row starts there.
  auto launch = [this, from, to, to_chunk, r, op, kind, size, way] {
    const Time start = sim_.now();
    auto arrived = [this, from, to, to_chunk, r, op, start, kind, way] {
      row(from, r, op.chunk, Stream::kNetwork, kind, op.microbatch, start, sim_.now());
      ComputeStream& target = stream(to, r);
      const std::size_t i = slot(to_chunk, op.microbatch, in_.microbatches[r]);
      (op.forward ? target.input_ready : target.grad_ready)[i] = 1;
      end_ = std::max(end_, sim_.now());
      // The next send of the queue leaves now.
      SendQueue& queue = stream(from, r).sends[way];
      if (queue.head == queue.waiting.size()) {
        queue.busy = false;
      } else {
        const std::function<void()> next = std::move(queue.waiting[queue.head++]);
        if (queue.head == queue.waiting.size()) {
          queue.waiting.clear();
          queue.head = 0;
        }
        next();
      }
      try_start(to, r);
      if (!in_.overlap_boundary_transfers) {
        stream(from, r).busy = false;
        try_start(from, r);
      }
    };
    if (options_.zero_network || size == Bytes(0)) {
      at(start, std::move(arrived));
      return;
    }
    auto flows = [this, from, to, size, op, r, arrived = std::move(arrived)]() mutable {
      const auto src = shards(from, r);
      const auto dst = shards(to, r);
      const std::size_t simulated = options_.one_shard_plane ? 1 : src.size();
      const std::uint32_t pending = add_pending(simulated, std::move(arrived));
      for (std::size_t k = 0; k < simulated; ++k) {
        const std::uint64_t flow = transfer_flow_key(op.microbatch, op.chunk, r);
        router_.route_into(src[k], dst[k], flow, route_);
        if (options_.transfers_ahead != nullptr) take_off(route_);
        sim_.start_flow(route_, size,
                        [this, pending](net::FlowId, Time) { flow_arrived(pending); });
      }
    };
    const Time latency = options_.transfer_latency ? options_.transfer_latency(size) : Time::zero();
    if (latency > Time::zero()) {
      at(start + latency, std::move(flows));
    } else {
      flows();
    }
  };
  SendQueue& queue = stream(from, r).sends[way];
  if (queue.busy) {
    queue.waiting.emplace_back(std::move(launch));
    return;
  }
  queue.busy = true;
  launch();
}

std::uint32_t Engine::add_pending(std::size_t flows, std::function<void()> arrived) {
  std::uint32_t slot = 0;
  if (free_pending_.empty()) {
    slot = static_cast<std::uint32_t>(pending_.size());
    pending_.emplace_back();
  } else {
    slot = free_pending_.back();
    free_pending_.pop_back();
  }
  pending_[slot] = PendingTransfer{flows, std::move(arrived)};
  return slot;
}

void Engine::flow_arrived(std::uint32_t pending) {
  PendingTransfer& p = pending_[pending];
  if (--p.flows > 0) return;
  // Moved out first: what it runs may start transfers, which reuse or grow `pending_`.
  const std::function<void()> arrived = std::move(p.arrived);
  p.arrived = nullptr;
  free_pending_.push_back(pending);
  arrived();
}

void Engine::bucket_ready(std::size_t s, int bucket) {
  ++sync_[s].bucket_ready[static_cast<std::size_t>(bucket)];
  start_bucket(s);
}

void Engine::start_bucket(std::size_t s) {
  SyncState& sync = sync_[s];
  const int k = std::max(1, in_.gradient_buckets);
  if (sync.running || sync.next_bucket >= k) return;
  if (sync.bucket_ready[static_cast<std::size_t>(sync.next_bucket)] < static_cast<int>(replicas_)) {
    return;
  }
  sync.running = true;
  const std::int64_t total = group_sync_[s].count();
  const int b = sync.next_bucket;
  const Bytes size = bucket_size(Bytes(total), b, k);
  const Time start = sim_.now();
  const std::size_t shard_count = shards(s, 0).size();
  // Under one_shard_plane shard 0's reduction stands for all (same algorithm, same times).
  const std::size_t simulated = options_.one_shard_plane ? 1 : shard_count;
  auto left = std::make_shared<std::size_t>(simulated);
  // Each shard's reduction records the algorithm its launcher chose.
  auto algorithms = std::make_shared<std::vector<std::string>>(shard_count, "ring");
  auto done = [this, s, k, start, left, size, algorithms] {
    if (--*left > 0) return;
    const Time now = sim_.now();
    for (std::size_t r = 0; r < replicas_; ++r) {
      row(s, r, s, Stream::kNetwork, TaskKind::kGradientSync, -1, start, now);
    }
    for (std::size_t shard = 0; shard < shards(s, 0).size(); ++shard) {
      CollectiveRow c{"allreduce", (*algorithms)[shard], {}, size, start, now, Time::zero()};
      for (std::size_t r = 0; r < replicas_; ++r) c.group.push_back(shards(s, r)[shard]);
      record_.collectives.push_back(std::move(c));
    }
    SyncState& st = sync_[s];
    st.running = false;
    ++st.next_bucket;
    end_ = std::max(end_, now);
    if (st.next_bucket == k) {
      start_optimizer(s);
    } else {
      start_bucket(s);
    }
  };
  for (std::size_t shard = 0; shard < simulated; ++shard) {
    if (options_.zero_network || size == Bytes(0)) {
      at(start, done);
      continue;
    }
    std::vector<topo::DeviceId> group;
    for (std::size_t r = 0; r < replicas_; ++r) group.push_back(shards(s, r)[shard]);
    (*algorithms)[shard] = allreduce_(group, size, done);
  }
  for (std::size_t shard = simulated; shard < shard_count; ++shard) {
    (*algorithms)[shard] = (*algorithms)[0];
  }
}

void Engine::start_optimizer(std::size_t s) {
  const Time t0 = sim_.now();
  const Time t1 = t0 + group_optimizer_[s];
  at(t1, [this, s, t0, t1] {
    for (std::size_t r = 0; r < replicas_; ++r) {
      row(s, r, s, Stream::kCompute, TaskKind::kOptimizer, -1, t0, t1);
      stream(s, r).compute_busy += t1 - t0;
    }
    end_ = std::max(end_, t1);
  });
}

void Engine::row(std::size_t g, std::size_t r, std::size_t chunk, Stream kind_stream, TaskKind kind,
                 std::int64_t mb, Time start, Time end) {
  if (!rows_) return;
  const StageSpec& spec = in_.stages[chunk];
  plane_timeline_.push_back(
      TimelineRow{plane(g, r), kind_stream, kind, static_cast<std::int32_t>(chunk),
                  static_cast<std::int32_t>(mb), spec.first_layer, spec.last_layer, start, end});
}

void Engine::memory(std::size_t s, std::size_t r, Time at, Bytes level) {
  if (!rows_) return;
  plane_memory_.push_back(MemoryRow{plane(s, r), at, level, MemoryCategory::kActivations});
}

// Every flow `transfer` will start: each send's, from each simulated shard.
void Engine::count_transfers() {
  std::vector<std::uint32_t>& ahead = *options_.transfers_ahead;
  ahead.assign(sim_.topology().num_links(), 0);
  for_each_send(in_, [&](const Send& send) {
    const std::size_t simulated = options_.one_shard_plane ? 1 : send.from.size();
    for (std::size_t k = 0; k < simulated; ++k) {
      router_.route_into(send.from[k], send.to[k], send.key, route_);
      for (const topo::LinkId link : route_) ++ahead[link];
    }
    return true;
  });
}

void Engine::take_off(std::span<const topo::LinkId> route) {
  std::vector<std::uint32_t>& ahead = *options_.transfers_ahead;
  for (const topo::LinkId link : route) {
    if (ahead[link] == 0) throw Error::internal("replay: a transfer that was not counted");
    --ahead[link];
  }
}

void check(const ReplayInput& in, const topo::Topology& topology) {
  if (in.stages.empty()) throw Error::input("plan has no stage", {.key = "stages"});
  if (in.devices.empty()) throw Error::input("plan has no replica", {.key = "devices"});
  if (in.microbatches.size() != in.devices.size()) {
    throw Error::internal("replay: one microbatch count per replica expected");
  }
  const std::size_t groups = in.devices[0].size();
  if (groups == 0 || in.stages.size() % groups != 0) {
    throw Error::input(
        fmt::format("{} stages do not divide into {} device groups", in.stages.size(), groups),
        {.key = "devices"});
  }
  const std::size_t v = in.stages.size() / groups;
  if (v > 1 && in.schedule != Schedule::kInterleaved) {
    throw Error::input("virtual stages need the interleaved schedule",
                       {.key = "--schedule", .expected = "interleaved"});
  }
  const std::size_t shard_count = in.devices[0][0].size();
  // Where each device was met first (replica, stage), to name both when it is met again.
  std::vector<std::pair<std::size_t, std::size_t>> seen(topology.num_devices(),
                                                        {in.devices.size(), 0});
  for (std::size_t r = 0; r < in.devices.size(); ++r) {
    if (in.devices[r].size() != groups) {
      throw Error::input(
          fmt::format("replica {} has {} stages, replica 0 {}", r, in.devices[r].size(), groups),
          {.key = "devices"});
    }
    if (v > 1 && in.microbatches[r] % static_cast<std::int64_t>(groups) != 0) {
      throw Error::input(
          fmt::format("the interleaved schedule runs microbatches in groups of the {} stages",
                      groups),
          {.key = "microbatches",
           .value = std::to_string(in.microbatches[r]),
           .expected = fmt::format("a multiple of {} per replica", groups)});
    }
    for (std::size_t s = 0; s < groups; ++s) {
      if (in.devices[r][s].size() != shard_count || shard_count == 0) {
        throw Error::input(fmt::format("stage {} of replica {} has {} devices, expected {}", s, r,
                                       in.devices[r][s].size(), shard_count),
                           {.key = "devices"});
      }
      for (topo::DeviceId d : in.devices[r][s]) {
        if (d >= topology.num_devices()) {
          throw Error::input(
              fmt::format("device {} is outside the topology", d),
              {.key = "devices",
               .expected = fmt::format("a device id below {}", topology.num_devices())});
        }
        if (seen[d].first != in.devices.size()) {
          throw Error::input(fmt::format("device {} is in stage {} of replica {} and in stage {} "
                                         "of replica {}",
                                         d, seen[d].second, seen[d].first, s, r),
                             {.key = "devices", .expected = "each device in one stage replica"});
        }
        seen[d] = {r, s};
      }
    }
  }
}

RunRecord Engine::run() {
  check(in_, sim_.topology());
  streams_.resize(groups_ * replicas_);
  sync_.assign(groups_, SyncState{});
  for (auto& sync : sync_) {
    sync.bucket_ready.assign(static_cast<std::size_t>(std::max(1, in_.gradient_buckets)), 0);
  }
  // What a device group holds: the constant memory, gradients and optimizer step of its chunks.
  group_sync_.assign(groups_, Bytes(0));
  group_optimizer_.assign(groups_, Time::zero());
  std::vector<StageSpec> held(groups_);
  for (std::size_t c = 0; c < chunks_; ++c) {
    const StageSpec& spec = in_.stages[c];
    const std::size_t g = c % groups_;
    group_sync_[g] += spec.gradient_sync;
    group_optimizer_[g] += spec.optimizer;
    held[g].weights += spec.weights;
    held[g].gradients += spec.gradients;
    held[g].optimizer_state += spec.optimizer_state;
  }
  for (std::size_t r = 0; r < replicas_; ++r) {
    for (std::size_t g = 0; g < groups_; ++g) {
      ComputeStream& st = stream(g, r);
      const std::int64_t m = in_.microbatches[r];
      st.group = g;
      st.replica = r;
      st.ops = stage_order(in_.schedule, g, groups_, chunks_, m);
      const std::size_t slots = chunks_ / groups_ * static_cast<std::size_t>(m);
      st.input_ready.assign(slots, 0);
      st.grad_ready.assign(slots, 0);
      if (rows_) {
        const std::uint32_t p = plane(g, r);
        plane_memory_.push_back({p, Time::zero(), held[g].weights, MemoryCategory::kWeights});
        plane_memory_.push_back({p, Time::zero(), held[g].gradients, MemoryCategory::kGradients});
        plane_memory_.push_back(
            {p, Time::zero(), held[g].optimizer_state, MemoryCategory::kOptimizer});
        plane_memory_.push_back({p, Time::zero(), Bytes(0), MemoryCategory::kActivations});
      }
    }
  }
  if (options_.zero_network) options_.transfers_ahead = nullptr;
  if (options_.transfers_ahead != nullptr) count_transfers();
  for (std::size_t r = 0; r < replicas_; ++r) {
    for (std::size_t g = 0; g < groups_; ++g) at(Time::zero(), [this, g, r] { try_start(g, r); });
  }
  sim_.run();
  for (const ComputeStream& st : streams_) {
    if (st.next != st.ops.size()) {
      throw Error::internal(fmt::format("replay: stage {} of replica {} stopped at op {} of {}",
                                        st.group, st.replica, st.next, st.ops.size()));
    }
  }
  record_.timeline = by_device(plane_timeline_, [](const TimelineRow& row) { return row.start; });
  record_.memory = by_device(plane_memory_, [](const MemoryRow& row) { return row.at; });
  Summary& sum = record_.summary;
  sum.iteration_time = end_;
  sum.estimate = in_.estimate;
  if (end_ > Time::zero()) {
    Time busy;
    for (const ComputeStream& st : streams_) busy += st.compute_busy;
    const double seconds = end_.to_seconds();
    sum.bubble_fraction =
        1.0 - busy.to_seconds() / (seconds * static_cast<double>(streams_.size()));
    sum.sequences_per_s = in_.sequences_per_iteration / seconds;
    sum.tokens_per_s = in_.tokens_per_iteration / seconds;
    const double devices = static_cast<double>(streams_.size() * shards(0, 0).size());
    if (in_.peak_flop_rate.flops_per_s() > 0) {
      sum.model_flops_utilization =
          in_.flops_per_iteration.count() / (seconds * devices * in_.peak_flop_rate.flops_per_s());
    }
  }
  return std::move(record_);
}

// `rows` (each `device` below `devices`) in the order of a stable sort by (device,
// time_of(row)): a stable counting sort by device, then a stable sort of each device's rows by
// time. The same permutation (ties keep their order in both), in O(rows + devices) plus each
// device's short, nearly sorted run instead of a merge sort of millions of rows. Returns where
// each device's rows begin, and the row count last.
template <class Row, class TimeOf>
std::vector<std::size_t> sort_by_device_then(std::vector<Row>& rows, TimeOf time_of,
                                             std::size_t devices) {
  std::vector<std::size_t> begin(devices + 1, 0);
  for (const Row& row : rows) ++begin[row.device + 1];
  for (std::size_t d = 0; d < devices; ++d) begin[d + 1] += begin[d];
  std::vector<Row> sorted(rows.size());
  std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
  for (Row& row : rows) sorted[next[row.device]++] = std::move(row);
  for (std::size_t d = 0; d < devices; ++d) {
    const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(begin[d]);
    const auto last = sorted.begin() + static_cast<std::ptrdiff_t>(begin[d + 1]);
    std::stable_sort(first, last,
                     [&](const Row& a, const Row& b) { return time_of(a) < time_of(b); });
  }
  rows = std::move(sorted);
  return begin;
}

// Before the planes, each task's rows were made per device of its plane, in plane device order,
// and sorted as `sort_by_device_then` sorts. A device is in one plane (`check`), so its rows
// were its plane's in the order made, and the sort by time within the device orders them as
// the same sort within the plane: sorting the planes' rows so and giving each device, in
// increasing id, a copy of its plane's is the same table, made without the per-device rows'
// growth or the sort's copy (4.8 million rows for GPT-3 on 16,384 GPUs).
template <class Row, class TimeOf>
std::vector<Row> Engine::by_device(std::vector<Row>& rows, TimeOf time_of) const {
  std::vector<Row> out;
  if (rows.empty()) return out;
  const std::vector<std::size_t> begin = sort_by_device_then(rows, time_of, groups_ * replicas_);
  constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> plane_of;
  std::size_t total = 0;
  for (std::size_t r = 0; r < replicas_; ++r) {
    for (std::size_t g = 0; g < groups_; ++g) {
      const std::uint32_t p = plane(g, r);
      for (const topo::DeviceId d : shards(g, r)) {
        if (d >= plane_of.size()) plane_of.resize(d + 1U, kNone);
        plane_of[d] = p;
        total += begin[p + 1] - begin[p];
      }
    }
  }
  out.reserve(total);
  for (std::size_t d = 0; d < plane_of.size(); ++d) {
    if (plane_of[d] == kNone) continue;
    for (std::size_t i = begin[plane_of[d]]; i < begin[plane_of[d] + 1U]; ++i) {
      out.push_back(rows[i]);
      out.back().device = static_cast<std::uint32_t>(d);
    }
  }
  return out;
}

// The tables that make the record self-describing: which devices run each stage replica, and
// what each stage holds and sends.
void describe(const ReplayInput& in, RunRecord& record) {
  const std::size_t groups = in.devices[0].size();
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t r = 0; r < in.devices.size(); ++r) {
      const auto& shards = in.devices[r][g];
      record.placement.push_back({static_cast<std::int32_t>(g), static_cast<std::int32_t>(r),
                                  std::vector<std::uint32_t>(shards.begin(), shards.end())});
    }
  }
  for (std::size_t c = 0; c < in.stages.size(); ++c) {
    const StageSpec& s = in.stages[c];
    record.stages.push_back({static_cast<std::int32_t>(c % groups), s.first_layer, s.last_layer,
                             s.activation_out, s.gradient_out});
  }
}

}  // namespace

bool for_each_send(const ReplayInput& input, const std::function<bool(const Send&)>& visit) {
  const std::size_t chunks = input.stages.size();
  for (std::size_t r = 0; r < input.devices.size(); ++r) {
    const std::size_t groups = input.devices[r].size();
    for (std::size_t c = 0; c < chunks; ++c) {
      const StageSpec& spec = input.stages[c];
      for (const bool forward : {true, false}) {
        if (forward ? c + 1 == chunks : c == 0) continue;
        if ((forward ? spec.activation_out : spec.gradient_out) == Bytes(0)) continue;
        Send send{r,
                  c,
                  forward,
                  0,
                  input.devices[r][c % groups],
                  input.devices[r][(forward ? c + 1 : c - 1) % groups],
                  0};
        for (std::int64_t mb = 0; mb < input.microbatches[r]; ++mb) {
          send.microbatch = mb;
          send.key = transfer_flow_key(mb, c, r);
          if (!visit(send)) return false;
        }
      }
    }
  }
  return true;
}

std::uint64_t transfer_flow_key(std::int64_t microbatch, std::size_t chunk,
                                std::size_t replica) noexcept {
  return (static_cast<std::uint64_t>(microbatch) << 20) ^ (chunk << 8) ^ replica;
}

Bytes bucket_size(Bytes total, int b, int k) noexcept {
  return Bytes(share_of(total.count(), b + 1, k) - share_of(total.count(), b, k));
}

RunRecord replay(const ReplayInput& input, net::Simulator& sim, const AllreduceLauncher& allreduce,
                 const ReplayOptions& options) {
  RunRecord record = Engine(input, sim, allreduce, options).run();
  if (!options.zero_network) {
    // The same iteration on a network that costs nothing: what it saves is the exposed
    // communication.
    net::Simulator free_sim(sim.topology());
    ReplayOptions free = options;
    free.zero_network = true;
    const Time reference =
        Engine(input, free_sim, allreduce, free, false).run().summary.iteration_time;
    record.summary.exposed_communication = record.summary.iteration_time - reference;
  }
  describe(input, record);
  // Per-device peaks from the trace: the sum of the categories' levels, at each change.
  std::vector<MemoryRow>& m = record.memory;
  for (std::size_t i = 0; i < m.size();) {
    const topo::DeviceId d = m[i].device;
    Bytes level[4];
    Bytes peak;
    for (; i < m.size() && m[i].device == d; ++i) {
      level[static_cast<int>(m[i].category)] = m[i].bytes;
      peak = std::max(peak, level[0] + level[1] + level[2] + level[3]);
    }
    record.peaks.push_back({d, peak});
    record.summary.peak_memory = std::max(record.summary.peak_memory, peak);
  }
  return record;
}

}  // namespace nest::replay
