#pragma once
/// \file
/// One collective as `nest collective` (and `nest.collective` in Python) reports it: simulated
/// on every group at once, its closed form (each group alone; the layout's is the slowest
/// group's), and nccl-tests' figures (algbw = size / time, busbw = algbw × the operation's bus
/// factor). The command line and the Python module both measure through `measure`, so their
/// numbers are the same.

#include <cstdint>
#include <vector>

#include "nest/coll/calibration.h"
#include "nest/coll/closed_form.h"
#include "nest/coll/collective.h"
#include "nest/coll/simulate.h"
#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::coll {

/// What to measure (the size is the spec's).
struct MeasureRequest {
  CollectiveSpec spec;
  /// Run the fastest of the tuner's candidates for the group (NCCL's choice) instead of
  /// `spec.algorithm`.
  bool tuned = false;
  /// The groups that run at once (the first is the one reported); equal sizes.
  std::vector<std::vector<topo::DeviceId>> groups;
  SimulationOptions simulation;
};

/// The outcome of one size.
struct Measurement {
  CollectiveSpec spec;  ///< as resolved: algorithm, chunks, channels, levels
  SimulationResult result;
  ClosedForm closed;        ///< the slowest group's closed form
  double simulated_s = 0;   ///< the layout's makespan
  double difference_s = 0;  ///< simulated − closed form, in whole picoseconds
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  Time fastest;  ///< the fastest group's duration
};

/// Simulates `request` on `network` and prices its closed form. Throws `Error` (input) for bad
/// groups or specs; times beyond the simulator's range are an input error without a key (the
/// caller names the size that caused them).
[[nodiscard]] Measurement measure(const CalibratedNetwork& network, const MeasureRequest& request);

/// Elements of 4-byte floats as nccl-tests prints them in its `count` column: the buffer for
/// allreduce, broadcast and send, one rank's part for the operations whose size is the whole
/// gathered (or scattered) buffer.
[[nodiscard]] std::int64_t nccl_count(Operation op, Bytes size, int ranks) noexcept;

}  // namespace nest::coll
