// A replayed iteration as a Chakra trace (nest/chakra/chakra.h, "What a replay becomes"): per
// device, the nodes of its compute stream, its transfers and its gradient buckets, with the
// replay's dependencies, ordered so that every node follows the nodes it depends on.

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "nest/chakra/chakra.h"
#include "nest/core/error.h"

namespace nest::chakra {
namespace {

using replay::RunRecord;
using replay::Stream;
using replay::TaskKind;
using replay::TimelineRow;

// Ties in time: a receive is posted before the compute that waits for it, compute before the
// send of its output, sends before collectives.
enum Priority : int {
  kReceivePriority = 0,
  kComputePriority = 1,
  kSendPriority = 2,
  kCollectivePriority = 3
};

// A node being built, with its dependencies as indices of other items of its rank.
struct Item {
  Node node;
  int priority = 0;
  std::vector<std::size_t> deps;
};

// Where a device sits in the placement.
struct Seat {
  std::size_t replica_index = 0;  // index into RunRecord::placement
  std::size_t shard = 0;
};

class Converter {
 public:
  explicit Converter(const RunRecord& r) : r_(r) { index(); }

  Trace run() {
    Trace trace;
    const std::uint32_t ranks = rank_count();
    for (std::uint32_t d = 0; d < ranks; ++d) {
      Rank rank;
      rank.rank = d;
      rank.version = "1.0.0";
      if (seats_.contains(d)) rank.nodes = ordered(items_of(d));
      trace.ranks.push_back(std::move(rank));
    }
    trace.groups = groups_;
    return trace;
  }

 private:
  void index() {
    for (std::size_t i = 0; i < r_.placement.size(); ++i) {
      const replay::StageReplica& s = r_.placement[i];
      replica_of_[{s.stage, s.replica}] = i;
      for (std::size_t k = 0; k < s.devices.size(); ++k) seats_[s.devices[k]] = {i, k};
    }
    for (std::size_t i = 0; i < r_.timeline.size(); ++i) {
      const TimelineRow& row = r_.timeline[i];
      rows_[row.device].push_back(i);
      if (row.stream == Stream::kNetwork) {
        sends_[{row.device, static_cast<int>(row.kind), row.stage, row.microbatch}] = i;
      }
    }
    for (std::size_t i = 0; i < r_.collectives.size(); ++i) {
      const replay::CollectiveRow& c = r_.collectives[i];
      for (const std::uint32_t d : c.group) buckets_[d].push_back(i);
      std::vector<std::uint32_t> members = c.group;
      if (!group_names_.contains(members)) {
        const std::string name = std::to_string(group_names_.size() + 1);
        group_names_[members] = name;
        groups_[name] = members;
      }
    }
  }

  std::uint32_t rank_count() const {
    std::uint32_t n = 0;
    for (const topo::Node& node : r_.topology.nodes) n += node.kind == topo::NodeKind::kDevice;
    for (const auto& [device, seat] : seats_) n = std::max(n, device + 1);
    return n;
  }

  // The counterpart of `device`'s shard in (virtual) stage `stage` of its replica.
  std::uint32_t counterpart(std::uint32_t device, std::int32_t stage) const {
    const Seat& seat = seats_.at(device);
    const std::int32_t replica = r_.placement[seat.replica_index].replica;
    const std::int32_t group = r_.stages.at(static_cast<std::size_t>(stage)).device_group;
    const auto it = replica_of_.find({group, replica});
    if (it == replica_of_.end() || seat.shard >= r_.placement[it->second].devices.size()) {
      throw Error::internal(fmt::format("chakra: no stage {} in replica {}", stage, replica));
    }
    return r_.placement[it->second].devices[seat.shard];
  }

  // Pairs a send with its receive: the sending stage, the microbatch and the direction.
  std::int32_t tag(std::int32_t stage, std::int32_t microbatch, bool forward) const {
    const std::int64_t t =
        (static_cast<std::int64_t>(microbatch) * static_cast<std::int64_t>(r_.stages.size()) +
         stage) *
            2 +
        (forward ? 0 : 1);
    if (t > std::numeric_limits<std::int32_t>::max()) {
      throw Error::internal("chakra: more transfers than 32-bit tags can name");
    }
    return static_cast<std::int32_t>(t);
  }

  static Node annotated(const TimelineRow& row, std::string name, NodeType type) {
    Node n;
    n.name = std::move(name);
    n.type = type;
    n.start = row.start;
    n.duration = row.end - row.start;
    n.stage = row.stage;
    n.microbatch = row.microbatch;
    n.first_layer = row.first_layer;
    n.last_layer = row.last_layer;
    return n;
  }

  std::vector<Item> items_of(std::uint32_t d) const {
    std::vector<Item> items;
    const std::vector<std::size_t>& rows = rows_.count(d) ? rows_.at(d) : empty_;
    const std::vector<std::size_t>& buckets = buckets_.count(d) ? buckets_.at(d) : empty_;
    // The last backward of the stream is cut into one part per bucket.
    std::size_t last_backward = rows.size();
    for (std::size_t j = 0; j < rows.size(); ++j) {
      if (r_.timeline[rows[j]].kind == TaskKind::kBackward) last_backward = j;
    }
    const std::int64_t k = static_cast<std::int64_t>(buckets.size());
    std::map<std::tuple<std::int32_t, std::int32_t, bool>, std::size_t> producer;  // last item
    std::vector<std::size_t> parts;
    std::size_t previous_compute = SIZE_MAX;
    std::size_t optimizer = SIZE_MAX;
    auto push = [&](Item item) {
      items.push_back(std::move(item));
      return items.size() - 1;
    };
    auto receive = [&](const TimelineRow& row, bool forward) -> std::size_t {
      // The transfer into this compute: from the previous stage (forward) or the next one.
      const std::int32_t from_stage = row.stage + (forward ? -1 : 1);
      const std::uint32_t sender = counterpart(d, from_stage);
      const TaskKind kind = forward ? TaskKind::kSendActivation : TaskKind::kSendGradient;
      const auto it = sends_.find({sender, static_cast<int>(kind), from_stage, row.microbatch});
      if (it == sends_.end()) {
        throw Error::internal(fmt::format("chakra: device {} has no {} of stage {} mb {}", sender,
                                          to_string(kind), from_stage, row.microbatch));
      }
      const TimelineRow& send = r_.timeline[it->second];
      Item item{annotated(send,
                          fmt::format("recv {} mb{} from {}", forward ? "activation" : "gradient",
                                      row.microbatch, sender),
                          NodeType::kReceive),
                kReceivePriority,
                {}};
      const replay::StageRow& s = r_.stages.at(static_cast<std::size_t>(from_stage));
      item.node.comm_size = forward ? s.activation_out : s.gradient_out;
      item.node.comm_src = static_cast<std::int32_t>(sender);
      item.node.comm_tag = tag(from_stage, row.microbatch, forward);
      return push(std::move(item));
    };
    const std::int32_t last_stage = static_cast<std::int32_t>(r_.stages.size()) - 1;
    for (std::size_t j = 0; j < rows.size(); ++j) {
      const TimelineRow& row = r_.timeline[rows[j]];
      if (row.stream != Stream::kCompute) continue;
      const bool forward = row.kind == TaskKind::kForward;
      std::vector<std::size_t> deps;
      if (previous_compute != SIZE_MAX) deps.push_back(previous_compute);
      if ((forward && row.stage > 0) ||
          (row.kind == TaskKind::kBackward && row.stage < last_stage)) {
        deps.push_back(receive(row, forward));
      }
      std::string name =
          row.kind == TaskKind::kOptimizer
              ? fmt::format("optimizer stage {}", row.stage)
              : fmt::format("{} mb{} stage {}", to_string(row.kind), row.microbatch, row.stage);
      if (j == last_backward && k > 0) {
        for (std::int64_t i = 0; i < k; ++i) {
          const std::int64_t dur = (row.end - row.start).ps();
          Item part{
              annotated(row, fmt::format("{} part {}/{}", name, i + 1, k), NodeType::kCompute),
              kComputePriority, deps};
          part.node.start = row.start + Time::picoseconds(dur * i / k);
          part.node.duration =
              Time::picoseconds(dur * (i + 1) / k) - Time::picoseconds(dur * i / k);
          part.node.part = static_cast<std::int32_t>(i);
          previous_compute = push(std::move(part));
          parts.push_back(previous_compute);
          deps = {previous_compute};
        }
      } else {
        previous_compute =
            push({annotated(row, std::move(name), NodeType::kCompute), kComputePriority, deps});
      }
      if (row.kind == TaskKind::kOptimizer) optimizer = previous_compute;
      producer[{row.stage, row.microbatch, forward}] = previous_compute;
    }
    // A device's sends to one peer leave one after another (the replay's queue): each also
    // depends on the one before it.
    std::map<std::uint32_t, std::size_t> last_send;
    for (const std::size_t j : rows) {
      const TimelineRow& row = r_.timeline[j];
      const bool forward = row.kind == TaskKind::kSendActivation;
      if (!forward && row.kind != TaskKind::kSendGradient) continue;
      const auto made = producer.find({row.stage, row.microbatch, forward});
      if (made == producer.end()) {
        throw Error::internal(fmt::format("chakra: device {} sends mb {} of stage {} it never made",
                                          d, row.microbatch, row.stage));
      }
      const std::int32_t to_stage = row.stage + (forward ? 1 : -1);
      const std::uint32_t receiver = counterpart(d, to_stage);
      Item item{annotated(row,
                          fmt::format("send {} mb{} to {}", forward ? "activation" : "gradient",
                                      row.microbatch, receiver),
                          NodeType::kSend),
                kSendPriority,
                {made->second}};
      const replay::StageRow& s = r_.stages.at(static_cast<std::size_t>(row.stage));
      item.node.comm_size = forward ? s.activation_out : s.gradient_out;
      item.node.comm_dst = static_cast<std::int32_t>(receiver);
      item.node.comm_tag = tag(row.stage, row.microbatch, forward);
      if (const auto before = last_send.find(receiver); before != last_send.end()) {
        item.deps.push_back(before->second);
      }
      last_send[receiver] = push(std::move(item));
    }
    std::size_t previous_bucket = SIZE_MAX;
    for (std::int64_t i = 0; i < k; ++i) {
      const replay::CollectiveRow& c = r_.collectives[buckets[static_cast<std::size_t>(i)]];
      Item item;
      item.node.name =
          fmt::format("allreduce bucket {}/{} group {}", i + 1, k, group_names_.at(c.group));
      item.node.type = NodeType::kCollective;
      item.node.start = c.start;
      item.node.duration = c.end - c.start;
      item.node.comm_type = Collective::kAllReduce;
      item.node.comm_size = c.size;
      item.node.pg_name = group_names_.at(c.group);
      item.node.part = static_cast<std::int32_t>(i);
      item.priority = kCollectivePriority;
      if (static_cast<std::size_t>(i) < parts.size())
        item.deps.push_back(parts[static_cast<std::size_t>(i)]);
      if (previous_bucket != SIZE_MAX) item.deps.push_back(previous_bucket);
      previous_bucket = push(std::move(item));
    }
    if (optimizer != SIZE_MAX && previous_bucket != SIZE_MAX) {
      items[optimizer].deps.push_back(previous_bucket);
    }
    return items;
  }

  // The items in an order where each follows what it depends on: the earliest ready item by
  // (start, priority, creation) first. Ids are the positions.
  static std::vector<Node> ordered(std::vector<Item> items) {
    const std::size_t n = items.size();
    std::vector<std::vector<std::size_t>> users(n);
    std::vector<std::size_t> waiting(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      for (const std::size_t d : items[i].deps) users[d].push_back(i);
      waiting[i] = items[i].deps.size();
    }
    using Key = std::tuple<std::int64_t, int, std::size_t>;
    std::priority_queue<Key, std::vector<Key>, std::greater<>> ready;
    auto key = [&](std::size_t i) { return Key{items[i].node.start.ps(), items[i].priority, i}; };
    for (std::size_t i = 0; i < n; ++i) {
      if (waiting[i] == 0) ready.push(key(i));
    }
    std::vector<std::uint64_t> id(n, 0);
    std::vector<std::size_t> order;
    while (!ready.empty()) {
      const std::size_t i = std::get<2>(ready.top());
      ready.pop();
      id[i] = order.size();
      order.push_back(i);
      for (const std::size_t u : users[i]) {
        if (--waiting[u] == 0) ready.push(key(u));
      }
    }
    if (order.size() != n) throw Error::internal("chakra: the replay's dependencies form a cycle");
    std::vector<Node> nodes;
    nodes.reserve(n);
    for (const std::size_t i : order) {
      Node node = std::move(items[i].node);
      node.id = id[i];
      for (const std::size_t d : items[i].deps) node.data_deps.push_back(id[d]);
      nodes.push_back(std::move(node));
    }
    return nodes;
  }

  const RunRecord& r_;
  std::map<std::uint32_t, Seat> seats_;
  std::map<std::pair<std::int32_t, std::int32_t>, std::size_t> replica_of_;  // (stage, replica)
  std::map<std::uint32_t, std::vector<std::size_t>> rows_;     // device -> timeline rows
  std::map<std::uint32_t, std::vector<std::size_t>> buckets_;  // device -> its collectives
  // (device, kind, stage, microbatch) -> the network row
  std::map<std::tuple<std::uint32_t, int, std::int32_t, std::int32_t>, std::size_t> sends_;
  std::map<std::vector<std::uint32_t>, std::string> group_names_;
  std::map<std::string, std::vector<std::uint32_t>> groups_;
  std::vector<std::size_t> empty_;
};

}  // namespace

const char* to_string(NodeType type) noexcept {
  switch (type) {
    case NodeType::kInvalid:
      return "INVALID_NODE";
    case NodeType::kMetadata:
      return "METADATA_NODE";
    case NodeType::kMemoryLoad:
      return "MEM_LOAD_NODE";
    case NodeType::kMemoryStore:
      return "MEM_STORE_NODE";
    case NodeType::kCompute:
      return "COMP_NODE";
    case NodeType::kSend:
      return "COMM_SEND_NODE";
    case NodeType::kReceive:
      return "COMM_RECV_NODE";
    case NodeType::kCollective:
      return "COMM_COLL_NODE";
  }
  return "?";
}

const char* to_string(Collective type) noexcept {
  switch (type) {
    case Collective::kAllReduce:
      return "ALL_REDUCE";
    case Collective::kReduce:
      return "REDUCE";
    case Collective::kAllGather:
      return "ALL_GATHER";
    case Collective::kGather:
      return "GATHER";
    case Collective::kScatter:
      return "SCATTER";
    case Collective::kBroadcast:
      return "BROADCAST";
    case Collective::kAllToAll:
      return "ALL_TO_ALL";
    case Collective::kReduceScatter:
      return "REDUCE_SCATTER";
    case Collective::kReduceScatterBlock:
      return "REDUCE_SCATTER_BLOCK";
    case Collective::kBarrier:
      return "BARRIER";
  }
  return "?";
}

Trace from_run(const RunRecord& record) { return Converter(record).run(); }

}  // namespace nest::chakra
