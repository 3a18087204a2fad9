#include "nest/placer/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <tuple>
#include <utility>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/placer/baselines.h"
#include "placer/stage_model.h"

namespace nest::placer {
namespace {

using detail::ChainSums;
using detail::PositionPrices;
using detail::PricedNetwork;

constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max();

// run_end[l]: one past the last layer of the run of layers identical to layer l that starts at l.
std::vector<std::size_t> identical_runs(const workload::Variant& v) {
  const std::size_t n = v.layers.size();
  std::vector<std::size_t> run_end(n, n);
  for (std::size_t l = n; l-- > 0;) {
    if (l + 1 < n && detail::same_layer(v.layers[l], v.layers[l + 1])) {
      run_end[l] = run_end[l + 1];
    } else {
      run_end[l] = l + 1;
    }
  }
  return run_end;
}

// The largest feasible end of a stage per (first layer, position), row by row. Memory grows with
// the stage's end and with its position (more microbatches in flight), so row s is a binary
// search under row s−1; a run of identical layers shifts the answer by one in O(1).
class MemoryLimits {
 public:
  MemoryLimits(const workload::Variant& v, const std::vector<std::size_t>& run_end,
               workload::MemoryOptions options, Bytes capacity, SearchStats& stats)
      : v_(v), run_end_(run_end), options_(options), capacity_(capacity), stats_(stats) {}

  // Row for position s (1-based); entry i is the largest j with [i, j) fitting (i if none).
  const std::vector<std::size_t>& row(int s) {
    while (static_cast<int>(rows_.size()) < s) add_row();
    return rows_[static_cast<std::size_t>(s) - 1];
  }

  bool fits(std::size_t first, std::size_t last, int in_flight) {
    ++stats_.memory_queries;
    return workload::stage_memory(v_, first, last, in_flight, options_).total() <= capacity_;
  }

 private:
  void add_row() {
    const int s = static_cast<int>(rows_.size()) + 1;
    const std::size_t n = v_.layers.size();
    std::vector<std::size_t> row(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t hi = s == 1 ? n : rows_.back()[i];
      if (i > 0) {
        const std::size_t prev = row[i - 1];
        // [i, prev+1) repeats [i−1, prev) when layers i−1..prev are identical; prev was
        // maximal, so [i, prev+2) repeats the infeasible [i−1, prev+1) when layer prev+1 is
        // identical too.
        if (prev >= i && run_end_[i - 1] > prev) {
          if (prev + 1 == n || run_end_[i - 1] > prev + 1) {
            row[i] = prev + 1;
            continue;
          }
        }
      }
      std::size_t lo = i;
      std::size_t up = hi;
      if (i > 0) {
        // The neighbour's end, one further, is usually the answer: verify it with two queries
        // and narrow the binary search to the side where it is wrong.
        const std::size_t guess = std::clamp(row[i - 1] + 1, i, hi);
        if (guess == i || fits(i, guess, s)) {
          lo = guess;
          if (guess == hi || !fits(i, guess + 1, s)) up = guess;
        } else {
          up = guess - 1;
        }
      }
      while (lo < up) {
        const std::size_t mid = lo + (up - lo + 1) / 2;
        if (fits(i, mid, s)) {
          lo = mid;
        } else {
          up = mid - 1;
        }
      }
      row[i] = lo;
    }
    rows_.push_back(std::move(row));
  }

  const workload::Variant& v_;
  const std::vector<std::size_t>& run_end_;
  workload::MemoryOptions options_;
  Bytes capacity_;
  SearchStats& stats_;
  std::vector<std::vector<std::size_t>> rows_;
};

// Network prices per position (1-based from the pipeline's end), computed on demand.
class Pricer {
 public:
  // `map` lays out at least as many stages as positions will be asked for; position s is its
  // stage map.stages − s. A null map means a placement-independent network.
  Pricer(const workload::Variant& v, const VariantDegrees& degrees, std::optional<DeviceMap> map,
         int data_parallel, int zero_stage, PricedNetwork& net)
      : v_(v),
        degrees_(degrees),
        map_(map),
        data_parallel_(data_parallel),
        zero_stage_(zero_stage),
        net_(net) {}

  const PositionPrices& at(int s) {
    if (!map_) {
      auto& slot = s == 1 ? last_ : interior_;
      if (!slot) {
        slot = std::make_unique<PositionPrices>(
            detail::price_any_position(v_, degrees_, data_parallel_, zero_stage_, s == 1, net_));
      }
      return *slot;
    }
    while (static_cast<int>(positions_.size()) < s) {
      const int position = static_cast<int>(positions_.size()) + 1;
      positions_.push_back(
          detail::price_position(v_, degrees_, *map_, map_->stages - position, zero_stage_, net_));
    }
    return positions_[static_cast<std::size_t>(s) - 1];
  }

 private:
  const workload::Variant& v_;
  VariantDegrees degrees_;
  std::optional<DeviceMap> map_;
  int data_parallel_;
  int zero_stage_;
  PricedNetwork& net_;
  std::unique_ptr<PositionPrices> interior_;
  std::unique_ptr<PositionPrices> last_;
  std::vector<PositionPrices> positions_;
};

// The exact network but for a plan's data-parallel syncs, each answered at a level that rises
// one sync per round (`next_round`): the syncs each stage runs alone (the collectives `op` on
// `layouts`, asked through `collective`) start at their event-free bounds
// (`collective_pass_bound`); the joint syncs (`collective_like`, asked once `start_joint` is
// called) start at zero (a joint factor of 1: the stage's sync as priced alone) and rise to
// their event-free bounds (`collective_like_bound`), and only once every one has, to their
// exact prices. In each round the first sync the cost model asks for below the phase's target
// level (`set_target`) is raised to it. The plan's price grows with each sync (a stage's buckets
// end later, and with them its optimizer step), so each round's price is a lower bound of the
// exact one, and once every sync is exact it is the exact price (`syncs_rule_out`). With the
// joint syncs on, the price is not monotone in a stage's sync alone (a longer one can join a
// run of overlapping stages and change that run's factor): so the joint phase starts only once
// every stage's sync is exact, and the runs it asks for are the exact price's. Bounding every joint
// sync before pricing any keeps the simulations, and so the events counted, those of bounding them
// all at once.
class SyncStepNetwork final : public ForwardingCommCost {
 public:
  enum class Level : std::uint8_t { kZero, kBound, kExact };

  SyncStepNetwork(CommCost& exact, workload::CollectiveOp op, std::vector<GroupLayout> layouts)
      : ForwardingCommCost(exact), op_(op), layouts_(std::move(layouts)) {}
  // The syncs priced exactly so far.
  [[nodiscard]] int priced() const noexcept {
    return static_cast<int>(std::count_if(entries_.begin(), entries_.end(),
                                          [](const Entry& e) { return e.level == Level::kExact; }));
  }
  // Starts a round; `take` false: no sync rises.
  void next_round(bool take) {
    take_ = take;
    below_ = false;
  }
  // The level the rounds raise syncs to.
  void set_target(Level target) noexcept { target_ = target; }
  // Whether the last round met a sync below the target level.
  [[nodiscard]] bool met_below() const noexcept { return below_; }
  // Whether some sync is not priced exactly yet.
  [[nodiscard]] bool any_unpriced() const noexcept {
    return priced() < static_cast<int>(entries_.size());
  }
  // From now on the joint syncs (`collective_like`) rise and every `collective` is exact: a
  // joint factor divides by the syncs alone at their reference size, which a bound would raise.
  void start_joint() noexcept { joint_ = true; }
  [[nodiscard]] bool joint_started() const noexcept { return joint_; }

  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    if (joint_ || op != op_ ||
        std::find(layouts_.begin(), layouts_.end(), layout) == layouts_.end()) {
      return inner().collective(op, size, layout);
    }
    switch (level(Key{op, size, layout, GroupLayout{}}, Level::kBound)) {
      case Level::kExact:
        return inner().collective(op, size, layout);
      default:
        return inner().collective_pass_bound(op, size, layout);
    }
  }
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like) override {
    switch (level(Key{op, size, layout, like}, Level::kZero)) {
      case Level::kExact:
        return inner().collective_like(op, size, layout, like);
      case Level::kBound:
        return inner().collective_like_bound(op, size, layout, like);
      default:
        return Time::zero();
    }
  }

 private:
  // Keys of `collective`: an empty `like` (never a joint sync's, whose groups are not empty).
  using Key = std::tuple<workload::CollectiveOp, Bytes, GroupLayout, GroupLayout>;
  struct Entry {
    Key key;
    Level level;
  };
  // The level of `key` in this round (entering at `start`), raised if it is the round's one.
  Level level(const Key& key, Level start) {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Entry& e) { return e.key == key; });
    if (it == entries_.end()) it = entries_.insert(entries_.end(), Entry{key, start});
    if (it->level < target_) {
      if (take_) {
        take_ = false;
        it->level = target_;
      } else {
        below_ = true;
      }
    }
    return it->level;
  }

  workload::CollectiveOp op_;
  std::vector<GroupLayout> layouts_;
  std::vector<Entry> entries_;
  Level target_ = Level::kExact;
  bool take_ = false;
  bool below_ = false;
  bool joint_ = false;
};

// Whether every stage of `choice` (a chunk partition evaluated directly) fits `capacity`, by the
// cost model's own memory functions; `microbatches` per replica.
bool fits_memory(const workload::Variant& v, const PlanChoice& choice, std::int64_t microbatches,
                 const workload::MemoryOptions& memory, Bytes capacity) {
  const int S = choice.stages();
  const int vs = choice.virtual_stages;
  for (int p = 0; p < S; ++p) {
    std::vector<ChunkReport> chunks;
    for (int j = 0; j < vs; ++j) {
      const auto c = static_cast<std::size_t>(p + j * S);
      chunks.push_back(
          {.first_layer = choice.boundaries[c], .last_layer = choice.boundaries[c + 1]});
    }
    const workload::StageMemory m =
        vs == 1
            ? workload::stage_memory(v, chunks[0].first_layer, chunks[0].last_layer, S - p, memory)
            : detail::interleaved_memory(v, chunks, S, p, microbatches, memory);
    if (m.total() > capacity) return false;
  }
  return true;
}

// f[s][i] and its argmin, rows added on demand (see search.h).
class Table {
 public:
  // `transfers` false: stage costs without the boundary transfers, a lower bound of the
  // pipeline when the cost model overlaps them with compute (CostOptions).
  Table(const workload::Variant& v, const ChainSums& sums, Pricer pricer, MemoryLimits& limits,
        workload::MemoryRules rules, workload::Recompute recompute, SearchStats& stats,
        bool transfers = true)
      : n_(v.layers.size()),
        sums_(sums),
        pricer_(std::move(pricer)),
        limits_(limits),
        rules_(rules),
        recompute_(recompute),
        stats_(stats),
        transfers_(transfers) {
    ++stats_.tables;
    best_.emplace_back();  // row 0 is unused
    arg_.emplace_back();
  }

  std::int64_t best(int s) {
    grow(s);
    return best_[static_cast<std::size_t>(s)][0];
  }

  // Stage boundaries of the optimum for S stages (best(S) must be finite).
  std::vector<std::size_t> boundaries(int stages) {
    grow(stages);
    std::vector<std::size_t> b{0};
    std::size_t i = 0;
    for (int s = stages; s >= 1; --s) {
      i = arg_[static_cast<std::size_t>(s)][i];
      b.push_back(i);
    }
    return b;
  }

 private:
  void grow(int s) {
    while (static_cast<int>(best_.size()) <= s) add_row(static_cast<int>(best_.size()));
  }

  void add_row(int s) {
    const PositionPrices& p = pricer_.at(s);
    const workload::Recompute mode = detail::recompute_applies(rules_, recompute_, s);
    const bool rec = mode == workload::Recompute::kFull;
    const bool selective = mode == workload::Recompute::kSelective;
    const auto& limit = limits_.row(s);
    const auto& fb = sums_.forward_backward;
    const auto& rc = sums_.recompute;
    const auto& sel = sums_.selective;
    const auto& pb = sums_.parameter_bytes;
    // Stage cost without the transfer: non-decreasing in j (all parts are sums of non-negative
    // terms, the gather line is non-decreasing when its slope is).
    auto body = [&](std::size_t i, std::size_t j) {
      std::int64_t c = fb[j] - fb[i] + p.collectives[j] - p.collectives[i];
      if (rec) c += rc[j] - rc[i] + p.recompute_collectives[j] - p.recompute_collectives[i];
      if (selective) c += sel[j] - sel[i];
      return c + p.gather_ps(pb[j] - pb[i]);
    };
    auto cost = [&](std::size_t i, std::size_t j) {
      return body(i, j) + (!transfers_ || p.transfer.empty() ? 0 : p.transfer[j]);
    };

    std::vector<std::int64_t> row(n_, kInf);
    std::vector<std::uint32_t> arg(n_, 0);
    if (s == 1) {
      for (std::size_t i = 0; i < n_; ++i) {
        if (limit[i] == n_) {
          row[i] = cost(i, n_);
          arg[i] = static_cast<std::uint32_t>(n_);
        }
      }
      ++stats_.states;
      best_.push_back(std::move(row));
      arg_.push_back(std::move(arg));
      return;
    }
    const auto& prev = best_[static_cast<std::size_t>(s) - 1];
    // The min-max over j is a crossing-point search when cost(i, ·) rises and f[s−1][·] falls
    // over the ends a stage may have, j <= n − s + 1 (each later stage needs a layer: f[s−1] is
    // infinite past that, which is no reason to scan). Adding layer j to a stage adds its own
    // compute and collectives (whatever i is), a non-negative gather increment when the gather
    // line rises, and changes the transfer from transfer[j] to transfer[j+1].
    const bool body_rises = p.gather_beta_ps_per_byte >= 0;
    const std::size_t last_end = static_cast<std::size_t>(s) <= n_ ? n_ - s + 1 : 0;
    bool monotone = body_rises;
    for (std::size_t j = 1; monotone && j + 1 <= last_end; ++j) {
      std::int64_t step = fb[j + 1] - fb[j] + p.collectives[j + 1] - p.collectives[j];
      if (rec)
        step += rc[j + 1] - rc[j] + p.recompute_collectives[j + 1] - p.recompute_collectives[j];
      if (selective) step += sel[j + 1] - sel[j];
      if (transfers_ && !p.transfer.empty()) step += p.transfer[j + 1] - p.transfer[j];
      monotone = step >= 0 && prev[j] >= prev[j + 1];
    }
    for (std::size_t i = 0; i + static_cast<std::size_t>(s) <= n_; ++i) {
      ++stats_.states;
      const std::size_t lo = i + 1;
      const std::size_t hi = std::min(limit[i], n_ - static_cast<std::size_t>(s) + 1);
      if (hi < lo) continue;
      std::int64_t best = kInf;
      std::size_t best_j = lo;
      if (monotone) {
        std::size_t a = lo;
        std::size_t b = hi + 1;  // first j in [lo, hi] with cost >= prev[j], or hi + 1
        while (a < b) {
          const std::size_t mid = a + (b - a) / 2;
          if (cost(i, mid) >= prev[mid]) {
            b = mid;
          } else {
            a = mid + 1;
          }
        }
        // Below a the stage is cheaper than the rest: max = f[s−1][j], falling; from a on it
        // is not: max = cost(i, j), rising. The first j of the minimum, as a scan takes it: a
        // when cost(i, a) is below f[s−1][a−1], else the first j of f[s−1]'s plateau at a − 1.
        if (a <= hi && (a == lo || cost(i, a) < prev[a - 1])) {
          best = cost(i, a);
          best_j = a;
        } else if (a > lo) {
          best = prev[a - 1];
          std::size_t x = lo;
          std::size_t y = a - 1;  // first j in [lo, a − 1] with f[s−1][j] <= best
          while (x < y) {
            const std::size_t mid = x + (y - x) / 2;
            if (prev[mid] <= best) {
              y = mid;
            } else {
              x = mid + 1;
            }
          }
          best_j = x;
        }
      } else {
        for (std::size_t j = lo; j <= hi; ++j) {
          if (body_rises && body(i, j) >= best) break;
          const std::int64_t v = std::max(cost(i, j), prev[j]);
          if (v < best) {
            best = v;
            best_j = j;
          }
        }
      }
      row[i] = best;
      arg[i] = static_cast<std::uint32_t>(best_j);
    }
    best_.push_back(std::move(row));
    arg_.push_back(std::move(arg));
  }

  std::size_t n_;
  const ChainSums& sums_;
  Pricer pricer_;
  MemoryLimits& limits_;
  workload::MemoryRules rules_;
  workload::Recompute recompute_;
  SearchStats& stats_;
  bool transfers_;
  std::vector<std::vector<std::int64_t>> best_;
  std::vector<std::vector<std::uint32_t>> arg_;
};

// The data-parallel degrees worth trying, largest first: for each value of ceil(M/d), the
// smallest and the largest d (steps of `step` when expert groups span replicas).
std::vector<int> candidate_degrees(std::int64_t microbatches, int dmax, int step, bool all) {
  std::vector<int> out;
  auto k = [&](int d) { return (microbatches + d - 1) / d; };
  for (int d = step; d <= dmax; d += step) {
    const bool first = d == step || k(d - step) != k(d);
    const bool last = d + step > dmax || k(d + step) != k(d);
    if (all || first || last) out.push_back(d);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

bool experts_span_replicas(const workload::Variant& v) {
  return v.expert_parallel > 1 &&
         v.tensor_parallel * v.context_parallel * v.expert_parallel != v.devices_per_replica;
}

struct Best {
  std::int64_t time = kInf;
  PlanChoice choice;
};

// Why nothing fits: the smallest stage's memory, or the devices the smallest pipeline needs.
std::string explain_infeasible(const workload::LayerProfile& profile,
                               const std::vector<std::size_t>& variants,
                               const std::vector<workload::Recompute>& recomputes,
                               const std::vector<int>& zeros, const SearchOptions& options,
                               SearchStats& stats) {
  const std::int64_t devices = options.cost.devices;
  // The stage that must exist for layer l is at least l alone at the last position, with the
  // most memory-saving options: per variant, the largest such stage over the layers; over the
  // variants, the smallest of those.
  Bytes smallest = Bytes(std::numeric_limits<std::int64_t>::max());
  std::string where;
  int min_replica = std::numeric_limits<int>::max();
  for (const std::size_t vi : variants) {
    const auto& v = profile.variants[vi];
    min_replica = std::min(min_replica, v.devices_per_replica);
    const std::int64_t dmax =
        std::min<std::int64_t>(v.microbatches, devices / v.devices_per_replica);
    if (dmax < 1) continue;
    Bytes worst;
    std::string worst_where;
    for (std::size_t l = 0; l < v.layers.size(); ++l) {
      Bytes least = Bytes(std::numeric_limits<std::int64_t>::max());
      std::string least_where;
      for (const workload::Recompute rec : recomputes) {
        for (const int zero : zeros) {
          int d = zero > 0 ? static_cast<int>(dmax) : 1;
          if (experts_span_replicas(v)) d = d / v.expert_parallel * v.expert_parallel;
          if (d < 1) continue;
          const workload::MemoryOptions mo{.rules = options.cost.rules,
                                           .zero_stage = zero,
                                           .data_parallel = d,
                                           .recompute = rec};
          ++stats.memory_queries;
          const Bytes m = workload::stage_memory(v, l, l + 1, 1, mo).total();
          if (m < least) {
            least = m;
            least_where = fmt::format(
                "layer {} '{}' alone, tensor parallel {}, ZeRO-{} over {} replica{}, "
                "recomputation {}",
                l, v.layers[l].name, v.tensor_parallel, zero, d, d == 1 ? "" : "s",
                workload::to_string(rec));
          }
        }
      }
      if (!least_where.empty() && least > worst) {
        worst = least;
        worst_where = least_where;
      }
    }
    if (!worst_where.empty() && worst < smallest) {
      smallest = worst;
      where = worst_where;
    }
  }
  if (where.empty()) {
    return fmt::format("nothing fits: {} devices are fewer than the smallest stage replica ({})",
                       devices, min_replica);
  }
  if (smallest > profile.hbm) {
    return fmt::format(
        "nothing fits: the smallest stage ({}) needs {} per device against a capacity of {}", where,
        format_bytes(smallest), format_bytes(profile.hbm));
  }
  // Memory allows single layers: the device budget is what is short. Find the fewest stages
  // that fit without data parallelism (a feasibility DP over the memory rows).
  std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
  std::string config;
  for (const std::size_t vi : variants) {
    const auto& v = profile.variants[vi];
    const std::size_t n = v.layers.size();
    const auto run_end = identical_runs(v);
    for (const workload::Recompute rec : recomputes) {
      MemoryLimits limits(v, run_end,
                          {.rules = options.cost.rules, .data_parallel = 1, .recompute = rec},
                          profile.hbm, stats);
      std::vector<char> ok(n + 1, 0);  // ok[i]: [i, n) splits into the current s stages
      for (std::size_t i = 0; i < n; ++i) ok[i] = limits.row(1)[i] == n;
      for (int s = 1; s <= static_cast<int>(n); ++s) {
        if (s > 1) {
          std::vector<char> next(n + 1, 0);
          const auto& limit = limits.row(s);
          for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t j = i + 1; j <= limit[i] && j < n; ++j) {
              if (ok[j]) {
                next[i] = 1;
                break;
              }
            }
          }
          ok = std::move(next);
        }
        if (ok[0]) {
          const std::int64_t need = static_cast<std::int64_t>(s) * v.devices_per_replica;
          if (need < fewest) {
            fewest = need;
            config = fmt::format("{} stage{} of {} device{} (tensor parallel {}, recomputation {})",
                                 s, s == 1 ? "" : "s", v.devices_per_replica,
                                 v.devices_per_replica == 1 ? "" : "s", v.tensor_parallel,
                                 workload::to_string(rec));
          }
          break;
        }
      }
    }
  }
  if (config.empty()) {
    return fmt::format(
        "nothing fits: no split of the layer chain fits memory at every pipeline position "
        "(capacity {})",
        format_bytes(profile.hbm));
  }
  return fmt::format(
      "nothing fits on {} devices: the smallest pipeline that fits memory needs {} = {} devices",
      devices, config, fewest);
}

}  // namespace

std::optional<PlanChoice> best_partition(const workload::LayerProfile& profile, std::size_t variant,
                                         int stages, int data_parallel, int zero_stage,
                                         workload::Recompute recompute, PlacementOrder order,
                                         CommCost& comm, const CostOptions& options) {
  PlanChoice choice{.variant = variant,
                    .data_parallel = data_parallel,
                    .zero_stage = zero_stage,
                    .recompute = recompute,
                    .order = order};
  if (variant < profile.variants.size()) {
    const std::size_t n = profile.variants[variant].layers.size();
    if (stages < 1 || static_cast<std::size_t>(stages) > n) {
      throw Error::input("pipeline depth out of range",
                         {.key = "stages",
                          .value = std::to_string(stages),
                          .expected = fmt::format("1..{} (the layers)", n)});
    }
    // A provisional partition of the right depth (one layer per stage, the rest in the last):
    // validation then checks every other field; the search replaces it.
    for (int p = 0; p < stages; ++p) choice.boundaries.push_back(static_cast<std::size_t>(p));
    choice.boundaries.push_back(n);
  }
  validate_choice(profile, choice, options);
  const auto& v = profile.variants[variant];
  const ChainSums sums(v);
  const auto run_end = identical_runs(v);
  SearchStats stats;
  PricedNetwork net(comm);
  MemoryLimits limits(v, run_end,
                      {.rules = options.rules,
                       .zero_stage = zero_stage,
                       .data_parallel = data_parallel,
                       .recompute = recompute},
                      profile.hbm, stats);
  std::optional<DeviceMap> map;
  if (!net.placement_independent()) {
    map = DeviceMap::make(order, stages, data_parallel, v.devices_per_replica);
  }
  Table table(v, sums, Pricer(v, detail::degrees_of(v), map, data_parallel, zero_stage, net),
              limits, options.rules, recompute, stats);
  if (table.best(stages) == kInf) return std::nullopt;
  choice.boundaries = table.boundaries(stages);
  return choice;
}

Time verification_cut(std::optional<Time> first_of_order, std::size_t orders_with_plans,
                      std::vector<Time> rest, int k) {
  if (!first_of_order) return Time::max();
  const auto n = static_cast<std::int64_t>(orders_with_plans);
  if (k <= n) return *first_of_order;
  const auto slots = static_cast<std::size_t>(k - n);
  if (rest.size() < slots) return Time::max();
  std::nth_element(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(slots - 1), rest.end());
  return std::max(*first_of_order, rest[slots - 1]);
}

std::vector<bool> replay_selection(std::span<const Plan> plans, std::size_t k) {
  std::vector<bool> take(plans.size(), false);
  std::vector<PlacementOrder> seen;
  std::size_t taken = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i].fits()) continue;
    if (std::find(seen.begin(), seen.end(), plans[i].choice.order) != seen.end()) continue;
    seen.push_back(plans[i].choice.order);
    take[i] = true;
    ++taken;
  }
  for (std::size_t i = 0; i < plans.size() && taken < k; ++i) {
    if (!take[i] && plans[i].fits()) {
      take[i] = true;
      ++taken;
    }
  }
  return take;
}

Time BoundNetwork::collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
  return event_free_ ? exact_.collective_pass_bound(op, size, layout)
                     : exact_.collective_bound(op, size, layout);
}

Time BoundNetwork::transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  return exact_.transfer_bound(size, from, to);
}

Time BoundNetwork::gather_point(Bytes size, const GroupLayout& layout) {
  return exact_.collective_bound(workload::CollectiveOp::kAllGather, size, layout);
}

std::string BoundNetwork::describe() const {
  return (event_free_ ? "event-free bounds of " : "lower bounds of ") + exact_.describe();
}

namespace {

// `bounds` but for the data-parallel syncs of stages 1 to S − 1, answered zero unasked: the
// plan's bound reads stage 0's sync alone (stage 0 ends the pipeline; with the joint syncs off,
// no stage's sync changes another's), so pricing the others would spend their bounds' passes
// for nothing. A sync is matched by its operation and its layout field for field, as
// `SyncStepNetwork` matches it: no other collective `evaluate` asks has both (tensor and
// context layouts differ in their group axes, expert ones run all-to-alls or differ in a
// count-1 axis's stride, gathers are all-gathers). The oracle counts fewer contention-free
// evaluations for it (`OracleStats::simulations`).
class StageZeroSync final : public ForwardingCommCost {
 public:
  StageZeroSync(CommCost& bounds, workload::CollectiveOp op, std::vector<GroupLayout> others)
      : ForwardingCommCost(bounds), op_(op), others_(std::move(others)) {}
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    if (op == op_ && std::find(others_.begin(), others_.end(), layout) != others_.end()) {
      return Time::zero();
    }
    return inner().collective(op, size, layout);
  }
  Time gather_point(Bytes size, const GroupLayout& layout) override {
    return inner().gather_point(size, layout);
  }

 private:
  workload::CollectiveOp op_;
  std::vector<GroupLayout> others_;
};

}  // namespace

PlanBound plan_lower_bound(const workload::LayerProfile& profile, const PlanChoice& choice,
                           CommCost& bounds, const CostOptions& options) {
  CostOptions alone = options;
  alone.joint_data_parallel_sync = false;
  std::vector<GroupLayout> others;
  if (choice.data_parallel > 1 && !bounds.placement_independent()) {
    const DeviceMap map = DeviceMap::make(choice.order, choice.stages(), choice.data_parallel,
                                          profile.variants.at(choice.variant).devices_per_replica);
    for (int p = 1; p < choice.stages(); ++p) others.push_back(detail::sync_layout(map, p));
  }
  StageZeroSync stage_zero(bounds, detail::sync_operation(choice.zero_stage), std::move(others));
  PlanBound out{.plan = evaluate(profile, choice, stage_zero, alone)};
  const Plan& p = out.plan;
  const Breakdown& b = p.breakdown;
  const StageReport& last = p.stages.front();  // stage 0 ends the pipeline
  const double sync = static_cast<double>(last.data_parallel_sync.ps());
  const bool overlap = options.overlap_gradient_sync;
  const double exposed = overlap ? sync / options.gradient_buckets : sync;
  // With overlapped transfers the pipeline is at least K·W + (S−1)·C; blocking ones are part of
  // the work, K·(W + T).
  const Time work =
      b.compute + b.collectives + (options.overlap_boundary_transfers ? Time::zero() : b.transfers);
  const std::int64_t rest = (b.bubble + last.optimizer).ps();
  const std::int64_t last_bucket = work.ps() + rest + static_cast<std::int64_t>(0.999 * exposed);
  out.bound = Time::picoseconds(last_bucket);
  if (!overlap || options.gradient_buckets < 2) return out;
  const std::int64_t k = p.microbatches_per_replica;
  out.before_buckets = Time::picoseconds(work.ps() / k * (k - 1) + rest);
  const std::int64_t all_buckets =
      out.before_buckets->ps() + static_cast<std::int64_t>(0.999 * sync);
  out.bound = Time::picoseconds(std::max(last_bucket, all_buckets));
  return out;
}

SyncCheck syncs_rule_out(const workload::LayerProfile& profile, const PlanChoice& choice,
                         CommCost& exact, const CostOptions& options, Time at,
                         bool stop_before_joint) {
  using Level = SyncStepNetwork::Level;
  std::vector<GroupLayout> layouts;
  const DeviceMap map = DeviceMap::make(choice.order, choice.stages(), choice.data_parallel,
                                        profile.variants.at(choice.variant).devices_per_replica);
  for (int p = 0; p < choice.stages(); ++p) layouts.push_back(detail::sync_layout(map, p));
  SyncStepNetwork steps(exact, detail::sync_operation(choice.zero_stage), std::move(layouts));
  CostOptions alone = options;
  alone.joint_data_parallel_sync = false;
  // Rounds at `cost` until the price reaches `at` or every sync met is at `target`; `first`:
  // whether the first round raises none (the previous phase's last price is this phase's
  // first otherwise).
  bool took = false;
  Time price;
  // The rounds change only the syncs' answers (`steps` passes every other query to `exact`), so
  // the stages' position prices and exposed transfers are priced once.
  detail::KeptPrices kept;
  const auto rounds = [&](const CostOptions& cost, Level target, bool first) {
    steps.set_target(target);
    for (bool take = !first;; take = true) {
      steps.next_round(take);
      took = took || take;
      price = detail::evaluate_keeping(profile, choice, steps, cost, &kept).iteration_time;
      if (price >= at) return true;
      if (!steps.met_below()) return false;
    }
  };
  // Each stage's sync alone; then, once every one is known, the joint syncs: every one bounded,
  // then priced.
  bool ruled_out = rounds(alone, Level::kExact, true);
  if (!ruled_out && options.joint_data_parallel_sync) {
    steps.start_joint();
    ruled_out = rounds(options, Level::kBound, false);
    // Every sync alone is exact by now: what is left unpriced are joint syncs.
    if (!ruled_out && stop_before_joint && steps.any_unpriced()) {
      return {.joint_pending = true, .priced = steps.priced(), .price = price};
    }
    ruled_out = ruled_out || rounds(options, Level::kExact, false);
  }
  // With the joint syncs off the last round of the first phase is the exact price too.
  const bool priced_in_full = ruled_out && !steps.any_unpriced() &&
                              (options.joint_data_parallel_sync ? steps.joint_started() : true);
  return {.ruled_out = ruled_out,
          .spared = ruled_out && took && steps.any_unpriced(),
          .exact = priced_in_full,
          .priced = steps.priced(),
          .price = price};
}

SearchResult search(const workload::LayerProfile& profile, CommCost& comm,
                    const SearchOptions& options) {
  return search(profile, comm, options, {});
}

SearchResult search(const workload::LayerProfile& profile, CommCost& comm,
                    const SearchOptions& options, const SearchHooks& hooks) {
  if (profile.variants.empty()) throw Error::input("the profile has no variants");
  if (options.cost.devices <= 0) {
    throw Error::input("no devices to place on", {.key = "devices",
                                                  .value = std::to_string(options.cost.devices),
                                                  .expected = "at least 1"});
  }
  const bool artifact = options.cost.rules == workload::MemoryRules::kNestArtifact;
  // Whether the bounds may count the boundary transfers: not when the cost model overlaps them
  // with compute (a plan then costs at least its pipeline without them, never with them).
  const bool bound_transfers = !options.cost.overlap_boundary_transfers;
  std::vector<std::size_t> variants = options.variants;
  if (variants.empty()) {
    for (std::size_t i = 0; i < profile.variants.size(); ++i) variants.push_back(i);
  }
  for (const std::size_t vi : variants) {
    if (vi >= profile.variants.size()) {
      throw Error::input("no such variant in the profile",
                         {.key = "variants", .value = std::to_string(vi)});
    }
    if (profile.variants[vi].layers.empty()) {
      throw Error::input("a variant has no layers",
                         {.key = "variants", .value = std::to_string(vi)});
    }
  }
  std::vector<int> zeros = artifact ? std::vector<int>{0} : options.zero_stages;
  if (zeros.empty()) zeros = {0};
  for (const int z : zeros) {
    if (z < 0 || z > 3) {
      throw Error::input("ZeRO stage out of range",
                         {.key = "zero_stages", .value = std::to_string(z), .expected = "0..3"});
    }
  }
  std::vector<workload::Recompute> recomputes;
  for (const workload::Recompute mode : options.recompute_modes) {
    if (mode != workload::Recompute::kNone && !profile.recompute_allowed) continue;
    if (mode == workload::Recompute::kSelective &&
        (artifact || !profile.selective_recompute_allowed)) {
      continue;
    }
    if (std::find(recomputes.begin(), recomputes.end(), mode) == recomputes.end()) {
      recomputes.push_back(mode);
    }
  }
  if (recomputes.empty()) {
    throw Error::input("no recomputation mode to try", {.key = "recompute_modes",
                                                        .expected = "none, or a mode the profile "
                                                                    "allows"});
  }
  if (options.orders.empty()) throw Error::input("no placement order to try");
  PricedNetwork net(comm);
  std::vector<PlacementOrder> orders = options.orders;
  if (net.placement_independent()) orders.resize(1);

  SearchResult result;
  SearchStats& stats = result.stats;
  Best best;
  if (options.keep_per_order < 0) {
    throw Error::input("negative number of plans to keep",
                       {.key = "keep_per_order",
                        .value = std::to_string(options.keep_per_order),
                        .expected = "an integer >= 0"});
  }
  if (options.replay_candidates < 0) {
    throw Error::input("negative number of candidates to replay",
                       {.key = "replay_candidates",
                        .value = std::to_string(options.replay_candidates),
                        .expected = "an integer >= 0"});
  }
  if (options.keep_per_order > 0 && options.replay_candidates > 0) {
    throw Error::input("keep_per_order and replay_candidates are exclusive",
                       {.key = "replay_candidates",
                        .value = std::to_string(options.replay_candidates),
                        .expected = "0 with keep_per_order > 0"});
  }
  // Kept plans, by (time, order found): with keep_per_order k > 0 the best k of each order, an
  // entry of order o pruned against the k-th of o; with replay_candidates K > 0 the plans that
  // `nest place --verify K` replays, an entry pruned against `verification_cut`; with neither,
  // only the best plan, entries pruned against it alone.
  const bool verifying = options.replay_candidates > 0;
  const auto keep =
      static_cast<std::size_t>(verifying ? options.replay_candidates : options.keep_per_order);
  struct KeptPlan {
    std::int64_t time;
    std::int64_t found;
    Plan plan;
  };
  std::vector<std::vector<KeptPlan>> kept(orders.size());
  std::int64_t found = 0;
  // replay_candidates K: the cut of each order, updated whenever a plan is kept.
  std::vector<std::int64_t> verify_cut(orders.size(), kInf);
  auto update_verify_cuts = [&] {
    std::size_t with_plans = 0;
    std::vector<Time> rest;
    for (const auto& list : kept) {
      with_plans += list.empty() ? 0 : 1;
      for (std::size_t i = 1; i < list.size(); ++i) rest.push_back(list[i].plan.iteration_time);
    }
    for (std::size_t oi = 0; oi < orders.size(); ++oi) {
      const std::optional<Time> first =
          kept[oi].empty() ? std::nullopt : std::optional(kept[oi].front().plan.iteration_time);
      verify_cut[oi] = verification_cut(first, with_plans, rest, options.replay_candidates).ps();
    }
  };
  std::int64_t pass_cap = kInf;  // the cap of the current pass (capped passes)
  auto cut = [&](std::size_t oi) {
    if (keep == 0) return best.time;
    if (verifying) return std::min(verify_cut[oi], pass_cap);
    return kept[oi].size() < keep ? kInf : kept[oi].back().time;
  };
  auto cut_any = [&] {
    std::int64_t c = best.time;
    if (keep == 0) return c;
    for (std::size_t oi = 0; oi < orders.size(); ++oi) c = std::max(c, cut(oi));
    return c;
  };
  std::int64_t least_priced = kInf;  // the least price of a plan recorded or not (capped passes)
  auto record = [&](std::size_t oi, PlanChoice&& choice, const Plan& plan) {
    const std::int64_t t = plan.iteration_time.ps();
    least_priced = std::min(least_priced, t);
    // A plan over memory (priced with ignore_memory) cannot be replayed: no candidate.
    if (keep > 0 && t < cut(oi) && (!verifying || plan.fits())) {
      auto& list = kept[oi];
      // Distinct: not the same choice, nor one that differs only in its ZeRO stage at the
      // same price (the replay times them alike).
      const bool duplicate = std::any_of(list.begin(), list.end(), [&](const KeptPlan& k) {
        return same_candidate(k.plan, plan);
      });
      if (!duplicate) {
        auto at = std::upper_bound(list.begin(), list.end(), t,
                                   [](std::int64_t x, const KeptPlan& k) { return x < k.time; });
        list.insert(at, KeptPlan{t, found++, plan});
        if (list.size() > keep) list.pop_back();
        if (verifying) {
          update_verify_cuts();
          if (hooks.kept) hooks.kept(plan);
        }
      }
    }
    if (t < best.time) {
      best.time = t;
      best.choice = std::move(choice);
    }
  };
  const std::int64_t devices = options.cost.devices;

  struct VariantData {
    std::size_t index;
    const workload::Variant* v;
    VariantDegrees degrees;
    ChainSums sums;
    std::vector<std::size_t> run_end;
    std::vector<int> ds;
    int stage_cap;
    std::size_t blocks;  // the longest run of identical layers (the transformer blocks)
  };
  std::vector<VariantData> data;
  const Bytes capacity =
      options.ignore_memory ? Bytes(std::numeric_limits<std::int64_t>::max()) : profile.hbm;
  auto contains = [](const std::vector<int>& list, int x) {
    return std::find(list.begin(), list.end(), x) != list.end();
  };
  auto depth_allowed = [&](int s) { return options.stages.empty() || contains(options.stages, s); };
  auto v_allowed = [&](int vs) {
    if (options.virtual_stages.empty()) return vs == 1 || !artifact;
    return contains(options.virtual_stages, vs);
  };
  // The DP partitions 1F1B pipelines; the rest is evaluated directly.
  const bool dp_path = v_allowed(1) && !options.uniform_partition;
  for (const std::size_t vi : variants) {
    const auto& v = profile.variants[vi];
    const int dmax =
        static_cast<int>(std::min<std::int64_t>(v.microbatches, devices / v.devices_per_replica));
    if (dmax < 1) continue;
    const int step = experts_span_replicas(v) ? v.expert_parallel : 1;
    int cap = static_cast<int>(v.layers.size());
    if (options.max_stages > 0) cap = std::min(cap, options.max_stages);
    std::vector<int> ds =
        candidate_degrees(v.microbatches, dmax, step, options.all_data_parallel_degrees);
    if (!options.data_parallel.empty()) {
      std::vector<int> all = candidate_degrees(v.microbatches, dmax, step, true);
      ds.clear();
      for (const int d : all) {
        if (contains(options.data_parallel, d)) ds.push_back(d);
      }
    }
    std::vector<std::size_t> run_end = identical_runs(v);
    std::size_t blocks = 0;
    for (std::size_t l = 0; l < run_end.size(); l = run_end[l])
      blocks = std::max(blocks, run_end[l] - l);
    if (blocks < 2) blocks = v.layers.size();
    data.push_back({vi, &v, detail::degrees_of(v), ChainSums(v), std::move(run_end), std::move(ds),
                    cap, blocks});
  }
  // The (S, v) evaluated directly for d replicas: interleaved (v ≥ 2, equal blocks per chunk,
  // microbatches per replica a multiple of S) and, under `uniform_partition`, 1F1B.
  auto direct_vs = [&](const VariantData& vd, int d, int s) {
    std::vector<int> out;
    const auto blocks = static_cast<std::int64_t>(vd.blocks);
    if (v_allowed(1) && options.uniform_partition && blocks % s == 0) out.push_back(1);
    const std::int64_t m = vd.v->microbatches;
    if (s < 2 || artifact || m % d != 0 || (m / d) % s != 0) return out;
    for (int vs = 2; static_cast<std::int64_t>(s) * vs <= blocks; ++vs) {
      if (blocks % (static_cast<std::int64_t>(s) * vs) == 0 && v_allowed(vs)) out.push_back(vs);
    }
    return out;
  };
  auto stages_max = [&](const VariantData& vd, int d) {
    return static_cast<int>(std::min<std::int64_t>(
        vd.stage_cap, devices / (static_cast<std::int64_t>(vd.v->devices_per_replica) * d)));
  };
  auto memory_options = [&](workload::Recompute rec, int zero, int d) {
    return workload::MemoryOptions{
        .rules = options.cost.rules, .zero_stage = zero, .data_parallel = d, .recompute = rec};
  };
  // Memory depends on d only through ZeRO sharding.
  auto memory_d = [&](int zero, int d) { return zero > 0 && !artifact ? d : 0; };

  // Phase 1: a lower bound for every (configuration, d, S) from the zero network, whose tables
  // are cheap: network terms are never negative, so (ceil(M/d) + S − 1)·f0[S] bounds T. Under
  // ZeRO-1..3 memory shrinks as d grows, so one table with the memory of the largest d bounds
  // every d of the configuration.
  struct Item {
    std::int64_t bound = kInf;
    std::size_t slot = 0;
    workload::Recompute rec = workload::Recompute::kNone;
    int zero = 0;
    int d = 1;
    std::vector<std::int64_t> by_depth;       // bound per S (index S), kInf when nothing fits
    std::vector<std::int64_t> by_depth_1f1b;  // of it, the bound of the 1F1B partitions
  };
  std::vector<Item> items;
  // The bounding network: flat at the injection bound with no latency (raised by a millionth so
  // that rounding to picoseconds never lifts a bound above the true price), or free.
  std::unique_ptr<CommCost> bounding;
  if (comm.injection_bound().bytes_per_s() > 0) {
    bounding = std::make_unique<FlatCommCost>(comm.injection_bound() * (1 + 1e-6), Time::zero());
  } else {
    bounding = std::make_unique<ZeroCommCost>();
  }
  PricedNetwork bound_net(*bounding);
  // A lower bound of an interleaved (or uniform) pipeline. Every chunk holds the same blocks, the
  // first also the leading layers (embedding), the last the trailing ones (head); so the
  // busiest stage has at least B/S blocks' work plus the larger end (K times), and the bubble is
  // at least S − 1 times the chunk of B/(S·v) blocks plus the larger end. Work: compute,
  // intra-layer collectives and the chunk boundaries' transfers (the blocks' average), the
  // network terms at their lower bounds on the bounding network (no simulation).
  std::map<std::tuple<std::size_t, int, int>, PositionPrices> lower_prices;
  // The chunks of (variant, S, v): asked for every recomputation, ZeRO stage, d and microbatch
  // count, each time an O(layers) comparison of neighbouring layers.
  std::map<std::tuple<std::size_t, int, int>, std::vector<std::size_t>> partitions;
  auto direct_bound = [&](const VariantData& vd, workload::Recompute rec, int zero, int d,
                          std::int64_t k, int s, int vs) {
    auto [it, fresh] = lower_prices.try_emplace({vd.index, zero, d});
    if (fresh) {
      it->second = detail::price_any_position(*vd.v, vd.degrees, d, zero, false, bound_net);
    }
    const PositionPrices& lb = it->second;
    const bool full = rec == workload::Recompute::kFull;
    auto work = [&](std::size_t i, std::size_t j) {
      std::int64_t w = vd.sums.forward_backward[j] - vd.sums.forward_backward[i] +
                       lb.collectives[j] - lb.collectives[i];
      if (full) {
        w += vd.sums.recompute[j] - vd.sums.recompute[i] + lb.recompute_collectives[j] -
             lb.recompute_collectives[i];
      }
      if (rec == workload::Recompute::kSelective) {
        w += vd.sums.selective[j] - vd.sums.selective[i];
      }
      return static_cast<double>(w);
    };
    auto [memo, unseen] = partitions.try_emplace({vd.index, s, vs});
    if (unseen) memo->second = interleaved_partition(*vd.v, s, vs);
    const std::vector<std::size_t>& b = memo->second;
    const std::size_t n = vd.v->layers.size();
    const std::size_t first_block = b[1] - (b[2] - b[1]);  // chunk 1 holds only blocks
    const std::size_t end_block = b[b.size() - 2] + (b[2] - b[1]);
    double blocks = work(first_block, end_block);
    if (bound_transfers && !lb.transfer.empty()) {
      for (std::size_t c = 1; c + 1 < b.size(); ++c)
        blocks += static_cast<double>(lb.transfer[b[c]]);
    }
    const double ends = std::max(work(0, first_block), work(end_block, n));
    const double chunks = static_cast<double>(s) * vs;
    const double stage = blocks / s + ends;
    const double chunk = blocks / chunks + ends;
    const double bound =
        std::floor(static_cast<double>(k) * stage + static_cast<double>(s - 1) * chunk);
    // Beyond Time's range: no bound at all (0 is one), so the plan is evaluated and its
    // evaluation names the overflow.
    return bound < 9.2e18 ? static_cast<std::int64_t>(bound) : std::int64_t{0};
  };
  for (std::size_t slot = 0; slot < data.size(); ++slot) {
    const VariantData& vd = data[slot];
    for (const workload::Recompute rec : recomputes) {
      for (const int zero : zeros) {
        std::unique_ptr<MemoryLimits> limits;
        std::unique_ptr<Table> table;
        int table_d = -1;
        for (const int d : vd.ds) {
          if (zero > 0 && d == 1) continue;  // ZeRO over one replica is ZeRO-0
          const int smax = stages_max(vd, d);
          if (smax < 1) continue;
          if (!limits) {
            // vd.ds is in descending order: the first d is the largest.
            limits = std::make_unique<MemoryLimits>(
                *vd.v, vd.run_end, memory_options(rec, zero, vd.ds.front()), capacity, stats);
          }
          // ZeRO-3 gathers span the d replicas: their bound depends on d.
          const int price_d = zero == 3 && !bound_net.zero() ? d : 0;
          if (!table || table_d != price_d) {
            table = std::make_unique<Table>(
                *vd.v, vd.sums, Pricer(*vd.v, vd.degrees, std::nullopt, d, zero, bound_net),
                *limits, options.cost.rules, rec, stats, bound_transfers);
            table_d = price_d;
          }
          const std::int64_t k = (vd.v->microbatches + d - 1) / d;
          Item item{.slot = slot, .rec = rec, .zero = zero, .d = d};
          item.by_depth.assign(static_cast<std::size_t>(smax) + 1, kInf);
          item.by_depth_1f1b.assign(static_cast<std::size_t>(smax) + 1, kInf);
          for (int stages = 1; stages <= smax; ++stages) {
            if (!depth_allowed(stages)) continue;
            const std::int64_t f = table->best(stages);
            const std::int64_t factor = k + stages - 1;
            const bool partitioned = f != kInf && f <= (kInf - 1) / factor;
            std::int64_t b = kInf;
            // The DP's optimum also bounds the uniform split (which fits only if some split does).
            for (const int vs : direct_vs(vd, d, stages)) {
              if (vs > 1) b = std::min(b, direct_bound(vd, rec, zero, d, k, stages, vs));
              if (vs == 1 && partitioned) b = std::min(b, factor * f);
            }
            if (dp_path && partitioned) b = std::min(b, factor * f);
            if (b == kInf) continue;
            if (partitioned) item.by_depth_1f1b[static_cast<std::size_t>(stages)] = factor * f;
            item.by_depth[static_cast<std::size_t>(stages)] = b;
            item.bound = std::min(item.bound, b);
          }
          if (item.bound < kInf) items.push_back(std::move(item));
        }
      }
    }
  }
  // Most promising first; equal bounds keep the loop order (variants, recomputation, ZeRO, d).
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.bound < b.bound; });

  // Phase 2: best-first branch and bound. An open entry is a lower bound on the plans it stands
  // for: level 0, a whole (configuration, d) with its phase-1 bound; level 1, one (order, S) of
  // it with a refined bound (a table priced with the network's layout-aware lower bounds, plus
  // bounds on the sync and optimizer step that hold for every partition). Entries leave the
  // queue smallest first; level 0 is refined, level 1 priced exactly. Once the smallest open
  // bound is no better than the best plan, the search is over.
  using Mode = workload::Recompute;
  std::map<std::tuple<std::size_t, Mode, int, int>, std::unique_ptr<MemoryLimits>> limits_cache;
  std::map<std::tuple<std::size_t, Mode, int, int, std::size_t, int>, std::unique_ptr<Table>>
      table_cache;
  std::map<std::tuple<std::size_t, Mode, int, int, std::size_t, int>, std::unique_ptr<Table>>
      bound_cache;
  BoundNetwork bounds(comm, false);
  BoundNetwork pass_bounds(comm, true);
  PricedNetwork exit_net(bounds);
  const bool refine = !net.zero() && !net.placement_independent();

  struct Entry {
    std::int64_t key;
    std::size_t item;
    std::size_t order;
    int stages;
    int level;
    std::int64_t key_1f1b = 0;  // level 1: the bound of its 1F1B partitions (kInf: none fits)
    std::size_t plan = 0;       // level 2: the plan's index in `waiting`
    bool operator>(const Entry& o) const {
      return std::tie(key, item, order, stages, level, plan) >
             std::tie(o.key, o.item, o.order, o.stages, o.level, o.plan);
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> open;
  // Plans requeued at their bound (level 2, `SearchOptions::requeue_joint_from`): priced once
  // every open entry below the cut has come up.
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> later;
  // Whether a directly evaluated pipeline fits memory (the network does not change it).
  std::map<std::tuple<std::size_t, Mode, int, int, int, int>, bool> direct_fits;
  // Capped passes (an estimate-only search, `SearchOptions::capped_passes`): the branch and
  // bound below runs with its best time starting at a cap c instead of infinity, until a pass
  // finds a plan. The first cap is the least entry bound times 1.25. After a pass that found
  // none: one more than the least price of the plans it priced (all at c or above), when it
  // priced one, which the next pass is sure to find (that plan passed every check under a lower
  // cut); else the least entry bound times 1.5, 2, 3, 5 in turn; finally no cap (also after
  // the least price's pass, should it find nothing).
  // Why a pass that finds a plan below c finds the uncapped search's plan. Entry keys come from
  // analytic bounds that do not depend on what was priced before (but for the cut-dependent
  // choice of a level-1 key noted below), and a child's key is never below its parent's, so the
  // entries with keys below the best time leave the queue in the same order in both searches,
  // as far as the plans below it go. Every other check rules a table or a plan out only when a
  // lower bound of its price is at least the cut, the best time so far (bounds the oracle has
  // meanwhile sharpened with memoized answers are still lower bounds). So a plan whose price is
  // below the best time at the point it comes up is priced by both searches, and a plan at or
  // above it cannot become the best (that needs a strictly lower time). By induction the two
  // searches record the same sequence of bests below c, and the capped pass ends with the
  // uncapped best, ties included (the first found). With a loose first bound the uncapped
  // search prices many poor plans before it meets a good one (GPT-3 on 8,192 rail GPUs: 8.6 s,
  // 7.4 s, ... before the 1.35 s optimum); under a cap they are ruled out by their bounds.
  // Searches for --verify K (`replay_candidates`) run capped passes too: each order's cut is
  // the smaller of its verification cut and c, and a pass ends the search when every order's
  // verification cut, from the plans the pass kept (all below c), is at most c; else the next
  // cap (the geometric ones: a price met above c says nothing about the K-th plan). Why such
  // a pass keeps the uncapped search's candidates. The cuts only fall during a pass, so each
  // order's cut was at least its final V <= c all along: every plan of order o priced below
  // V_o came up unpruned and was recorded, in the same relative order as in the uncapped
  // search. (Keys are not fixed: a level-1 key takes the 1F1B partitions' bound factor * f only
  // while that is below the cut of the moment, which differs between the searches. But a key
  // is raised past factor * f only when factor * f is at or above that cut, and then every
  // plan of the entry costs at least that cut; so the plans below both searches' final cuts
  // leave the queue in the same relative order. The same holds for the estimate-only passes
  // above.) A plan that the pass did not record costs V_o or more, and
  // `verification_cut` is the price from which a plan of o cannot enter the replay selection
  // (the best of each order, then the best K - n of the rest, by (time, order found)) given the
  // kept plans, provided it does not add an order: none can, every order having a kept plan
  // (an order without one leaves its cut infinite, above c). So adding the unrecorded plans
  // changes no selection, and the selection is the uncapped search's. Per-order keeping
  // (`keep_per_order`) runs one uncapped pass. Llama-3.1-405B on 4,096 rail GPUs, --verify 4:
  // the uncapped pass priced a ZeRO-3 plan over 1,024-GPU data-parallel groups before it had
  // four plans (15 s of event-simulated rings of 8.4 M events each); the first cap rules it
  // out on its bounds (search 18 -> 3.3 s, the same candidates).
  // The prices of the plans priced so far: a later pass prices most of them again. The cost
  // model is a function of the choice (the oracle's answers do not depend on what it was asked
  // before), so a plan met again takes its first price. With the two maps below, a pass that
  // does not end the search costs the next one little more than its own new plans (GPT-3 on
  // 4,096 rail GPUs, --verify 4, three passes: 4,868 tables built against 6,306 without them and
  // 4,864 in one uncapped pass).
  std::map<PlanChoice, Plan> priced_plans;
  auto price = [&](const PlanChoice& choice) -> const Plan& {
    auto it = priced_plans.find(choice);
    if (it == priced_plans.end()) {
      it = priced_plans.emplace(choice, evaluate(profile, choice, comm, options.cost)).first;
    }
    return it->second;
  };
  // What a later pass asks again of (item, order, S): the least stage time of its partitions on
  // the layout-aware bounds (level 0) and its exact optimum and boundaries (level 1). Both are
  // functions of their key: the layout bounds (`collective_bound`, `transfer_bound`) are
  // computed, never sharpened by remembered answers, and exact prices are exact; so an entry's
  // key, and the order in which entries leave the queue, are what a fresh table would give.
  std::map<std::tuple<std::size_t, std::size_t, int>, std::int64_t> exit_bests;
  std::map<std::tuple<std::size_t, std::size_t, int>,
           std::pair<std::int64_t, std::vector<std::size_t>>>
      optima;
  // A pass that does not end the search leaves the next cap to a guess: the next geometric
  // one, or (estimate-only) one more than the least price met. The plans its sync checks ruled
  // out against the cap itself (`syncs_rule_out`: their last round's price, at or above the
  // cap, bounds their price from below) say more: the one of least bound is often the best or
  // near it, so the next pass is capped kGuessMargin above that bound when that is below the
  // next cap (a guessed pass that does not end the search is followed by the cap the loop then
  // takes, unguessed, so at most one guessed pass per step). Any cap gives the uncapped search's
  // plans (the proof above); a guess changes only which passes run. Mixtral-8x7B on 16,384 rail
  // GPUs: the pass at twice the least entry bound (0.1902 s) ruled the best plan (0.1914 s) out on
  // 0.1914 s, the least of its checks' bounds, and the next pass was capped one above the least
  // price met (0.2575 s); now at 0.2105 s. Pricing that plan instead, to cap the next pass one
  // above its price, did as well at 16,384 GPUs, but a plan priced in full costs what the
  // search otherwise spares: Mixtral-8x7B's search at 131,072 GPUs took 1,223 s against 763 s
  // pricing that one plan, and over 1,700 s against 865 s (stopped there) pricing every plan of
  // bound below the least price met, least bound first (both binaries at once). The margin: GPT-3
  // 175B's tp-pp-dp best on 16,384 rail GPUs lies 7% above the least bound its failed pass met
  // (0.9915 against 0.9259 s), at t = 4 on 1,024 GPUs 2%.
  constexpr double kGuessMargin = 1.1;
  std::int64_t least_ruled = kInf;  // the least bound on which the sync checks ruled a plan
                                    // out against the cap
  std::int64_t guessed_cap = kInf;
  std::vector<std::int64_t> caps;  // the geometric caps, in turn
  const bool capped = options.capped_passes && (keep == 0 || verifying);
  if (capped && !items.empty()) {
    for (const double m : {1.25, 1.5, 2.0, 3.0, 5.0}) {
      const double c = static_cast<double>(items.front().bound) * m;
      if (c < static_cast<double>(kInf)) caps.push_back(static_cast<std::int64_t>(c));
    }
  }
  caps.push_back(kInf);
  // What a sync check that ruled its plan out adds to the counters and to the next cap's guess.
  auto tally = [&](const SyncCheck& check, std::int64_t at) {
    if (!check.ruled_out) return false;
    ++stats.sync_bounded;
    if (check.spared) ++stats.syncs_spared;
    // Priced in full (every sync exact) on the way: a price as `record` takes it, for the
    // next capped pass.
    if (check.exact) least_priced = std::min(least_priced, check.price.ps());
    if (at == pass_cap) least_ruled = std::min(least_ruled, check.price.ps());
    return true;
  };
  // Waiting plans ruled out on the bound they wait at, before their joint syncs are priced.
  auto ruled_out_waiting = [&](std::size_t plans) {
    stats.sync_bounded += static_cast<std::int64_t>(plans);
    stats.syncs_spared += static_cast<std::int64_t>(plans);
  };
  // Requeueing (`SearchOptions::requeue_joint_from`). Pricing a plan's joint syncs is the one
  // step of a check that simulates many stages' syncs at once, once per run of stages (GPT-3
  // 175B on 131,072 rail GPUs: 49-98 runs of 9-17 stages' trees on 8 rails, 3-7 s each, ~300 s
  // per plan that stands). A plan whose check reaches that step with its price, every joint sync
  // at its event-free bound (a lower bound), still below the cut waits in a queue of its own
  // (`later`, level 2), keyed by that price, until every open entry below the cut has come up;
  // then the waiting plans are priced least bound first. A plan met later in the pass with a
  // lower such bound, often the better one, is then priced first and lowers the cut, against
  // which the other waiting plans may be ruled out on their bound or after a few runs. (Keyed
  // into the open queue instead, GPT-3's first such plan came up before the better one's entry
  // did, whose own bound was looser: no gain.) This changes the order in which plans are
  // priced, and with it which of two plans of equal price is found first; so such a pass does
  // not end the search. When it would have, the next pass is capped one above its best time and
  // runs without requeueing: a pass in the search's own order that finds its plan below its
  // cap, so its result is the uncapped search's (the proof above). Searches that keep
  // candidates (--verify K) do not requeue (see `requeue`). It reprices little (1.4-2.4 s at
  // 65,536-131,072 GPUs): the plans, bounds and simulations are memoized, and its cut starts one
  // above the best price. The requeued plans, by index; `direct`: evaluated directly (it may not
  // fit memory).
  struct Waiting {
    PlanChoice choice;
    bool direct;
  };
  std::vector<Waiting> waiting;
  // Whether passes requeue such plans: estimate-only searches, until a pass confirms what one
  // found (that pass and any after it price every plan as it comes up). Not under --verify K:
  // there each order's cut, from K kept plans, stays high while plans wait, so more plans reach
  // their joint syncs (Mixtral-8x7B on 131,072 GPUs with every default: 662 waited, and the
  // pass that found them took 1,569 s).
  bool requeue = capped && keep == 0 && options.requeue_joint_from > 0;
  // The cap of a confirming pass to run next; negative: none.
  std::int64_t confirm_cap = -1;
  for (std::size_t next = 0; next < caps.size() || confirm_cap >= 0;) {
    const bool confirms = confirm_cap >= 0;
    const bool guessed = !confirms && guessed_cap < kInf;
    std::int64_t cap = confirms ? confirm_cap : guessed_cap;
    if (confirms) {
      confirm_cap = -1;
      requeue = false;
    } else if (!guessed) {
      cap = caps[next++];
      if (keep == 0 && stats.passes > 0 && least_priced < kInf && next < caps.size()) {
        cap = least_priced + 1;
        next = caps.size() - 1;  // then only the uncapped pass (should this one find nothing)
      }
    }
    guessed_cap = kInf;
    least_ruled = kInf;
    ++stats.passes;
    stats.last_cap = cap == kInf ? 0 : cap;
    best = Best{.time = cap, .choice = {}};
    pass_cap = cap;
    for (auto& list : kept) list.clear();
    std::fill(verify_cut.begin(), verify_cut.end(), kInf);
    open = {};
    waiting.clear();
    later = {};
    for (std::size_t i = 0; i < items.size(); ++i) open.push({items[i].bound, i, 0, 0, 0});

    for (;;) {
      // The open entries first; then the requeued plans, least bound first.
      const bool from_later = open.empty() || open.top().key >= cut_any();
      auto& from = from_later ? later : open;
      if (from.empty()) break;
      const Entry e = from.top();
      from.pop();
      if (e.key >= cut_any()) {
        if (e.level == 2) ruled_out_waiting(1);
        break;
      }
      if (e.level == 2) {
        // A requeued plan whose bound came up: its joint syncs priced, as far as the cut asks.
        if (e.key >= cut(e.order)) {
          ruled_out_waiting(1);
          continue;
        }
        Waiting& w = waiting[e.plan];
        const std::int64_t at = cut(e.order);
        if (tally(syncs_rule_out(profile, w.choice, comm, options.cost, Time::picoseconds(at)),
                  at)) {
          continue;
        }
        if (w.direct) ++stats.candidates;
        const Plan& plan = price(w.choice);
        if (w.direct && !options.ignore_memory && !plan.fits()) continue;
        record(e.order, std::move(w.choice), plan);
        continue;
      }
      const Item& item = items[e.item];
      const VariantData& vd = data[item.slot];
      const workload::Variant& v = *vd.v;
      const int d = item.d;
      const int dpr = v.devices_per_replica;
      const std::int64_t k = (v.microbatches + d - 1) / d;
      if (table_cache.size() > 64 || bound_cache.size() > 64 || limits_cache.size() > 64) {
        table_cache.clear();  // tables refer to limits: drop them first
        bound_cache.clear();
        limits_cache.clear();
      }
      auto& limits = limits_cache[{item.slot, item.rec, item.zero, memory_d(item.zero, d)}];
      if (!limits) {
        limits = std::make_unique<MemoryLimits>(
            v, vd.run_end, memory_options(item.rec, item.zero, d), capacity, stats);
      }
      // A table for (order, S): cached when the stage's devices do not depend on S.
      // `transfers`: whether its stage costs count the boundary transfers (Table).
      auto table_for = [&](auto& cache, PricedNetwork& prices, std::size_t oi, int stages,
                           std::unique_ptr<Table>& local, bool transfers = true) -> Table& {
        const PlacementOrder order = orders[oi];
        const bool per_depth = !net.placement_independent() && !pipeline_outermost(order);
        if (per_depth) {
          local = std::make_unique<Table>(
              v, vd.sums,
              Pricer(v, vd.degrees, DeviceMap::make(order, stages, d, dpr), d, item.zero, prices),
              *limits, options.cost.rules, item.rec, stats, transfers);
          return *local;
        }
        // Prices depend on d only through the groups' sizes and neighbours: a zero network never,
        // a flat one only through ZeRO-3 gathers.
        const int price_d = net.zero()                    ? 0
                            : net.placement_independent() ? (item.zero == 3 ? d : 0)
                                                          : d;
        auto& cached = cache[{item.slot, item.rec, item.zero, memory_d(item.zero, d), oi, price_d}];
        if (!cached) {
          std::optional<DeviceMap> map;
          if (!net.placement_independent()) {
            map = DeviceMap::make(order, static_cast<int>(v.layers.size()), d, dpr);
          }
          cached =
              std::make_unique<Table>(v, vd.sums, Pricer(v, vd.degrees, map, d, item.zero, prices),
                                      *limits, options.cost.rules, item.rec, stats, transfers);
        }
        return *cached;
      };

      if (e.level == 0) {
        for (std::size_t oi = 0; oi < orders.size(); ++oi) {
          for (int stages = 1; stages < static_cast<int>(item.by_depth.size()); ++stages) {
            std::int64_t key = item.by_depth[static_cast<std::size_t>(stages)];
            std::int64_t key_1f1b = item.by_depth_1f1b[static_cast<std::size_t>(stages)];
            if (key >= cut(oi)) continue;
            if (refine) {
              const std::vector<int> direct = direct_vs(vd, d, stages);
              std::int64_t pipe = kInf;
              const std::int64_t factor = k + stages - 1;
              if (dp_path || (!direct.empty() && direct.front() == 1)) {
                auto [at, fresh] = exit_bests.try_emplace({e.item, oi, stages}, kInf);
                if (fresh) {
                  std::unique_ptr<Table> local;
                  at->second = table_for(bound_cache, exit_net, oi, stages, local, bound_transfers)
                                   .best(stages);
                }
                const std::int64_t f = at->second;
                if (f != kInf && f <= (cut(oi) - 1) / factor) pipe = factor * f;
                key_1f1b = pipe;
              }
              for (const int vs : direct) {
                if (vs > 1)
                  pipe = std::min(pipe, direct_bound(vd, item.rec, item.zero, d, k, stages, vs));
              }
              if (pipe >= cut(oi)) continue;
              // The tail (exposed sync and optimizer step) is bounded by zero only: with the
              // reduction beside the backward and the cooldown's lag, no stage's share of it is
              // known before the partition.
              key = std::max(key, pipe);
              if (key_1f1b < kInf) {
                key_1f1b = std::max(item.by_depth_1f1b[static_cast<std::size_t>(stages)], key_1f1b);
              }
              if (key >= cut(oi)) continue;
            }
            open.push({key, e.item, oi, stages, 1, key_1f1b});
          }
        }
        continue;
      }

      // The plan's price on the sharper bounds, then its first bucket's reduction within what the
      // plan can afford, then its exact price with each stage's sync alone (the joint factor is at
      // least 1), then with the joint syncs at their event-free bounds, then in full: each step can
      // rule it out before the next, costlier one (`ruled_out`).
      auto lower_bound = [&](const PlanChoice& choice, CommCost& prices) {
        return plan_lower_bound(profile, choice, prices, options.cost).bound.ps();
      };
      // Stage 0's bucket reduction R, priced only as long as the plan can still beat `at`: the
      // bound's second form rules it out once before + 0.999·B·R >= at.
      auto buckets_rule_out = [&](const PlanBound& lb, std::int64_t at) {
        if (!lb.before_buckets || at == kInf) return false;
        const Plan& p = lb.plan;
        const std::int64_t bytes =
            detail::bucket_bytes(vd.sums, p.stages.front(), options.cost.gradient_buckets);
        if (p.choice.data_parallel <= 1 || bytes <= 0) return false;
        // Positive: the plan's bound, at least before_buckets, is below `at`.
        const double room = static_cast<double>(at - lb.before_buckets->ps());
        // Past `within`, 0.999·B·R exceeds the room by more than a picosecond.
        const auto within = Time::picoseconds(
            static_cast<std::int64_t>(std::ceil(room / (0.999 * options.cost.gradient_buckets))) +
            1);
        return !comm.collective_within(detail::sync_operation(p.choice.zero_stage), Bytes(bytes),
                                       detail::sync_layout(p.device_map(), 0), within);
      };
      // `direct`: an interleaved or uniform pipeline, which may not fit memory (a partition of
      // the DP always does). Returns true also when the plan waits in `later` (`requeue`).
      auto ruled_out = [&](const PlanChoice& choice, std::int64_t at, bool direct) {
        if (!refine || !options.pass_bounds) return false;
        const PlanBound lb = plan_lower_bound(profile, choice, pass_bounds, options.cost);
        if (lb.bound.ps() >= at) {
          ++stats.pass_bounded;
          return true;
        }
        // Only a pipeline of replicated stages has joint syncs (else pricing its syncs one at a
        // time would end in its full price).
        const bool joint = options.cost.joint_data_parallel_sync && choice.data_parallel > 1 &&
                           choice.stages() > 1;
        if (buckets_rule_out(lb, at)) {
          ++stats.sync_bounded;
          return true;
        }
        // Nothing is ruled out below no cut: the plan is priced in full at once.
        if (!joint || at == kInf) return false;
        const bool may_wait =
            requeue && static_cast<std::int64_t>(choice.stages()) * choice.data_parallel * dpr >=
                           options.requeue_joint_from;
        const SyncCheck check =
            syncs_rule_out(profile, choice, comm, options.cost, Time::picoseconds(at), may_wait);
        if (check.joint_pending) {
          // It waits at its bound (below `at`) until the open entries below the cut are done.
          later.push({check.price.ps(), e.item, e.order, e.stages, 2, 0, waiting.size()});
          waiting.push_back({choice, direct});
          ++stats.requeued;
          return true;
        }
        return tally(check, at);
      };

      // Level 1: the exact price of (order, S).
      const PlacementOrder order = orders[e.order];
      const int stages = e.stages;
      auto price_partitioned = [&] {
        auto [at, fresh] = optima.try_emplace({e.item, e.order, stages});
        if (fresh) {
          std::unique_ptr<Table> local;
          Table& t = table_for(table_cache, net, e.order, stages, local);
          at->second.first = t.best(stages);
          if (at->second.first != kInf) at->second.second = t.boundaries(stages);
        }
        const std::int64_t stage_time = at->second.first;
        if (stage_time == kInf) return;
        const std::int64_t factor = k + stages - 1;
        if (bound_transfers && stage_time > (cut(e.order) - 1) / factor) return;
        ++stats.candidates;
        PlanChoice choice{.variant = vd.index,
                          .boundaries = at->second.second,
                          .data_parallel = d,
                          .zero_stage = item.zero,
                          .recompute = item.rec,
                          .order = order};
        // The tail (exposed sync, optimizer step) needs every stage's last backward: the cost
        // model prices the partition in full, once its bound on the network's lower bounds (no
        // simulation) can still win.
        if (refine && lower_bound(choice, bounds) >= cut(e.order)) return;
        if (ruled_out(choice, cut(e.order), false)) return;
        const Plan& plan = price(choice);
        record(e.order, std::move(choice), plan);
      };
      if (dp_path && e.key_1f1b < cut(e.order)) price_partitioned();
      // Interleaved pipelines and the uniform split, evaluated in full when they fit memory.
      for (const int vs : direct_vs(vd, d, stages)) {
        const std::int64_t bound =
            vs == 1 ? e.key_1f1b : direct_bound(vd, item.rec, item.zero, d, k, stages, vs);
        if (bound >= cut(e.order)) continue;
        PlanChoice choice{.variant = vd.index,
                          .boundaries = interleaved_partition(v, stages, vs),
                          .data_parallel = d,
                          .zero_stage = item.zero,
                          .recompute = item.rec,
                          .virtual_stages = vs,
                          .order = order};
        if (!options.ignore_memory) {
          auto [fit, fresh] = direct_fits.try_emplace(
              {item.slot, item.rec, item.zero, memory_d(item.zero, d), stages, vs}, false);
          if (fresh) {
            fit->second =
                fits_memory(v, choice, k, memory_options(item.rec, item.zero, d), capacity);
            ++stats.memory_queries;
          }
          if (!fit->second) continue;
        }
        // The plan on the network's lower bounds (no simulation) bounds its exact price.
        // (Not the plan's full price on the bounds: stage 0's first bucket is ready earlier when
        // its last backward is longer, so that price is not monotone in the network's.)
        if (refine && lower_bound(choice, bounds) >= cut(e.order)) continue;
        if (ruled_out(choice, cut(e.order), true)) continue;
        ++stats.candidates;
        const Plan& plan = price(choice);
        if (!options.ignore_memory && !plan.fits()) continue;
        record(e.order, std::move(choice), plan);
      }
    }
    ruled_out_waiting(later.size());  // left waiting: their bounds reach the cut
    bool ends = cap == kInf || (keep == 0 && best.time < cap) ||
                (verifying && std::all_of(verify_cut.begin(), verify_cut.end(),
                                          [&](std::int64_t c) { return c <= cap; }));
    // A pass that requeued plans (estimate-only: `requeue`) priced them out of the search's
    // order, which may change which of two equal plans it found: the next pass, capped one above
    // its best time (finite: a plan waits only below a finite cut) and without requeueing, finds
    // that plan or an earlier equal one below its cap in the search's order, and so ends the
    // search with the uncapped search's plan (the proof above).
    if (ends && !waiting.empty()) {
      if (best.time == kInf) throw Error::internal("plans waited below no cut");
      confirm_cap = best.time + 1;
      ends = false;
    } else if (confirms && !ends) {
      throw Error::internal("a confirming pass found no plan below its cap");
    }
    if (hooks.pass) {
      PassReport report{
          .pass = stats.passes,
          .cap = cap == kInf ? std::nullopt : std::optional<Time>(Time::picoseconds(cap)),
          .guessed = guessed,
          .confirms = confirms,
          .ends = ends,
          .to_confirm = confirm_cap >= 0,
          .stats = stats};
      report.stats.network_queries = net.queries();
      hooks.pass(report);
    }
    if (ends) break;
    if (confirm_cap >= 0) continue;
    if (!guessed && next < caps.size() && least_ruled < kInf) {
      // The cap the loop takes next (one above the least price met only before the last).
      const std::int64_t following = keep == 0 && least_priced < kInf && next + 1 < caps.size()
                                         ? least_priced + 1
                                         : caps[next];
      const double guess = static_cast<double>(least_ruled) * kGuessMargin;
      if (guess < static_cast<double>(following)) guessed_cap = static_cast<std::int64_t>(guess);
    }
  }
  stats.network_queries = net.queries();

  if (best.time == kInf) {
    if (!options.ignore_memory && options.stages.size() == 1 && options.data_parallel.size() == 1) {
      // A fixed configuration: name the stage that does not fit, and by how much.
      SearchOptions anyway = options;
      anyway.ignore_memory = true;
      SearchResult priced = search(profile, comm, anyway);
      if (priced.best) {
        const Plan& p = *priced.best;
        std::size_t worst = 0;
        for (std::size_t s = 0; s < p.stages.size(); ++s) {
          if (p.stages[s].memory.total() > p.stages[worst].memory.total()) worst = s;
        }
        const Bytes need = p.stages[worst].memory.total();
        result.infeasible_reason = fmt::format(
            "the plan does not fit memory: stage {} needs {} per device, {} more than the {} of "
            "device memory (ignore_memory prices it anyway)",
            worst, format_bytes(need), format_bytes(need - p.capacity), format_bytes(p.capacity));
        result.over_memory = std::move(priced.best);
        return result;
      }
    }
    result.infeasible_reason =
        explain_infeasible(profile, variants, recomputes, zeros, options, stats);
    return result;
  }
  Plan plan = evaluate(profile, best.choice, comm, options.cost);
  if (plan.iteration_time.ps() != best.time) {
    throw Error::internal(
        fmt::format("the search priced its best plan at {} ps but the cost model gives {} ps",
                    best.time, plan.iteration_time.ps()));
  }
  if (keep > 0) {
    std::vector<KeptPlan> all;
    for (auto& list : kept) {
      for (auto& k : list) all.push_back(std::move(k));
    }
    std::stable_sort(all.begin(), all.end(), [](const KeptPlan& a, const KeptPlan& b) {
      return std::tie(a.time, a.found) < std::tie(b.time, b.found);
    });
    for (auto& k : all) result.candidates.push_back(std::move(k.plan));
    if (verifying) {
      // Kept plans that a later one pushed out of the set are dropped.
      const std::vector<bool> take = replay_selection(result.candidates, keep);
      std::vector<Plan> set;
      for (std::size_t i = 0; i < take.size(); ++i) {
        if (take[i]) set.push_back(std::move(result.candidates[i]));
      }
      result.candidates = std::move(set);
    }
    const bool listed = !verifying || plan.fits();
    if (listed &&
        (result.candidates.empty() || !(result.candidates.front().choice == plan.choice))) {
      // Equal times found in another order: the best plan leads the list.
      auto it = std::find_if(result.candidates.begin(), result.candidates.end(),
                             [&](const Plan& c) { return c.choice == plan.choice; });
      if (it != result.candidates.end()) result.candidates.erase(it);
      result.candidates.insert(result.candidates.begin(), plan);
    }
  }
  result.best = std::move(plan);
  return result;
}

}  // namespace nest::placer
