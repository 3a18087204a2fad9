#include "nest/replay/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "nest/core/error.h"
#include "nest/topo/router.h"

namespace nest::replay {
namespace {

struct Op {
  bool forward = true;
  std::int64_t microbatch = 0;
};

// The order in which one stage runs its microbatches. `stage` counts from the first stage.
std::vector<Op> stage_order(Schedule schedule, std::size_t stage, std::size_t stages,
                            std::int64_t microbatches) {
  std::vector<Op> ops;
  ops.reserve(static_cast<std::size_t>(2 * microbatches));
  if (schedule == Schedule::kGPipe) {
    for (std::int64_t i = 0; i < microbatches; ++i) ops.push_back({true, i});
    for (std::int64_t i = 0; i < microbatches; ++i) ops.push_back({false, i});
    return ops;
  }
  const std::int64_t warmup =
      std::min<std::int64_t>(static_cast<std::int64_t>(stages - stage - 1), microbatches);
  for (std::int64_t i = 0; i < warmup; ++i) ops.push_back({true, i});
  for (std::int64_t i = 0; i < microbatches - warmup; ++i) {
    ops.push_back({true, warmup + i});
    ops.push_back({false, i});
  }
  for (std::int64_t i = microbatches - warmup; i < microbatches; ++i) ops.push_back({false, i});
  return ops;
}

// The compute stream of one stage replica (all its shards run in lockstep).
struct ComputeStream {
  std::size_t stage = 0;
  std::size_t replica = 0;
  std::vector<Op> ops;
  std::size_t next = 0;
  bool busy = false;
  std::vector<char> input_ready;  // per microbatch: activation (forward) has arrived
  std::vector<char> grad_ready;   // per microbatch: gradient (backward) has arrived
  Bytes activations;              // current activation level of each shard
  Time compute_busy;
};

// Gradient reduction of one stage across replicas, bucket by bucket.
struct SyncState {
  std::vector<int> bucket_ready;  // replicas whose backward produced bucket i
  int next_bucket = 0;
  bool running = false;
};

class Engine {
 public:
  Engine(const ReplayInput& in, net::Simulator& sim, const AllreduceLauncher& allreduce,
         const ReplayOptions& options)
      : in_(in),
        sim_(sim),
        allreduce_(allreduce),
        options_(options),
        router_(sim.topology(), options.seed),
        stages_(in.stages.size()),
        replicas_(in.devices.size()) {}

  RunRecord run();

 private:
  ComputeStream& stream(std::size_t s, std::size_t r) { return streams_[r * stages_ + s]; }
  std::span<const topo::DeviceId> shards(std::size_t s, std::size_t r) const {
    return in_.devices[r][s];
  }
  bool ready(const ComputeStream& st, const Op& op) const;
  void try_start(std::size_t s, std::size_t r);
  void finish(std::size_t s, std::size_t r, Op op, Time start);
  void transfer(std::size_t s, std::size_t r, std::size_t to, Op op);
  void bucket_ready(std::size_t s, int bucket);
  void start_bucket(std::size_t s);
  void start_optimizer(std::size_t s);
  void row(std::size_t s, std::size_t r, Stream kind_stream, TaskKind kind, std::int64_t mb,
           Time start, Time end);
  void memory(std::size_t s, std::size_t r, Time at, Bytes level);
  void at(Time t, std::function<void()> action) { sim_.schedule(t, std::move(action)); }

  const ReplayInput& in_;
  net::Simulator& sim_;
  const AllreduceLauncher& allreduce_;
  ReplayOptions options_;
  topo::Router router_;
  std::size_t stages_;
  std::size_t replicas_;
  std::vector<ComputeStream> streams_;
  std::vector<SyncState> sync_;
  RunRecord record_;
  Time end_;
};

bool Engine::ready(const ComputeStream& st, const Op& op) const {
  const auto mb = static_cast<std::size_t>(op.microbatch);
  if (op.forward) return st.stage == 0 || st.input_ready[mb] != 0;
  return st.stage + 1 == stages_ || st.grad_ready[mb] != 0;
}

void Engine::try_start(std::size_t s, std::size_t r) {
  ComputeStream& st = stream(s, r);
  if (st.busy || st.next >= st.ops.size() || !ready(st, st.ops[st.next])) return;
  const Op op = st.ops[st.next];
  const StageSpec& spec = in_.stages[s];
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
  if (last_backward && replicas_ > 1 && spec.gradient_sync > Bytes(0)) {
    // Buckets become ready as the last backward pass works back through the stage's layers.
    const int k = std::max(1, in_.gradient_buckets);
    for (int i = 0; i < k; ++i) {
      const Time ready_at = start + Time::picoseconds(duration.ps() * (i + 1) / k);
      at(ready_at, [this, s, i] { bucket_ready(s, i); });
    }
  }
  at(start + duration, [this, s, r, op, start] { finish(s, r, op, start); });
}

void Engine::finish(std::size_t s, std::size_t r, Op op, Time start) {
  ComputeStream& st = stream(s, r);
  const StageSpec& spec = in_.stages[s];
  const Time now = sim_.now();
  st.busy = false;
  st.compute_busy += now - start;
  row(s, r, Stream::kCompute, op.forward ? TaskKind::kForward : TaskKind::kBackward, op.microbatch,
      start, now);
  if (!op.forward) {
    st.activations -= spec.stash + spec.working;
    memory(s, r, now, st.activations);
  }
  if (op.forward && s + 1 < stages_) transfer(s, r, s + 1, op);
  if (!op.forward && s > 0) transfer(s, r, s - 1, op);
  ++st.next;
  end_ = std::max(end_, now);
  if (st.next == st.ops.size() && (replicas_ == 1 || spec.gradient_sync == Bytes(0))) {
    // No reduction to wait for: this replica's optimizer step follows at once.
    const Time t1 = now + spec.optimizer;
    at(t1, [this, s, r, now, t1] {
      row(s, r, Stream::kCompute, TaskKind::kOptimizer, -1, now, t1);
      stream(s, r).compute_busy += t1 - now;
      end_ = std::max(end_, t1);
    });
  }
  try_start(s, r);
}

void Engine::transfer(std::size_t s, std::size_t r, std::size_t to, Op op) {
  const StageSpec& spec = in_.stages[s];
  const Bytes size = op.forward ? spec.activation_out : spec.gradient_out;
  const TaskKind kind = op.forward ? TaskKind::kSendActivation : TaskKind::kSendGradient;
  const auto src = shards(s, r);
  const auto dst = shards(to, r);
  const auto mb = static_cast<std::size_t>(op.microbatch);
  const Time start = sim_.now();
  auto arrived = [this, s, r, to, op, mb, start, kind] {
    row(s, r, Stream::kNetwork, kind, op.microbatch, start, sim_.now());
    ComputeStream& target = stream(to, r);
    (op.forward ? target.input_ready : target.grad_ready)[mb] = 1;
    end_ = std::max(end_, sim_.now());
    try_start(to, r);
  };
  if (options_.zero_network || size == Bytes(0)) {
    at(start, std::move(arrived));
    return;
  }
  auto left = std::make_shared<std::size_t>(src.size());
  for (std::size_t k = 0; k < src.size(); ++k) {
    const std::uint64_t flow = (static_cast<std::uint64_t>(op.microbatch) << 20) ^ (s << 8) ^ r;
    sim_.start_flow(router_.route(src[k], dst[k], flow), size, [left, arrived](net::FlowId, Time) {
      if (--*left == 0) arrived();
    });
  }
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
  const StageSpec& spec = in_.stages[s];
  const std::int64_t total = spec.gradient_sync.count();
  const int b = sync.next_bucket;
  const Bytes size(total * (b + 1) / k - total * b / k);
  const Time start = sim_.now();
  const std::size_t shard_count = shards(s, 0).size();
  auto left = std::make_shared<std::size_t>(shard_count);
  auto done = [this, s, b, k, start, left, size] {
    if (--*left > 0) return;
    const Time now = sim_.now();
    for (std::size_t r = 0; r < replicas_; ++r) {
      row(s, r, Stream::kNetwork, TaskKind::kGradientSync, -1, start, now);
    }
    for (std::size_t shard = 0; shard < shards(s, 0).size(); ++shard) {
      CollectiveRow c{"allreduce", "ring", {}, size, start, now, Time::zero()};
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
  for (std::size_t shard = 0; shard < shard_count; ++shard) {
    if (options_.zero_network || size == Bytes(0)) {
      at(start, done);
      continue;
    }
    std::vector<topo::DeviceId> group;
    for (std::size_t r = 0; r < replicas_; ++r) group.push_back(shards(s, r)[shard]);
    allreduce_(group, size, done);
  }
}

void Engine::start_optimizer(std::size_t s) {
  const Time t0 = sim_.now();
  const Time t1 = t0 + in_.stages[s].optimizer;
  at(t1, [this, s, t0, t1] {
    for (std::size_t r = 0; r < replicas_; ++r) {
      row(s, r, Stream::kCompute, TaskKind::kOptimizer, -1, t0, t1);
      stream(s, r).compute_busy += t1 - t0;
    }
    end_ = std::max(end_, t1);
  });
}

void Engine::row(std::size_t s, std::size_t r, Stream kind_stream, TaskKind kind, std::int64_t mb,
                 Time start, Time end) {
  const StageSpec& spec = in_.stages[s];
  for (topo::DeviceId d : shards(s, r)) {
    record_.timeline.push_back(TimelineRow{d, kind_stream, kind, static_cast<std::int32_t>(s),
                                           static_cast<std::int32_t>(mb), spec.first_layer,
                                           spec.last_layer, start, end});
  }
}

void Engine::memory(std::size_t s, std::size_t r, Time at, Bytes level) {
  for (topo::DeviceId d : shards(s, r)) {
    record_.memory.push_back(MemoryRow{d, at, level, MemoryCategory::kActivations});
  }
}

void check(const ReplayInput& in, const topo::Topology& topology) {
  if (in.stages.empty()) throw Error::input("plan has no stage", {.key = "stages"});
  if (in.devices.empty()) throw Error::input("plan has no replica", {.key = "devices"});
  if (in.microbatches.size() != in.devices.size()) {
    throw Error::internal("replay: one microbatch count per replica expected");
  }
  const std::size_t shard_count = in.devices[0].empty() ? 0 : in.devices[0][0].size();
  for (std::size_t r = 0; r < in.devices.size(); ++r) {
    if (in.devices[r].size() != in.stages.size()) {
      throw Error::input(fmt::format("replica {} has {} stages, the plan {}", r,
                                     in.devices[r].size(), in.stages.size()),
                         {.key = "devices"});
    }
    for (std::size_t s = 0; s < in.stages.size(); ++s) {
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
      }
    }
  }
}

RunRecord Engine::run() {
  check(in_, sim_.topology());
  streams_.resize(stages_ * replicas_);
  sync_.assign(stages_, SyncState{});
  for (auto& sync : sync_) {
    sync.bucket_ready.assign(static_cast<std::size_t>(std::max(1, in_.gradient_buckets)), 0);
  }
  for (std::size_t r = 0; r < replicas_; ++r) {
    for (std::size_t s = 0; s < stages_; ++s) {
      ComputeStream& st = stream(s, r);
      const std::int64_t m = in_.microbatches[r];
      st.stage = s;
      st.replica = r;
      st.ops = stage_order(in_.schedule, s, stages_, m);
      st.input_ready.assign(static_cast<std::size_t>(m), 0);
      st.grad_ready.assign(static_cast<std::size_t>(m), 0);
      const StageSpec& spec = in_.stages[s];
      for (topo::DeviceId d : shards(s, r)) {
        record_.memory.push_back({d, Time::zero(), spec.weights, MemoryCategory::kWeights});
        record_.memory.push_back({d, Time::zero(), spec.gradients, MemoryCategory::kGradients});
        record_.memory.push_back(
            {d, Time::zero(), spec.optimizer_state, MemoryCategory::kOptimizer});
        record_.memory.push_back({d, Time::zero(), Bytes(0), MemoryCategory::kActivations});
      }
    }
  }
  for (std::size_t r = 0; r < replicas_; ++r) {
    for (std::size_t s = 0; s < stages_; ++s) at(Time::zero(), [this, s, r] { try_start(s, r); });
  }
  sim_.run();
  for (const ComputeStream& st : streams_) {
    if (st.next != st.ops.size()) {
      throw Error::internal(fmt::format("replay: stage {} of replica {} stopped at op {} of {}",
                                        st.stage, st.replica, st.next, st.ops.size()));
    }
  }
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

}  // namespace

RunRecord replay(const ReplayInput& input, net::Simulator& sim, const AllreduceLauncher& allreduce,
                 const ReplayOptions& options) {
  RunRecord record = Engine(input, sim, allreduce, options).run();
  if (!options.zero_network) {
    // The same iteration on a network that costs nothing: what it saves is the exposed
    // communication.
    net::Simulator free_sim(sim.topology());
    ReplayOptions free = options;
    free.zero_network = true;
    const Time reference = Engine(input, free_sim, allreduce, free).run().summary.iteration_time;
    record.summary.exposed_communication = record.summary.iteration_time - reference;
  }
  // Per-device peaks from the trace: the sum of the categories' levels, at each change.
  std::vector<std::pair<topo::DeviceId, std::size_t>> order;
  std::vector<MemoryRow>& m = record.memory;
  std::stable_sort(m.begin(), m.end(), [](const MemoryRow& a, const MemoryRow& b) {
    return a.device != b.device ? a.device < b.device : a.at < b.at;
  });
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
  std::stable_sort(record.timeline.begin(), record.timeline.end(),
                   [](const TimelineRow& a, const TimelineRow& b) {
                     return a.device != b.device ? a.device < b.device : a.start < b.start;
                   });
  return record;
}

}  // namespace nest::replay
