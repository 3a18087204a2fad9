#pragma once
/// \file
/// Rebuilding what a plan file names: its workload (the layer profile holding the plan's
/// variant) and its network cost model, so that `nest simulate` evaluates exactly the plan that
/// `nest place` chose.

#include <filesystem>
#include <memory>

#include "nest/io/plan_file.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"

namespace nest::job {

/// An input path of a plan file: as written when it exists, else relative to the plan file's
/// folder. Throws `Error` (input, key `key`) when neither exists.
[[nodiscard]] std::string resolve_plan_path(const std::string& path,
                                            const std::filesystem::path& plan_file,
                                            const std::string& key);

/// The layer profile of `record`: the profile file, or the model built on the accelerator for
/// the plan's variant only (default build options, as `nest place` uses). `plan_file` anchors
/// relative paths.
[[nodiscard]] workload::LayerProfile load_plan_profile(const io::PlanRecord& record,
                                                       const std::filesystem::path& plan_file);

/// The network cost model of `inputs`: zero, flat (its recorded bandwidth and latency) or the
/// collective oracle on `topology` (which must then be given and outlive the result).
[[nodiscard]] std::unique_ptr<placer::CommCost> make_comm_cost(const io::PlanInputs& inputs,
                                                               const topo::Topology* topology);

/// `record` evaluated on `profile` with `comm` (the variant found by its degrees).
[[nodiscard]] placer::Plan evaluate_record(const io::PlanRecord& record,
                                           const workload::LayerProfile& profile,
                                           placer::CommCost& comm);

}  // namespace nest::job
