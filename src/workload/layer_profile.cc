#include "nest/workload/layer_profile.h"

#include <string>

#include "nest/core/error.h"

namespace nest::workload {

std::string_view to_string(CollectiveOp op) noexcept {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kReduceScatter:
      return "reducescatter";
    case CollectiveOp::kAllToAll:
      return "alltoall";
  }
  return "";
}

std::string_view to_string(ParallelAxis axis) noexcept {
  switch (axis) {
    case ParallelAxis::kTensor:
      return "tensor";
    case ParallelAxis::kExpert:
      return "expert";
    case ParallelAxis::kContext:
      return "context";
  }
  return "";
}

std::string_view to_string(Recompute mode) noexcept {
  switch (mode) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

Recompute parse_recompute(std::string_view text) {
  if (text == "none" || text == "false") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full" || text == "true") return Recompute::kFull;
  throw Error::input(
      "unknown recomputation mode",
      {.key = "recompute", .value = std::string(text), .expected = "none, selective or full"});
}

}  // namespace nest::workload
