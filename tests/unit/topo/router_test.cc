#include "nest/topo/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/topo/generators.h"
#include "unit/topo/test_util.h"

namespace nest::topo {
namespace {

using testing::bfs_hops;
using testing::is_walk;

const Bandwidth kBw = Bandwidth::gigabytes_per_second(50);
const Time kLat = Time::microseconds(1);

Topology small_fat_tree(int k, int devices_per_host = 1) {
  return build_fat_tree({.k = k,
                         .link_bandwidth = kBw,
                         .link_latency = kLat,
                         .devices_per_host = devices_per_host,
                         .scale_up_bandwidth = kBw * 4,
                         .scale_up_latency = kLat});
}

// Every path index of every device pair is a walk from src to dst whose length is the BFS hop
// distance (devices do not forward on these families), and distinct indices give distinct paths.
void expect_all_routes_minimal(const Topology& t, bool devices_forward) {
  Router router(t, 7);
  for (DeviceId s = 0; s < t.num_devices(); ++s) {
    const std::vector<int> dist = bfs_hops(t, s, devices_forward);
    for (DeviceId d = 0; d < t.num_devices(); ++d) {
      const std::uint64_t n = router.path_count(s, d);
      ASSERT_GE(n, 1U);
      std::set<std::vector<LinkId>> distinct;
      for (std::uint64_t i = 0; i < n; ++i) {
        const auto r = router.route_path(s, d, i);
        ASSERT_TRUE(is_walk(t, r, s, d)) << t.name() << " " << s << "->" << d << " #" << i;
        ASSERT_EQ(static_cast<int>(r.size()), dist[d]) << t.name() << " " << s << "->" << d;
        distinct.emplace(r.begin(), r.end());
      }
      ASSERT_EQ(distinct.size(), n) << t.name() << " " << s << "->" << d;
    }
  }
}

TEST(Router, FatTreeRoutesAreMinimalAndPathCountsAreTheEcmpWidth) {
  const Topology t = small_fat_tree(4);
  expect_all_routes_minimal(t, false);
  Router r(t);
  EXPECT_EQ(r.path_count(0, 1), 1U);   // same edge switch
  EXPECT_EQ(r.path_count(0, 2), 2U);   // same pod: k/2 aggregation switches
  EXPECT_EQ(r.path_count(0, 15), 4U);  // other pod: (k/2)^2 core switches
  EXPECT_EQ(r.route(0, 1).size(), 2U);
  EXPECT_EQ(r.route(0, 2).size(), 4U);
  EXPECT_EQ(r.route(0, 15).size(), 6U);
}

TEST(Router, FatTreeWithScaleUpHostsRoutesAreMinimal) {
  expect_all_routes_minimal(small_fat_tree(4, 2), false);
}

TEST(Router, SpineLeafRailAndHierarchicalRoutesAreMinimal) {
  expect_all_routes_minimal(build_spine_leaf({.leaves = 3,
                                              .spines = 2,
                                              .hosts_per_leaf = 3,
                                              .host_bandwidth = kBw,
                                              .host_latency = kLat,
                                              .uplink_bandwidth = kBw,
                                              .uplink_latency = kLat}),
                            false);
  expect_all_routes_minimal(build_rail_optimized(testing::rail(5, 4, 2, 3)), false);
  // One GPU per node (no NVSwitch): every route leaves through the NIC.
  expect_all_routes_minimal(build_rail_optimized(testing::rail(7, 1, 3, 2)), false);
  expect_all_routes_minimal(build_hierarchical({.devices_per_level = {2, 3, 2},
                                                .bandwidth_per_level = {kBw, kBw, kBw},
                                                .latency_per_level = {kLat, kLat, kLat}}),
                            false);
}

// Dragonfly minimal routing takes one global cable: its length is 2 (host cables) + the router
// hops of the best local-global-local path, found here by scanning the graph's global cables.
TEST(Router, DragonflyRoutesTakeTheShortestLocalGlobalLocalPath) {
  const DragonflyParams p{.groups = 5,
                          .routers_per_group = 4,
                          .hosts_per_router = 2,
                          .global_links_per_router = 2,
                          .host_bandwidth = kBw,
                          .host_latency = kLat,
                          .local_bandwidth = kBw,
                          .local_latency = kLat,
                          .global_bandwidth = kBw,
                          .global_latency = kLat};
  const Topology t = build_dragonfly(p);
  const auto n = static_cast<NodeId>(t.num_devices());
  const auto group = [&](NodeId router) { return (router - n) / p.routers_per_group; };
  EXPECT_EQ(t.num_switches(), 20U);
  // 4 routers * 2 ports / (5 - 1) = 2 cables per group pair, 10 pairs; 6 local per group.
  EXPECT_EQ(t.num_cables(), 40U + 5U * 6U + 10U * 2U);
  Router r(t, 11);
  for (DeviceId s = 0; s < n; ++s) {
    for (DeviceId d = 0; d < n; ++d) {
      const NodeId rs = t.link(t.out_links(s)[0]).dst;
      const NodeId rd = t.link(t.out_links(d)[0]).dst;
      int best = 0;
      if (s == d) {
        best = -2;
      } else if (rs == rd) {
        best = 0;
      } else if (group(rs) == group(rd)) {
        best = 1;
      } else {
        best = 1000;
        for (const Link& l : t.links()) {
          if (t.is_device(l.src) || t.is_device(l.dst)) continue;
          if (group(l.src) != group(rs) || group(l.dst) != group(rd)) continue;
          best = std::min(best, 1 + (l.src != rs ? 1 : 0) + (l.dst != rd ? 1 : 0));
        }
      }
      for (std::uint64_t i = 0; i < r.path_count(s, d); ++i) {
        const auto route = r.route_path(s, d, i);
        ASSERT_TRUE(is_walk(t, route, s, d));
        ASSERT_EQ(static_cast<int>(route.size()), best + 2) << s << "->" << d;
      }
    }
  }
}

TEST(Router, TorusDimensionOrderRouteLengthIsTorusDistance) {
  const std::vector<int> dims = {4, 3, 2, 5};
  const Topology t = build_torus({.dims = dims, .link_bandwidth = kBw, .link_latency = kLat});
  expect_all_routes_minimal(t, true);
  Router r(t);
  for (DeviceId s = 0; s < t.num_devices(); ++s) {
    for (DeviceId d = 0; d < t.num_devices(); ++d) {
      EXPECT_EQ(static_cast<int>(r.route(s, d, s * 31 + d).size()),
                testing::torus_distance(dims, s, d));
    }
  }
}

TEST(Router, TorusRouteCorrectsDimensionZeroFirst) {
  const Topology t = build_torus({.dims = {8, 8}, .link_bandwidth = kBw, .link_latency = kLat});
  Router r(t);
  // (1, 1) -> (3, 7): +2 in x first, then -2 in y (wrapping 1 -> 0 -> 7).
  const auto route = r.route(1 + 8 * 1, 3 + 8 * 7);
  std::vector<NodeId> nodes;
  for (const LinkId l : route) nodes.push_back(t.link(l).dst);
  EXPECT_EQ(nodes, (std::vector<NodeId>{2 + 8, 3 + 8, 3, 3 + 8 * 7}));
  // A tie (distance 4 of 8) has two minimal directions.
  EXPECT_EQ(r.path_count(0, 4), 2U);
  EXPECT_EQ(r.path_count(0, 4 + 8 * 4), 4U);
}

TEST(Router, RoutesAreCachedAndStable) {
  const Topology t = small_fat_tree(4);
  Router r(t, 3);
  const auto a = r.route(0, 15, 99);
  const auto b = r.route(0, 15, 99);
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(r.cached_routes(), 1U);
  EXPECT_TRUE(r.route(5, 5).empty());
}

TEST(Router, RouteIntoCopiesTheCachedRouteWithoutCachingIt) {
  // Every pair and flow key of a k = 8 fat-tree with scale-up hosts (8-link routes), of a
  // rail-optimized cluster (walked from tables, as the fat-tree) and of a torus (routes of up to
  // 12 links, longer than the recent-route table keeps), asked for twice (the second time from
  // the recent-route table where it fits).
  const Topology tree = small_fat_tree(8, 2);
  const Topology rail = build_rail_optimized(testing::rail(40, 4, 3, 3));
  const Topology torus =
      build_torus({.dims = {4, 8, 16}, .link_bandwidth = kBw, .link_latency = kLat});
  for (const Topology* t : {&tree, &rail, &torus}) {
    Router copying(*t, 5);
    Router caching(*t, 5);
    std::vector<LinkId> out{99, 98};
    const auto devices = static_cast<DeviceId>(t->num_devices());
    for (int pass = 0; pass < 2; ++pass) {
      for (DeviceId s = 0; s < devices; s += 3) {
        for (DeviceId d = 0; d < devices; d += 5) {
          const std::uint64_t flow = hash_mix(s, d) % 7;
          copying.route_into(s, d, flow, out);
          const auto expected = caching.route(s, d, flow);
          ASSERT_EQ(out, std::vector<LinkId>(expected.begin(), expected.end()))
              << t->name() << " " << s << "->" << d;
        }
      }
    }
    EXPECT_EQ(copying.cached_routes(), 0U);
    EXPECT_GT(caching.cached_routes(), 1000U);
  }
  Router r(tree);
  std::vector<LinkId> out{1, 2, 3};
  r.route_into(4, 4, 0, out);
  EXPECT_TRUE(out.empty());
  EXPECT_THROW(r.route_into(0, static_cast<DeviceId>(tree.num_devices()), 0, out), Error);
}

TEST(Router, SameSeedSameChoiceDifferentSeedsSpread) {
  const Topology t = small_fat_tree(8);
  Router a(t, 1);
  Router b(t, 1);
  std::set<std::uint64_t> indices;
  for (std::uint64_t flow = 0; flow < 64; ++flow) {
    EXPECT_EQ(a.path_index(0, 127, flow), b.path_index(0, 127, flow));
    indices.insert(a.path_index(0, 127, flow));
  }
  // 64 flows hashed over 16 paths: every path gets at least one (probability of missing one
  // is about 16 * (15/16)^64 ~ 0.27% for a random hash; this hash and seed are fixed).
  EXPECT_EQ(indices.size(), 16U);
}

TEST(Router, OutOfRangeDeviceIsAnInternalError) {
  const Topology t = small_fat_tree(4);
  Router r(t);
  EXPECT_THROW((void)r.route(0, 16), Error);
}

}  // namespace
}  // namespace nest::topo
