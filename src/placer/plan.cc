#include "nest/placer/plan.h"

#include <algorithm>
#include <array>
#include <utility>

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

bool Plan::fits() const noexcept {
  return std::all_of(stages.begin(), stages.end(),
                     [this](const StageReport& s) { return s.fits(capacity); });
}

}  // namespace nest::placer
