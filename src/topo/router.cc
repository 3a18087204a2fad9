#include "nest/topo/router.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "topo/graph.h"
#include "topo/layout.h"

namespace nest::topo {
namespace {

// Links between adjacent nodes, sorted by neighbour for a binary search per hop.
class LinkIndex {
 public:
  explicit LinkIndex(const Topology& t) : begin_(t.num_nodes() + 1, 0) {
    for (NodeId n = 0; n < t.num_nodes(); ++n) {
      begin_[n + 1] = begin_[n] + static_cast<std::uint32_t>(t.out_links(n).size());
    }
    entries_.reserve(t.num_links());
    for (NodeId n = 0; n < t.num_nodes(); ++n) {
      const std::size_t first = entries_.size();
      for (const LinkId l : t.out_links(n)) entries_.push_back({t.link(l).dst, l});
      // Stable: among parallel cables the first added wins.
      std::stable_sort(entries_.begin() + static_cast<std::ptrdiff_t>(first), entries_.end(),
                       [](const Entry& a, const Entry& b) { return a.to < b.to; });
    }
  }

  [[nodiscard]] LinkId between(NodeId a, NodeId b) const {
    const auto first = entries_.begin() + begin_[a];
    const auto last = entries_.begin() + begin_[a + 1];
    const auto it =
        std::lower_bound(first, last, b, [](const Entry& e, NodeId to) { return e.to < to; });
    if (it == last || it->to != b) throw Error::internal("router: no link between adjacent nodes");
    return it->link;
  }

 private:
  struct Entry {
    NodeId to;
    LinkId link;
  };
  std::vector<std::uint32_t> begin_;
  std::vector<Entry> entries_;
};

// Appends the links joining consecutive nodes of a walk.
class PathBuilder {
 public:
  PathBuilder(const LinkIndex& index, std::vector<LinkId>& out) : index_(index), out_(out) {}
  void start(NodeId n) { last_ = n; }
  void to(NodeId n) {
    out_.push_back(index_.between(last_, n));
    last_ = n;
  }

 private:
  const LinkIndex& index_;
  std::vector<LinkId>& out_;
  NodeId last_ = 0;
};

// Fat-tree paths from tables of the links between each switch and its neighbours, built once
// with the link index (same cables, the first of parallel ones): a route is a few table reads,
// with no binary search and no division by the tree's radix per hop.
class FatTreePaths {
 public:
  FatTreePaths(const detail::FatTreeLayout& layout, const LinkIndex& index) : f_(layout) {
    const auto hosts = static_cast<std::size_t>(f_.hosts);
    const auto h = static_cast<std::size_t>(f_.h);
    host_edge_.resize(hosts);
    host_up_.resize(hosts);
    host_down_.resize(hosts);
    for (std::size_t host = 0; host < hosts; ++host) {
      const auto edge = static_cast<std::uint32_t>(host / h);
      host_edge_[host] = edge;
      host_up_[host] =
          index.between(f_.host_node(static_cast<std::int64_t>(host)), f_.edge_base + edge);
      host_down_[host] =
          index.between(f_.edge_base + edge, f_.host_node(static_cast<std::int64_t>(host)));
    }
    if (f_.d > 1) {
      const auto devices = static_cast<std::size_t>(f_.devices);
      device_up_.resize(devices);
      device_down_.resize(devices);
      for (std::size_t device = 0; device < devices; ++device) {
        const NodeId su =
            f_.host_node(static_cast<std::int64_t>(device / static_cast<std::size_t>(f_.d)));
        device_up_[device] = index.between(static_cast<NodeId>(device), su);
        device_down_[device] = index.between(su, static_cast<NodeId>(device));
      }
    }
    const std::size_t switches = static_cast<std::size_t>(f_.k) * h;  // edges, and aggregations
    edge_up_.resize(switches * h);
    edge_down_.resize(switches * h);
    agg_up_.resize(switches * h);
    agg_down_.resize(switches * h);
    for (std::size_t e = 0; e < switches; ++e) {
      const int pod = static_cast<int>(e / h);
      for (std::size_t a = 0; a < h; ++a) {
        const NodeId agg = f_.agg(pod, static_cast<int>(a));
        edge_up_[e * h + a] = index.between(f_.edge_base + static_cast<NodeId>(e), agg);
        edge_down_[e * h + a] = index.between(agg, f_.edge_base + static_cast<NodeId>(e));
      }
    }
    for (std::size_t g = 0; g < switches; ++g) {  // aggregation switch g = pod * h + a
      const auto a = static_cast<int>(g % h);
      for (std::size_t c = 0; c < h; ++c) {
        const NodeId core = f_.core(a, static_cast<int>(c));
        agg_up_[g * h + c] = index.between(f_.agg_base + static_cast<NodeId>(g), core);
        agg_down_[g * h + c] = index.between(core, f_.agg_base + static_cast<NodeId>(g));
      }
    }
  }

  [[nodiscard]] std::uint64_t count(DeviceId s, DeviceId d) const {
    const std::int64_t hs = host(s);
    const std::int64_t hd = host(d);
    if (hs == hd) return 1;
    const std::uint32_t es = host_edge_[static_cast<std::size_t>(hs)];
    const std::uint32_t ed = host_edge_[static_cast<std::size_t>(hd)];
    if (es == ed) return 1;
    const auto h = static_cast<std::uint64_t>(f_.h);
    if (es / h == ed / h) return h;
    return h * h;
  }

  void walk(DeviceId s, DeviceId d, std::uint64_t idx, std::vector<LinkId>& out) const {
    const auto hs = static_cast<std::size_t>(host(s));
    const auto hd = static_cast<std::size_t>(host(d));
    if (f_.d > 1) out.push_back(device_up_[s]);
    if (hs != hd) {
      out.push_back(host_up_[hs]);
      const std::size_t es = host_edge_[hs];
      const std::size_t ed = host_edge_[hd];
      if (es != ed) {
        const auto h = static_cast<std::size_t>(f_.h);
        const std::size_t ps = es / h;
        const std::size_t pd = ed / h;
        if (ps == pd) {
          out.push_back(edge_up_[es * h + idx]);
          out.push_back(edge_down_[ed * h + idx]);
        } else {
          const std::size_t a = idx / h;
          const std::size_t c = idx % h;
          out.push_back(edge_up_[es * h + a]);
          out.push_back(agg_up_[(ps * h + a) * h + c]);
          out.push_back(agg_down_[(pd * h + a) * h + c]);
          out.push_back(edge_down_[ed * h + a]);
        }
      }
      out.push_back(host_down_[hd]);
    }
    if (f_.d > 1) out.push_back(device_down_[d]);
  }

 private:
  [[nodiscard]] std::int64_t host(DeviceId device) const {
    return f_.d == 1 ? std::int64_t{device} : std::int64_t{device} / f_.d;
  }

  detail::FatTreeLayout f_;
  std::vector<std::uint32_t> host_edge_;  // per host: its edge switch, pod * h + e
  std::vector<LinkId> host_up_;           // per host: its node (device or scale-up) -> edge
  std::vector<LinkId> host_down_;         // per host: edge -> its node
  std::vector<LinkId> device_up_;         // per device (scale-up hosts): device -> scale-up
  std::vector<LinkId> device_down_;       // per device: scale-up -> device
  std::vector<LinkId> edge_up_;           // [edge * h + a]: edge -> aggregation a of its pod
  std::vector<LinkId> edge_down_;         // [edge * h + a]: aggregation a -> edge
  std::vector<LinkId> agg_up_;            // [(pod * h + a) * h + c]: aggregation -> core (a, c)
  std::vector<LinkId> agg_down_;          // [(pod * h + a) * h + c]: core (a, c) -> aggregation
};

struct SpineLeafPaths {
  detail::SpineLeafLayout s;

  [[nodiscard]] std::uint64_t count(DeviceId a, DeviceId b) const {
    return a / s.per_leaf == b / s.per_leaf ? 1 : static_cast<std::uint64_t>(s.spines);
  }
  void walk(DeviceId a, DeviceId b, std::uint64_t idx, PathBuilder& p) const {
    const auto la = static_cast<int>(a / s.per_leaf);
    const auto lb = static_cast<int>(b / s.per_leaf);
    p.start(a);
    p.to(s.leaf(la));
    if (la != lb) {
      p.to(s.spine(static_cast<int>(idx)));
      p.to(s.leaf(lb));
    }
    p.to(b);
  }
};

// Rail-optimized paths from tables of each device's and each leaf's links, built once with the
// link index (the first of parallel cables, as a walk through the index picks): a route is a
// few table reads instead of a binary search per hop (a spine's links to thousands of leaves).
class RailPaths {
 public:
  RailPaths(const detail::RailLayout& layout, const LinkIndex& index) : r_(layout) {
    const auto devices = static_cast<std::size_t>(r_.devices);
    nic_up_.resize(devices);
    nic_down_.resize(devices);
    if (r_.has_nvswitch()) {
      nvlink_up_.resize(devices);
      nvlink_down_.resize(devices);
    }
    for (std::size_t device = 0; device < devices; ++device) {
      const auto dev = static_cast<NodeId>(device);
      const int node = static_cast<int>(device / static_cast<std::size_t>(r_.gpus));
      const NodeId leaf = r_.leaf(node / r_.per_leaf, static_cast<int>(device % r_.gpus));
      nic_up_[device] = index.between(dev, leaf);
      nic_down_[device] = index.between(leaf, dev);
      if (r_.has_nvswitch()) {
        nvlink_up_[device] = index.between(dev, r_.nvswitch(node));
        nvlink_down_[device] = index.between(r_.nvswitch(node), dev);
      }
    }
    const auto leaves = static_cast<std::size_t>(r_.units) * static_cast<std::size_t>(r_.gpus);
    const auto spines = static_cast<std::size_t>(r_.spines);
    leaf_up_.resize(leaves * spines);
    leaf_down_.resize(leaves * spines);
    for (std::size_t leaf = 0; leaf < leaves; ++leaf) {
      const NodeId node = r_.leaf_base + static_cast<NodeId>(leaf);
      for (std::size_t s = 0; s < spines; ++s) {
        const NodeId spine = r_.spine(static_cast<int>(s));
        leaf_up_[leaf * spines + s] = index.between(node, spine);
        leaf_down_[leaf * spines + s] = index.between(spine, node);
      }
    }
  }

  [[nodiscard]] std::uint64_t count(DeviceId a, DeviceId b) const {
    const auto na = static_cast<int>(a / r_.gpus);
    const auto nb = static_cast<int>(b / r_.gpus);
    if (na == nb) return 1;
    if (a % r_.gpus == b % r_.gpus && na / r_.per_leaf == nb / r_.per_leaf) return 1;
    return static_cast<std::uint64_t>(r_.spines);
  }
  // Same node: through its NVSwitch. Else: the source's NIC to its rail's leaf, through spine
  // `idx` to the destination's leaf unless that is the same leaf, the destination's NIC.
  void walk(DeviceId a, DeviceId b, std::uint64_t idx, std::vector<LinkId>& out) const {
    const auto na = static_cast<int>(a / r_.gpus);
    const auto nb = static_cast<int>(b / r_.gpus);
    if (na == nb) {
      out.push_back(nvlink_up_[a]);
      out.push_back(nvlink_down_[b]);
      return;
    }
    out.push_back(nic_up_[a]);
    const std::size_t la = leaf_index(na, a);
    const std::size_t lb = leaf_index(nb, b);
    if (la != lb) {
      const auto spines = static_cast<std::size_t>(r_.spines);
      out.push_back(leaf_up_[la * spines + idx]);
      out.push_back(leaf_down_[lb * spines + idx]);
    }
    out.push_back(nic_down_[b]);
  }

 private:
  // The leaf of `device` (on `node`) among all leaves: unit * gpus + rail.
  [[nodiscard]] std::size_t leaf_index(int node, DeviceId device) const {
    return static_cast<std::size_t>(node / r_.per_leaf) * static_cast<std::size_t>(r_.gpus) +
           device % static_cast<std::size_t>(r_.gpus);
  }

  detail::RailLayout r_;
  std::vector<LinkId> nic_up_;       // per device: device -> its rail's leaf
  std::vector<LinkId> nic_down_;     // per device: leaf -> device
  std::vector<LinkId> nvlink_up_;    // per device (nodes of several GPUs): device -> NVSwitch
  std::vector<LinkId> nvlink_down_;  // per device: NVSwitch -> device
  std::vector<LinkId> leaf_up_;      // [leaf * spines + s]: leaf -> spine s
  std::vector<LinkId> leaf_down_;    // [leaf * spines + s]: spine s -> leaf
};

struct HierarchicalPaths {
  detail::HierarchicalLayout h;

  [[nodiscard]] static std::uint64_t count(DeviceId, DeviceId) { return 1; }
  void walk(DeviceId a, DeviceId b, std::uint64_t, PathBuilder& p) const {
    int top = 1;
    while (a / h.span[top] != b / h.span[top]) ++top;
    p.start(a);
    for (int j = 1; j <= top; ++j) p.to(h.above(a, j));
    for (int j = top - 1; j >= 1; --j) p.to(h.above(b, j));
    p.to(b);
  }
};

struct TorusPaths {
  detail::TorusLayout t;

  // Dimensions where both directions are minimal (and distinct).
  [[nodiscard]] int ties(DeviceId a, DeviceId b) const {
    int n = 0;
    for (std::size_t i = 0; i < t.dims.size(); ++i) {
      const int m = t.dims[i];
      const int delta = ((t.coord(b, i) - t.coord(a, i)) % m + m) % m;
      if (m > 2 && 2 * delta == m) ++n;
    }
    return n;
  }
  [[nodiscard]] std::uint64_t count(DeviceId a, DeviceId b) const {
    return std::uint64_t{1} << ties(a, b);
  }
  void walk(DeviceId a, DeviceId b, std::uint64_t idx, PathBuilder& p) const {
    std::int64_t cur = a;
    p.start(a);
    for (std::size_t i = 0; i < t.dims.size(); ++i) {
      const int m = t.dims[i];
      const int delta = ((t.coord(b, i) - t.coord(cur, i)) % m + m) % m;
      if (delta == 0) continue;
      bool forward = 2 * delta < m || m == 2;
      if (m > 2 && 2 * delta == m) {
        forward = (idx & 1U) == 0;
        idx >>= 1U;
      }
      const int steps = forward ? delta : m - delta;
      for (int s = 0; s < steps; ++s) {
        const int x = static_cast<int>(cur / t.stride[i] % m);
        const int next = forward ? (x + 1) % m : (x + m - 1) % m;
        cur += (next - x) * t.stride[i];
        p.to(static_cast<NodeId>(cur));
      }
    }
  }
};

struct DragonflyPaths {
  detail::DragonflyLayout d;

  // Distinct (exit router, entry router) pairs of the fewest-hop one-global-hop paths.
  void candidates(int ra, int rb, std::vector<std::pair<int, int>>& out) const {
    out.clear();
    const int ga = ra / d.routers;
    const int gb = rb / d.routers;
    int best = std::numeric_limits<int>::max();
    for (int round = 0; round < d.rounds; ++round) {
      const int x = d.port_router(d.port_to(ga, gb, round));
      const int y = d.port_router(d.port_to(gb, ga, round));
      const int hops = (x != ra % d.routers ? 1 : 0) + (y != rb % d.routers ? 1 : 0);
      if (hops < best) {
        best = hops;
        out.clear();
      }
      if (hops == best && std::find(out.begin(), out.end(), std::pair{x, y}) == out.end()) {
        out.emplace_back(x, y);
      }
    }
  }
  [[nodiscard]] std::uint64_t count(DeviceId a, DeviceId b) const {
    const auto ra = static_cast<int>(a / d.hosts);
    const auto rb = static_cast<int>(b / d.hosts);
    if (ra / d.routers == rb / d.routers) return 1;
    std::vector<std::pair<int, int>> c;
    candidates(ra, rb, c);
    return c.size();
  }
  void walk(DeviceId a, DeviceId b, std::uint64_t idx, PathBuilder& p) const {
    const auto ra = static_cast<int>(a / d.hosts);
    const auto rb = static_cast<int>(b / d.hosts);
    const int ga = ra / d.routers;
    const int gb = rb / d.routers;
    p.start(a);
    p.to(d.router(ga, ra % d.routers));
    int at = ra % d.routers;  // router index (within its group) the walk has reached
    if (ga != gb) {
      std::vector<std::pair<int, int>> c;
      candidates(ra, rb, c);
      const auto [x, y] = c[idx];
      if (x != at) p.to(d.router(ga, x));
      p.to(d.router(gb, y));
      at = y;
    }
    if (at != rb % d.routers) p.to(d.router(gb, rb % d.routers));
    p.to(b);
  }
};

// Least latency, then fewest hops: one Dijkstra tree per source, computed on first use.
class ExplicitPaths {
 public:
  explicit ExplicitPaths(const Topology& t) : t_(&t), graph_(detail::make_latency_digraph(t)) {
    link_src_.reserve(t.num_links());
    for (const Link& l : t.links()) link_src_.push_back(l.src);
  }

  [[nodiscard]] static std::uint64_t count(DeviceId, DeviceId) { return 1; }

  void walk(DeviceId a, DeviceId b, std::vector<LinkId>& out) {
    auto it = trees_.find(a);
    if (it == trees_.end()) it = trees_.emplace(a, detail::latency_tree(*graph_, a)).first;
    const std::vector<LinkId>& pred = it->second;
    const std::size_t first = out.size();
    if (pred[detail::arrival_vertex(*t_, b)] == detail::kNoLink) {
      throw Error::input(
          "no route from " + t_->node(a).name + " to " + t_->node(b).name +
              " that does not pass through a device (devices do not forward)",
          {.key = "nodes",
           .value = t_->name(),
           .expected = "a path through switches, or forwarding: true on the devices in between"});
    }
    // The last hop arrives at b's arrival vertex; every node before it forwards.
    for (std::size_t v = detail::arrival_vertex(*t_, b); v != a;) {
      const LinkId l = pred[v];
      out.push_back(l);
      v = link_src_[l];
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  }

 private:
  const Topology* t_;
  std::unique_ptr<detail::Digraph> graph_;  // owned by pointer: moved, never copied
  std::vector<NodeId> link_src_;
  std::unordered_map<NodeId, std::vector<LinkId>> trees_;
};

using Paths = std::variant<ExplicitPaths, FatTreePaths, SpineLeafPaths, TorusPaths, RailPaths,
                           HierarchicalPaths, DragonflyPaths>;

Paths make_paths(const Topology& t, const LinkIndex& index) {
  const TopologyParams& p = t.params();
  if (const auto* q = std::get_if<FatTreeParams>(&p)) {
    return Paths(std::in_place_type<FatTreePaths>, detail::FatTreeLayout(*q), index);
  }
  if (const auto* q = std::get_if<SpineLeafParams>(&p)) {
    return SpineLeafPaths{detail::SpineLeafLayout(*q)};
  }
  if (const auto* q = std::get_if<TorusParams>(&p)) return TorusPaths{detail::TorusLayout(*q)};
  if (const auto* q = std::get_if<RailOptimizedParams>(&p)) {
    return Paths(std::in_place_type<RailPaths>, detail::RailLayout(*q), index);
  }
  if (const auto* q = std::get_if<HierarchicalParams>(&p)) {
    return HierarchicalPaths{detail::HierarchicalLayout(*q)};
  }
  if (const auto* q = std::get_if<DragonflyParams>(&p)) {
    return DragonflyPaths{detail::DragonflyLayout(*q)};
  }
  return Paths(std::in_place_type<ExplicitPaths>, t);
}

// Route cache: open addressing with linear probing, keyed by (src << 32 | dst, path index).
// About 2x faster than std::unordered_map here and without one allocation per route.
class RouteCache {
 public:
  [[nodiscard]] const std::span<const LinkId>* find(std::uint64_t pair, std::uint64_t index) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = hash_mix(pair, index) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.route.data() == nullptr) return nullptr;
      if (s.pair == pair && s.index == index) return &s.route;
    }
  }

  // `route` must be non-empty (empty routes are never cached) and the key absent.
  void insert(std::uint64_t pair, std::uint64_t index, std::span<const LinkId> route) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(Slot{pair, index, route});
    ++size_;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    std::uint64_t pair = 0;
    std::uint64_t index = 0;
    std::span<const LinkId> route;  // data() == nullptr marks an empty slot
  };

  void place(const Slot& slot) {
    std::size_t i = hash_mix(slot.pair, slot.index) & mask_;
    while (slots_[i].route.data() != nullptr) i = (i + 1) & mask_;
    slots_[i] = slot;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : 2 * old.size(), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.route.data() != nullptr) place(s);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// Stores routes in fixed blocks so that spans handed out stay valid as the cache grows.
class Arena {
 public:
  std::span<const LinkId> store(std::span<const LinkId> links) {
    if (links.empty()) return {};
    if (blocks_.empty() || used_ + links.size() > capacity_) {
      capacity_ = std::max(kBlock, links.size());
      blocks_.push_back(std::make_unique<LinkId[]>(capacity_));
      used_ = 0;
    }
    LinkId* dst = blocks_.back().get() + used_;
    std::copy(links.begin(), links.end(), dst);
    used_ += links.size();
    return {dst, links.size()};
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<std::unique_ptr<LinkId[]>> blocks_;
  std::size_t used_ = 0;
  std::size_t capacity_ = 0;
};

// The routes `route_into` computed last, direct-mapped by (pair, path index): a fixed
// kSlots x 64 bytes (256 KiB), so repeated pairs (a ring's neighbours) are copied instead of
// recomputed while memory stays bounded however many pairs are asked for. Routes longer than
// kHops links are not kept.
class RecentRoutes {
 public:
  bool find(std::uint64_t pair, std::uint64_t index, std::vector<LinkId>& out) const {
    if (slots_.empty()) return false;
    const Slot& s = slots_[hash_mix(pair, index) & (kSlots - 1)];
    if (s.hops == 0 || s.pair != pair || s.index != index) return false;
    out.assign(s.links.begin(), s.links.begin() + s.hops);
    return true;
  }
  void insert(std::uint64_t pair, std::uint64_t index, std::span<const LinkId> route) {
    if (route.empty() || route.size() > kHops) return;
    if (slots_.empty()) slots_.resize(kSlots);
    Slot& s = slots_[hash_mix(pair, index) & (kSlots - 1)];
    s.pair = pair;
    s.index = index;
    s.hops = static_cast<std::uint32_t>(route.size());
    std::copy(route.begin(), route.end(), s.links.begin());
  }

 private:
  static constexpr std::size_t kSlots = 4096;
  static constexpr std::size_t kHops = 11;
  struct Slot {
    std::uint64_t pair = 0;
    std::uint64_t index = 0;
    std::uint32_t hops = 0;  // 0: empty
    std::array<LinkId, kHops> links{};
  };
  static_assert(sizeof(Slot) == 64);
  std::vector<Slot> slots_;
};

}  // namespace

struct Router::Impl {
  Impl(const Topology& t, std::uint64_t s)
      : topo(&t), seed(s), index(t), paths(make_paths(t, index)) {}

  void check(DeviceId src, DeviceId dst) const {
    if (src >= topo->num_devices() || dst >= topo->num_devices()) {
      throw Error::internal("router: device id out of range in topology " + topo->name());
    }
  }

  [[nodiscard]] std::uint64_t count(DeviceId src, DeviceId dst) const {
    if (src == dst) return 1;
    return std::visit([&](const auto& p) { return p.count(src, dst); }, paths);
  }

  // Appends path `idx` from src to dst (src != dst) to `out`.
  void compute(DeviceId src, DeviceId dst, std::uint64_t idx, std::vector<LinkId>& out) {
    if (auto* e = std::get_if<ExplicitPaths>(&paths)) {
      e->walk(src, dst, out);
      return;
    }
    if (const auto* tree = std::get_if<FatTreePaths>(&paths)) {
      tree->walk(src, dst, idx, out);
      return;
    }
    if (const auto* rail = std::get_if<RailPaths>(&paths)) {
      rail->walk(src, dst, idx, out);
      return;
    }
    PathBuilder builder(index, out);
    std::visit(
        [&](auto& p) {
          using Kind = std::decay_t<decltype(p)>;
          if constexpr (!std::is_same_v<Kind, ExplicitPaths> &&
                        !std::is_same_v<Kind, FatTreePaths> && !std::is_same_v<Kind, RailPaths>) {
            p.walk(src, dst, idx, builder);
          }
        },
        paths);
  }

  std::span<const LinkId> get(DeviceId src, DeviceId dst, std::uint64_t idx) {
    if (src == dst) return {};
    const std::uint64_t pair = (std::uint64_t{src} << 32U) | dst;
    if (const auto* hit = cache.find(pair, idx)) return *hit;
    scratch.clear();
    compute(src, dst, idx, scratch);
    const std::span<const LinkId> stored = arena.store(scratch);
    cache.insert(pair, idx, stored);
    return stored;
  }

  void get_into(DeviceId src, DeviceId dst, std::uint64_t idx, std::vector<LinkId>& out) {
    out.clear();
    if (src == dst) return;
    // A fat-tree or rail route is a few table reads: cheaper than a probe of the recent-route
    // table, which an all-to-all would miss every time.
    if (const auto* tree = std::get_if<FatTreePaths>(&paths)) {
      tree->walk(src, dst, idx, out);
      return;
    }
    if (const auto* rail = std::get_if<RailPaths>(&paths)) {
      rail->walk(src, dst, idx, out);
      return;
    }
    const std::uint64_t pair = (std::uint64_t{src} << 32U) | dst;
    if (recent.find(pair, idx, out)) return;
    compute(src, dst, idx, out);
    recent.insert(pair, idx, out);
  }

  const Topology* topo;
  std::uint64_t seed;
  LinkIndex index;
  Paths paths;
  Arena arena;
  RouteCache cache;
  RecentRoutes recent;
  std::vector<LinkId> scratch;
};

Router::Router(const Topology& topology, std::uint64_t seed)
    : impl_(std::make_unique<Impl>(topology, seed)) {}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

std::uint64_t Router::path_count(DeviceId src, DeviceId dst) const {
  impl_->check(src, dst);
  return impl_->count(src, dst);
}

std::uint64_t Router::path_index(DeviceId src, DeviceId dst, std::uint64_t flow) const {
  const std::uint64_t n = path_count(src, dst);
  if (n == 1) return 0;
  return hash_mix(hash_mix(impl_->seed, flow), (std::uint64_t{src} << 32U) | dst) % n;
}

std::span<const LinkId> Router::route(DeviceId src, DeviceId dst, std::uint64_t flow) {
  return impl_->get(src, dst, path_index(src, dst, flow));
}

void Router::route_into(DeviceId src, DeviceId dst, std::uint64_t flow, std::vector<LinkId>& out) {
  impl_->get_into(src, dst, path_index(src, dst, flow), out);
}

std::span<const LinkId> Router::route_path(DeviceId src, DeviceId dst, std::uint64_t index) {
  return impl_->get(src, dst, index % path_count(src, dst));
}

std::size_t Router::cached_routes() const noexcept { return impl_->cache.size(); }
std::uint64_t Router::seed() const noexcept { return impl_->seed; }
const Topology& Router::topology() const noexcept { return *impl_->topo; }

}  // namespace nest::topo
