#pragma once
// The tuner's choice among candidates, each simulated only as far as it can still win
// (`coll::simulate_fastest`; private to coll).

#include <cstddef>
#include <functional>
#include <optional>
#include <span>

#include "nest/core/units.h"

namespace nest::coll::detail {

/// The candidate with the smallest makespan, ties to the earliest, as one run of every
/// candidate to the end in turn would keep it. `bounds[i]` is at most candidate i's makespan and
/// `bases[i]` the part of it that its run does not simulate (the base latency: the makespan is
/// the run's end plus it); `run(i, until)` gives candidate i's makespan, or nullopt when its run,
/// stopped once its simulated time passes `until`, has not ended (it ends later: its makespan
/// exceeds until + bases[i]). Candidates run in the order of their bounds (ties: the earlier),
/// each skipped once its bound loses to the best so far, else run until what it must beat (see
/// the definition for why the choice is the same). At least one candidate; the first one run
/// gets `Time::max()` and must answer.
[[nodiscard]] std::size_t fastest_candidate(
    std::span<const Time> bounds, std::span<const Time> bases,
    const std::function<std::optional<Time>(std::size_t, Time)>& run);

}  // namespace nest::coll::detail
