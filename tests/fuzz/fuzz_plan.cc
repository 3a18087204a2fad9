// libFuzzer target: plan files (nest/io/plan_file.h).
#include "fuzz_common.h"
#include "nest/io/plan_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return nest::fuzz::run_one(
      data, size, [](std::string_view text) { (void)nest::io::parse_plan(text, "fuzz.yaml"); });
}
