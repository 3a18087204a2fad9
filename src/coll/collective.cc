#include "nest/coll/collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "nest/core/error.h"

namespace nest::coll {
namespace {

constexpr std::array kOperations = {
    Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather, Operation::kAllToAll,
    Operation::kBroadcast, Operation::kSend,          Operation::kReduce,    Operation::kGather,
    Operation::kScatter,   Operation::kSendRecv,
};
constexpr std::array kAlgorithms = {
    Algorithm::kRing,     Algorithm::kTree,         Algorithm::kHalvingDoubling, Algorithm::kDirect,
    Algorithm::kPairwise, Algorithm::kHierarchical, Algorithm::kTorus,           Algorithm::kNvls,
};

constexpr std::array kAllReduceAlgorithms = {
    Algorithm::kRing,   Algorithm::kTree,         Algorithm::kHalvingDoubling,
    Algorithm::kDirect, Algorithm::kHierarchical, Algorithm::kTorus,
    Algorithm::kNvls,
};
constexpr std::array kScatterGatherAlgorithms = {
    Algorithm::kRing,         Algorithm::kHalvingDoubling, Algorithm::kDirect,
    Algorithm::kHierarchical, Algorithm::kTorus,
};
constexpr std::array kAllToAllAlgorithms = {Algorithm::kPairwise, Algorithm::kDirect};
constexpr std::array kBroadcastAlgorithms = {Algorithm::kRing, Algorithm::kTree,
                                             Algorithm::kDirect};
constexpr std::array kSendAlgorithms = {Algorithm::kDirect};
constexpr std::array kReduceAlgorithms = {Algorithm::kRing, Algorithm::kDirect};

// Lower-case, with '-' read as '_'.
std::string normalize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '-') c = '_';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

template <typename Range, typename NameFn>
std::string name_list(const Range& values, NameFn name) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += ", ";
    out += name(v);
  }
  return out;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

bool pipelines(Algorithm a) {
  return a == Algorithm::kRing || a == Algorithm::kTree || a == Algorithm::kHierarchical ||
         a == Algorithm::kTorus;
}

}  // namespace

std::string_view operation_name(Operation op) noexcept {
  switch (op) {
    case Operation::kAllReduce:
      return "allreduce";
    case Operation::kReduceScatter:
      return "reduce_scatter";
    case Operation::kAllGather:
      return "all_gather";
    case Operation::kAllToAll:
      return "all_to_all";
    case Operation::kBroadcast:
      return "broadcast";
    case Operation::kSend:
      return "send";
    case Operation::kReduce:
      return "reduce";
    case Operation::kGather:
      return "gather";
    case Operation::kScatter:
      return "scatter";
    case Operation::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

std::string_view algorithm_name(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHalvingDoubling:
      return "halving_doubling";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kTorus:
      return "torus";
    case Algorithm::kNvls:
      return "nvls";
  }
  return "?";
}

Operation parse_operation(std::string_view text) {
  const std::string s = normalize(text);
  for (Operation op : kOperations) {
    if (s == operation_name(op)) return op;
  }
  if (s == "reducescatter") return Operation::kReduceScatter;
  if (s == "allgather") return Operation::kAllGather;
  if (s == "alltoall") return Operation::kAllToAll;
  if (s == "all_reduce") return Operation::kAllReduce;
  if (s == "send_recv") return Operation::kSendRecv;
  throw Error::input("unknown operation", {.key = "--op",
                                           .value = std::string(text),
                                           .expected = name_list(kOperations, operation_name)});
}

Algorithm parse_algorithm(std::string_view text) {
  const std::string s = normalize(text);
  for (Algorithm a : kAlgorithms) {
    if (s == algorithm_name(a)) return a;
  }
  throw Error::input("unknown algorithm", {.key = "--algorithm",
                                           .value = std::string(text),
                                           .expected = name_list(kAlgorithms, algorithm_name)});
}

Algorithm default_algorithm(Operation op) noexcept {
  switch (op) {
    case Operation::kAllToAll:
      return Algorithm::kPairwise;
    case Operation::kSend:
    case Operation::kGather:
    case Operation::kScatter:
    case Operation::kSendRecv:
      return Algorithm::kDirect;
    default:
      return Algorithm::kRing;
  }
}

std::span<const Algorithm> algorithms_for(Operation op) noexcept {
  switch (op) {
    case Operation::kAllReduce:
      return kAllReduceAlgorithms;
    case Operation::kReduceScatter:
    case Operation::kAllGather:
      return kScatterGatherAlgorithms;
    case Operation::kAllToAll:
      return kAllToAllAlgorithms;
    case Operation::kBroadcast:
      return kBroadcastAlgorithms;
    case Operation::kSend:
    case Operation::kGather:
    case Operation::kScatter:
    case Operation::kSendRecv:
      return kSendAlgorithms;
    case Operation::kReduce:
      return kReduceAlgorithms;
  }
  return {};
}

double bus_bandwidth_factor(Operation op, int ranks) noexcept {
  const double n = ranks;
  switch (op) {
    case Operation::kAllReduce:
      return 2 * (n - 1) / n;
    case Operation::kReduceScatter:
    case Operation::kAllGather:
    case Operation::kAllToAll:
    case Operation::kGather:
    case Operation::kScatter:
      return (n - 1) / n;
    case Operation::kBroadcast:
    case Operation::kSend:
    case Operation::kReduce:
    case Operation::kSendRecv:
      return 1;
  }
  return 1;
}

std::string level_algorithms_text(std::span<const Algorithm> algorithms) {
  std::string out;
  for (Algorithm a : algorithms) out += (out.empty() ? "" : ",") + std::string(algorithm_name(a));
  return out;
}

std::string levels_text(std::span<const int> levels) {
  std::string out;
  for (int l : levels) out += (out.empty() ? "" : ",") + std::to_string(l);
  return out;
}

namespace {

// Per-level algorithms: hierarchical only, one per level, each valid at its level.
void validate_level_algorithms(const CollectiveSpec& spec, const std::string& prefix) {
  if (spec.level_algorithms.empty()) return;
  const std::string text = level_algorithms_text(spec.level_algorithms);
  const auto fail = [&](const std::string& message, const std::string& expected) {
    throw Error::input(message,
                       {.key = prefix + "level-algorithms", .value = text, .expected = expected});
  };
  if (spec.algorithm != Algorithm::kHierarchical) {
    fail("level algorithms apply only to hierarchical, not " +
             std::string(algorithm_name(spec.algorithm)),
         "--algorithm hierarchical");
  }
  if (spec.level_algorithms.size() != spec.levels.size()) {
    fail(fmt::format("{} level algorithms for {} levels", spec.level_algorithms.size(),
                     spec.levels.size()),
         fmt::format("one per level ({})", levels_text(spec.levels)));
  }
  if (spec.op != Operation::kAllReduce && spec.op != Operation::kReduceScatter &&
      spec.op != Operation::kAllGather) {
    fail("level algorithms apply to allreduce, reduce_scatter and all_gather",
         "no level algorithms for " + std::string(operation_name(spec.op)));
  }
  for (std::size_t l = 0; l < spec.levels.size(); ++l) {
    const Algorithm a = spec.level_algorithms[l];
    const int d = spec.levels[l];
    switch (a) {
      case Algorithm::kRing:
      case Algorithm::kDirect:
        break;
      case Algorithm::kHalvingDoubling:
        if (!is_power_of_two(d)) {
          fail(fmt::format("halving_doubling on level {} of {} ranks, not a power of two", l, d),
               "ring or direct on that level");
        }
        break;
      case Algorithm::kTree:
        if (spec.op != Operation::kAllReduce || l + 1 != spec.levels.size()) {
          fail(fmt::format("double_binary_tree on level {}", l),
               "double_binary_tree only on the last level of an allreduce");
        }
        break;
      default:
        fail(fmt::format("{} cannot run on a level", algorithm_name(a)),
             "ring, direct, halving_doubling or tree (double binary tree)");
    }
  }
}

}  // namespace

void validate(const CollectiveSpec& spec, int ranks, std::string_view key_prefix) {
  const std::string prefix(key_prefix);
  const auto valid = algorithms_for(spec.op);
  if (std::find(valid.begin(), valid.end(), spec.algorithm) == valid.end()) {
    throw Error::input("algorithm not valid for " + std::string(operation_name(spec.op)),
                       {.key = prefix + "algorithm",
                        .value = std::string(algorithm_name(spec.algorithm)),
                        .expected = "one of " + name_list(valid, algorithm_name)});
  }
  if (spec.size.count() <= 0) {
    throw Error::input("message size must be positive",
                       {.key = prefix + "size",
                        .value = std::to_string(spec.size.count()) + " B",
                        .expected = "a size > 0, e.g. 1GiB"});
  }
  if (spec.chunks < 1 || (spec.chunks > 1 && !pipelines(spec.algorithm))) {
    throw Error::input("bad chunk count for " + std::string(algorithm_name(spec.algorithm)),
                       {.key = prefix + "chunks",
                        .value = std::to_string(spec.chunks),
                        .expected = pipelines(spec.algorithm)
                                        ? "an integer >= 1"
                                        : "1 (only ring, tree, hierarchical and torus pipeline)"});
  }
  if (ranks < 1) {
    throw Error::input("empty group", {.key = prefix + "group", .expected = "at least 1 device"});
  }
  if (spec.channels < 1 || (spec.channels > 1 && (spec.algorithm != Algorithm::kRing ||
                                                  (spec.op != Operation::kAllReduce &&
                                                   spec.op != Operation::kReduceScatter &&
                                                   spec.op != Operation::kAllGather)))) {
    throw Error::input("bad channel count for " + std::string(operation_name(spec.op)) + " " +
                           std::string(algorithm_name(spec.algorithm)),
                       {.key = prefix + "channels",
                        .value = std::to_string(spec.channels),
                        .expected = spec.channels < 1 ? "an integer >= 1"
                                                      : "1 (only ring allreduce, reduce_scatter "
                                                        "and all_gather run several rings)"});
  }
  if (spec.ranks_per_node < 0 ||
      (spec.ranks_per_node > 0 &&
       (spec.algorithm != Algorithm::kRing || ranks < 1 || ranks % spec.ranks_per_node != 0))) {
    throw Error::internal("ranks_per_node " + std::to_string(spec.ranks_per_node) +
                          " does not fit " + std::to_string(spec.channels) + " channels over " +
                          std::to_string(ranks) + " ranks");
  }
  // Pieces of at least one byte. The smallest piece: size / chunks for a broadcast or a reduce
  // (the whole buffer goes down or up the chain or tree), size / (2 · chunks) for a tree
  // allreduce (each tree takes half), size / (channels · ranks · chunks) for the ring family (a
  // rank's segment in pieces).
  if (spec.chunks > 1) {
    const std::int64_t parts = spec.op == Operation::kBroadcast || spec.op == Operation::kReduce ? 1
                               : spec.algorithm == Algorithm::kTree                              ? 2
                                                                    : ranks;
    const std::int64_t most =
        std::max<std::int64_t>(1, spec.size.count() / parts / std::max(1, spec.channels));
    if (spec.chunks > most) {
      throw Error::input(
          "more pieces than bytes",
          {.key = prefix + "chunks",
           .value = std::to_string(spec.chunks),
           .expected = fmt::format(
               "at most {} for {} B {} (pieces of at least 1 B)", most, spec.size.count(),
               parts == 1   ? std::string(operation_name(spec.op))
               : parts == 2 ? std::string("in two trees")
               : spec.channels > 1
                   ? fmt::format("over {} ranks in {} channels", ranks, spec.channels)
                   : fmt::format("over {} ranks", ranks))});
    }
  }
  if (!spec.levels.empty() && spec.algorithm != Algorithm::kHierarchical &&
      spec.algorithm != Algorithm::kTorus) {
    throw Error::input("level sizes apply only to hierarchical and torus, not " +
                           std::string(algorithm_name(spec.algorithm)),
                       {.key = prefix + "levels",
                        .value = levels_text(spec.levels),
                        .expected = "no --levels, or --algorithm hierarchical or torus"});
  }
  if (spec.op == Operation::kSend && ranks != 2) {
    throw Error::input("send needs a group of exactly two devices {source, destination}",
                       {.key = prefix + "group",
                        .value = std::to_string(ranks) + " devices",
                        .expected = "2 devices"});
  }
  if (spec.algorithm == Algorithm::kHalvingDoubling && spec.op != Operation::kAllReduce &&
      !is_power_of_two(ranks)) {
    throw Error::input(
        "halving_doubling " + std::string(operation_name(spec.op)) + " needs a power-of-two group",
        {.key = prefix + "group",
         .value = std::to_string(ranks) + " devices",
         .expected = "1, 2, 4, 8, ... devices (allreduce also takes other sizes)"});
  }
  if (spec.algorithm == Algorithm::kHierarchical || spec.algorithm == Algorithm::kTorus) {
    long long product = 1;
    std::string text;
    for (int level : spec.levels) {
      if (!text.empty()) text += ",";
      text += std::to_string(level);
      if (level < 1) {
        throw Error::input("level sizes must be >= 1",
                           {.key = prefix + "levels", .value = text, .expected = "sizes >= 1"});
      }
      product *= level;
    }
    if (!spec.levels.empty() && product != ranks) {
      throw Error::input("level sizes must multiply to the group size",
                         {.key = prefix + "levels",
                          .value = text,
                          .expected = "a product of " + std::to_string(ranks)});
    }
  }
  validate_level_algorithms(spec, prefix);
}

}  // namespace nest::coll
