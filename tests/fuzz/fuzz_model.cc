// libFuzzer target: model files (nest/workload/model.h), then the profile of the model on an
// H100 without parallelism (every size and time check of the compute model runs).
#include "fuzz_common.h"
#include "fuzz_workloads.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nest::workload::Accelerator kDevice = nest::fuzz::h100();
  return nest::fuzz::run_one(data, size, [](std::string_view text) {
    const nest::workload::Model model = nest::workload::parse_model(text, "fuzz.yaml");
    (void)nest::workload::count_parameters(model);
    (void)nest::workload::build_profile(model, kDevice, {nest::workload::ParallelConfig{}}, {});
  });
}
