// libFuzzer target: layer-profile files (nest/workload/profile_file.h).
#include "fuzz_common.h"
#include "nest/workload/profile_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return nest::fuzz::run_one(data, size, [](std::string_view text) {
    (void)nest::workload::parse_layer_profile(text, "fuzz.yaml");
  });
}
