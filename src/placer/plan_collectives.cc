#include "nest/placer/plan_collectives.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "nest/coll/collective.h"
#include "nest/topo/collective_model.h"
#include "placer/stage_model.h"

namespace nest::placer {
namespace {

struct Query {
  workload::CollectiveOp op;
  Bytes size;
  GroupLayout layout;
  friend bool operator==(const Query&, const Query&) = default;
};

// Forwards to the oracle and remembers each distinct collective asked, in order.
class Recorder final : public ForwardingCommCost {
 public:
  using ForwardingCommCost::ForwardingCommCost;
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    const Query q{op, size, layout};
    if (std::find(queries_.begin(), queries_.end(), q) == queries_.end()) queries_.push_back(q);
    return inner().collective(op, size, layout);
  }
  [[nodiscard]] const std::vector<Query>& queries() const noexcept { return queries_; }

 private:
  std::vector<Query> queries_;
};

// The group kind and stage whose devices form `layout`, or nothing.
std::optional<std::pair<std::string, int>> name_of(const GroupLayout& layout, const Plan& plan) {
  const DeviceMap map = plan.device_map();
  constexpr workload::ParallelAxis kAxes[] = {workload::ParallelAxis::kTensor,
                                              workload::ParallelAxis::kExpert,
                                              workload::ParallelAxis::kContext};
  for (int p = 0; p < plan.choice.stages(); ++p) {
    if (layout == detail::sync_layout(map, p)) return std::pair<std::string, int>{"data", p};
    for (const auto axis : kAxes) {
      if (layout == detail::axis_layout(map, p, axis, plan.degrees)) {
        return std::pair<std::string, int>{std::string(workload::to_string(axis)), p};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<PlanCollective> plan_collectives(const workload::LayerProfile& profile,
                                             const Plan& plan, OracleCommCost& comm,
                                             const CostOptions& options) {
  Recorder recorder(comm);
  (void)evaluate(profile, plan.choice, recorder, options);
  std::vector<PlanCollective> out;
  for (const Query& q : recorder.queries()) {
    const auto choice = comm.choice(q.op, q.size, q.layout);
    const auto name = name_of(q.layout, plan);
    if (!choice || !name || q.layout.group_size() <= 1) continue;
    out.push_back({.group = name->first,
                   .stage = name->second,
                   .op = q.op,
                   .size = q.size,
                   .group_size = q.layout.group_size(),
                   .groups = q.layout.group_count(),
                   .algorithm = std::string(coll::algorithm_name(choice->algorithm)),
                   .protocol = topo::protocol_name(choice->protocol),
                   .channels = choice->channels,
                   .tuned = choice->tuned,
                   .time = choice->time});
  }
  std::sort(out.begin(), out.end(), [](const PlanCollective& a, const PlanCollective& b) {
    return std::tie(a.stage, a.group, a.op, a.size) < std::tie(b.stage, b.group, b.op, b.size);
  });
  return out;
}

}  // namespace nest::placer
