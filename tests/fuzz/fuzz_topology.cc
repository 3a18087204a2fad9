// libFuzzer target: topology files (nest/topo/loader.h), then a route between the first and
// the last device of what loaded.
#include "fuzz_common.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return nest::fuzz::run_one(data, size, [](std::string_view text) {
    const nest::topo::Topology t =
        nest::topo::load_topology_string(text, "fuzz.yaml", nest::fuzz::fuzz_limits());
    nest::topo::Router router(t);
    (void)router.route(0, static_cast<nest::topo::DeviceId>(t.num_devices() - 1), 0);
  });
}
