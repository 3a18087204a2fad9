#pragma once
/// \file
/// What a collective is: an operation, the algorithm that implements it and its message size,
/// following the nccl-tests conventions for sizes. A collective runs over an ordered group of
/// devices (given separately, see nest/coll/schedule.h and nest/coll/simulate.h); the group's
/// first device is the root of a broadcast and the sender of a point-to-point send.
///
/// Valid (operation, algorithm) pairs:
///
/// | operation      | algorithms                                                      |
/// |----------------|-----------------------------------------------------------------|
/// | allreduce      | ring, tree, halving_doubling, direct, hierarchical, torus, nvls |
/// | reduce_scatter | ring, halving_doubling, direct, hierarchical, torus             |
/// | all_gather     | ring, halving_doubling, direct, hierarchical, torus             |
/// | all_to_all     | pairwise, direct                                                |
/// | broadcast      | ring, tree, direct                                              |
/// | send           | direct                                                          |
/// | reduce         | ring, direct                                                    |
/// | gather         | direct                                                          |
/// | scatter        | direct                                                          |
/// | sendrecv       | direct                                                          |

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nest/core/units.h"

namespace nest::coll {

/// A collective operation.
enum class Operation : std::uint8_t {
  kAllReduce,      ///< every rank ends with the reduction of all buffers (size = the buffer)
  kReduceScatter,  ///< rank i ends with reduced chunk i (size = the full, unscattered buffer)
  kAllGather,      ///< every rank ends with all chunks (size = the full, gathered buffer)
  kAllToAll,       ///< rank i sends chunk j to rank j (size = what each rank sends in total,
                   ///< its own chunk included, as nccl-tests count it)
  kBroadcast,      ///< the group's first device sends its buffer to all (size = the buffer)
  kSend,           ///< point-to-point: group {src, dst}, src sends the buffer to dst
  kReduce,         ///< the group's first device ends with the reduction (size = the buffer)
  kGather,         ///< the first device ends with every rank's chunk (size = the gathered
                   ///< buffer, each rank contributes size / n)
  kScatter,        ///< the first device sends chunk i to rank i (size = the whole buffer)
  kSendRecv,       ///< every rank i sends its buffer to rank i+1 (mod n) and receives one
                   ///< (size = the buffer), as nccl-tests' sendrecv_perf
};

/// How an operation is decomposed into point-to-point transfers.
enum class Algorithm : std::uint8_t {
  kRing,             ///< ring over the group order; `chunks` splits each step into pieces
  kTree,             ///< NCCL's double binary tree (allreduce), one binary tree (broadcast);
                     ///< pipelined in `chunks` pieces
  kHalvingDoubling,  ///< recursive halving (reduce-scatter) and doubling (all-gather)
  kDirect,           ///< one shot: every rank sends to every rank at once
  kPairwise,         ///< all-to-all in n-1 steps, step k: rank i sends to rank i+k
  kHierarchical,     ///< n-level: reduce-scatter inside each domain, recurse across domains,
                     ///< all-gather back; domains from the topology or `levels`
  kTorus,            ///< multi-dimensional ring: one ring per dimension in sequence
  /// NVLink SHARP (in-switch reduction, NCCL's NVLS) allreduce inside one scale-up switch: the
  /// switch reads every rank's buffer, reduces and multicasts the result, so every rank sends
  /// S + S/n into the switch and receives as much (its reads served and its slice's store; its
  /// slice's result and every store). Modelled by those port loads: one step in which rank i
  /// sends S + S/n through the switch to rank i+1. Needs `Topology::nvlink_sharp()`.
  kNvls,
};

/// Everything about a collective except its group.
struct CollectiveSpec {
  Operation op = Operation::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  Bytes size;  ///< message size, nccl-tests convention (see `Operation`)
  /// Pipeline pieces per step (ring, tree, hierarchical, torus; ring reduce), >= 1; 0 asks
  /// `resolve` to choose (a pipelined tree under a collective model, else 1).
  int chunks = 1;
  /// Hierarchical and torus: sizes of the nested levels, innermost first, whose product is the
  /// group size; the group lists level-0 domains one after another (ranks p and q share a
  /// level-0 domain iff p / levels[0] == q / levels[0]). Empty: derived from the topology's
  /// domains (see `hierarchy_levels` in nest/coll/simulate.h).
  std::vector<int> levels;
  /// Hierarchical: the algorithm of each level (one per entry of `levels`), as ASTRA-sim runs a
  /// different one per network dimension: kRing (d-1 steps), kDirect (one step, every member to
  /// every member), kHalvingDoubling (log2 d steps, d a power of two) for the level's
  /// reduce-scatter and all-gather, and kTree (a double binary tree allreduce of the level's
  /// segment, replacing its reduce-scatter and all-gather; only on the last level of an
  /// allreduce, where ASTRA-sim's localBWAware schedule runs an allreduce too). Empty: ring at
  /// every level. `resolve` fills it from a `kind: dimensions` topology's dimensions.
  std::vector<Algorithm> level_algorithms;
  /// Rings of a ring allreduce, reduce-scatter or all-gather (NCCL's channels), each carrying
  /// size / channels; 0 asks `resolve` to choose (under a collective model: the model's channels,
  /// at most the group's devices per scale-up domain, when the group spans domains rail by rail;
  /// else 1). See `ring_orders` in nest/coll/schedule.h for the ring of each channel.
  int channels = 1;
  /// Ring allreduce, reduce-scatter, all-gather: the group's devices per scale-up domain when
  /// the group lists whole domains rail by rail (the same local devices in the same order in
  /// every domain), so that each ring crosses domains on one rail (`ring_orders`); set by
  /// `resolve` with channels > 1 and always under a collective model. 0: rings are rotations
  /// of the group order.
  int ranks_per_node = 0;
  /// Ring family (ring, hierarchical, torus allreduce, reduce-scatter, all-gather): a rank's
  /// step waits only for what it forwards (what it received the step before), not for its own
  /// previous send to have arrived, as NCCL's rings forward each slice as it arrives (their
  /// flow control, 8 slots per connection, never binds in a flow model). So a step's latency is
  /// paid along the ring, not by every step at its slowest hop. Set by `resolve` under a
  /// collective model; the closed form (bulk-synchronous) is then an upper bound.
  bool forward_on_arrival = false;

  friend bool operator==(const CollectiveSpec&, const CollectiveSpec&) = default;
};

/// Name of an operation as the command line spells it ("allreduce", "reduce_scatter",
/// "all_gather", "all_to_all", "broadcast", "send", "reduce", "gather", "scatter", "sendrecv").
[[nodiscard]] std::string_view operation_name(Operation op) noexcept;
/// Name of an algorithm as the command line spells it ("ring", "tree", "halving_doubling",
/// "direct", "pairwise", "hierarchical", "torus", "nvls").
[[nodiscard]] std::string_view algorithm_name(Algorithm algorithm) noexcept;

/// Parses an operation name; also accepts "-" for "_" and "reducescatter", "allgather",
/// "alltoall". Throws `Error` (input) listing the accepted names.
[[nodiscard]] Operation parse_operation(std::string_view text);
/// Parses an algorithm name ("-" for "_" accepted). Throws `Error` (input) listing the names.
[[nodiscard]] Algorithm parse_algorithm(std::string_view text);

/// The default algorithm of an operation: ring (allreduce, reduce-scatter, all-gather,
/// broadcast, reduce), pairwise (all-to-all), direct (send, gather, scatter, sendrecv).
[[nodiscard]] Algorithm default_algorithm(Operation op) noexcept;

/// The algorithms valid for `op`, in the order of the table above.
[[nodiscard]] std::span<const Algorithm> algorithms_for(Operation op) noexcept;

/// NCCL's bus-bandwidth factor: busbw = algbw * factor, with n ranks (nccl-tests
/// doc/PERFORMANCE.md and src/*.cu). allreduce 2(n-1)/n; reduce-scatter, all-gather,
/// all-to-all, gather and scatter (n-1)/n; broadcast, reduce, send and sendrecv 1.
[[nodiscard]] double bus_bandwidth_factor(Operation op, int ranks) noexcept;

/// Level algorithms as text: "ring,direct,ring".
[[nodiscard]] std::string level_algorithms_text(std::span<const Algorithm> algorithms);

/// Level sizes as text: "8,4".
[[nodiscard]] std::string levels_text(std::span<const int> levels);

/// Checks that `spec` can run on a group of `ranks` devices: the algorithm is valid for the
/// operation, chunks >= 1 (and 1 for algorithms that do not pipeline) and no more than make
/// pieces of one byte, channels >= 1 (more only for ring allreduce, reduce-scatter and
/// all-gather, with ranks_per_node 0 or a divisor of ranks), size > 0, send has two ranks,
/// halving-doubling reduce-scatter/all-gather has a power-of-two group, levels are given only to
/// hierarchical and torus and (when given) are >= 1 and multiply to `ranks`. Throws `Error` (input)
/// with key `key_prefix` + the field ("--algorithm", "--size", ...) naming the bad value and what
/// was expected.
void validate(const CollectiveSpec& spec, int ranks, std::string_view key_prefix = "--");

}  // namespace nest::coll
