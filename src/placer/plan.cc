#include "nest/placer/plan.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "nest/core/error.h"

namespace nest::placer {
namespace {

constexpr std::array<std::pair<PlacementOrder, std::string_view>, 6> kOrderNames = {{
    {PlacementOrder::kTensorPipelineData, "tp-pp-dp"},
    {PlacementOrder::kTensorDataPipeline, "tp-dp-pp"},
    {PlacementOrder::kPipelineTensorData, "pp-tp-dp"},
    {PlacementOrder::kPipelineDataTensor, "pp-dp-tp"},
    {PlacementOrder::kDataTensorPipeline, "dp-tp-pp"},
    {PlacementOrder::kDataPipelineTensor, "dp-pp-tp"},
}};

enum Axis { kShard, kStage, kReplica };

// The axes of `order`, innermost first.
std::array<Axis, 3> axes_of(PlacementOrder order) {
  switch (order) {
    case PlacementOrder::kTensorPipelineData:
      return {kShard, kStage, kReplica};
    case PlacementOrder::kTensorDataPipeline:
      return {kShard, kReplica, kStage};
    case PlacementOrder::kPipelineTensorData:
      return {kStage, kShard, kReplica};
    case PlacementOrder::kPipelineDataTensor:
      return {kStage, kReplica, kShard};
    case PlacementOrder::kDataTensorPipeline:
      return {kReplica, kShard, kStage};
    case PlacementOrder::kDataPipelineTensor:
      return {kReplica, kStage, kShard};
  }
  throw Error::internal("unknown placement order");
}

}  // namespace

std::string_view to_string(PlacementOrder order) noexcept {
  for (const auto& [o, name] : kOrderNames) {
    if (o == order) return name;
  }
  return "?";
}

PlacementOrder parse_placement_order(std::string_view text) {
  for (const auto& [o, name] : kOrderNames) {
    if (name == text) return o;
  }
  std::string expected = "one of";
  for (const auto& entry : kOrderNames) expected += " " + std::string(entry.second);
  throw Error::input("unknown placement order",
                     {.key = "placement_order", .value = std::string(text), .expected = expected});
}

std::vector<PlacementOrder> all_placement_orders() {
  std::vector<PlacementOrder> out;
  for (const auto& entry : kOrderNames) out.push_back(entry.first);
  return out;
}

bool pipeline_outermost(PlacementOrder order) noexcept {
  return order == PlacementOrder::kTensorDataPipeline ||
         order == PlacementOrder::kDataTensorPipeline;
}

DeviceMap DeviceMap::make(PlacementOrder order, int stages, int data_parallel,
                          int devices_per_replica) {
  DeviceMap map{
      .stages = stages, .data_parallel = data_parallel, .devices_per_replica = devices_per_replica};
  std::uint32_t stride = 1;
  for (const Axis axis : axes_of(order)) {
    switch (axis) {
      case kShard:
        map.shard_stride = stride;
        stride *= static_cast<std::uint32_t>(devices_per_replica);
        break;
      case kStage:
        map.stage_stride = stride;
        stride *= static_cast<std::uint32_t>(stages);
        break;
      case kReplica:
        map.replica_stride = stride;
        stride *= static_cast<std::uint32_t>(data_parallel);
        break;
    }
  }
  return map;
}

topo::DeviceId DeviceMap::device(int stage, int replica, int shard) const noexcept {
  return static_cast<std::uint32_t>(stages - 1 - stage) * stage_stride +
         static_cast<std::uint32_t>(replica) * replica_stride +
         static_cast<std::uint32_t>(shard) * shard_stride;
}

GroupLayout DeviceMap::stage_layout(int stage) const noexcept {
  return GroupLayout{.base = device(stage, 0, 0),
                     .member = {devices_per_replica, shard_stride},
                     .groups = {{{data_parallel, replica_stride}, {1, 0}, {1, 0}}}};
}

bool same_candidate(const Plan& a, const Plan& b) {
  PlanChoice c = a.choice;
  c.zero_stage = b.choice.zero_stage;
  return c == b.choice && (a.iteration_time == b.iteration_time || a.choice == b.choice);
}

bool Plan::fits() const noexcept {
  return std::all_of(stages.begin(), stages.end(),
                     [this](const StageReport& s) { return s.fits(capacity); });
}

std::string_view to_string(workload::MemoryRules rules) noexcept {
  return rules == workload::MemoryRules::kNestArtifact ? "nest-artifact" : "megatron";
}

workload::MemoryRules parse_rules(std::string_view text) {
  if (text == "megatron") return workload::MemoryRules::kMegatron;
  if (text == "nest-artifact") return workload::MemoryRules::kNestArtifact;
  throw Error::input(
      "unknown memory rules",
      {.key = "rules", .value = std::string(text), .expected = "megatron or nest-artifact"});
}

std::size_t find_variant(const workload::LayerProfile& profile, const VariantDegrees& degrees) {
  for (std::size_t i = 0; i < profile.variants.size(); ++i) {
    const auto& v = profile.variants[i];
    const VariantDegrees d{.tensor_parallel = v.tensor_parallel,
                           .expert_parallel = v.expert_parallel,
                           .context_parallel = v.context_parallel,
                           .sequence_parallel = v.sequence_parallel,
                           .micro_batch = v.micro_batch,
                           .devices_per_replica = v.devices_per_replica};
    if (d == degrees) return i;
  }
  throw Error::input("the profile has no variant with the plan's degrees",
                     {.key = "variant",
                      .value = fmt::format("t {} e {} c {} sp {} mb {} devices_per_replica {}",
                                           degrees.tensor_parallel, degrees.expert_parallel,
                                           degrees.context_parallel, degrees.sequence_parallel,
                                           degrees.micro_batch, degrees.devices_per_replica)});
}

}  // namespace nest::placer
