#include "placer/stage_model.h"

#include <algorithm>
#include <cmath>

#include "nest/core/error.h"
#include "nest/core/rng.h"

namespace nest::placer::detail {
namespace {

using workload::CollectiveOp;
using workload::ParallelAxis;

constexpr Bytes kGatherLow = Bytes::mebibytes(256);
constexpr Bytes kGatherHigh = Bytes::gibibytes(1);

bool experts_in_replica(const VariantDegrees& d) {
  return d.tensor_parallel * d.context_parallel * d.expert_parallel == d.devices_per_replica;
}

// Sum of count · price over the collectives of `layer` (or of recompute_count when
// `recomputed`), each less the compute it overlaps (`LayerCollective::overlap`).
std::int64_t layer_collectives_ps(const workload::Layer& layer, bool recomputed,
                                  const VariantDegrees& degrees, const DeviceMap* map, int stage,
                                  int data_parallel, PricedNetwork& net) {
  std::int64_t total = 0;
  for (const auto& c : layer.collectives) {
    const int times = recomputed ? c.recompute_count : c.count;
    if (times == 0 || c.size.count() <= 0) continue;
    GroupLayout layout;
    if (map != nullptr) {
      layout = axis_layout(*map, stage, c.axis, degrees);
    } else {
      // Placement-independent network: only the group size matters; any layout of that size
      // with d groups stands for all.
      const DeviceMap any = DeviceMap::make(PlacementOrder::kTensorPipelineData, 1, data_parallel,
                                            degrees.devices_per_replica);
      layout = axis_layout(any, 0, c.axis, degrees);
    }
    // A collective beside a backward GEMM costs only its excess over it.
    const Time price = net.collective(c.op, c.size, layout);
    total += times * std::max<std::int64_t>(0, (price - c.overlap).ps());
  }
  return total;
}

PositionPrices price(const workload::Variant& variant, const VariantDegrees& degrees,
                     const DeviceMap* map, int stage, int data_parallel, int zero_stage, bool last,
                     PricedNetwork& net) {
  const std::size_t n = variant.layers.size();
  PositionPrices p;
  p.collectives.assign(n + 1, 0);
  p.recompute_collectives.assign(n + 1, 0);
  if (net.zero()) return p;
  std::int64_t base = 0;
  std::int64_t recomputed = 0;
  for (std::size_t l = 0; l < n; ++l) {
    const auto& layer = variant.layers[l];
    if (l == 0 || layer.collectives.empty() || !same_layer(layer, variant.layers[l - 1])) {
      base = layer_collectives_ps(layer, false, degrees, map, stage, data_parallel, net);
      recomputed = layer_collectives_ps(layer, true, degrees, map, stage, data_parallel, net);
    }
    p.collectives[l + 1] = p.collectives[l] + base;
    p.recompute_collectives[l + 1] = p.recompute_collectives[l] + recomputed;
  }
  const DeviceMap two = DeviceMap::make(PlacementOrder::kTensorPipelineData, 2, data_parallel,
                                        degrees.devices_per_replica);
  if (!last) {
    const GroupLayout from = map != nullptr ? map->stage_layout(stage) : two.stage_layout(0);
    const GroupLayout to = map != nullptr ? map->stage_layout(stage + 1) : two.stage_layout(1);
    p.transfer.assign(n + 1, 0);
    const GroupLayout gather = map != nullptr
                                   ? axis_layout(*map, stage + 1, ParallelAxis::kTensor, degrees)
                                   : axis_layout(two, 1, ParallelAxis::kTensor, degrees);
    for (std::size_t j = 1; j <= n; ++j) {
      const workload::Layer& layer = variant.layers[j - 1];
      // Most layers send what the one before sent: the same queries, the same price.
      if (j > 1) {
        const workload::Layer& before = variant.layers[j - 2];
        if (layer.output_bytes == before.output_bytes &&
            layer.output_gather == before.output_gather) {
          p.transfer[j] = p.transfer[j - 1];
          continue;
        }
      }
      p.transfer[j] = 2 * (net.transfer(layer.output_bytes, from, to) +
                           net.collective(CollectiveOp::kAllGather, layer.output_gather, gather))
                              .ps();
    }
  }
  if (zero_stage == 3 && data_parallel > 1) {
    const GroupLayout layout = sync_layout(map != nullptr ? *map : two, map != nullptr ? stage : 0);
    const double lo = static_cast<double>(net.gather(kGatherLow, layout).ps());
    const double hi = static_cast<double>(net.gather(kGatherHigh, layout).ps());
    p.gathers = true;
    p.gather_beta_ps_per_byte = (hi - lo) / (kGatherHigh - kGatherLow).as_double();
    p.gather_alpha_ps = lo - p.gather_beta_ps_per_byte * kGatherLow.as_double();
  }
  return p;
}

}  // namespace

VariantDegrees degrees_of(const workload::Variant& v) {
  return VariantDegrees{.tensor_parallel = v.tensor_parallel,
                        .expert_parallel = v.expert_parallel,
                        .context_parallel = v.context_parallel,
                        .sequence_parallel = v.sequence_parallel,
                        .micro_batch = v.micro_batch,
                        .devices_per_replica = v.devices_per_replica};
}

GroupLayout axis_layout(const DeviceMap& map, int stage, ParallelAxis axis,
                        const VariantDegrees& degrees) {
  const auto t = static_cast<std::uint32_t>(degrees.tensor_parallel);
  const auto c = static_cast<std::uint32_t>(degrees.context_parallel);
  const auto dpr = static_cast<std::uint32_t>(map.devices_per_replica);
  const std::uint32_t sh = map.shard_stride;
  GroupLayout g;
  g.base = map.device(stage, 0, 0);
  switch (axis) {
    case ParallelAxis::kTensor:
      g.member = {degrees.tensor_parallel, sh};
      g.groups = {
          {{static_cast<int>(dpr / t), t * sh}, {map.data_parallel, map.replica_stride}, {1, 0}}};
      return g;
    case ParallelAxis::kContext:
      g.member = {degrees.context_parallel, t * sh};
      g.groups = {{{degrees.tensor_parallel, sh},
                   {static_cast<int>(dpr / (t * c)), t * c * sh},
                   {map.data_parallel, map.replica_stride}}};
      return g;
    case ParallelAxis::kExpert:
      if (experts_in_replica(degrees)) {
        g.member = {degrees.expert_parallel, t * c * sh};
        g.groups = {
            {{static_cast<int>(t * c), sh}, {map.data_parallel, map.replica_stride}, {1, 0}}};
      } else {
        const auto e = static_cast<std::uint32_t>(degrees.expert_parallel);
        g.member = {degrees.expert_parallel, map.replica_stride};
        g.groups = {{{static_cast<int>(dpr), sh},
                     {map.data_parallel / degrees.expert_parallel, e * map.replica_stride},
                     {1, 0}}};
      }
      return g;
  }
  throw Error::internal("unknown parallel axis");
}

GroupLayout stages_sync_layout(const DeviceMap& map, int first, int last) {
  // Stage `last` has the smallest device ids (stages are laid out from the pipeline's end).
  return GroupLayout{.base = map.device(last, 0, 0),
                     .member = {map.data_parallel, map.replica_stride},
                     .groups = {{{map.devices_per_replica, map.shard_stride},
                                 {last - first + 1, map.stage_stride},
                                 {1, 0}}}};
}

GroupLayout sync_layout(const DeviceMap& map, int stage) {
  return GroupLayout{.base = map.device(stage, 0, 0),
                     .member = {map.data_parallel, map.replica_stride},
                     .groups = {{{map.devices_per_replica, map.shard_stride}, {1, 0}, {1, 0}}}};
}

template <class Ask>
Time PricedNetwork::remembered(const LayoutKey& key, Ask ask) {
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  ++queries_;
  const Time t = ask();
  memo_.emplace(key, t);
  return t;
}

Time PricedNetwork::collective(CollectiveOp op, Bytes size, const GroupLayout& layout) {
  if (layout.group_size() <= 1 || size.count() <= 0 || zero()) return Time::zero();
  return remembered(LayoutKey::of(0, static_cast<int>(op), size.count(), layout),
                    [&] { return comm_.collective(op, size, layout); });
}

Time PricedNetwork::transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  if (size.count() <= 0 || zero()) return Time::zero();
  return remembered(LayoutKey::of(1, 0, size.count(), from, to),
                    [&] { return comm_.transfer(size, from, to); });
}

Time PricedNetwork::collective_like(CollectiveOp op, Bytes size, const GroupLayout& layout,
                                    const GroupLayout& like) {
  if (layout.group_size() <= 1 || size.count() <= 0 || zero()) return Time::zero();
  return remembered(LayoutKey::of(2, static_cast<int>(op), size.count(), layout, like),
                    [&] { return comm_.collective_like(op, size, layout, like); });
}

Time PricedNetwork::gather(Bytes size, const GroupLayout& layout) {
  if (layout.group_size() <= 1 || size.count() <= 0 || zero()) return Time::zero();
  return remembered(LayoutKey::of(3, 0, size.count(), layout),
                    [&] { return comm_.gather_point(size, layout); });
}

ChainSums::ChainSums(const workload::Variant& variant) {
  const std::size_t n = variant.layers.size();
  forward_backward.assign(n + 1, 0);
  recompute.assign(n + 1, 0);
  selective.assign(n + 1, 0);
  parameter_bytes.assign(n + 1, 0);
  parameters.assign(n + 1, 0);
  for (std::size_t l = 0; l < n; ++l) {
    const auto& layer = variant.layers[l];
    forward_backward[l + 1] = forward_backward[l] + layer.forward.ps() + layer.backward.ps();
    recompute[l + 1] = recompute[l] + layer.recompute.ps();
    selective[l + 1] = selective[l] + layer.selective_recompute.ps();
    parameter_bytes[l + 1] = parameter_bytes[l] + layer.parameter_bytes.count();
    parameters[l + 1] = parameters[l] + layer.parameters;
  }
}

PositionPrices price_position(const workload::Variant& variant, const VariantDegrees& degrees,
                              const DeviceMap& map, int stage, int zero_stage, PricedNetwork& net) {
  return price(variant, degrees, &map, stage, map.data_parallel, zero_stage,
               stage == map.stages - 1, net);
}

PositionPrices price_any_position(const workload::Variant& variant, const VariantDegrees& degrees,
                                  int data_parallel, int zero_stage, bool last,
                                  PricedNetwork& net) {
  return price(variant, degrees, nullptr, 0, data_parallel, zero_stage, last, net);
}

workload::Recompute recompute_applies(workload::MemoryRules rules, workload::Recompute mode,
                                      int in_flight) noexcept {
  if (rules == workload::MemoryRules::kNestArtifact && in_flight <= 1) {
    return workload::Recompute::kNone;
  }
  return mode;
}

StageTime stage_time(const ChainSums& sums, const PositionPrices& prices, std::size_t first,
                     std::size_t last, workload::Recompute mode) noexcept {
  StageTime t;
  std::int64_t compute = sums.forward_backward[last] - sums.forward_backward[first];
  std::int64_t collectives = prices.collectives[last] - prices.collectives[first];
  if (mode == workload::Recompute::kFull) {
    compute += sums.recompute[last] - sums.recompute[first];
    collectives += prices.recompute_collectives[last] - prices.recompute_collectives[first];
  }
  // The attention core runs inside the tensor-parallel region: no collective runs again.
  if (mode == workload::Recompute::kSelective) {
    compute += sums.selective[last] - sums.selective[first];
  }
  collectives += prices.gather_ps(sums.parameter_bytes[last] - sums.parameter_bytes[first]);
  t.compute = Time::picoseconds(compute);
  t.collectives = Time::picoseconds(collectives);
  t.transfer = Time::picoseconds(prices.transfer.empty() ? 0 : prices.transfer[last]);
  return t;
}

Time boundary_transfer(const workload::Variant& variant, std::size_t last_layer,
                       const DeviceMap& map, int from, int to, const VariantDegrees& degrees,
                       PricedNetwork& net) {
  const workload::Layer& layer = variant.layers[last_layer - 1];
  if (net.placement_independent()) {
    const DeviceMap two = DeviceMap::make(PlacementOrder::kTensorPipelineData, 2, map.data_parallel,
                                          degrees.devices_per_replica);
    return (net.transfer(layer.output_bytes, two.stage_layout(0), two.stage_layout(1)) +
            net.collective(CollectiveOp::kAllGather, layer.output_gather,
                           axis_layout(two, 1, ParallelAxis::kTensor, degrees))) *
           2;
  }
  return (net.transfer(layer.output_bytes, map.stage_layout(from), map.stage_layout(to)) +
          net.collective(CollectiveOp::kAllGather, layer.output_gather,
                         axis_layout(map, to, ParallelAxis::kTensor, degrees))) *
         2;
}

int interleaved_in_flight(int stages, int stage, int virtual_stages,
                          std::int64_t microbatches) noexcept {
  const std::int64_t total = microbatches * virtual_stages;
  const std::int64_t warmup =
      std::min<std::int64_t>(static_cast<std::int64_t>(stages - stage - 1) * 2 +
                                 static_cast<std::int64_t>(virtual_stages - 1) * stages,
                             total);
  return static_cast<int>(std::min(warmup + 1, total));
}

workload::StageMemory interleaved_memory(const workload::Variant& variant,
                                         const std::vector<ChunkReport>& chunks, int stages,
                                         int stage, std::int64_t microbatches,
                                         const workload::MemoryOptions& options) {
  const auto v = static_cast<std::int64_t>(chunks.size());
  std::vector<std::int64_t> stash;
  std::vector<std::int64_t> working;
  workload::StageMemory m;
  for (const ChunkReport& c : chunks) {
    const auto one = workload::stage_memory(variant, c.first_layer, c.last_layer, 1, options);
    const auto two = workload::stage_memory(variant, c.first_layer, c.last_layer, 2, options);
    m.weights += one.weights;
    m.gradients += one.gradients;
    m.optimizer += one.optimizer;
    stash.push_back((two.activations - one.activations).count());
    working.push_back(one.activations.count() - stash.back());
  }
  // Megatron-LM's forward_backward_pipelining_with_interleaving (the replay's order): forward k
  // runs local chunk (k / S) mod v, backward i local chunk v − 1 − (i / S) mod v; warm-up
  // forwards, then one forward one backward, then the remaining backwards.
  const std::int64_t s = stages;
  const std::int64_t total = microbatches * v;
  const std::int64_t warmup = std::min((s - stage - 1) * 2 + (v - 1) * s, total);
  const auto forward_chunk = [&](std::int64_t k) { return static_cast<std::size_t>((k / s) % v); };
  const auto backward_chunk = [&](std::int64_t i) {
    return static_cast<std::size_t>(v - 1 - (i / s) % v);
  };
  std::int64_t level = 0;
  std::int64_t peak = 0;
  const auto backward = [&](std::int64_t i) {
    const std::size_t j = backward_chunk(i);
    peak = std::max(peak, level + working[j]);
    level -= stash[j];
  };
  for (std::int64_t k = 0; k < warmup; ++k) {
    level += stash[forward_chunk(k)];
    peak = std::max(peak, level);
  }
  for (std::int64_t i = 0; i < total - warmup; ++i) {
    level += stash[forward_chunk(warmup + i)];
    peak = std::max(peak, level);
    backward(i);
  }
  for (std::int64_t i = total - warmup; i < total; ++i) backward(i);
  m.activations = Bytes(peak);
  return m;
}

std::int64_t bucket_bytes(const ChainSums& sums, const StageReport& stage, int buckets) {
  std::int64_t total = 0;
  for (const ChunkReport& c : stage.chunks) {
    total += sums.parameter_bytes[c.last_layer] - sums.parameter_bytes[c.first_layer];
  }
  return (total + buckets - 1) / buckets;
}

CollectiveOp sync_operation(int zero_stage) noexcept {
  return zero_stage == 3 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
}

Time sync_time(std::int64_t parameter_bytes, int zero_stage, const DeviceMap& map, int stage,
               PricedNetwork& net) {
  if (map.data_parallel <= 1 || parameter_bytes <= 0) return Time::zero();
  return net.collective(sync_operation(zero_stage), Bytes(parameter_bytes),
                        sync_layout(map, stage));
}

double joint_sync_factor(int zero_stage, const DeviceMap& map, int first, int last,
                         PricedNetwork& net) {
  if (map.data_parallel <= 1 || first >= last) return 1;
  const CollectiveOp op = sync_operation(zero_stage);
  // When no stage's groups can share a link with another stage's, whatever each runs, the run
  // together is each stage's alone: nothing to price. Asked of the whole pipeline, so that
  // every run of its stages shares the answer.
  if (net.groups_apart(op, kJointSyncReference, stages_sync_layout(map, 0, map.stages - 1),
                       map.devices_per_replica)) {
    return 1;
  }
  const GroupLayout all = stages_sync_layout(map, first, last);
  // Each stage's groups run what they run alone (the replay tunes a bucket's group alone).
  const Time together = net.collective_like(op, kJointSyncReference, all, sync_layout(map, last));
  // Nothing to divide (the search's lower bounds answer zero before they bound a joint sync): the
  // syncs alone are not asked for.
  if (together.ps() <= 0) return 1;
  Time alone;
  for (int p = first; p <= last; ++p) {
    alone = std::max(alone, net.collective(op, kJointSyncReference, sync_layout(map, p)));
  }
  if (alone.ps() <= 0 || together <= alone) return 1;
  return static_cast<double>(together.ps()) / static_cast<double>(alone.ps());
}

Time pipeline_makespan(std::span<const Time> forward, std::span<const Time> backward,
                       std::span<const Time> send, int stages, std::int64_t microbatches) {
  const auto chunks = static_cast<std::int64_t>(forward.size());
  const std::int64_t s = stages;
  if (s < 1 || chunks % s != 0 || microbatches < 1 ||
      static_cast<std::int64_t>(backward.size()) != chunks ||
      static_cast<std::int64_t>(send.size()) != chunks) {
    throw Error::internal("pipeline_makespan: inconsistent chunks, stages or microbatches");
  }
  const std::int64_t v = chunks / s;
  const std::int64_t total = microbatches * v;  // operations of each kind per stage
  if (v > 1 && microbatches % s != 0) {
    throw Error::internal("pipeline_makespan: interleaved microbatches not a multiple of S");
  }
  // When the output of the forward / backward of (chunk, microbatch) is where the next
  // operation runs (the last chunk's forward: when it ends); -1 until it ran.
  std::vector<std::int64_t> forward_end(static_cast<std::size_t>(chunks * microbatches), -1);
  std::vector<std::int64_t> backward_end(forward_end.size(), -1);
  // When each stage's link to the next (forward) and to the previous stage (backward) is free:
  // its sends leave one after another, in its order (which is their order in time).
  std::vector<std::int64_t> forward_link(static_cast<std::size_t>(s), 0);
  std::vector<std::int64_t> backward_link(static_cast<std::size_t>(s), 0);
  const auto at = [&](std::int64_t c, std::int64_t mb) {
    return static_cast<std::size_t>(c * microbatches + mb);
  };
  struct Stream {
    std::int64_t next = 0;   // operations run (of its `pipeline_op` order)
    std::int64_t clock = 0;  // when the last one ended
  };
  std::vector<Stream> streams(static_cast<std::size_t>(s));
  // Times stay within [0, kMaxDurationPs], so a sum of two never overflows.
  const auto add = [](std::int64_t a, std::int64_t b) {
    const std::int64_t sum = a + b;
    if (sum > kMaxDurationPs) throw_duration_out_of_range(static_cast<double>(sum));
    return sum;
  };
  std::vector<std::int64_t> work;
  work.reserve(static_cast<std::size_t>(s));
  for (std::int64_t g = s - 1; g >= 0; --g) work.push_back(g);
  std::int64_t end = 0;
  while (!work.empty()) {
    const std::int64_t g = work.back();
    work.pop_back();
    Stream& st = streams[static_cast<std::size_t>(g)];
    while (st.next < 2 * total) {
      const PipelineOp op = pipeline_op(s, g, v, microbatches, st.next);
      std::int64_t ready = 0;
      if (op.forward && op.chunk > 0) {
        ready = forward_end[at(op.chunk - 1, op.microbatch)];
        if (ready < 0) break;
      } else if (!op.forward) {
        const bool last = op.chunk + 1 == chunks;
        ready = last ? forward_end[at(op.chunk, op.microbatch)]
                     : backward_end[at(op.chunk + 1, op.microbatch)];
        if (ready < 0) break;
      }
      const Time duration = (op.forward ? forward : backward)[static_cast<std::size_t>(op.chunk)];
      const std::int64_t finish = add(std::max(st.clock, ready), duration.ps());
      st.clock = finish;
      end = std::max(end, finish);
      ++st.next;
      // The send, once the stage's link is free; the operation it feeds may be what another
      // stage waits for.
      const auto sent = [&](std::int64_t& link, std::int64_t one_way) {
        link = add(std::max(link, finish), one_way);
        return link;
      };
      const auto gi = static_cast<std::size_t>(g);
      if (op.forward && op.chunk + 1 < chunks) {
        forward_end[at(op.chunk, op.microbatch)] =
            sent(forward_link[gi], send[static_cast<std::size_t>(op.chunk)].ps());
        work.push_back((op.chunk + 1) % s);
      } else if (op.forward) {
        forward_end[at(op.chunk, op.microbatch)] = finish;
      } else if (op.chunk > 0) {
        // With two stages the previous stage is the next one: one queue for both ways.
        backward_end[at(op.chunk, op.microbatch)] =
            sent(s <= 2 ? forward_link[gi] : backward_link[gi],
                 send[static_cast<std::size_t>(op.chunk - 1)].ps());
        work.push_back((op.chunk - 1) % s);
      } else {
        backward_end[at(op.chunk, op.microbatch)] = finish;
      }
    }
  }
  for (const Stream& st : streams) {
    if (st.next != 2 * total) throw Error::internal("pipeline_makespan: the schedule deadlocked");
  }
  return Time::picoseconds(end);
}

Time exposed_transfers(const workload::Variant& variant, const std::vector<StageReport>& stages,
                       const std::vector<workload::Recompute>& mode, int stage_count,
                       std::int64_t microbatches, Time base) {
  const auto s = static_cast<std::size_t>(stage_count);
  const std::size_t v = stages.front().chunks.size();
  std::vector<Time> forward(s * v);
  std::vector<Time> backward(s * v);
  std::vector<Time> send(s * v);
  for (std::size_t p = 0; p < s; ++p) {
    for (std::size_t j = 0; j < v; ++j) {
      const ChunkReport& c = stages[p].chunks[j];
      const PassTimes t = pass_times(variant, c, mode[p]);
      forward[p + j * s] = t.forward;
      backward[p + j * s] = t.backward;
      send[p + j * s] = Time::picoseconds(c.time.transfer.ps() / 2);
    }
  }
  const Time with = pipeline_makespan(forward, backward, send, stage_count, microbatches);
  const std::vector<Time> none(s * v);
  const Time without = pipeline_makespan(forward, backward, none, stage_count, microbatches);
  return std::max(Time::zero(), with - std::max(without, base));
}

Time optimizer_time(std::int64_t parameters, int zero_stage, int data_parallel,
                    const CostOptions& options) noexcept {
  if (options.rules == workload::MemoryRules::kNestArtifact) return Time::zero();
  if (!(options.memory_bandwidth.bytes_per_s() > 0) || parameters <= 0) return Time::zero();
  double bytes = static_cast<double>(parameters) * kOptimizerBytesPerParameter;
  if (zero_stage >= 1) bytes /= data_parallel;
  return Time::seconds(bytes / options.memory_bandwidth.bytes_per_s());
}

bool same_layer(const workload::Layer& a, const workload::Layer& b) noexcept {
  if (a.forward != b.forward || a.backward != b.backward || a.recompute != b.recompute ||
      a.selective_recompute != b.selective_recompute ||
      a.selective_activation_bytes != b.selective_activation_bytes ||
      a.parameter_bytes != b.parameter_bytes || a.parameters != b.parameters ||
      a.activation_bytes != b.activation_bytes || a.input_bytes != b.input_bytes ||
      a.output_bytes != b.output_bytes || a.output_gather != b.output_gather ||
      a.flops != b.flops || a.collectives.size() != b.collectives.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.collectives.size(); ++i) {
    const auto& x = a.collectives[i];
    const auto& y = b.collectives[i];
    if (x.op != y.op || x.axis != y.axis || x.size != y.size || x.count != y.count ||
        x.recompute_count != y.recompute_count || x.overlap != y.overlap) {
      return false;
    }
  }
  return true;
}

}  // namespace nest::placer::detail
