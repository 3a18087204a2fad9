#pragma once
/// \file
/// What one replayed training iteration produced: timeline, memory, link and collective records
/// and the summary. Plain data (value types, no behaviour): the replay fills it, the writers of
/// nest/io/ turn it into HDF5, Perfetto JSON and CSV. Times are integer picoseconds from the
/// start of the iteration; bytes are per device.

#include <cstdint>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::replay {

/// What a timeline task did.
enum class TaskKind : std::uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kSendActivation,   ///< stage-to-stage forward transfer
  kSendGradient,     ///< stage-to-stage backward transfer
  kLayerCollective,  ///< TP / SP / EP / CP collective inside a stage replica
  kGradientSync,     ///< data-parallel gradient reduction (one bucket)
  kOptimizer,
};

/// Where a task runs on its device.
enum class Stream : std::uint8_t { kCompute, kNetwork };

/// Memory categories of the memory model (nest/workload/memory.h).
enum class MemoryCategory : std::uint8_t { kWeights, kGradients, kOptimizer, kActivations };

/// One task on one device.
struct TimelineRow {
  std::uint32_t device = 0;
  Stream stream = Stream::kCompute;
  TaskKind kind = TaskKind::kForward;
  std::int32_t stage = 0;
  std::int32_t microbatch = -1;  ///< -1 for tasks of the whole iteration (sync, optimizer)
  std::int32_t first_layer = 0;  ///< layer range [first_layer, last_layer)
  std::int32_t last_layer = 0;
  Time start;
  Time end;
};

/// A device's memory in one category changed to `bytes` at `at`.
struct MemoryRow {
  std::uint32_t device = 0;
  Time at;
  Bytes bytes;
  MemoryCategory category = MemoryCategory::kActivations;
};

/// One directed link over the iteration.
struct LinkRow {
  std::uint32_t src = 0;  ///< topology node ids
  std::uint32_t dst = 0;
  double bytes = 0;
  Time busy;
  double utilization = 0;  ///< bytes / (bandwidth · iteration time), in [0, 1]
  topo::LinkId link = 0;   ///< the topology's link id (not written to files)
};

/// From `at` on, a link carried `utilization` of its bandwidth (the sum of its flows' rates).
struct UtilizationPoint {
  Time at;
  double utilization = 0;
};

/// The utilization over time of one directed link: its rate changes in time order, ending
/// with a point of 0 when the link falls idle.
struct LinkSeries {
  std::uint32_t link = 0;  ///< directed link id (index into `TopologyTable::links`)
  std::uint32_t src = 0;   ///< topology node ids
  std::uint32_t dst = 0;
  std::vector<UtilizationPoint> points;
};

/// One collective (or point-to-point transfer) the iteration ran.
struct CollectiveRow {
  std::string op;         ///< "allreduce", "all-gather", ..., "send"
  std::string algorithm;  ///< "ring", "direct", ...
  std::vector<std::uint32_t> group;
  Bytes size;
  Time start;
  Time end;
  Time closed_form;  ///< the alpha-beta estimate of its duration, no contention
};

/// Peak memory of one device.
struct DevicePeak {
  std::uint32_t device = 0;
  Bytes peak;
};

/// Headline figures.
struct Summary {
  Time iteration_time;  ///< replayed
  Time estimate;        ///< the placer's prediction
  double sequences_per_s = 0;
  double tokens_per_s = 0;
  double bubble_fraction = 0;          ///< idle share of the compute streams of used devices
  Time exposed_communication;          ///< time on the critical path not overlapped by compute
  Bytes peak_memory;                   ///< the highest device peak
  double model_flops_utilization = 0;  ///< 0 when FLOPs are unknown
};

/// Provenance: what produced the run.
struct Meta {
  std::string tool_version;
  std::string command_line;
  std::vector<std::pair<std::string, std::string>> inputs;  ///< (path, content hash)
  std::string plan_yaml;
};

/// The topology the iteration ran on, so that the node ids of `LinkRow` and `TimelineRow` can be
/// named: node id = index into `nodes`, directed link id = index into `links`. `replay_plan`
/// fills it with the topology it was given.
struct TopologyTable {
  std::string name;
  std::vector<topo::Node> nodes;
  std::vector<topo::Link> links;
};

/// The devices of one stage replica: device group (plan stage) `stage` of data-parallel replica
/// `replica`, shards in order (shard k sends to shard k of the next stage).
struct StageReplica {
  std::int32_t stage = 0;
  std::int32_t replica = 0;
  std::vector<std::uint32_t> devices;
};

/// One (virtual) stage, numbered as `TimelineRow::stage`: what it holds and what each of its
/// shards sends per microbatch.
struct StageRow {
  std::int32_t device_group = 0;  ///< the plan stage whose devices run it (chunk mod S)
  std::int32_t first_layer = 0;   ///< layer range [first_layer, last_layer)
  std::int32_t last_layer = 0;
  Bytes activation_out;  ///< to the next stage, per shard and microbatch
  Bytes gradient_out;    ///< to the previous stage, per shard and microbatch
};

struct RunRecord {
  Meta meta;
  Summary summary;
  std::vector<TimelineRow> timeline;
  std::vector<MemoryRow> memory;
  std::vector<DevicePeak> peaks;
  std::vector<LinkRow> links;
  std::vector<CollectiveRow> collectives;
  TopologyTable topology;
  std::vector<StageReplica> placement;  ///< by stage, then replica
  std::vector<StageRow> stages;         ///< by (virtual) stage
  /// The busiest links' utilization over time, busiest first; empty unless asked for
  /// (`PlanReplayOptions::utilization_links`). Not written to HDF5.
  std::vector<LinkSeries> link_series;
  /// Shards whose flows the replay simulated per stage replica: 1 when shard 0's stood for all
  /// (`PlanReplayOptions::merge_shards`), else t·c. Not written to files (the record is the
  /// same either way).
  std::int32_t simulated_shards = 0;
  /// Reductions (bucket executions) timed alone (the contention-free evaluation or their run alone)
  /// (`PlanReplayOptions::alone_reductions`), and those simulated flow by flow. Not written to
  /// files (the record is the same either way).
  std::int32_t alone_reductions = 0;
  std::int32_t simulated_reductions = 0;
};

/// Stable lower-case names, as written to files: "forward", "compute", "weights", ...
[[nodiscard]] constexpr const char* to_string(TaskKind kind) noexcept {
  switch (kind) {
    case TaskKind::kForward:
      return "forward";
    case TaskKind::kBackward:
      return "backward";
    case TaskKind::kRecompute:
      return "recompute";
    case TaskKind::kSendActivation:
      return "send_activation";
    case TaskKind::kSendGradient:
      return "send_gradient";
    case TaskKind::kLayerCollective:
      return "layer_collective";
    case TaskKind::kGradientSync:
      return "gradient_sync";
    case TaskKind::kOptimizer:
      return "optimizer";
  }
  return "?";
}
[[nodiscard]] constexpr const char* to_string(topo::NodeKind kind) noexcept {
  return kind == topo::NodeKind::kDevice ? "device" : "switch";
}
[[nodiscard]] constexpr const char* to_string(Stream stream) noexcept {
  return stream == Stream::kCompute ? "compute" : "network";
}
[[nodiscard]] constexpr const char* to_string(MemoryCategory category) noexcept {
  switch (category) {
    case MemoryCategory::kWeights:
      return "weights";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizer:
      return "optimizer";
    case MemoryCategory::kActivations:
      return "activations";
  }
  return "?";
}

}  // namespace nest::replay
