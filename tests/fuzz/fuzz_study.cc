// libFuzzer target: study files (nest/sweep/study.h), read as if they sat in studies/ (so the
// bundled studies' relative workload paths resolve), then the topology parameters of every
// point (the derived sizes and rates).
#include "fuzz_common.h"
#include "nest/sweep/study.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return nest::fuzz::run_one(data, size, [](std::string_view text) {
    const nest::sweep::Study study = nest::sweep::parse_study(
        text, "fuzz.yaml", NEST_SOURCE_DIR "/studies", nest::fuzz::fuzz_limits());
    for (const nest::sweep::Point& p : study.points) {
      try {
        (void)nest::sweep::topology_parameters(study, p);
      } catch (const nest::Error& e) {
        // A point's own failure: its row would record it. It must still be an input error.
        if (e.kind() != nest::ErrorKind::kInput) nest::fuzz::finding("internal error", e.what());
        nest::fuzz::check_line(e.what());
      }
    }
  });
}
