#include "nest/job/plan_inputs.h"

#include "nest/core/error.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace nest::job {

using io::PlanInputs;
using io::PlanRecord;
using placer::CommCost;
using placer::FlatCommCost;
using placer::OracleCommCost;
using placer::Plan;
using placer::ZeroCommCost;

namespace fs = std::filesystem;

std::string resolve_plan_path(const std::string& path, const fs::path& plan_file,
                              const std::string& key) {
  if (fs::exists(path)) return path;
  const fs::path beside = plan_file.parent_path() / path;
  if (fs::exists(beside)) return beside.string();
  throw Error::input("input file of the plan not found",
                     {.file = plan_file.string(),
                      .key = key,
                      .value = path,
                      .expected = "a path relative to the working directory or the plan file"});
}

workload::LayerProfile load_plan_profile(const PlanRecord& record, const fs::path& plan_file) {
  const PlanInputs& in = record.inputs;
  if (!in.profile.empty()) {
    return workload::load_layer_profile(resolve_plan_path(in.profile, plan_file, "inputs.profile"));
  }
  const workload::Model model =
      workload::load_model(resolve_plan_path(in.model, plan_file, "inputs.model"));
  const workload::Accelerator device = workload::load_accelerator(
      resolve_plan_path(in.accelerator, plan_file, "inputs.accelerator"));
  const placer::VariantDegrees& v = record.degrees;
  const workload::ParallelConfig config{.tensor = v.tensor_parallel,
                                        .context = v.context_parallel,
                                        .expert = v.expert_parallel,
                                        .sequence = v.sequence_parallel,
                                        .micro_batch = v.micro_batch};
  return workload::build_profile(model, device, {config}, workload::BuildOptions{});
}

std::unique_ptr<CommCost> make_comm_cost(const PlanInputs& inputs, const topo::Topology* topology) {
  const int scale_up =
      topology != nullptr && !topology->domain_sizes().empty() ? topology->domain_sizes()[0] : 8;
  if (inputs.network == "oracle") {
    if (topology == nullptr) {
      throw Error::input("the oracle network needs the plan's topology",
                         {.key = "inputs.topology", .expected = "a topology file"});
    }
    return std::make_unique<OracleCommCost>(*topology);
  }
  if (inputs.network == "flat") {
    return std::make_unique<FlatCommCost>(inputs.flat_bandwidth, inputs.flat_latency, scale_up);
  }
  return std::make_unique<ZeroCommCost>(scale_up);
}

Plan evaluate_record(const PlanRecord& record, const workload::LayerProfile& profile,
                     CommCost& comm) {
  placer::PlanChoice choice = record.choice;
  choice.variant = placer::find_variant(profile, record.degrees);
  const placer::CostOptions options{.rules = record.inputs.rules,
                                    .devices = record.inputs.devices,
                                    .memory_bandwidth = record.inputs.memory_bandwidth};
  return placer::evaluate(profile, choice, comm, options);
}

}  // namespace nest::job
