#pragma once
/// \file
/// Chakra execution traces (MLCommons Chakra ET, the input of ASTRA-sim): a replayed iteration
/// written as one ET file per rank, and ET folders read back, checked and summarized.
///
/// The format: per rank a file `<prefix>.<rank>.et` that holds a `GlobalMetadata` message and
/// then one `Node` message per node, each preceded by its size as a varint32 (Chakra's
/// protolib); the schema is third_party/chakra/et_def.proto (mlcommons/chakra, commit
/// 21585d8f2d65603d791d2121e3d4632351120262). Beside them, `comm_group.json` maps each
/// collective's `pg_name` to its ranks (ASTRA-sim's --comm-group-configuration). Protobuf stays
/// in src/chakra/: this header holds plain data.
///
/// What a replay becomes (`from_run`), per device (rank = device id; every device of the
/// topology gets a file, unused ones only the metadata, so the folder fits a network of all of
/// them):
/// - `COMP_NODE` per forward, backward and optimizer step of the device, in its compute
///   stream's order, each depending on the one before (Chakra's converters put stream order in
///   `data_deps`, which is what ASTRA-sim's feeder follows). The last backward before a
///   data-parallel reduction is cut into one part per gradient bucket, as the replay makes
///   bucket i ready after (i + 1)/k of it.
/// - `COMM_SEND_NODE` per activation or gradient the device sends (after the compute that made
///   it and after its previous send to the same device, as the replay queues them) and
///   `COMM_RECV_NODE` on its counterpart (the shard of the same index in the next or previous
///   stage), with `comm_src`/`comm_dst`, `comm_tag` and `comm_size`; the compute that waits for it
///   depends on the receive.
/// - `COMM_COLL_NODE` (`ALL_REDUCE`) per gradient bucket, with `comm_size`, `pg_name` and its
///   group in comm_group.json; bucket i depends on the backward part i and on bucket i - 1, and
///   the optimizer step on the last bucket.
/// Times: `start_time_micros` and `duration_micros` (rounded to whole microseconds, as the
/// schema has them) and the exact picoseconds in NEST's own attributes `nest_start_ps`,
/// `nest_duration_ps`; also `nest_stage`, `nest_microbatch`, `nest_first_layer`,
/// `nest_last_layer` and `nest_part` (the bucket part of a cut backward). Intra-layer (tensor,
/// sequence, expert, context parallel) collectives are inside the compute durations, as the
/// replay runs them on the compute stream.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/replay/run_record.h"

namespace nest::chakra {

/// Chakra's `NodeType` (same numbers).
enum class NodeType : std::uint8_t {
  kInvalid = 0,
  kMetadata = 1,
  kMemoryLoad = 2,
  kMemoryStore = 3,
  kCompute = 4,
  kSend = 5,
  kReceive = 6,
  kCollective = 7,
};

/// Chakra's `CollectiveCommType` (same numbers).
enum class Collective : std::uint8_t {
  kAllReduce = 0,
  kReduce = 1,
  kAllGather = 2,
  kGather = 3,
  kScatter = 4,
  kBroadcast = 5,
  kAllToAll = 6,
  kReduceScatter = 7,
  kReduceScatterBlock = 8,
  kBarrier = 9,
};

/// "COMP_NODE", "COMM_SEND_NODE", ... as the schema names them.
[[nodiscard]] const char* to_string(NodeType type) noexcept;
/// "ALL_REDUCE", "ALL_GATHER", ...
[[nodiscard]] const char* to_string(Collective type) noexcept;

/// One node of a rank's graph.
struct Node {
  std::uint64_t id = 0;  ///< unique within its rank
  std::string name;
  NodeType type = NodeType::kInvalid;
  std::vector<std::uint64_t> data_deps;  ///< ids of nodes of the same rank
  std::vector<std::uint64_t> ctrl_deps;
  Time start;     ///< from the start of the iteration
  Time duration;  ///< compute time; for communication the replay's (informative)
  // Communication nodes:
  Collective comm_type = Collective::kAllReduce;  ///< collectives only
  Bytes comm_size;
  std::int32_t comm_src = -1;  ///< receives: the sending rank
  std::int32_t comm_dst = -1;  ///< sends: the receiving rank
  std::int32_t comm_tag = -1;  ///< pairs a send with its receive
  std::string pg_name;         ///< collectives: the process group (comm_group.json)
  // NEST's annotations (-1 when absent):
  std::int32_t stage = -1;  ///< the (virtual) stage
  std::int32_t microbatch = -1;
  std::int32_t first_layer = -1;  ///< layer range [first_layer, last_layer)
  std::int32_t last_layer = -1;
  std::int32_t part = -1;  ///< the bucket part of a cut backward
  /// Attributes a reader does not interpret, by name (kept as their text form).
  std::map<std::string, std::string> other;
};

/// The graph of one rank.
struct Rank {
  std::uint32_t rank = 0;
  std::string version;  ///< GlobalMetadata.version
  std::vector<Node> nodes;
};

/// A trace: its ranks in rank order and the process groups of its collectives.
struct Trace {
  std::vector<Rank> ranks;
  std::map<std::string, std::vector<std::uint32_t>> groups;  ///< pg_name -> ranks
};

/// The replayed iteration of `record` as a Chakra trace (see the file comment). Needs the
/// record's placement, stages and topology (a replay fills them); throws `Error` (internal)
/// when they do not match its timeline.
[[nodiscard]] Trace from_run(const replay::RunRecord& record);

/// The file names `write_folder` writes for `trace`: `<prefix>.<rank>.et` per rank, then
/// "comm_group.json".
[[nodiscard]] std::vector<std::string> file_names(const Trace& trace,
                                                  const std::string& prefix = "nest");

/// Writes the files of `trace` into the existing folder `folder`, meant to be a staging folder
/// that the caller puts in place once it is complete (nest/core/staged_folder.h): plain writes,
/// then one syncfs(2) so that the contents are on disk before that rename. The same trace gives
/// the same bytes. Throws `Error` (input) naming the file when the file system refuses.
void write_files(const Trace& trace, const std::filesystem::path& folder,
                 const std::string& prefix = "nest");

/// Reads every `*.et` file of `folder` (ranks from the names `<prefix>.<rank>.et`, one prefix)
/// and `comm_group.json` when present, and checks the trace: node ids unique, dependencies
/// on nodes of the same rank and acyclic, communication nodes with their attributes, every
/// send matched by one receive (same tag, size and ranks) and every collective's group known
/// and holding its rank. Throws `Error` (input) naming the file, the node and the key
/// (`nest.3.et: node 12: data_deps: unknown node (got "99"; expected ...)`).
[[nodiscard]] Trace read_folder(const std::filesystem::path& folder);

/// What a trace holds.
struct Summary {
  std::size_t ranks = 0;
  std::size_t empty_ranks = 0;  ///< ranks with no node (devices a plan does not use)
  std::map<NodeType, std::size_t> nodes;
  std::size_t dependencies = 0;
  /// Per rank: the sum of its compute durations; the largest and the smallest of them.
  Time max_compute;
  Time min_compute;
  /// The end of the last node (start + duration) over all ranks.
  Time end;
  std::map<Collective, Bytes> collective_bytes;  ///< summed over nodes
  Bytes send_bytes;
  std::size_t groups = 0;
  /// Per (virtual) stage of a NEST trace (nodes with `nest_stage`): layer range and mean
  /// forward and backward time per microbatch (a cut backward counted whole).
  struct Stage {
    std::int32_t stage = 0;
    std::int32_t first_layer = 0;
    std::int32_t last_layer = 0;
    Time forward;
    Time backward;
    std::size_t ranks = 0;
  };
  std::vector<Stage> stages;
};

/// Counts and sums of `trace`.
[[nodiscard]] Summary summarize(const Trace& trace);

}  // namespace nest::chakra
