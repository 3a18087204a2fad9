#include "nest/coll/measure.h"

#include <algorithm>
#include <cmath>

namespace nest::coll {

Measurement measure(const CalibratedNetwork& network, const MeasureRequest& request) {
  Measurement m;
  const CollectiveSpec& spec = request.spec;
  if (request.tuned) {
    TunedRun tuned = simulate_fastest(network, spec, request.groups, request.simulation);
    m.spec = tuned.spec;
    m.result = std::move(tuned.result);
  } else {
    m.spec = resolve(spec, network, request.groups.front());
    m.result = simulate(network, spec, request.groups, request.simulation);
  }
  CollectiveSpec chosen = spec;
  chosen.algorithm = m.spec.algorithm;
  chosen.chunks = m.spec.chunks;
  if (request.tuned) chosen.levels.clear();
  for (const auto& g : request.groups) {
    const ClosedForm cf = closed_form(network, chosen, g, request.simulation.seed);
    if (cf.seconds >= m.closed.seconds) m.closed = cf;
  }
  const int n = static_cast<int>(request.groups.front().size());
  m.simulated_s = m.result.makespan.to_seconds();
  // The simulator keeps whole picoseconds: a difference below that is the closed form's rounding.
  m.difference_s =
      static_cast<double>(m.result.makespan.ps() - std::llround(m.closed.seconds * 1e12)) * 1e-12;
  m.algbw_bytes_per_s = m.simulated_s > 0 ? spec.size.as_double() / m.simulated_s : 0;
  m.busbw_bytes_per_s = m.algbw_bytes_per_s * bus_bandwidth_factor(spec.op, n);
  m.fastest = *std::min_element(m.result.durations.begin(), m.result.durations.end());
  return m;
}

std::int64_t nccl_count(Operation op, Bytes size, int ranks) noexcept {
  const std::int64_t elements = size.count() / 4;
  switch (op) {
    case Operation::kReduceScatter:
    case Operation::kAllGather:
    case Operation::kAllToAll:
      return elements / ranks;
    default:
      return elements;
  }
}

}  // namespace nest::coll
