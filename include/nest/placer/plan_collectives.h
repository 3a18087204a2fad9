#pragma once
/// \file
/// What the collective oracle chose for each collective of a plan (issue 13: the plan file
/// records the choice per group): the plan is priced once more through a recorder, each
/// collective it asks is named by the group that runs it (the tensor, expert or context groups
/// of a stage, or the stage's data-parallel replicas) and paired with the oracle's choice.

#include <vector>

#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"

namespace nest::placer {

/// Every distinct collective `evaluate(profile, plan.choice, comm, options)` asks, with the
/// oracle's choice, sorted by stage, group, operation and size. Deterministic.
[[nodiscard]] std::vector<PlanCollective> plan_collectives(const workload::LayerProfile& profile,
                                                           const Plan& plan, OracleCommCost& comm,
                                                           const CostOptions& options);

}  // namespace nest::placer
