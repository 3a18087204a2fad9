// libFuzzer target: accelerator files (nest/workload/accelerator.h), then Llama-2-7B's profile
// on the accelerator at t = 1 and t = 8 (its rates and efficiencies reach every time).
#include "fuzz_common.h"
#include "fuzz_workloads.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nest::workload::Model kModel = nest::fuzz::llama2_7b();
  return nest::fuzz::run_one(data, size, [](std::string_view text) {
    const nest::workload::Accelerator device = nest::workload::parse_accelerator(text, "fuzz.yaml");
    (void)nest::workload::build_profile(
        kModel, device,
        {nest::workload::ParallelConfig{}, nest::workload::ParallelConfig{.tensor = 8}},
        {.precision = device.peak.front().first});
  });
}
