#include "nest/coll/schedule.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "nest/core/error.h"

namespace nest::coll {
namespace {

using Rank = std::uint32_t;

// Collects transfers while an algorithm is lowered.
class Builder {
 public:
  explicit Builder(std::uint64_t expected) { transfers_.reserve(expected); }

  void emit(Rank src, Rank dst, std::uint64_t step, int channel, Bytes bytes) {
    end_ = std::max(end_, step + 1);
    transfers_.push_back(Transfer{src, dst, static_cast<std::uint32_t>(step),
                                  static_cast<std::uint16_t>(channel), bytes});
  }

  // `bytes` sent as `chunks` pieces, piece j at step first_step + j.
  void emit_pieces(Rank src, Rank dst, std::uint64_t first_step, int chunks, int channel,
                   Bytes bytes) {
    for (int j = 0; j < chunks; ++j)
      emit(src, dst, first_step + j, channel, split_bytes(bytes, chunks, j));
  }

  std::vector<Transfer> take() { return std::move(transfers_); }

  // 1 + the largest step emitted so far (0 before any).
  [[nodiscard]] std::uint64_t end() const noexcept { return end_; }

 private:
  std::vector<Transfer> transfers_;
  std::uint64_t end_ = 0;
};

std::uint64_t positive_mod(std::int64_t a, std::int64_t n) {
  return static_cast<std::uint64_t>(((a % n) + n) % n);
}

// Mixed-radix coordinates of a rank: levels[0] varies fastest.
struct Hierarchy {
  std::vector<int> levels;
  std::vector<std::int64_t> stride;  // stride[l] = product of levels below l

  explicit Hierarchy(std::vector<int> sizes) : levels(std::move(sizes)) {
    std::int64_t s = 1;
    for (int d : levels) {
      stride.push_back(s);
      s *= d;
    }
  }
  [[nodiscard]] int coordinate(std::int64_t rank, std::size_t level) const {
    return static_cast<int>((rank / stride[level]) % levels[level]);
  }
};

// The segment a rank holds when level `level` starts: the buffer split by every level below.
Bytes segment_bytes(Bytes size, const Hierarchy& h, std::int64_t rank, std::size_t level) {
  Bytes s = size;
  for (std::size_t l = 0; l < level; ++l) s = split_bytes(s, h.levels[l], h.coordinate(rank, l));
  return s;
}

enum class RingPhase { kReduceScatter, kAllGather };

// A flat ring's channel as one phase for the event-free bound (`Program::bounding_ring`), over
// `steps` steps (its reduce-scatter's and all-gather's):
// position p of `order` (rank order[p]) sends to position p + 1, and the channel's `share` is
// split into n chunks (share / n + 1 bytes for the first share % n, share / n after), each cut
// into `chunks` pieces. In the reduce-scatter's n - 1 rounds position p sends chunk p - k - 1 in
// round k (mod n): every chunk but its own, p; in the all-gather's, chunk p - k: every chunk but
// p + 1. A chunk's pieces sum to the chunk, so p sends share less that chunk per phase; the
// least piece is the smaller chunks' last piece. Empty `next` when a piece would be empty.
// Unsplit chunks (`chunks` = 1) travel: in step s position p sends chunk p - s - 1 (mod n) when
// the channel starts with the reduce-scatter (its all-gather's round k is step n - 1 + k, and
// p - k = p - s + n - 1), else p - s, which is what position p - 1 sent in step s - 1.
BoundingRingPhase bounding_channel(std::uint16_t channel, std::uint32_t steps, Bytes share,
                                   int chunks, bool scatter, bool gather,
                                   std::span<const std::uint32_t> order) {
  BoundingRingPhase out;
  const auto n = static_cast<std::int64_t>(order.size());
  if (n < 2) return out;
  out.least = split_bytes(Bytes(share.count() / n), chunks, chunks - 1);
  if (out.least.count() <= 0) return out;
  out.channel = channel;
  out.steps = steps;
  out.next.resize(order.size());
  out.sent.resize(order.size());
  const auto chunk = [&](std::int64_t i) { return split_bytes(share, n, i % n).count(); };
  for (std::int64_t p = 0; p < n; ++p) {
    const auto rank = order[static_cast<std::size_t>(p)];
    out.next[rank] = order[static_cast<std::size_t>((p + 1) % n)];
    out.sent[rank] =
        (scatter ? share.count() - chunk(p) : 0) + (gather ? share.count() - chunk(p + 1) : 0);
  }
  if (chunks == 1) {
    out.carried.resize(order.size());
    const std::int64_t last = static_cast<std::int64_t>(steps) - 1 + (scatter ? 1 : 0);
    for (std::int64_t p = 0; p < n; ++p) {
      out.carried[order[static_cast<std::size_t>(p)]] =
          chunk(static_cast<std::int64_t>(positive_mod(p - last, n)));
    }
  }
  return out;
}

// One ring phase at `level` of the hierarchy, every ring of that level at once. Member x of a
// ring (coordinate x at the level) holds chunk x of the ring's segment at the end of a
// reduce-scatter and at the start of an all-gather. Returns the number of steps used.
std::uint64_t ring_phase(Builder& b, const Hierarchy& h, std::size_t level, RingPhase phase,
                         Bytes size, int chunks, std::uint64_t base, std::int64_t ranks) {
  const std::int64_t d = h.levels[level];
  if (d == 1) return 0;
  const std::int64_t stride = h.stride[level];
  for (std::int64_t rank = 0; rank < ranks; ++rank) {
    const std::int64_t x = h.coordinate(rank, level);
    const std::int64_t next = rank + (x + 1 == d ? -(d - 1) * stride : stride);
    const Bytes segment = segment_bytes(size, h, rank, level);
    for (std::int64_t k = 0; k + 1 < d; ++k) {
      const auto chunk = static_cast<std::int64_t>(
          positive_mod(phase == RingPhase::kReduceScatter ? x - k - 1 : x - k, d));
      b.emit_pieces(static_cast<Rank>(rank), static_cast<Rank>(next),
                    base + static_cast<std::uint64_t>(k * chunks), chunks, 0,
                    split_bytes(segment, d, chunk));
    }
  }
  return static_cast<std::uint64_t>((d - 1) * chunks);
}

void lower_leveled(Builder& b, const CollectiveSpec& spec, int n);

void lower_hierarchical(Builder& b, const CollectiveSpec& spec, int n) {
  if (!spec.level_algorithms.empty()) {
    lower_leveled(b, spec, n);
    return;
  }
  const Hierarchy h(spec.levels.empty() ? std::vector<int>{n} : spec.levels);
  const std::size_t m = h.levels.size();
  std::uint64_t step = 0;
  const bool scatter = spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter;
  const bool gather = spec.op == Operation::kAllReduce || spec.op == Operation::kAllGather;
  if (scatter) {
    for (std::size_t l = 0; l < m; ++l) {
      step += ring_phase(b, h, l, RingPhase::kReduceScatter, spec.size, spec.chunks, step, n);
    }
  }
  if (gather) {
    for (std::size_t l = m; l-- > 0;) {
      step += ring_phase(b, h, l, RingPhase::kAllGather, spec.size, spec.chunks, step, n);
    }
  }
}

// Bytes of chunks [start, start + len) of `size` split into `parts`.
Bytes block_bytes(Bytes size, std::int64_t parts, std::int64_t start, std::int64_t len) {
  const std::int64_t rem = size.count() % parts;
  const std::int64_t extra = std::max<std::int64_t>(0, std::min(start + len, rem) - start);
  return Bytes(len * (size.count() / parts) + extra);
}

void lower_halving_doubling(Builder& b, const CollectiveSpec& spec, int n) {
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - p;  // ranks 2i (i < extra) fold into 2i+1
  const int log_p = std::countr_zero(static_cast<unsigned>(p));
  auto rank_of = [extra](int q) { return static_cast<Rank>(q < extra ? 2 * q + 1 : q + extra); };
  std::uint64_t step = 0;
  if (extra > 0) {
    for (int i = 0; i < extra; ++i) b.emit(2 * i, 2 * i + 1, step, 0, spec.size);
    ++step;
  }
  const bool scatter = spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter;
  const bool gather = spec.op == Operation::kAllReduce || spec.op == Operation::kAllGather;
  if (scatter) {
    for (int k = 0; k < log_p; ++k, ++step) {
      const int d = p >> (k + 1);
      for (int q = 0; q < p; ++q) {
        const int partner = q ^ d;
        b.emit(rank_of(q), rank_of(partner), step, 0,
               block_bytes(spec.size, p, partner & ~(d - 1), d));
      }
    }
  }
  if (gather) {
    for (int k = 0; k < log_p; ++k, ++step) {
      const int d = 1 << k;
      for (int q = 0; q < p; ++q) {
        b.emit(rank_of(q), rank_of(q ^ d), step, 0, block_bytes(spec.size, p, q & ~(d - 1), d));
      }
    }
  }
  if (extra > 0) {
    for (int i = 0; i < extra; ++i) b.emit(2 * i + 1, 2 * i, step, 0, spec.size);
  }
}

void lower_direct(Builder& b, const CollectiveSpec& spec, int n) {
  const Bytes s = spec.size;
  switch (spec.op) {
    case Operation::kSend:
      b.emit(0, 1, 0, 0, s);
      return;
    case Operation::kReduce:
      for (int i = 1; i < n; ++i) b.emit(i, 0, 0, 0, s);
      return;
    case Operation::kGather:
      for (int i = 1; i < n; ++i) b.emit(i, 0, 0, 0, split_bytes(s, n, i));
      return;
    case Operation::kScatter:
      for (int j = 1; j < n; ++j) b.emit(0, j, 0, 0, split_bytes(s, n, j));
      return;
    case Operation::kSendRecv:
      for (int i = 0; i < n; ++i) b.emit(i, (i + 1) % n, 0, 0, s);
      return;
    case Operation::kBroadcast:
      for (int j = 1; j < n; ++j) b.emit(0, j, 0, 0, s);
      return;
    case Operation::kAllToAll:
    case Operation::kReduceScatter:
      // Rank i sends chunk j (reduce-scatter: its contribution to j's chunk) to rank j.
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i != j) b.emit(i, j, 0, 0, split_bytes(s, n, j));
        }
      }
      return;
    case Operation::kAllGather:
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i != j) b.emit(i, j, 0, 0, split_bytes(s, n, i));
        }
      }
      return;
    case Operation::kAllReduce:
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i == j) continue;
          b.emit(i, j, 0, 0, split_bytes(s, n, j));
          b.emit(i, j, 1, 0, split_bytes(s, n, i));
        }
      }
      return;
  }
}

void lower_pairwise(Builder& b, const CollectiveSpec& spec, int n) {
  for (int k = 0; k + 1 < n; ++k) {
    for (int i = 0; i < n; ++i) {
      const int j = (i + k + 1) % n;
      b.emit(i, j, static_cast<std::uint64_t>(k), 0, split_bytes(spec.size, n, j));
    }
  }
}

// A rooted tree given by its parent array, with heights and depths.
struct Tree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
  std::vector<int> height;
  std::vector<int> depth;
  int root = 0;

  explicit Tree(std::vector<int> parents) : parent(std::move(parents)) {
    const auto n = parent.size();
    children.resize(n);
    height.assign(n, 0);
    depth.assign(n, 0);
    for (std::size_t v = 0; v < n; ++v) {
      if (parent[v] < 0) {
        root = static_cast<int>(v);
      } else {
        children[static_cast<std::size_t>(parent[v])].push_back(static_cast<int>(v));
      }
    }
    set_depths(root, 0);
  }

 private:
  int set_depths(int v, int d) {
    depth[v] = d;
    int h = 0;
    for (int c : children[v]) h = std::max(h, 1 + set_depths(c, d + 1));
    height[v] = h;
    return h;
  }
};

// Pipelined reduce up `tree` (when `reduce`) and broadcast down, `size` in `chunks` pieces.
void tree_phases(Builder& b, const Tree& tree, bool reduce, Bytes size, int chunks, int channel) {
  const std::uint64_t down_base = reduce ? static_cast<std::uint64_t>(tree.height[tree.root]) : 0;
  for (std::size_t v = 0; v < tree.parent.size(); ++v) {
    const auto rank = static_cast<Rank>(v);
    if (reduce && tree.parent[v] >= 0) {
      b.emit_pieces(rank, static_cast<Rank>(tree.parent[v]),
                    static_cast<std::uint64_t>(tree.height[v]), chunks, channel, size);
    }
    for (int c : tree.children[v]) {
      b.emit_pieces(rank, static_cast<Rank>(c),
                    down_base + static_cast<std::uint64_t>(tree.depth[v]), chunks, channel, size);
    }
  }
}

void lower_tree(Builder& b, const CollectiveSpec& spec, int n) {
  const auto trees = double_binary_tree(n);
  if (spec.op == Operation::kBroadcast) {
    tree_phases(b, Tree(trees[0]), false, spec.size, spec.chunks, 0);
    return;
  }
  for (int t = 0; t < 2; ++t) {
    tree_phases(b, Tree(trees[static_cast<std::size_t>(t)]), true, split_bytes(spec.size, 2, t),
                spec.chunks, t);
  }
}

// The members of rank's group at `level`: member(y) has coordinate y there, rank's elsewhere.
struct LevelGroup {
  std::int64_t rank;
  std::int64_t x;  // rank's coordinate at the level
  std::int64_t d;
  std::int64_t stride;
  [[nodiscard]] Rank member(std::int64_t y) const {
    return static_cast<Rank>(rank + (y - x) * stride);
  }
};

LevelGroup level_group(const Hierarchy& h, std::size_t level, std::int64_t rank) {
  return {rank, h.coordinate(rank, level), h.levels[level], h.stride[level]};
}

// Direct at a level, one step: reduce-scatter sends member y chunk y of the segment, all-gather
// sends every member its own chunk.
std::uint64_t direct_phase(Builder& b, const Hierarchy& h, std::size_t level, RingPhase phase,
                           Bytes size, std::uint64_t base, std::int64_t ranks) {
  if (h.levels[level] == 1) return 0;
  for (std::int64_t rank = 0; rank < ranks; ++rank) {
    const LevelGroup g = level_group(h, level, rank);
    const Bytes segment = segment_bytes(size, h, rank, level);
    for (std::int64_t y = 0; y < g.d; ++y) {
      if (y == g.x) continue;
      b.emit(static_cast<Rank>(rank), g.member(y), base, 0,
             split_bytes(segment, g.d, phase == RingPhase::kReduceScatter ? y : g.x));
    }
  }
  return 1;
}

// Recursive halving (reduce-scatter) or doubling (all-gather) at a level of 2^k members: at
// the end of a reduce-scatter member x holds chunk x, as after a ring.
std::uint64_t halving_doubling_phase(Builder& b, const Hierarchy& h, std::size_t level,
                                     RingPhase phase, Bytes size, std::uint64_t base,
                                     std::int64_t ranks) {
  const std::int64_t d = h.levels[level];
  const int log_d = std::countr_zero(static_cast<std::uint64_t>(d));
  for (std::int64_t rank = 0; rank < ranks; ++rank) {
    const LevelGroup g = level_group(h, level, rank);
    const Bytes segment = segment_bytes(size, h, rank, level);
    for (int k = 0; k < log_d; ++k) {
      if (phase == RingPhase::kReduceScatter) {
        const std::int64_t half = d >> (k + 1);
        const std::int64_t partner = g.x ^ half;
        b.emit(static_cast<Rank>(rank), g.member(partner), base + static_cast<std::uint64_t>(k), 0,
               block_bytes(segment, d, partner & ~(half - 1), half));
      } else {
        const std::int64_t span = std::int64_t{1} << k;
        b.emit(static_cast<Rank>(rank), g.member(g.x ^ span), base + static_cast<std::uint64_t>(k),
               0, block_bytes(segment, d, g.x & ~(span - 1), span));
      }
    }
  }
  return static_cast<std::uint64_t>(log_d);
}

// A double binary tree allreduce of each group's segment at `level` (NCCL's trees over the
// members' coordinates), both trees on channel 0 so that they wait for the levels below.
std::uint64_t tree_level_allreduce(Builder& b, const Hierarchy& h, std::size_t level, Bytes size,
                                   int chunks, std::uint64_t base, std::int64_t ranks) {
  const std::int64_t d = h.levels[level];
  if (d == 1) return 0;
  const auto trees = double_binary_tree(static_cast<int>(d));
  const Tree shapes[2] = {Tree(trees[0]), Tree(trees[1])};
  for (std::int64_t rank = 0; rank < ranks; ++rank) {
    const LevelGroup g = level_group(h, level, rank);
    const Bytes segment = segment_bytes(size, h, rank, level);
    for (int t = 0; t < 2; ++t) {
      const Tree& tree = shapes[t];
      const auto v = static_cast<std::size_t>(g.x);
      const Bytes half = split_bytes(segment, 2, t);
      const std::uint64_t down = base + static_cast<std::uint64_t>(tree.height[tree.root]);
      if (tree.parent[v] >= 0) {
        b.emit_pieces(static_cast<Rank>(rank), g.member(tree.parent[v]),
                      base + static_cast<std::uint64_t>(tree.height[v]), chunks, 0, half);
      }
      for (int c : tree.children[v]) {
        b.emit_pieces(static_cast<Rank>(rank), g.member(c),
                      down + static_cast<std::uint64_t>(tree.depth[v]), chunks, 0, half);
      }
    }
  }
  return b.end() - base;
}

// Hierarchical with an algorithm per level (CollectiveSpec::level_algorithms): reduce-scatter
// up the levels, all-gather down, a tree allreduce replacing both on the last level.
void lower_leveled(Builder& b, const CollectiveSpec& spec, int n) {
  const Hierarchy h(spec.levels);
  const std::size_t m = h.levels.size();
  const bool scatter = spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter;
  const bool gather = spec.op == Operation::kAllReduce || spec.op == Operation::kAllGather;
  std::uint64_t step = 0;
  const auto phase = [&](std::size_t l, RingPhase p) {
    switch (spec.level_algorithms[l]) {
      case Algorithm::kDirect:
        return direct_phase(b, h, l, p, spec.size, step, n);
      case Algorithm::kHalvingDoubling:
        return halving_doubling_phase(b, h, l, p, spec.size, step, n);
      default:
        return ring_phase(b, h, l, p, spec.size, spec.chunks, step, n);
    }
  };
  const bool tree_top = spec.level_algorithms.back() == Algorithm::kTree;
  const std::size_t top = tree_top ? m - 1 : m;  // levels below `top` scatter and gather
  if (scatter) {
    for (std::size_t l = 0; l < top; ++l) step += phase(l, RingPhase::kReduceScatter);
  }
  if (tree_top) step += tree_level_allreduce(b, h, m - 1, spec.size, spec.chunks, step, n);
  if (gather) {
    for (std::size_t l = top; l-- > 0;) step += phase(l, RingPhase::kAllGather);
  }
}

void lower_ring_broadcast(Builder& b, const CollectiveSpec& spec, int n) {
  for (int r = 0; r + 1 < n; ++r) {
    b.emit_pieces(r, r + 1, static_cast<std::uint64_t>(r), spec.chunks, 0, spec.size);
  }
}

// The chain 1 -> 2 -> ... -> n-1 -> 0: each rank adds its buffer to what it receives and passes
// it on, piece by piece, so the reduction arrives at the root (rank 0) last.
void lower_ring_reduce(Builder& b, const CollectiveSpec& spec, int n) {
  for (int r = 1; r < n; ++r) {
    b.emit_pieces(r, (r + 1) % n, static_cast<std::uint64_t>(r - 1), spec.chunks, 0, spec.size);
  }
}

// NVLink SHARP allreduce by its port loads: rank i's switch port carries S + S/n each way.
void lower_nvls(Builder& b, const CollectiveSpec& spec, int n) {
  for (int i = 0; i < n; ++i) {
    b.emit(i, (i + 1) % n, 0, 0, spec.size + split_bytes(spec.size, n, i));
  }
}

// Transfers of lower_leveled.
std::uint64_t count_leveled(const CollectiveSpec& spec, int ranks) {
  const auto n = static_cast<std::uint64_t>(ranks);
  const auto c = static_cast<std::uint64_t>(spec.chunks);
  const std::uint64_t phases = spec.op == Operation::kAllReduce ? 2 : 1;
  std::uint64_t sum = 0;
  for (std::size_t l = 0; l < spec.levels.size(); ++l) {
    const auto d = static_cast<std::uint64_t>(spec.levels[l]);
    if (d == 1) continue;
    switch (spec.level_algorithms[l]) {
      case Algorithm::kDirect:
        sum += phases * n * (d - 1);
        break;
      case Algorithm::kHalvingDoubling:
        sum += phases * n * static_cast<std::uint64_t>(std::countr_zero(d));
        break;
      case Algorithm::kTree:
        sum += n / d * 4 * (d - 1) * c;
        break;
      default:
        sum += phases * n * (d - 1) * c;
    }
  }
  return sum;
}

// Exact transfer count of a lowering, to refuse schedules that do not fit before building.
std::uint64_t count_transfers_of(const CollectiveSpec& spec, int ranks) {
  const auto n = static_cast<std::uint64_t>(ranks);
  const auto c = static_cast<std::uint64_t>(spec.chunks);
  const std::uint64_t phases = spec.op == Operation::kAllReduce ? 2 : 1;
  switch (spec.algorithm) {
    case Algorithm::kHierarchical:
      if (!spec.level_algorithms.empty()) return count_leveled(spec, ranks);
      [[fallthrough]];
    case Algorithm::kRing:
    case Algorithm::kTorus: {
      if (spec.op == Operation::kBroadcast || spec.op == Operation::kReduce) return (n - 1) * c;
      if (spec.channels > 1 || spec.ranks_per_node > 0) {
        return phases * (n - 1) * n * c * static_cast<std::uint64_t>(spec.channels);
      }
      std::uint64_t sum = 0;
      for (int d : spec.levels.empty() ? std::vector<int>{ranks} : spec.levels) {
        sum += (static_cast<std::uint64_t>(d) - 1) * n * c;
      }
      return phases * sum;
    }
    case Algorithm::kTree:
      return (spec.op == Operation::kBroadcast ? 1 : 4) * (n - 1) * c;
    case Algorithm::kHalvingDoubling: {
      const std::uint64_t p = std::bit_floor(n);
      return phases * p * static_cast<std::uint64_t>(std::countr_zero(p)) + 2 * (n - p);
    }
    case Algorithm::kDirect:
      switch (spec.op) {
        case Operation::kSend:
          return 1;
        case Operation::kBroadcast:
        case Operation::kReduce:
        case Operation::kGather:
        case Operation::kScatter:
          return n - 1;
        case Operation::kSendRecv:
          return n;
        default:
          return phases * n * (n - 1);
      }
    case Algorithm::kPairwise:
      return n * (n - 1);
    case Algorithm::kNvls:
      return n;
  }
  return 0;
}

// The ring family computed from ids: gate (rank r, step s) = transfer s·n + r, one send per
// rank per step, waiting for its own and its predecessor's sends of step s-1.
class RingProgram final : public Program {
 public:
  RingProgram(const CollectiveSpec& spec, int ranks)
      : n_(ranks),
        size_(spec.size),
        chunks_(spec.chunks),
        own_(!spec.forward_on_arrival),
        h_(spec.levels.empty() ? std::vector<int>{ranks} : spec.levels) {
    const bool scatter = spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter;
    const bool gather = spec.op == Operation::kAllReduce || spec.op == Operation::kAllGather;
    const std::size_t m = h_.levels.size();
    std::uint64_t step = 0;
    auto add = [&](std::size_t level, RingPhase phase) {
      const auto steps =
          static_cast<std::uint64_t>(h_.levels[level] - 1) * static_cast<std::uint64_t>(chunks_);
      if (steps == 0) return;
      phases_.push_back({level, phase, step});
      phase_of_step_.insert(phase_of_step_.end(), steps,
                            static_cast<std::uint16_t>(phases_.size() - 1));
      step += steps;
    };
    if (scatter) {
      for (std::size_t l = 0; l < m; ++l) add(l, RingPhase::kReduceScatter);
    }
    if (gather) {
      for (std::size_t l = m; l-- > 0;) add(l, RingPhase::kAllGather);
    }
    steps_ = static_cast<std::uint32_t>(step);
  }

  int ranks() const noexcept override { return n_; }
  std::uint64_t transfer_count() const noexcept override {
    return static_cast<std::uint64_t>(steps_) * static_cast<std::uint64_t>(n_);
  }
  std::uint32_t steps() const noexcept override { return steps_; }
  std::uint64_t dense_gates() const noexcept override { return 0; }
  void initial_gates(std::vector<GateId>& out) const override {
    if (steps_ == 0) return;
    for (int r = 0; r < n_; ++r) out.push_back(static_cast<GateId>(r));
  }
  std::uint32_t waits(GateId gate) const override {
    return gate < rank_count() ? 0 : (own_ ? 2 : 1);
  }
  void sends(GateId gate, std::vector<TransferId>& out) const override { out.push_back(gate); }
  bool waits_for_own_sends() const noexcept override { return own_; }

  Transfer transfer(TransferId id) const override {
    const auto step = static_cast<std::uint32_t>(id / rank_count());
    const auto rank = static_cast<std::int64_t>(id % rank_count());
    const Phase& p = phases_[phase_of_step_[step]];
    const std::int64_t d = h_.levels[p.level];
    const std::int64_t x = h_.coordinate(rank, p.level);
    const auto into = static_cast<std::int64_t>(step - p.base);
    const std::int64_t k = into / chunks_;
    const std::int64_t j = into % chunks_;
    const auto chunk = static_cast<std::int64_t>(
        positive_mod(p.phase == RingPhase::kReduceScatter ? x - k - 1 : x - k, d));
    const Bytes piece =
        split_bytes(split_bytes(segment_bytes(size_, h_, rank, p.level), d, chunk), chunks_, j);
    return Transfer{static_cast<std::uint32_t>(rank),
                    static_cast<std::uint32_t>(next_rank(rank, p.level)), step, 0, piece};
  }

  // Within a step every rank's transfer follows from the step's phase, ring size d, round k and
  // piece j; along consecutive ranks the coordinate x at the phase's level advances by one
  // every stride ranks, and so does the chunk, so the loop needs no division per rank. The
  // segment a rank holds is the whole buffer at level 0 and is computed per rank above it.
  void transfers(TransferId first, std::span<Transfer> out) const override {
    std::size_t done = 0;
    while (done < out.size()) {
      const TransferId id = first + done;
      const auto step = static_cast<std::uint32_t>(id / rank_count());
      const auto rank0 = static_cast<std::int64_t>(id % rank_count());
      const std::size_t count =
          std::min<std::size_t>(out.size() - done, static_cast<std::size_t>(n_ - rank0));
      const Phase& p = phases_[phase_of_step_[step]];
      const std::int64_t d = h_.levels[p.level];
      const std::int64_t stride = h_.stride[p.level];
      const auto into = static_cast<std::int64_t>(step - p.base);
      const std::int64_t k = into / chunks_;
      const std::int64_t j = into % chunks_;
      const std::int64_t shift = p.phase == RingPhase::kReduceScatter ? k + 1 : k;
      std::int64_t x = h_.coordinate(rank0, p.level);
      std::int64_t within = rank0 % stride;  // position in the current run of equal x
      // At level 0 the chunk sizes are the buffer split d ways: (size / d) + 1 for the first
      // size % d chunks, size / d for the others, then split into the pieces.
      const std::int64_t larger = size_.count() % d;
      const Bytes large = split_bytes(Bytes(size_.count() / d + 1), chunks_, j);
      const Bytes small = split_bytes(Bytes(size_.count() / d), chunks_, j);
      for (std::size_t i = 0; i < count; ++i) {
        const std::int64_t rank = rank0 + static_cast<std::int64_t>(i);
        const std::int64_t chunk = x >= shift ? x - shift : x - shift + d;
        const Bytes piece =
            p.level == 0
                ? (chunk < larger ? large : small)
                : split_bytes(split_bytes(segment_bytes(size_, h_, rank, p.level), d, chunk),
                              chunks_, j);
        const std::int64_t next = rank + (x + 1 == d ? -(d - 1) * stride : stride);
        out[done + i] = Transfer{static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(next),
                                 step, 0, piece};
        if (++within == stride) {
          within = 0;
          if (++x == d) x = 0;
        }
      }
      done += count;
    }
  }

  std::array<GateId, 2> successors(TransferId id) const override {
    const std::uint64_t step = id / rank_count();
    if (step + 1 >= steps_) return {kNoGateId, kNoGateId};
    const auto rank = static_cast<std::int64_t>(id % rank_count());
    const std::uint64_t next_step = (step + 1) * rank_count();
    const auto dst =
        static_cast<std::uint64_t>(next_rank(rank, phases_[phase_of_step_[step]].level));
    return {own_ ? next_step + static_cast<std::uint64_t>(rank) : kNoGateId, next_step + dst};
  }

  void for_each_transfer(const std::function<void(const Transfer&)>& visit) const override {
    for (std::uint64_t id = 0; id < transfer_count(); ++id) visit(transfer(id));
  }

  // Uniform when the buffer splits evenly all the way down: with size divisible by
  // n · chunks, the segment at level l is size / (levels below l), each of its d chunks a d-th
  // of it and each piece a chunks-th of that, for every rank, round and piece.
  std::vector<UniformRingPhase> uniform_ring() const override {
    std::vector<UniformRingPhase> out;
    const std::int64_t all = static_cast<std::int64_t>(n_) * chunks_;
    if (steps_ == 0 || size_.count() <= 0 || size_.count() % all != 0) return out;
    for (std::size_t q = 0; q < phases_.size(); ++q) {
      const Phase& p = phases_[q];
      std::int64_t below = 1;
      for (std::size_t l = 0; l <= p.level; ++l) below *= h_.levels[l];
      UniformRingPhase u;
      const std::uint64_t end = q + 1 < phases_.size() ? phases_[q + 1].base : steps_;
      u.steps = static_cast<std::uint32_t>(end - p.base);
      u.piece = Bytes(size_.count() / below / chunks_);
      u.next.resize(static_cast<std::size_t>(n_));
      for (std::int64_t r = 0; r < n_; ++r) {
        u.next[static_cast<std::size_t>(r)] = static_cast<std::uint32_t>(next_rank(r, p.level));
      }
      out.push_back(std::move(u));
    }
    return out;
  }

  // A flat ring (one level) is one channel whose pieces follow `bounding_channel`'s split:
  // segment_bytes at level 0 is the whole buffer, so chunk x is split_bytes(size, n, x).
  std::vector<BoundingRingPhase> bounding_ring() const override {
    if (steps_ == 0 || h_.levels.size() != 1 || h_.levels[0] != n_ || size_.count() <= 0) return {};
    const bool scatter = std::any_of(phases_.begin(), phases_.end(), [](const Phase& p) {
      return p.phase == RingPhase::kReduceScatter;
    });
    const bool gather = std::any_of(phases_.begin(), phases_.end(), [](const Phase& p) {
      return p.phase == RingPhase::kAllGather;
    });
    std::vector<std::uint32_t> order(static_cast<std::size_t>(n_));
    for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<std::uint32_t>(r);
    BoundingRingPhase c = bounding_channel(0, steps_, size_, chunks_, scatter, gather, order);
    if (c.next.empty()) return {};
    return {std::move(c)};
  }

  // Each phase's first step sends every rank to its successor at the phase's level, and its
  // other steps repeat those pairs, so first use is phase by phase, rank by rank (a level's
  // gather phase, and a level whose successor equals an earlier one's, adds none).
  std::optional<std::vector<RankPair>> distinct_pairs() const override {
    std::vector<RankPair> out;
    std::vector<std::size_t> levels;
    std::unordered_set<std::uint64_t> seen;
    for (const Phase& p : phases_) {
      if (std::find(levels.begin(), levels.end(), p.level) != levels.end()) continue;
      levels.push_back(p.level);
      for (std::int64_t r = 0; r < n_; ++r) {
        const auto dst = static_cast<std::uint64_t>(next_rank(r, p.level));
        if (seen.insert(static_cast<std::uint64_t>(r) << 32 | dst).second) {
          out.push_back({static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(dst), 0});
        }
      }
    }
    return out;
  }

 private:
  struct Phase {
    std::size_t level;
    RingPhase phase;
    std::uint64_t base;
  };

  std::uint64_t rank_count() const noexcept { return static_cast<std::uint64_t>(n_); }
  std::int64_t next_rank(std::int64_t rank, std::size_t level) const {
    const std::int64_t d = h_.levels[level];
    const std::int64_t stride = h_.stride[level];
    return rank + (h_.coordinate(rank, level) + 1 == d ? -(d - 1) * stride : stride);
  }

  int n_;
  Bytes size_;
  int chunks_;
  bool own_;  // a rank's step waits for its own previous send too
  Hierarchy h_;
  std::vector<Phase> phases_;
  std::vector<std::uint16_t> phase_of_step_;
  std::uint32_t steps_ = 0;
};

// A flat ring in `channels` rings (NCCL's channels), channel c carrying split_bytes(size,
// channels, c) around the ring orders[c] (position p sends to position p + 1). Transfer id =
// step·(channels·n) + c·n + p; its gate is the same id: position p of channel c at that step,
// waiting for its own and its predecessor's sends of the step before, as in one ring.
class ChannelRingProgram final : public Program {
 public:
  ChannelRingProgram(const CollectiveSpec& spec, int ranks,
                     std::vector<std::vector<std::uint32_t>> orders)
      : n_(ranks),
        channels_(spec.channels),
        size_(spec.size),
        chunks_(spec.chunks),
        own_(!spec.forward_on_arrival),
        orders_(std::move(orders)) {
    const auto ring_steps =
        static_cast<std::uint64_t>(n_ - 1) * static_cast<std::uint64_t>(chunks_);
    scatter_steps_ = spec.op == Operation::kAllGather ? 0 : ring_steps;
    const std::uint64_t gather_steps = spec.op == Operation::kReduceScatter ? 0 : ring_steps;
    steps_ = static_cast<std::uint32_t>(scatter_steps_ + gather_steps);
    shares_.reserve(static_cast<std::size_t>(channels_));
    for (int c = 0; c < channels_; ++c) {
      const Bytes share = split_bytes(size_, channels_, c);
      const auto cut = [&](std::int64_t bytes) {
        return Split{.base = bytes / chunks_, .larger = bytes % chunks_};
      };
      shares_.push_back(ChannelShare{.larger = share.count() % n_,
                                     .large = cut(share.count() / n_ + 1),
                                     .small = cut(share.count() / n_)});
    }
  }

  int ranks() const noexcept override { return n_; }
  std::uint64_t transfer_count() const noexcept override {
    return static_cast<std::uint64_t>(steps_) * per_step();
  }
  std::uint32_t steps() const noexcept override { return steps_; }
  std::uint64_t dense_gates() const noexcept override { return 0; }
  void initial_gates(std::vector<GateId>& out) const override {
    if (steps_ == 0) return;
    for (std::uint64_t g = 0; g < per_step(); ++g) out.push_back(g);
  }
  std::uint32_t waits(GateId gate) const override { return gate < per_step() ? 0 : (own_ ? 2 : 1); }
  void sends(GateId gate, std::vector<TransferId>& out) const override { out.push_back(gate); }
  bool waits_for_own_sends() const noexcept override { return own_; }

  // The event simulation asks for every transfer one by one, so the pieces' sizes come from
  // `shares_` (split_bytes(split_bytes(split_bytes(size, channels, c), n, chunk), chunks, j),
  // as `transfers` splits them) and the chunk index from one comparison (k < n - 1 and p < n).
  Transfer transfer(TransferId id) const override {
    const std::uint64_t step = id / per_step();
    const std::uint64_t within = id - step * per_step();
    const auto c = static_cast<std::size_t>(within / rank_count());
    const auto p = static_cast<std::int64_t>(within - c * rank_count());
    const bool scatter = step < scatter_steps_;
    const auto into = static_cast<std::int64_t>(scatter ? step : step - scatter_steps_);
    const std::int64_t k = chunks_ == 1 ? into : into / chunks_;
    const std::int64_t j = into - k * chunks_;
    std::int64_t chunk = scatter ? p - k - 1 : p - k;
    if (chunk < 0) chunk += n_;
    const ChannelShare& share = shares_[c];
    const Split& split = chunk < share.larger ? share.large : share.small;
    const Bytes piece(split.base + (j < split.larger ? 1 : 0));
    const auto next = static_cast<std::size_t>(p + 1 == n_ ? 0 : p + 1);
    return Transfer{orders_[c][static_cast<std::size_t>(p)], orders_[c][next],
                    static_cast<std::uint32_t>(step), static_cast<std::uint16_t>(c), piece};
  }

  // Along consecutive ids of one (step, channel) the position p and the chunk advance by one
  // (mod n) and the piece is one of two sizes, as `transfer` computes them: split_bytes(share,
  // n, chunk) is share / n + 1 for the first share % n chunks and share / n after. So the loop
  // needs no division per transfer.
  void transfers(TransferId first, std::span<Transfer> out) const override {
    std::size_t done = 0;
    while (done < out.size()) {
      const TransferId id = first + done;
      const std::uint64_t step = id / per_step();
      const std::uint64_t within = id % per_step();
      const auto c = static_cast<std::size_t>(within / rank_count());
      const auto p0 = static_cast<std::int64_t>(within % rank_count());
      const std::size_t count =
          std::min<std::size_t>(out.size() - done, static_cast<std::size_t>(n_ - p0));
      const bool scatter = step < scatter_steps_;
      const auto into = static_cast<std::int64_t>(scatter ? step : step - scatter_steps_);
      const std::int64_t k = into / chunks_;
      const std::int64_t j = into % chunks_;
      const ChannelShare& share = shares_[c];
      const std::int64_t larger = share.larger;
      const Bytes large(share.large.base + (j < share.large.larger ? 1 : 0));
      const Bytes small(share.small.base + (j < share.small.larger ? 1 : 0));
      auto chunk = static_cast<std::int64_t>(positive_mod(scatter ? p0 - k - 1 : p0 - k, n_));
      const auto& order = orders_[c];
      for (std::size_t i = 0; i < count; ++i) {
        const auto p = static_cast<std::size_t>(p0) + i;
        const std::size_t next = p + 1 == static_cast<std::size_t>(n_) ? 0 : p + 1;
        out[done + i] = Transfer{order[p], order[next], static_cast<std::uint32_t>(step),
                                 static_cast<std::uint16_t>(c), chunk < larger ? large : small};
        if (++chunk == n_) chunk = 0;
      }
      done += count;
    }
  }

  // The same position one step later is id + channels·n, and per_step() is a multiple of n, so
  // the position is id mod n: one division per arrival.
  std::array<GateId, 2> successors(TransferId id) const override {
    const std::uint64_t next = id + per_step();
    if (next >= transfer_count()) return {kNoGateId, kNoGateId};
    const std::uint64_t p = id % rank_count();
    const std::uint64_t forward = next - p + (p + 1 == rank_count() ? 0 : p + 1);
    return {own_ ? next : kNoGateId, forward};
  }

  void for_each_transfer(const std::function<void(const Transfer&)>& visit) const override {
    for (std::uint64_t id = 0; id < transfer_count(); ++id) visit(transfer(id));
  }

  // Uniform when every channel's share splits evenly into n chunks of `chunks` pieces.
  std::vector<UniformRingPhase> uniform_ring() const override {
    std::vector<UniformRingPhase> out;
    if (steps_ == 0) return out;
    const std::int64_t all = static_cast<std::int64_t>(n_) * chunks_;
    for (int c = 0; c < channels_; ++c) {
      const Bytes share = split_bytes(size_, channels_, c);
      if (share.count() <= 0 || share.count() % all != 0) return {};
      UniformRingPhase u;
      u.channel = static_cast<std::uint16_t>(c);
      u.steps = steps_;
      u.piece = Bytes(share.count() / all);
      u.next.resize(static_cast<std::size_t>(n_));
      const auto& order = orders_[static_cast<std::size_t>(c)];
      for (std::size_t p = 0; p < order.size(); ++p) {
        u.next[order[p]] = order[(p + 1) % order.size()];
      }
      out.push_back(std::move(u));
    }
    return out;
  }

  // Every channel is a flat ring over its order, of split_bytes(size, channels, c) bytes split
  // as `bounding_channel` splits it (`transfer`'s pieces).
  std::vector<BoundingRingPhase> bounding_ring() const override {
    std::vector<BoundingRingPhase> out;
    if (steps_ == 0) return out;
    for (int c = 0; c < channels_; ++c) {
      BoundingRingPhase channel = bounding_channel(
          static_cast<std::uint16_t>(c), steps_, split_bytes(size_, channels_, c), chunks_,
          scatter_steps_ > 0, steps_ > scatter_steps_, orders_[static_cast<std::size_t>(c)]);
      if (channel.next.empty()) return {};
      out.push_back(std::move(channel));
    }
    return out;
  }

  // Step 0 sends every position of every channel to the next (transfer ids channel by channel,
  // position by position) and every later step repeats those pairs.
  std::optional<std::vector<RankPair>> distinct_pairs() const override {
    std::vector<RankPair> out;
    if (steps_ == 0) return out;
    out.reserve(per_step());
    const auto n = static_cast<std::size_t>(n_);
    for (int c = 0; c < channels_; ++c) {
      const auto& order = orders_[static_cast<std::size_t>(c)];
      for (std::size_t p = 0; p < n; ++p) {
        out.push_back({order[p], order[(p + 1) % n], static_cast<std::uint16_t>(c)});
      }
    }
    return out;
  }

 private:
  std::uint64_t rank_count() const noexcept { return static_cast<std::uint64_t>(n_); }
  std::uint64_t per_step() const noexcept {
    return rank_count() * static_cast<std::uint64_t>(channels_);
  }

  // split_bytes(Bytes(base * parts + larger), parts, j) = base + (j < larger).
  struct Split {
    std::int64_t base;
    std::int64_t larger;
  };
  // A channel's share split into n chunks (the first `larger` one byte larger), each into
  // `chunks_` pieces.
  struct ChannelShare {
    std::int64_t larger;
    Split large;
    Split small;
  };

  int n_;
  int channels_;
  Bytes size_;
  int chunks_;
  bool own_;  // a rank's step waits for its own previous send too
  std::vector<std::vector<std::uint32_t>> orders_;
  std::vector<ChannelShare> shares_;  // by channel
  std::uint64_t scatter_steps_ = 0;
  std::uint32_t steps_ = 0;
};

// The pairwise all-to-all computed from ids, as `lower_pairwise` stores it: step k (0..n-2) has
// rank i send split_bytes(size, n, j) to j = (i + k + 1) mod n. The stored schedule sorts by
// (step, src), so transfer id k·n + i, and has one gate per transfer (one send per rank and
// step) with the same id. Gate (i, k >= 1) waits for two transfers: its own send of step k - 1
// and the one it receives at step k - 1 (from i - k mod n, its only receive of that step; a
// receive at step s feeds the receiver's first sending step after s, which is s + 1 since
// every rank sends at every step). So transfer (i, k) feeds the gates (i, k + 1) and
// (j, k + 1) of the step after, if any. Memory O(1) instead of ~56 bytes per transfer (940 MB
// at 4,096 ranks), and the execution reads no table per flow.
class PairwiseProgram final : public Program {
 public:
  PairwiseProgram(Bytes size, int ranks) : n_(static_cast<std::uint64_t>(ranks)), size_(size) {}

  int ranks() const noexcept override { return static_cast<int>(n_); }
  std::uint64_t transfer_count() const noexcept override { return n_ * (n_ - 1); }
  std::uint32_t steps() const noexcept override { return static_cast<std::uint32_t>(n_ - 1); }
  std::uint64_t dense_gates() const noexcept override { return 0; }
  void initial_gates(std::vector<GateId>& out) const override {
    for (std::uint64_t r = 0; r < n_ && n_ > 1; ++r) out.push_back(r);
  }
  std::uint32_t waits(GateId gate) const override { return gate < n_ ? 0 : 2; }
  void sends(GateId gate, std::vector<TransferId>& out) const override { out.push_back(gate); }

  Transfer transfer(TransferId id) const override {
    const std::uint64_t step = id / n_;
    const std::uint64_t src = id % n_;
    return make(src, step, destination(src, step));
  }

  void transfers(TransferId first, std::span<Transfer> out) const override {
    std::uint64_t step = first / n_;
    std::uint64_t src = first % n_;
    std::uint64_t dst = destination(src, step);
    for (Transfer& t : out) {
      t = make(src, step, dst);
      if (++dst == n_) dst = 0;
      if (++src == n_) {
        src = 0;
        ++step;
        dst = destination(0, step);
      }
    }
  }

  std::array<GateId, 2> successors(TransferId id) const override {
    const std::uint64_t step = id / n_;
    if (step + 2 >= n_) return {kNoGateId, kNoGateId};
    const std::uint64_t src = id % n_;
    const std::uint64_t next = (step + 1) * n_;
    return {next + src, next + destination(src, step)};
  }

  void for_each_transfer(const std::function<void(const Transfer&)>& visit) const override {
    for (std::uint64_t id = 0; id < transfer_count(); ++id) visit(transfer(id));
  }

 private:
  std::uint64_t destination(std::uint64_t src, std::uint64_t step) const noexcept {
    return (src + step + 1) % n_;
  }
  Transfer make(std::uint64_t src, std::uint64_t step, std::uint64_t dst) const noexcept {
    return Transfer{
        static_cast<std::uint32_t>(src), static_cast<std::uint32_t>(dst),
        static_cast<std::uint32_t>(step), 0,
        split_bytes(size_, static_cast<std::int64_t>(n_), static_cast<std::int64_t>(dst))};
  }

  std::uint64_t n_;
  Bytes size_;
};

// Pairwise all-to-alls that `PairwiseProgram` computes: one channel, no rails or levels.
bool plain_pairwise(const CollectiveSpec& spec) {
  return spec.algorithm == Algorithm::kPairwise && spec.channels <= 1 && spec.ranks_per_node == 0 &&
         spec.level_algorithms.empty();
}

bool ring_family(const CollectiveSpec& spec) {
  const bool ring_algorithm = spec.algorithm == Algorithm::kRing ||
                              spec.algorithm == Algorithm::kHierarchical ||
                              spec.algorithm == Algorithm::kTorus;
  const bool op = spec.op == Operation::kAllReduce || spec.op == Operation::kReduceScatter ||
                  spec.op == Operation::kAllGather;
  const bool rings = std::all_of(spec.level_algorithms.begin(), spec.level_algorithms.end(),
                                 [](Algorithm a) { return a == Algorithm::kRing; });
  return ring_algorithm && op && rings;
}

}  // namespace

Schedule::Schedule(int ranks, std::vector<Transfer> transfers) : ranks_(ranks) {
  build(std::move(transfers));
}

Schedule::Schedule(int ranks, std::vector<Transfer> transfers, const Schedule& like)
    : ranks_(ranks) {
  const std::vector<std::uint32_t>& order = like.deps_->order;
  bool alike = ranks == like.ranks_ && transfers.size() == like.transfers_.size();
  std::vector<Transfer> placed;
  if (alike) placed.resize(transfers.size());
  Bytes total;
  for (std::size_t i = 0; alike && i < placed.size(); ++i) {
    const Transfer& t = transfers[order[i]];
    const Transfer& u = like.transfers_[i];
    alike = t.src == u.src && t.dst == u.dst && t.step == u.step && t.channel == u.channel &&
            t.bytes.count() >= 0;
    placed[i] = t;
    total += t.bytes;
  }
  if (!alike) {
    build(std::move(transfers));
    return;
  }
  transfers_ = std::move(placed);
  deps_ = like.deps_;
  total_bytes_ = total;
}

Schedule::Schedule(Schedule&& other) noexcept
    : ranks_(other.ranks_),
      transfers_(std::move(other.transfers_)),
      deps_(std::exchange(other.deps_, empty_dependencies())),
      total_bytes_(std::exchange(other.total_bytes_, Bytes(0))) {
  other.transfers_.clear();
}

Schedule& Schedule::operator=(Schedule&& other) noexcept {
  if (this == &other) return *this;
  ranks_ = other.ranks_;
  transfers_ = std::move(other.transfers_);
  other.transfers_.clear();
  deps_ = std::exchange(other.deps_, empty_dependencies());
  total_bytes_ = std::exchange(other.total_bytes_, Bytes(0));
  return *this;
}

const std::shared_ptr<const Schedule::Dependencies>& Schedule::empty_dependencies() noexcept {
  static const std::shared_ptr<const Dependencies> empty = std::make_shared<const Dependencies>();
  return empty;
}

void Schedule::build(std::vector<Transfer> given) {
  auto deps = std::make_shared<Dependencies>();
  std::vector<Gate>& gates = deps->gates;
  std::uint32_t& steps = deps->steps;
  const auto n = static_cast<std::uint32_t>(ranks_);
  int channels = 0;
  for (const Transfer& t : given) {
    if (t.src >= n || t.dst >= n || t.src == t.dst || t.bytes.count() < 0) {
      throw Error::internal("bad transfer " + std::to_string(t.src) + "->" + std::to_string(t.dst) +
                            " in a schedule of " + std::to_string(ranks_) + " ranks");
    }
    channels = std::max(channels, t.channel + 1);
    steps = std::max(steps, t.step + 1);
    total_bytes_ += t.bytes;
  }
  // Step-major order: a run touches the transfers of one step at a time, so memory is read
  // nearly in order. Bucket by step in linear time (stable), then order each step by (channel,
  // src, dst); the lowerings emit most steps already in that order. Each transfer's position as
  // given is kept (`order`), so that a schedule lowered alike can be placed the same way.
  std::vector<std::size_t> offset(static_cast<std::size_t>(steps) + 1, 0);
  for (const Transfer& t : given) ++offset[t.step + 1];
  for (std::uint32_t k = 0; k < steps; ++k) offset[k + 1] += offset[k];
  std::vector<std::uint32_t>& order = deps->order;
  order.resize(given.size());
  transfers_.resize(given.size());
  {
    std::vector<std::size_t> fill(offset.begin(), offset.end() - 1);
    for (std::size_t i = 0; i < given.size(); ++i) {
      const std::size_t at = fill[given[i].step]++;
      transfers_[at] = given[i];
      order[at] = static_cast<std::uint32_t>(i);
    }
  }
  const auto by_sender = [](const Transfer& a, const Transfer& b) {
    return std::tie(a.channel, a.src, a.dst) < std::tie(b.channel, b.src, b.dst);
  };
  const auto by_sender_at = [&given, &by_sender](std::uint32_t a, std::uint32_t b) {
    return by_sender(given[a], given[b]);
  };
  for (std::uint32_t k = 0; k < steps; ++k) {
    const auto first = static_cast<std::ptrdiff_t>(offset[k]);
    const auto last = static_cast<std::ptrdiff_t>(offset[k + 1]);
    if (std::is_sorted(transfers_.begin() + first, transfers_.begin() + last, by_sender)) continue;
    // The positions are sorted (the same moves as sorting the transfers: they depend only on
    // the comparisons), then the step's transfers placed by them.
    std::sort(order.begin() + first, order.begin() + last, by_sender_at);
    for (auto i = first; i < last; ++i) {
      transfers_[static_cast<std::size_t>(i)] = given[order[static_cast<std::size_t>(i)]];
    }
  }
  given = {};

  // Gates: runs of equal (step, channel, src).
  std::vector<std::uint32_t> gate_of(transfers_.size());
  for (std::size_t i = 0; i < transfers_.size(); ++i) {
    const Transfer& t = transfers_[i];
    if (gates.empty() || gates.back().rank != t.src || gates.back().step != t.step ||
        gates.back().channel != t.channel) {
      gates.push_back(Gate{static_cast<std::uint32_t>(i), 0, 0, t.src, t.step, t.channel});
    }
    ++gates.back().count;
    gate_of[i] = static_cast<std::uint32_t>(gates.size() - 1);
  }

  // Each (channel, rank)'s gates in step order (CSR), and each gate's place in its list.
  const std::size_t lists = static_cast<std::size_t>(channels) * n;
  const auto list_of = [n](std::uint16_t channel, std::uint32_t rank) {
    return static_cast<std::size_t>(channel) * n + rank;
  };
  std::vector<std::uint32_t> list_start(lists + 1, 0);
  for (const Gate& g : gates) ++list_start[list_of(g.channel, g.rank) + 1];
  for (std::size_t l = 0; l < lists; ++l) list_start[l + 1] += list_start[l];
  std::vector<std::uint32_t> list(gates.size());
  std::vector<std::uint32_t> list_step(gates.size());  // gates[list[i]].step, contiguous
  std::vector<std::uint32_t> place(gates.size());
  {
    std::vector<std::uint32_t> fill(list_start.begin(), list_start.end() - 1);
    for (std::size_t g = 0; g < gates.size(); ++g) {
      const std::size_t l = list_of(gates[g].channel, gates[g].rank);
      place[g] = fill[l];
      list_step[fill[l]] = gates[g].step;
      list[fill[l]++] = static_cast<std::uint32_t>(g);
    }
  }

  // A transfer feeds its sender's and its receiver's first gate after its step (same channel).
  // Transfers come in step order, so each list's cursor only moves forward.
  std::vector<std::uint32_t> cursor(list_start.begin(), list_start.end() - 1);
  const auto next_gate = [&](std::uint16_t channel, std::uint32_t rank, std::uint32_t step) {
    const std::size_t l = list_of(channel, rank);
    std::uint32_t& c = cursor[l];
    while (c < list_start[l + 1] && list_step[c] <= step) ++c;
    return c < list_start[l + 1] ? list[c] : kNoGate;
  };
  std::vector<std::uint32_t>& successors = deps->successors;
  successors.resize(2 * transfers_.size());
  for (std::size_t i = 0; i < transfers_.size(); ++i) {
    const Transfer& t = transfers_[i];
    const std::uint32_t at = place[gate_of[i]] + 1;
    const std::uint32_t sender =
        at < list_start[list_of(t.channel, t.src) + 1] ? list[at] : kNoGate;
    const std::uint32_t receiver = next_gate(t.channel, t.dst, t.step);
    successors[2 * i] = sender;
    successors[2 * i + 1] = receiver;
    if (sender != kNoGate) ++gates[sender].waits;
    if (receiver != kNoGate) ++gates[receiver].waits;
  }
  deps_ = std::move(deps);
}

namespace {

// The limits of a program: a stored schedule numbers its transfers in 32 bits, and every program
// numbers its steps in 32 bits (`Transfer::step`). `what` is "transfers" or "steps".
void check_count(const CollectiveSpec& spec, int ranks, std::uint64_t count, const char* what) {
  if (count < std::numeric_limits<std::uint32_t>::max()) return;
  const bool chunked = spec.chunks > 1;
  throw Error::input(
      "collective too large to lower: " + std::to_string(count) + " " + what,
      {.key = chunked ? "--chunks" : "--group",
       .value = chunked ? std::to_string(spec.chunks) : std::to_string(ranks) + " devices",
       .expected = std::string("fewer than 2^32 ") + what + " (a smaller group or fewer chunks)"});
}

}  // namespace

Schedule lower(const CollectiveSpec& spec, int ranks, const Schedule* like) {
  if (spec.forward_on_arrival && ranks > 1) {
    throw Error::internal("lower: a ring that forwards on arrival has no stored schedule");
  }
  if (ranks <= 1) return Schedule(std::max(ranks, 1), {});
  const std::uint64_t count = count_transfers_of(spec, ranks);
  check_count(spec, ranks, count, "transfers");
  Builder b(count);
  if (spec.channels > 1 || spec.ranks_per_node > 0) {
    // Several rings, or rings along rails: the transfers of the implicit program, stored.
    const auto program = ring_program(spec, ranks);
    std::vector<Transfer> transfers;
    transfers.reserve(count);
    program->for_each_transfer([&](const Transfer& t) { transfers.push_back(t); });
    return like != nullptr ? Schedule(ranks, std::move(transfers), *like)
                           : Schedule(ranks, std::move(transfers));
  }
  switch (spec.algorithm) {
    case Algorithm::kRing:
      if (spec.op == Operation::kBroadcast) {
        lower_ring_broadcast(b, spec, ranks);
      } else if (spec.op == Operation::kReduce) {
        lower_ring_reduce(b, spec, ranks);
      } else {
        CollectiveSpec flat = spec;
        flat.levels = {ranks};
        lower_hierarchical(b, flat, ranks);
      }
      break;
    case Algorithm::kHierarchical:
    case Algorithm::kTorus:
      lower_hierarchical(b, spec, ranks);
      break;
    case Algorithm::kTree:
      lower_tree(b, spec, ranks);
      break;
    case Algorithm::kHalvingDoubling:
      lower_halving_doubling(b, spec, ranks);
      break;
    case Algorithm::kDirect:
      lower_direct(b, spec, ranks);
      break;
    case Algorithm::kPairwise:
      lower_pairwise(b, spec, ranks);
      break;
    case Algorithm::kNvls:
      lower_nvls(b, spec, ranks);
      break;
  }
  return like != nullptr ? Schedule(ranks, b.take(), *like) : Schedule(ranks, b.take());
}

void Schedule::initial_gates(std::vector<GateId>& out) const {
  const std::vector<Gate>& gates = deps_->gates;
  for (std::size_t g = 0; g < gates.size(); ++g) {
    if (gates[g].waits == 0) out.push_back(g);
  }
}

void Schedule::sends(GateId gate, std::vector<TransferId>& out) const {
  const Gate& g = deps_->gates[gate];
  for (std::uint32_t i = g.first; i < g.first + g.count; ++i) out.push_back(i);
}

void Schedule::for_each_transfer(const std::function<void(const Transfer&)>& visit) const {
  for (const Transfer& t : transfers_) visit(t);
}

std::uint64_t transfer_count(const CollectiveSpec& spec, int ranks) {
  return ranks <= 1 ? 0 : count_transfers_of(spec, ranks);
}

std::shared_ptr<const Program> ring_program(const CollectiveSpec& spec, int ranks) {
  if (!ring_family(spec)) {
    throw Error::internal("ring_program: not a ring-family collective (" +
                          std::string(operation_name(spec.op)) + " " +
                          std::string(algorithm_name(spec.algorithm)) + ")");
  }
  if (spec.channels > 1 || spec.ranks_per_node > 0) {
    return std::make_shared<const ChannelRingProgram>(
        spec, ranks, ring_orders(ranks, spec.channels, spec.ranks_per_node));
  }
  CollectiveSpec flat = spec;
  if (flat.algorithm == Algorithm::kRing) flat.levels = {std::max(ranks, 1)};
  return std::make_shared<const RingProgram>(flat, std::max(ranks, 1));
}

std::shared_ptr<const Program> lower_program(const CollectiveSpec& spec, int ranks,
                                             std::uint64_t implicit_above, const Program* like) {
  if (ranks > 1 && ring_family(spec)) {
    // Every rank sends once per step in the ring family: steps = transfers / ranks.
    const std::uint64_t count = count_transfers_of(spec, ranks);
    if (count > implicit_above || spec.forward_on_arrival) {
      check_count(spec, ranks, count / static_cast<std::uint64_t>(ranks), "steps");
      return ring_program(spec, ranks);
    }
  }
  if (ranks > 1 && plain_pairwise(spec) && count_transfers_of(spec, ranks) > implicit_above) {
    return pairwise_program(spec, ranks);
  }
  return std::make_shared<const Schedule>(lower(spec, ranks, dynamic_cast<const Schedule*>(like)));
}

std::shared_ptr<const Program> pairwise_program(const CollectiveSpec& spec, int ranks) {
  if (!plain_pairwise(spec) || ranks < 2) {
    throw Error::internal(
        "pairwise_program: not a pairwise all-to-all of one channel over two "
        "ranks or more (" +
        std::string(algorithm_name(spec.algorithm)) + ", " + std::to_string(ranks) + " ranks)");
  }
  const std::uint64_t count = count_transfers_of(spec, ranks);
  check_count(spec, ranks, count, "transfers");
  return std::make_shared<const PairwiseProgram>(spec.size, ranks);
}

std::vector<std::vector<int>> double_binary_tree(int n) {
  std::vector<int> first(static_cast<std::size_t>(n), -1);
  for (int r = 1; r < n; ++r) {
    const int bit = r & -r;
    int up = (r ^ bit) | (bit << 1);
    if (up >= n) up = r ^ bit;
    first[static_cast<std::size_t>(r)] = up;
  }
  // Tree 1: the same shape with position p held by rank map(p).
  auto map = [n](int p) { return n % 2 == 0 ? n - 1 - p : (p + 1) % n; };
  std::vector<int> second(static_cast<std::size_t>(n), -1);
  for (int p = 0; p < n; ++p) {
    const int parent = first[static_cast<std::size_t>(p)];
    second[static_cast<std::size_t>(map(p))] = parent < 0 ? -1 : map(parent);
  }
  return {first, second};
}

std::vector<std::vector<std::uint32_t>> ring_orders(int ranks, int channels, int ranks_per_node) {
  const int n = std::max(ranks, 1);
  const int k = ranks_per_node > 0 ? ranks_per_node : n;
  const int nodes = n / k;
  std::vector<std::vector<std::uint32_t>> orders(static_cast<std::size_t>(channels));
  for (int c = 0; c < channels; ++c) {
    auto& order = orders[static_cast<std::size_t>(c)];
    order.reserve(static_cast<std::size_t>(n));
    if (nodes == 1) {
      for (int p = 0; p < n; ++p) order.push_back(static_cast<std::uint32_t>((p + c) % n));
      continue;
    }
    // The local index (rail) at which the ring enters node t: c, c+1, c, c+1, ... so that every
    // node is left on the rail the next one is entered on; an odd count of nodes ends on c+2
    // when there are three rails to choose from.
    std::vector<int> entry(static_cast<std::size_t>(nodes));
    for (int t = 0; t < nodes; ++t) entry[static_cast<std::size_t>(t)] = (c + t % 2) % k;
    if (nodes % 2 == 1 && k >= 3) entry.back() = (c + 2) % k;
    for (int t = 0; t < nodes; ++t) {
      const int e = entry[static_cast<std::size_t>(t)];
      const int x = entry[static_cast<std::size_t>((t + 1) % nodes)];
      const auto at = [&](int local) { return static_cast<std::uint32_t>(t * k + local); };
      order.push_back(at(e));
      for (int i = 1; i < k; ++i) {
        const int local = (e + i) % k;
        if (local != x) order.push_back(at(local));
      }
      if (x != e) order.push_back(at(x));
    }
  }
  return orders;
}

}  // namespace nest::coll
