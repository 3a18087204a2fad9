// Places a training job and replays one iteration of its plan, through the library: the whole
// `nest run` in a few lines. Usage: place_and_simulate [model accelerator topology devices]
// (default: Llama-2-7B on 64 H100s of the bundled 1,024-GPU rail-optimized cluster). Names are
// looked up as `nest list` shows them, in the NEST data this program was built against (the
// installation's share/nest, or the source tree) and then in the standard places.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <vector>

#include "nest/job/job.h"

int main(int argc, char** argv) {
  nest::job::JobSpec spec;
  spec.workload.model = argc > 1 ? argv[1] : "llama2-7b";
  spec.workload.accelerator = argc > 2 ? argv[2] : "h100";
  spec.topology = argc > 3 ? argv[3] : "h100_rail_1024";
  spec.devices = argc > 4 ? std::atoll(argv[4]) : 64;
  spec.baselines = {"manual"};
  try {
    const nest::Catalog standard = nest::Catalog::standard();
    std::vector<std::filesystem::path> roots = {NEST_EXAMPLE_DATA};
    roots.insert(roots.end(), standard.roots().begin(), standard.roots().end());
    nest::job::Job job(spec, nest::Catalog(roots));
    const nest::placer::Plan plan = job.place();
    const nest::replay::RunRecord run = job.simulate(plan);
    std::printf("plan: t %d, %d stages, %d replicas, ZeRO-%d on %lld of %lld devices\n",
                plan.degrees.tensor_parallel, plan.choice.stages(), plan.choice.data_parallel,
                plan.choice.zero_stage, static_cast<long long>(plan.devices_used),
                static_cast<long long>(plan.devices_available));
    std::printf("estimate %.6f s, replayed %.6f s\n", plan.iteration_time.to_seconds(),
                run.summary.iteration_time.to_seconds());
    for (const auto& b : job.baselines()) {
      if (b.plan) std::printf("%s: %.6f s\n", b.name.c_str(), b.plan->iteration_time.to_seconds());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "place_and_simulate: %s\n", e.what());
    return 2;
  }
  return 0;
}
