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
/// | allreduce      | ring, tree, halving_doubling, direct, hierarchical, torus       |
/// | reduce_scatter | ring, halving_doubling, direct, hierarchical, torus             |
/// | all_gather     | ring, halving_doubling, direct, hierarchical, torus             |
/// | all_to_all     | pairwise, direct                                                |
/// | broadcast      | ring, tree, direct                                              |
/// | send           | direct                                                          |

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
};

/// Everything about a collective except its group.
struct CollectiveSpec {
  Operation op = Operation::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  Bytes size;      ///< message size, nccl-tests convention (see `Operation`)
  int chunks = 1;  ///< pipeline pieces per step (ring, tree, hierarchical, torus), >= 1
  /// Hierarchical and torus: sizes of the nested levels, innermost first, whose product is the
  /// group size; the group lists level-0 domains one after another (ranks p and q share a
  /// level-0 domain iff p / levels[0] == q / levels[0]). Empty: derived from the topology's
  /// domains (see `hierarchy_levels` in nest/coll/simulate.h).
  std::vector<int> levels;

  friend bool operator==(const CollectiveSpec&, const CollectiveSpec&) = default;
};

/// Name of an operation as the command line spells it ("allreduce", "reduce_scatter",
/// "all_gather", "all_to_all", "broadcast", "send").
[[nodiscard]] std::string_view operation_name(Operation op) noexcept;
/// Name of an algorithm as the command line spells it ("ring", "tree", "halving_doubling",
/// "direct", "pairwise", "hierarchical", "torus").
[[nodiscard]] std::string_view algorithm_name(Algorithm algorithm) noexcept;

/// Parses an operation name; also accepts "-" for "_" and "reducescatter", "allgather",
/// "alltoall". Throws `Error` (input) listing the accepted names.
[[nodiscard]] Operation parse_operation(std::string_view text);
/// Parses an algorithm name ("-" for "_" accepted). Throws `Error` (input) listing the names.
[[nodiscard]] Algorithm parse_algorithm(std::string_view text);

/// The default algorithm of an operation: ring (allreduce, reduce-scatter, all-gather,
/// broadcast), pairwise (all-to-all), direct (send).
[[nodiscard]] Algorithm default_algorithm(Operation op) noexcept;

/// The algorithms valid for `op`, in the order of the table above.
[[nodiscard]] std::span<const Algorithm> algorithms_for(Operation op) noexcept;

/// NCCL's bus-bandwidth factor: busbw = algbw * factor, with n ranks. allreduce 2(n-1)/n;
/// reduce-scatter, all-gather and all-to-all (n-1)/n; broadcast and send 1.
[[nodiscard]] double bus_bandwidth_factor(Operation op, int ranks) noexcept;

/// Level sizes as text: "8,4".
[[nodiscard]] std::string levels_text(std::span<const int> levels);

/// Checks that `spec` can run on a group of `ranks` devices: the algorithm is valid for the
/// operation, chunks >= 1 (and 1 for algorithms that do not pipeline) and no more than make
/// pieces of one byte, size > 0, send has two ranks, halving-doubling reduce-scatter/all-gather
/// has a power-of-two group, levels are given only to hierarchical and torus and (when given)
/// are >= 1 and multiply to `ranks`. Throws `Error` (input) with key `key_prefix` +
/// the field ("--algorithm", "--size", ...) naming the bad value and what was expected.
void validate(const CollectiveSpec& spec, int ranks, std::string_view key_prefix = "--");

}  // namespace nest::coll
