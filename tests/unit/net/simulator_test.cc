#include "nest/net/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/topo/router.h"

namespace nest::net {
namespace {

using topo::LinkId;

Time us(double v) { return Time::microseconds(v); }
Time ps(std::int64_t v) { return Time::picoseconds(v); }
Bandwidth gbps(double v) { return Bandwidth::gigabytes_per_second(v); }

/// Devices 0..n joined in a line: cable i goes i -> i+1 (directed link 2i forward, 2i+1 back).
topo::Topology line(const std::vector<double>& gigabytes_per_second, Time latency) {
  topo::Topology t("line", topo::Family::kExplicit);
  for (std::size_t i = 0; i <= gigabytes_per_second.size(); ++i) {
    t.add_device("d" + std::to_string(i));
  }
  for (std::size_t i = 0; i < gigabytes_per_second.size(); ++i) {
    t.add_link(static_cast<topo::NodeId>(i), static_cast<topo::NodeId>(i + 1),
               gbps(gigabytes_per_second[i]), latency);
  }
  return t;
}

/// Records each flow's delivery time.
struct Completions {
  std::map<FlowId, Time> at;
  auto callback() {
    return [this](FlowId f, Time t) { at[f] = t; };
  }
};

TEST(Simulator, LoneFlowTakesLatencyPlusSizeOverBandwidth) {
  // Route 0 -> 1 -> 2 -> 3: 100, 50 and 100 GB/s, 0.5 us each: 1.5 us + 1 MB / 50 GB/s = 21.5 us.
  const auto t = line({100, 50, 100}, us(0.5));
  Simulator sim(t);
  const std::vector<LinkId> route{0, 2, 4};
  Completions done;
  const FlowId f = sim.start_flow(route, Bytes(1'000'000), done.callback());
  sim.run();
  EXPECT_EQ(done.at.at(f), us(21.5));
  EXPECT_EQ(sim.now(), us(21.5));
  EXPECT_EQ(sim.active_flows(), 0U);
}

TEST(Simulator, RoutesAreCopiedSoTheSpanNeedNotOutliveTheCall) {
  // Two flows over 10 and 3 cables of a 10-cable line (longer than the 8 links a flow holds
  // inline), started from one buffer that is overwritten and freed before the run. The long
  // one is held to 50 GB/s by cable 8; on cables 0-2 (100 GB/s) the short one gets the other
  // 50 GB/s. Short: 1 MB / 50 GB/s + 3 x 0.1 us = 20.3 us; long: 4 MB / 50 GB/s + 1 us = 81 us.
  const auto t = line({100, 100, 100, 100, 100, 100, 100, 100, 50, 100}, us(0.1));
  Simulator sim(t);
  Completions done;
  auto buffer = std::make_unique<std::vector<LinkId>>();
  for (LinkId i = 0; i < 10; ++i) buffer->push_back(2 * i);
  const FlowId long_flow = sim.start_flow(*buffer, Bytes(4'000'000), done.callback());
  buffer->resize(3);
  const FlowId short_flow = sim.start_flow(*buffer, Bytes(1'000'000), done.callback());
  std::fill(buffer->begin(), buffer->end(), LinkId{1});
  buffer.reset();
  sim.run();
  EXPECT_EQ(done.at.at(short_flow), us(20.3));
  EXPECT_EQ(done.at.at(long_flow), us(81));
  for (LinkId i = 0; i < 10; ++i) {
    EXPECT_EQ(sim.link_stats(2 * i).bytes, i < 3 ? 5e6 : 4e6) << i;
    EXPECT_EQ(sim.link_stats(2 * i + 1).bytes, 0) << i;
  }
}

// 2^62 ps = 4,611,686.018427387904 s. At 1 GB/s, 4e15 bytes take 4e6 s (inside) and 5e15 bytes
// 5e6 s (past it): an input error, not an overflowed Time.
TEST(Simulator, TimesPastTheHorizonAreInputErrors) {
  const auto t = line({1}, us(0.5));
  const std::vector<LinkId> route{0};
  const auto error_of = [&](std::int64_t bytes) -> std::string {
    Simulator sim(t);
    Completions done;
    (void)sim.start_flow(route, Bytes(bytes), done.callback());
    try {
      sim.run();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      return e.what();
    }
    // 4e18 ps + 0.5 us latency, less the drain's rounding allowance (1e-12 relative: 4 us).
    EXPECT_NEAR(static_cast<double>(sim.now().ps()), 4.0000000000005e18, 4.1e6);
    return "done";
  };
  EXPECT_EQ(error_of(4'000'000'000'000'000), "done");
  const std::string message =
      "simulated time out of range (expected events within 2^62 ps (4.6e6 s) of simulated time: "
      "a smaller size or faster links)";
  EXPECT_EQ(error_of(5'000'000'000'000'000), message);
  EXPECT_THROW((void)drain_time(Bytes(5'000'000'000'000'000), gbps(1)), Error);
  EXPECT_EQ(later(kHorizon - ps(2), ps(1)), kHorizon - ps(1));
  EXPECT_THROW((void)later(kHorizon - ps(1), ps(1)), Error);
}

TEST(Simulator, WholePicosecondDrainTimesAreExact) {
  // 1 MiB at 100 GB/s is 10,485,760 ps; 3 B at 300 GB/s is 10 ps (not exact in binary).
  const auto t = line({100, 300}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> a{0};
  const std::vector<LinkId> b{2};
  Completions done;
  const FlowId fa = sim.start_flow(a, Bytes::mebibytes(1), done.callback());
  const FlowId fb = sim.start_flow(b, Bytes(3), done.callback());
  sim.run();
  EXPECT_EQ(done.at.at(fa), ps(10'485'760));
  EXPECT_EQ(done.at.at(fb), ps(10));
}

TEST(Simulator, FractionalDrainTimesRoundUpToWholePicoseconds) {
  // 1000 B at 3 GB/s = 333,333.33 ps -> 333,334 ps.
  const auto t = line({3}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  Completions done;
  const FlowId f = sim.start_flow(route, Bytes(1000), done.callback());
  sim.run();
  EXPECT_EQ(done.at.at(f), ps(333'334));
}

TEST(Simulator, TwoFlowsOnOneLinkGetHalfEach) {
  const auto t = line({100}, us(1));
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  Completions done;
  const FlowId f1 = sim.start_flow(route, Bytes(1'000'000), done.callback());
  const FlowId f2 = sim.start_flow(route, Bytes(1'000'000), done.callback());
  sim.run_until(us(10));
  EXPECT_EQ(sim.flow_rate(f1), gbps(50));
  EXPECT_EQ(sim.flow_rate(f2), gbps(50));
  EXPECT_EQ(sim.link_stats(0).bytes, 1'000'000);  // half of each flow by 10 us
  EXPECT_EQ(sim.link_stats(0).busy, us(10));
  sim.run();
  // Each drains 1 MB at 50 GB/s (20 us), then 1 us of latency.
  EXPECT_EQ(done.at.at(f1), us(21));
  EXPECT_EQ(done.at.at(f2), us(21));
  // Both start at 0 and both drain at 20 us: one rate computation per timestamp.
  EXPECT_EQ(sim.rate_updates(), 2U);
  // Two drain ends and two deliveries.
  EXPECT_EQ(sim.events_processed(), 4U);
  EXPECT_EQ(sim.flow_rate(f1), Bandwidth{});
}

TEST(Simulator, FlowLimitedElsewhereLeavesItsShareToTheOther) {
  // Star: devices 0 (A), 1 (C), 2 (D) and switch 3. A->S 100 GB/s, S->C 100, S->D 20; 1 us each.
  topo::Topology t("star", topo::Family::kExplicit);
  for (const char* n : {"A", "C", "D"}) t.add_device(n);
  const auto s = t.add_switch("S", 1);
  const LinkId a_s = t.add_link(0, s, gbps(100), us(1));
  const LinkId s_c = t.add_link(s, 1, gbps(100), us(1));
  const LinkId s_d = t.add_link(s, 2, gbps(20), us(1));
  Simulator sim(t);
  sim.record_utilization(true);
  const std::vector<LinkId> to_c{a_s, s_c};
  const std::vector<LinkId> to_d{a_s, s_d};
  Completions done;
  // Max-min: the flow to D is held to 20 GB/s by S->D, so the flow to C gets 100 - 20 = 80.
  const FlowId fc = sim.start_flow(to_c, Bytes(1'600'000), done.callback());
  const FlowId fd = sim.start_flow(to_d, Bytes(200'000), done.callback());
  sim.run_until(us(1));
  EXPECT_EQ(sim.flow_rate(fc), gbps(80));
  EXPECT_EQ(sim.flow_rate(fd), gbps(20));
  sim.run();
  // fd drains 200 kB at 20 GB/s by 10 us (+2 us latency). fc has 800 kB left at 10 us and
  // then has the link alone: 8 us more at 100 GB/s, drained at 18 us, delivered at 20 us.
  EXPECT_EQ(done.at.at(fd), us(12));
  EXPECT_EQ(done.at.at(fc), us(20));

  const auto shared = sim.utilization(a_s);
  ASSERT_EQ(shared.size(), 2U);  // 80 + 20, then 100 from 10 us: the same total, no sample
  EXPECT_EQ(shared[0].at, Time::zero());
  EXPECT_EQ(shared[0].rate, gbps(100));
  EXPECT_EQ(shared[1].at, us(18));
  EXPECT_EQ(shared[1].rate, Bandwidth{});
  const auto slow = sim.utilization(s_d);
  ASSERT_EQ(slow.size(), 2U);
  EXPECT_EQ(slow[0].rate, gbps(20));
  EXPECT_EQ(slow[1].at, us(10));
  EXPECT_EQ(slow[1].rate, Bandwidth{});
  // S->C carries fc alone (a private link, outside the filling): its rate still shows.
  const auto to_c_series = sim.utilization(s_c);
  ASSERT_EQ(to_c_series.size(), 3U);
  EXPECT_EQ(to_c_series[0].rate, gbps(80));
  EXPECT_EQ(to_c_series[1].at, us(10));
  EXPECT_EQ(to_c_series[1].rate, gbps(100));
  EXPECT_EQ(to_c_series[2].at, us(18));
  EXPECT_EQ(to_c_series[2].rate, Bandwidth{});
}

// A->S 100 GB/s, B->S 20, S->D 100, no latency: fa = 80, fb = 20 (held by B->S). When fa drains
// at 10 us, S->D carries fb alone, a flow below the departed level that keeps its rate: the
// link's series must still show the drop to 20 GB/s, with and without the level reuse.
TEST(Simulator, UtilizationOfALinkLeftWithOneLowerFlow) {
  for (const bool reuse : {true, false}) {
    topo::Topology t("star", topo::Family::kExplicit);
    for (const char* n : {"A", "B", "D"}) t.add_device(n);
    const auto s = t.add_switch("S", 1);
    const LinkId a_s = t.add_link(0, s, gbps(100), Time::zero());
    const LinkId b_s = t.add_link(1, s, gbps(20), Time::zero());
    const LinkId s_d = t.add_link(s, 2, gbps(100), Time::zero());
    Simulator sim(t);
    sim.record_utilization(true);
    sim.reuse_lower_levels(reuse);
    const std::vector<LinkId> from_a{a_s, s_d};
    const std::vector<LinkId> from_b{b_s, s_d};
    sim.start_flow(from_a, Bytes(800'000), nullptr);
    sim.start_flow(from_b, Bytes(2'000'000), nullptr);
    sim.run();
    const auto series = sim.utilization(s_d);
    ASSERT_EQ(series.size(), 3U) << reuse;
    EXPECT_EQ(series[0].at, Time::zero());
    EXPECT_EQ(series[0].rate, gbps(100));
    EXPECT_EQ(series[1].at, us(10));
    EXPECT_EQ(series[1].rate, gbps(20));
    EXPECT_EQ(series[2].at, us(100));
    EXPECT_EQ(series[2].rate, Bandwidth{});
  }
}

// A private link (one flow) and a shared link tie at 1/3 GB/s: A->S (id 0) at 1e9/3 B/s carries
// f1 alone, S->D at 1 GB/s carries f1, f2, f3. The filling takes the lower id first, so f1
// freezes at 1e9/3 and f2, f3 share what is left, (1e9 - 1e9/3) / 2: bit for bit the rates of
// a filling that treats the private link as an ordinary one.
TEST(Simulator, PrivateLinkCapsBreakTiesByLinkIdAsLinksDo) {
  topo::Topology t("tie", topo::Family::kExplicit);
  for (const char* n : {"A", "B", "C", "D"}) t.add_device(n);
  const auto s = t.add_switch("S", 1);
  const double third = 1e9 / 3;
  const LinkId a = t.add_link(0, s, Bandwidth::bytes_per_second(third), Time::zero());
  const LinkId b = t.add_link(1, s, gbps(10), Time::zero());
  const LinkId c = t.add_link(2, s, gbps(10), Time::zero());
  const LinkId d = t.add_link(s, 3, gbps(1), Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> ra{a, d};
  const std::vector<LinkId> rb{b, d};
  const std::vector<LinkId> rc{c, d};
  const FlowId f1 = sim.start_flow(ra, Bytes(1'000'000), nullptr);
  const FlowId f2 = sim.start_flow(rb, Bytes(1'000'000), nullptr);
  const FlowId f3 = sim.start_flow(rc, Bytes(1'000'000), nullptr);
  sim.run_until(ps(1));
  EXPECT_EQ(sim.flow_rate(f1).bytes_per_s(), third);
  EXPECT_EQ(sim.flow_rate(f2).bytes_per_s(), (1e9 - third) / 2);
  EXPECT_EQ(sim.flow_rate(f3).bytes_per_s(), (1e9 - third) / 2);
}

// Found in review: g on L (2 GB/s) and h on L then L2 (2.1 GB/s - 0.5 B/s), with d and e on L2
// (e held to 0.1 GB/s further on). When d drains, h is re-rated alone and would freeze on L at
// 1e9 - 0.25 B/s next to g at 1e9 + 0.25: rates 5e-10 apart that the verified refilling must
// not accept. Max-min gives both 1e9 B/s; every way of refilling must deliver them together.
TEST(Simulator, VerifiedRefillingRejectsNearlyFairRates) {
  topo::Topology t("near");
  for (int d = 0; d < 4; ++d) t.add_device("d" + std::to_string(d));
  const LinkId l1 = t.add_link(0, 1, Bandwidth::bytes_per_second(2e9), Time::zero());
  const LinkId l2 = t.add_link(1, 2, Bandwidth::bytes_per_second(2.1e9 - 0.5), Time::zero());
  const LinkId l3 = t.add_link(2, 3, Bandwidth::bytes_per_second(1e8), Time::zero());
  const std::vector<LinkId> rg{l1};
  const std::vector<LinkId> rh{l1, l2};
  const std::vector<LinkId> rd{l2};
  const std::vector<LinkId> re{l2, l3};
  for (const bool verified : {true, false}) {
    for (const bool reuse : {true, false}) {
      Simulator sim(t);
      sim.reuse_lower_levels(reuse);
      sim.verified_refills(verified);
      Completions done;
      const FlowId g = sim.start_flow(rg, Bytes(1'000'000'000'000), done.callback());
      const FlowId h = sim.start_flow(rh, Bytes(1'000'000'000'000), done.callback());
      sim.start_flow(rd, Bytes(1000), done.callback());
      sim.start_flow(re, Bytes(1'000'000'000'000), done.callback());
      sim.run_until(us(1000));
      EXPECT_EQ(sim.flow_rate(g).bytes_per_s(), 1e9) << verified << reuse;
      EXPECT_EQ(sim.flow_rate(h).bytes_per_s(), 1e9) << verified << reuse;
      sim.run();
      EXPECT_EQ(done.at.at(g), done.at.at(h)) << verified << reuse;
    }
  }
}

// A link of unbounded rate (the simulator accepts any rate > 0; the unit parser refuses
// overflowing ones): flows over it alone drain at once, and a flow that also crosses a 1 GB/s
// link takes 1,000 bytes / 1 GB/s = 1 us.
TEST(Simulator, LinksOfUnboundedRateDrainAtOnce) {
  topo::Topology t("unbounded");
  for (const char* n : {"a", "b", "c"}) t.add_device(n);
  const LinkId fast = t.add_link(
      0, 1, Bandwidth::bytes_per_second(std::numeric_limits<double>::infinity()), Time::zero());
  const LinkId slow = t.add_link(1, 2, gbps(1), Time::zero());
  const std::vector<LinkId> only_fast{fast};
  const std::vector<LinkId> both{fast, slow};
  for (const bool reuse : {true, false}) {
    Simulator sim(t);
    sim.reuse_lower_levels(reuse);
    Completions done;
    const FlowId f = sim.start_flow(only_fast, Bytes(1000), done.callback());
    const FlowId d = sim.start_flow(both, Bytes(1000), done.callback());
    sim.run();
    EXPECT_EQ(done.at.at(f), Time::zero()) << reuse;
    EXPECT_EQ(done.at.at(d), us(1)) << reuse;
  }
}

// After a reset, a handle from before names no event: cancelling it leaves the events scheduled
// since alone (the slots keep counting generations).
TEST(Simulator, HandlesFromBeforeAResetCancelNothing) {
  const topo::Topology t = line({100}, us(1));
  Simulator sim(t);
  const EventHandle old = sim.schedule(ps(100), [] {});
  sim.reset();
  bool ran = false;
  const EventHandle fresh = sim.schedule(ps(50), [&ran] { ran = true; });
  EXPECT_NE(old.id, fresh.id);
  sim.cancel(old);
  sim.run();
  EXPECT_TRUE(ran);
}

// A stop flag that stays false leaves the run as it is; once it is true, the run throws
// `Stopped` at the next check: after the first timestamp, then every kStopCheckEvents events
// (here one event per timestamp, so at events 1, 65,537, 131,073, ...).
TEST(Simulator, StopWhenStopsAtTheNextCheckAndOtherwiseChangesNothing) {
  const topo::Topology t = line({100}, us(1));
  const std::vector<LinkId> route{0};
  constexpr int kEvents = 150'000;
  // kEvents one-event timestamps (the one at 100,000 ps raises `raise`, if any) beside a flow of
  // 1 MB (10 us at 100 GB/s, 1 us latency).
  const auto load = [&](Simulator& sim, std::atomic<bool>* raise, Completions& done) {
    for (int i = 1; i <= kEvents; ++i) {
      sim.schedule(ps(i), [raise, i] {
        if (raise != nullptr && i == 100'000) *raise = true;
      });
    }
    return sim.start_flow(route, Bytes(1'000'000), done.callback());
  };
  Simulator plain(t);
  Completions plain_done;
  const FlowId f = load(plain, nullptr, plain_done);
  plain.run();

  std::atomic<bool> never{false};
  Simulator kept_on(t);
  kept_on.stop_when(&never);
  Completions kept_done;
  const FlowId g = load(kept_on, nullptr, kept_done);
  kept_on.run();
  EXPECT_EQ(kept_done.at.at(g), plain_done.at.at(f));
  EXPECT_EQ(kept_done.at.at(g), us(11));
  EXPECT_EQ(kept_on.events_processed(), plain.events_processed());
  EXPECT_EQ(kept_on.link_stats(0).bytes, plain.link_stats(0).bytes);

  std::atomic<bool> raised{false};
  Simulator stopped(t);
  stopped.stop_when(&raised);
  Completions stopped_done;
  (void)load(stopped, &raised, stopped_done);
  EXPECT_THROW(stopped.run(), Stopped);
  EXPECT_EQ(stopped.events_processed(), 1 + 2 * Simulator::kStopCheckEvents);
  EXPECT_TRUE(stopped_done.at.empty());

  std::atomic<bool> already{true};
  Simulator at_once(t);
  at_once.stop_when(&already);
  Completions at_once_done;
  (void)load(at_once, nullptr, at_once_done);
  EXPECT_THROW(at_once.run(), Stopped);
  EXPECT_EQ(at_once.events_processed(), 1u);
  // A reset simulator runs again as new (it keeps the flag, lowered here).
  at_once.reset();
  already = false;
  const FlowId h = load(at_once, nullptr, at_once_done);
  at_once.run();
  EXPECT_EQ(at_once_done.at.at(h), us(11));
  EXPECT_EQ(at_once.events_processed(), plain.events_processed());
}

TEST(Simulator, ParkingLotSharesByMaxMin) {
  // Line 0 -L1-> 1 -L2-> 2, L1 100 GB/s, L2 60 GB/s, 1 us each. Long flow f0 over L1 and L2,
  // f1 on L1, f2 on L2.
  // 0..5 us: L2 is the bottleneck (60/2 = 30 each for f0 and f2); f1 gets 100 - 30 = 70.
  //   f2 (150 kB) drains at 5 us. By then f0 sent 150 kB, f1 350 kB.
  // 5..8 us: L1 shared by f0 and f1 (50 each; L2 would allow f0 60). f0's other 150 kB
  //   drain at 8 us; f1 has sent 500 kB.
  // 8..13 us: f1 alone at 100 GB/s sends its last 500 kB.
  const auto t = line({100, 60}, us(1));
  Simulator sim(t);
  sim.record_utilization(true);
  const std::vector<LinkId> long_route{0, 2};
  const std::vector<LinkId> l1{0};
  const std::vector<LinkId> l2{2};
  Completions done;
  const FlowId f0 = sim.start_flow(long_route, Bytes(300'000), done.callback());
  const FlowId f1 = sim.start_flow(l1, Bytes(1'000'000), done.callback());
  const FlowId f2 = sim.start_flow(l2, Bytes(150'000), done.callback());
  sim.run_until(us(1));
  EXPECT_EQ(sim.flow_rate(f0), gbps(30));
  EXPECT_EQ(sim.flow_rate(f1), gbps(70));
  EXPECT_EQ(sim.flow_rate(f2), gbps(30));
  sim.run_until(us(6));
  EXPECT_EQ(sim.flow_rate(f0), gbps(50));
  EXPECT_EQ(sim.flow_rate(f1), gbps(50));
  sim.run();
  EXPECT_EQ(done.at.at(f2), us(6));
  EXPECT_EQ(done.at.at(f0), us(10));
  EXPECT_EQ(done.at.at(f1), us(14));

  const auto l2_series = sim.utilization(2);
  ASSERT_EQ(l2_series.size(), 3U);
  EXPECT_EQ(l2_series[0].rate, gbps(60));
  EXPECT_EQ(l2_series[1].at, us(5));
  EXPECT_EQ(l2_series[1].rate, gbps(50));
  EXPECT_EQ(l2_series[2].at, us(8));
  EXPECT_EQ(l2_series[2].rate, Bandwidth{});
}

TEST(Simulator, FlowStartingMidFlightChangesRates) {
  // One 100 GB/s link, 1 us. f1 (1 MB) alone from 0 to 4 us sends 400 kB. f2 (500 kB) starts
  // at 4 us: both at 50 GB/s; f2 drains at 14 us when f1 has 100 kB left, which it sends
  // alone in 1 us.
  const auto t = line({100}, us(1));
  Simulator sim(t);
  sim.record_utilization(true);
  const std::vector<LinkId> route{0};
  Completions done;
  const FlowId f1 = sim.start_flow(route, Bytes(1'000'000), done.callback());
  FlowId f2 = 0;
  sim.schedule(us(4), [&] { f2 = sim.start_flow(route, Bytes(500'000), done.callback()); });
  sim.run();
  EXPECT_EQ(done.at.at(f2), us(15));
  EXPECT_EQ(done.at.at(f1), us(16));

  const LinkStats& stats = sim.link_stats(0);
  EXPECT_EQ(stats.bytes, 1'500'000);
  EXPECT_EQ(stats.busy, us(15));
  EXPECT_EQ(stats.peak_flows, 2U);
  const LinkStats& reverse = sim.link_stats(1);
  EXPECT_EQ(reverse.bytes, 0);
  EXPECT_EQ(reverse.busy, Time::zero());
  EXPECT_EQ(reverse.peak_flows, 0U);
  // The link carries 100 GB/s throughout (one flow, then two halves, then one): one sample,
  // then idle.
  const auto series = sim.utilization(0);
  ASSERT_EQ(series.size(), 2U);
  EXPECT_EQ(series[0].rate, gbps(100));
  EXPECT_EQ(series[1].at, us(15));
  EXPECT_EQ(series[1].rate, Bandwidth{});
}

// Drain ends that move later keep their queued event (pushed again at its reserved position
// when it comes up), those that move earlier are pushed anew: the times are the hand-computed
// ones either way. One 100 GB/s link, 1 us. f1 (1 MB) alone: its end queued at 10 us. At 2 us
// f2 (400 kB) starts, both at 50 GB/s: f1's end moves later to 18 us (800 kB left), f2 drains
// at 10 us, the very picosecond of f1's queued event. f1, 400 kB left, alone again: 14 us. At
// 12 us f3 (100 kB) starts: f1 (200 kB left) would end at 16 us, f3 drains at 14 us (the
// picosecond of f1's queued event again); f1, 100 kB left, alone: 15 us. Deliveries 1 us later.
TEST(Simulator, DrainEndsThatMoveLaterAndBackGiveTheHandComputedTimes) {
  const auto t = line({100}, us(1));
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  Completions done;
  const FlowId f1 = sim.start_flow(route, Bytes(1'000'000), done.callback());
  FlowId f2 = 0;
  FlowId f3 = 0;
  sim.schedule(us(2), [&] { f2 = sim.start_flow(route, Bytes(400'000), done.callback()); });
  sim.schedule(us(12), [&] { f3 = sim.start_flow(route, Bytes(100'000), done.callback()); });
  sim.run_until(us(10.5));  // f2's delivery and f3's start still to come
  EXPECT_EQ(done.at.size(), 0U);
  sim.run();
  EXPECT_EQ(done.at.at(f2), us(11));
  EXPECT_EQ(done.at.at(f3), us(15));
  EXPECT_EQ(done.at.at(f1), us(16));
  // Two scheduled actions, a drain end and a delivery per flow: the kept events that came up
  // early and the superseded ones are not events.
  EXPECT_EQ(sim.events_processed(), 8U);
  EXPECT_EQ(sim.link_stats(0).bytes, 1'500'000);
}

// A superseded drain event past the stop time of `run_until` stays queued, so events may still
// be scheduled before it. f1 and f2 (1 MB and 200 kB) share a 100 GB/s link: f1's end is first
// queued at 20 us; f2 drains at 4 us and f1's end moves to 12 us, leaving the 20 us event
// superseded. Stopped at 13 us, an action at 15 us runs at 15 us.
TEST(Simulator, RunUntilLeavesSupersededEventsPastItsStopQueued) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  Completions done;
  const FlowId f1 = sim.start_flow(route, Bytes(1'000'000), done.callback());
  const FlowId f2 = sim.start_flow(route, Bytes(200'000), done.callback());
  sim.run_until(us(13));
  EXPECT_EQ(done.at.at(f2), us(4));
  EXPECT_EQ(done.at.at(f1), us(12));
  Time ran;
  sim.schedule(us(15), [&] { ran = sim.now(); });
  sim.run();
  EXPECT_EQ(ran, us(15));
}

TEST(Simulator, RatesAreRecomputedOnlyForTheAffectedComponent) {
  // Flows on two separate links: each start and each end re-rates only its own component.
  const auto t = line({100, 100}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> first{0};
  const std::vector<LinkId> second{2};
  sim.start_flow(first, Bytes(1'000'000), nullptr);
  sim.start_flow(second, Bytes(2'000'000), nullptr);
  sim.run();
  EXPECT_EQ(sim.rate_updates(), 3U);  // t = 0, 10 us, 20 us
  EXPECT_EQ(sim.flows_rated(), 2U);   // both at t = 0; a drain leaves its component empty

  // The same two flows on one link: the first drain re-rates the other.
  Simulator shared(t);
  shared.start_flow(first, Bytes(1'000'000), nullptr);
  shared.start_flow(first, Bytes(2'000'000), nullptr);
  shared.run();
  EXPECT_EQ(shared.flows_rated(), 3U);
  EXPECT_EQ(shared.now(), us(30));  // 3 MB through 100 GB/s, the link never idle
}

TEST(Simulator, ProcessorSharingOnOneLinkIsWorkConserving) {
  // 300 flows of 1 MB start 0.1 us apart on one 100 GB/s link; none can finish before the last
  // starts. Every start re-rates all active flows (about 45,000 superseded drain events, so the
  // queue is compacted). The link never idles: the last drain is at 300 MB / 100 GB/s = 3 ms, up
  // to the picosecond rounding of each of the 300 drain events; equal sizes finish in start
  // order.
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  std::vector<FlowId> order;
  for (int i = 0; i < 300; ++i) {
    sim.schedule(Time::nanoseconds(100.0 * i), [&] {
      sim.start_flow(route, Bytes(1'000'000), [&](FlowId f, Time) { order.push_back(f); });
    });
  }
  sim.run();
  ASSERT_EQ(order.size(), 300U);
  for (FlowId i = 0; i < 300; ++i) EXPECT_EQ(order[i], i);
  EXPECT_GE(sim.now(), Time::milliseconds(3));
  EXPECT_LE(sim.now(), Time::milliseconds(3) + ps(300));
  EXPECT_EQ(sim.link_stats(0).busy, sim.now());
  EXPECT_EQ(sim.link_stats(0).bytes, 300e6);
  EXPECT_EQ(sim.events_processed(), 900U);  // 300 starts, drains and deliveries
}

TEST(Simulator, BusyTimeExcludesIdleGaps) {
  // Flow of 1 MB (10 us at 100 GB/s), then a second one started at 30 us: busy 20 us of 40.
  const auto t = line({100}, us(2));
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  sim.start_flow(route, Bytes(1'000'000), nullptr);
  sim.schedule(us(30), [&] { sim.start_flow(route, Bytes(1'000'000), nullptr); });
  sim.run();
  EXPECT_EQ(sim.now(), us(42));
  EXPECT_EQ(sim.link_stats(0).busy, us(20));
  EXPECT_EQ(sim.link_stats(0).bytes, 2'000'000);
  EXPECT_EQ(sim.link_stats(0).peak_flows, 1U);
}

TEST(Simulator, ChainedFlowsStartAtTheDeliveryTime) {
  // A flow started from on_done starts at the delivery time: 3 hops of a chain, each 1 MB at
  // 100 GB/s + 1 us.
  const auto t = line({100}, us(1));
  Simulator sim(t);
  const std::vector<LinkId> route{0};
  std::vector<Time> deliveries;
  std::function<void(FlowId, Time)> next = [&](FlowId, Time at) {
    deliveries.push_back(at);
    if (deliveries.size() < 3) sim.start_flow(route, Bytes(1'000'000), next);
  };
  sim.start_flow(route, Bytes(1'000'000), next);
  sim.run();
  EXPECT_EQ(deliveries, (std::vector<Time>{us(11), us(22), us(33)}));
}

TEST(Simulator, EmptyRouteAndZeroBytesAreDeliveredThroughEvents) {
  const auto t = line({100, 100}, us(1));
  Simulator sim(t);
  const std::vector<LinkId> none;
  const std::vector<LinkId> two{0, 2};
  Completions done;
  const FlowId local = sim.start_flow(none, Bytes(1 << 20), done.callback());
  const FlowId empty = sim.start_flow(two, Bytes(0), done.callback());
  EXPECT_TRUE(done.at.empty());  // never inside start_flow
  EXPECT_EQ(sim.active_flows(), 2U);
  sim.run();
  EXPECT_EQ(done.at.at(local), Time::zero());
  EXPECT_EQ(done.at.at(empty), us(2));
  EXPECT_EQ(sim.link_stats(0).peak_flows, 0U);
}

TEST(Simulator, EventsRunByTimeThenPriorityThenInsertion) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  std::string order;
  sim.schedule(ps(20), [&] { order += 'a'; });
  sim.schedule(
      ps(10), [&] { order += 'b'; }, 1);
  sim.schedule(
      ps(10), [&] { order += 'c'; }, -1);
  sim.schedule(
      ps(10), [&] { order += 'd'; }, 1);
  sim.schedule(ps(10), [&] {
    order += 'e';
    // Same time, scheduled while running: runs in this timestamp, after what is queued.
    sim.schedule(sim.now(), [&] { order += 'f'; });
  });
  sim.run();
  EXPECT_EQ(order, "cefbda");
  EXPECT_EQ(sim.events_processed(), 6U);
  EXPECT_EQ(sim.now(), ps(20));
}

TEST(Simulator, CancelledEventsDoNotRun) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  std::string order;
  const EventHandle a = sim.schedule(ps(5), [&] { order += 'a'; });
  const EventHandle b = sim.schedule(ps(6), [&] { order += 'b'; });
  sim.cancel(a);
  sim.cancel(a);              // twice: no-op
  sim.cancel(EventHandle{});  // names nothing
  sim.run_until(ps(10));
  EXPECT_EQ(order, "b");
  sim.cancel(b);  // already ran: no-op
  // The cancelled slots are reused; the old handles must not cancel the new events.
  sim.schedule(ps(20), [&] { order += 'c'; });
  sim.schedule(ps(21), [&] { order += 'd'; });
  sim.cancel(a);
  sim.cancel(b);
  sim.run();
  EXPECT_EQ(order, "bcd");
  EXPECT_EQ(sim.events_processed(), 3U);
}

TEST(Simulator, RunUntilStopsAndAdvancesTime) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  std::string order;
  sim.schedule(ps(10), [&] { order += 'a'; });
  sim.schedule(ps(11), [&] { order += 'b'; });
  sim.run_until(ps(10));
  EXPECT_EQ(order, "a");
  EXPECT_EQ(sim.now(), ps(10));
  sim.run_until(ps(10'000));
  EXPECT_EQ(order, "ab");
  EXPECT_EQ(sim.now(), ps(10'000));
}

// run_within stops once the count is reached, at the end of a timestamp (all of its events run),
// and goes on from there; true once nothing is left. Cancelled events left pending do not count.
TEST(Simulator, RunWithinStopsAtAnEventCountAtTheEndOfATimestamp) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  std::string order;
  sim.schedule(ps(10), [&] { order += 'a'; });
  sim.schedule(ps(20), [&] { order += 'b'; });
  sim.schedule(ps(20), [&] { order += 'c'; });
  sim.schedule(ps(30), [&] { order += 'd'; });
  const EventHandle late = sim.schedule(ps(40), [&] { order += 'e'; });
  EXPECT_FALSE(sim.run_within(2));
  EXPECT_EQ(order, "abc");  // the second event is at 20 ps, and so is the third
  EXPECT_EQ(sim.events_processed(), 3U);
  EXPECT_EQ(sim.now(), ps(20));
  EXPECT_FALSE(sim.run_within(3));  // already reached: nothing runs
  EXPECT_EQ(order, "abc");
  sim.cancel(late);
  EXPECT_TRUE(sim.run_within(4));  // d, then only the cancelled event is left
  EXPECT_EQ(order, "abcd");
  EXPECT_TRUE(sim.run_within(4));
}

// With a time as well, the events after it stay pending (and the clock at the last event run);
// whichever limit comes first stops the run.
TEST(Simulator, RunWithinAlsoStopsAtATime) {
  const auto t = line({100}, Time::zero());
  Simulator sim(t);
  std::string order;
  sim.schedule(ps(10), [&] { order += 'a'; });
  sim.schedule(ps(20), [&] { order += 'b'; });
  sim.schedule(ps(30), [&] { order += 'c'; });
  sim.schedule(ps(40), [&] { order += 'd'; });
  EXPECT_FALSE(sim.run_within(100, ps(25)));
  EXPECT_EQ(order, "ab");
  EXPECT_EQ(sim.now(), ps(20));
  EXPECT_FALSE(sim.run_within(3, ps(100)));  // the count first
  EXPECT_EQ(order, "abc");
  EXPECT_TRUE(sim.run_within(100, ps(40)));  // an event at the time itself runs
  EXPECT_EQ(order, "abcd");
}

// What `f` throws as an `Error`, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

// A use credited from outside adds to the statistics as flows that drained there would: bytes
// and busy time summed with the simulated flows', the peak the larger, and a link used only
// that way listed as used; it is refused while a flow drains on the link or while the link's
// utilization is recorded.
TEST(Simulator, LinkUseCreditedFromOutsideAddsToTheStatistics) {
  const auto t = line({100, 100}, us(1));
  Simulator sim(t);
  EXPECT_TRUE(sim.link_idle(0));
  const std::vector<LinkId> route{0};
  Completions done;
  sim.start_flow(route, Bytes(1'000'000), done.callback());  // 10 us on link 0
  EXPECT_FALSE(sim.link_idle(0));
  EXPECT_TRUE(sim.link_idle(2));
  EXPECT_EQ(error_of([&] { sim.add_link_use(0, 5, us(1), 1); }),
            "internal error: link 0 credited while a flow drains on it");
  EXPECT_EQ(error_of([&] { (void)sim.link_idle(9); }),
            "internal error: no link 9 in topology line");
  EXPECT_EQ(error_of([&] { sim.add_link_use(3, 5, us(1), 0); }),
            "internal error: link 3 credited without a flow");
  EXPECT_EQ(error_of([&] { sim.add_link_use(3, -5, us(1), 1); }),
            "internal error: link 3 credited a negative use");
  sim.run();
  sim.add_link_use(0, 3'000'000, us(30), 2);
  sim.add_link_use(2, 7, us(2), 1);
  sim.run();  // publishes the statistics
  EXPECT_EQ(sim.link_stats(0).bytes, 4'000'000.0);
  EXPECT_EQ(sim.link_stats(0).busy, us(40));
  EXPECT_EQ(sim.link_stats(0).peak_flows, 2U);
  EXPECT_EQ(sim.link_stats(2).bytes, 7.0);
  EXPECT_EQ(sim.link_stats(2).busy, us(2));
  EXPECT_EQ(sim.link_stats(2).peak_flows, 1U);
  const std::vector<LinkId> chosen{2};
  sim.record_utilization(chosen);
  sim.add_link_use(0, 1, us(1), 1);  // not recorded: accepted
  EXPECT_EQ(error_of([&] { sim.add_link_use(2, 1, us(1), 1); }),
            "internal error: link 2 credited while its utilization is recorded");
  sim.record_utilization(true);
  EXPECT_EQ(error_of([&] { sim.add_link_use(0, 1, us(1), 1); }),
            "internal error: link 0 credited while its utilization is recorded");
  sim.reset();  // forgets the credits with the rest
  sim.run();
  EXPECT_EQ(sim.link_stats(2).bytes, 0.0);
  EXPECT_EQ(sim.link_stats(0).busy, Time::zero());
}

TEST(Simulator, RejectsBadRequestsWithClearErrors) {
  const auto t = line({100, 100}, Time::zero());
  Simulator sim(t);
  const std::vector<LinkId> unknown{9};
  const std::vector<LinkId> broken{0, 0};
  const std::vector<LinkId> fine{0};
  EXPECT_EQ(error_of([&] { sim.start_flow(unknown, Bytes(1), nullptr); }),
            "internal error: route names link 9 but topology line has 4");
  EXPECT_EQ(error_of([&] { sim.start_flow(broken, Bytes(1), nullptr); }),
            "internal error: route hop 1 (link 0) does not start where the previous link ends");
  EXPECT_EQ(error_of([&] { sim.start_flow(fine, Bytes(-1), nullptr); }),
            "internal error: flow of negative size -1 bytes");
  sim.run_until(ps(100));
  EXPECT_EQ(error_of([&] { sim.schedule(ps(99), [] {}); }),
            "internal error: event scheduled at 99 ps, before the current time 100 ps");
  EXPECT_EQ(error_of([&] { sim.run_until(ps(50)); }),
            "internal error: run_until 50 ps is before the current time 100 ps");
  EXPECT_EQ(error_of([&] { (void)sim.link_stats(4); }),
            "internal error: no link 4 in topology line");

  topo::Topology dead("dead", topo::Family::kExplicit);
  dead.add_device("a");
  dead.add_device("b");
  dead.add_link(0, 1, Bandwidth{}, Time::zero());
  Simulator on_dead(dead);
  const std::vector<LinkId> zero{0};
  EXPECT_EQ(
      error_of([&] { on_dead.start_flow(zero, Bytes(1), nullptr); }),
      "link 0: route crosses a link without bandwidth (got \"0 B/s\"; expected a bandwidth > 0)");
}

/// A two-level leaf-spine by hand: 4 leaves of 4 devices, 2 spines; host links 100 GB/s,
/// leaf-spine 50 GB/s (2:1 oversubscribed), 500 ns per hop.
struct LeafSpine {
  static constexpr int kHosts = 16;
  static constexpr int kPerLeaf = 4;
  static constexpr int kSpines = 2;
  topo::Topology topology{"leafspine", topo::Family::kSpineLeaf};

  explicit LeafSpine(Time latency = us(0.5)) {
    for (int h = 0; h < kHosts; ++h) topology.add_device("h" + std::to_string(h));
    std::vector<topo::NodeId> leaves, spines;
    for (int l = 0; l < kHosts / kPerLeaf; ++l) leaves.push_back(topology.add_switch("l", 1));
    for (int s = 0; s < kSpines; ++s) spines.push_back(topology.add_switch("s", 2));
    for (int h = 0; h < kHosts; ++h) {
      topology.add_link(static_cast<topo::NodeId>(h), leaves[h / kPerLeaf], gbps(100), latency);
    }
    for (const auto leaf : leaves) {
      for (const auto spine : spines) topology.add_link(leaf, spine, gbps(50), latency);
    }
  }
  LinkId up(int host) const { return static_cast<LinkId>(2 * host); }
  LinkId down(int host) const { return static_cast<LinkId>(2 * host + 1); }
  LinkId leaf_to_spine(int leaf, int spine) const {
    return static_cast<LinkId>(2 * (kHosts + leaf * kSpines + spine));
  }
  std::vector<LinkId> route(int src, int dst, int spine) const {
    if (src / kPerLeaf == dst / kPerLeaf) return {up(src), down(dst)};
    return {up(src), leaf_to_spine(src / kPerLeaf, spine), leaf_to_spine(dst / kPerLeaf, spine) + 1,
            down(dst)};
  }
};

/// Random flows with random sizes and start times on the leaf-spine; returns delivery times in
/// flow-id order and the final per-link statistics.
struct Scenario {
  std::vector<Time> deliveries;
  std::vector<LinkStats> stats;
  std::uint64_t events = 0;
  std::uint64_t rated = 0;
  std::vector<std::vector<UtilizationSample>> series;  // per link (with `recorded`)
};

Scenario run_random_scenario(std::uint64_t seed, bool reuse_levels = true, bool all_at_once = false,
                             bool verified = true, const std::vector<LinkId>* recorded = nullptr) {
  const LeafSpine fabric;
  Rng rng(seed);
  std::vector<std::vector<LinkId>> routes;
  routes.reserve(400);
  for (int i = 0; i < 400; ++i) {
    const auto src = static_cast<int>(rng.below(LeafSpine::kHosts));
    auto dst = static_cast<int>(rng.below(LeafSpine::kHosts - 1));
    if (dst >= src) ++dst;
    routes.push_back(fabric.route(src, dst, static_cast<int>(rng.below(LeafSpine::kSpines))));
  }
  Simulator sim(fabric.topology);
  sim.reuse_lower_levels(reuse_levels);
  sim.verified_refills(verified);
  if (recorded != nullptr) sim.record_utilization(*recorded);
  Scenario out;
  out.deliveries.resize(routes.size());
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const Time start =
        all_at_once ? Time::zero() : Time::nanoseconds(static_cast<double>(rng.below(50'000)));
    const Bytes size(static_cast<std::int64_t>(1 + rng.below(4'000'000)));
    sim.schedule(start, [&sim, &out, &routes, i, size] {
      sim.start_flow(routes[i], size, [&out, i](FlowId, Time at) { out.deliveries[i] = at; });
    });
  }
  sim.run();
  for (LinkId l = 0; l < fabric.topology.num_links(); ++l) {
    out.stats.push_back(sim.link_stats(l));
    const auto samples = sim.utilization(l);
    out.series.emplace_back(samples.begin(), samples.end());
  }
  out.events = sim.events_processed();
  out.rated = sim.flows_rated();
  return out;
}

void expect_same(const Scenario& a, const Scenario& b) {
  ASSERT_EQ(a.deliveries.size(), b.deliveries.size());
  for (std::size_t i = 0; i < a.deliveries.size(); ++i) {
    EXPECT_EQ(a.deliveries[i], b.deliveries[i]) << "flow " << i;
  }
  ASSERT_EQ(a.stats.size(), b.stats.size());
  for (std::size_t l = 0; l < a.stats.size(); ++l) {
    EXPECT_EQ(a.stats[l].bytes, b.stats[l].bytes) << "link " << l;  // bit-for-bit
    EXPECT_EQ(a.stats[l].busy, b.stats[l].busy) << "link " << l;
    EXPECT_EQ(a.stats[l].peak_flows, b.stats[l].peak_flows) << "link " << l;
  }
  EXPECT_EQ(a.events, b.events);
}

TEST(Simulator, SameInputsGiveIdenticalResults) {
  const Scenario a = run_random_scenario(7);
  const Scenario b = run_random_scenario(7);
  expect_same(a, b);
  // The scenario is not trivial: flows overlap on shared links.
  std::uint32_t peak = 0;
  for (const auto& s : a.stats) peak = std::max(peak, s.peak_flows);
  EXPECT_GE(peak, 5U);
  // A different seed gives different times (the comparison above can fail).
  const Scenario c = run_random_scenario(8);
  EXPECT_NE(a.deliveries, c.deliveries);
}

// Recording chosen links' series (as the replay's trace pass does) leaves the run as it is:
// the same deliveries, link statistics, events and rate work as without recording (the
// verified refilling stays on). Links not chosen record nothing; each chosen link's series
// integrates to its bytes, is non-zero exactly while the link is busy and ends at rate 0.
TEST(Simulator, RecordingChosenLinksLeavesTheRunAsItIs) {
  const LeafSpine fabric;
  std::vector<LinkId> chosen;
  for (LinkId l = 0; l < fabric.topology.num_links(); l += 3) chosen.push_back(l);
  for (const std::uint64_t seed : {11U, 12U}) {
    const Scenario plain = run_random_scenario(seed);
    const Scenario recorded = run_random_scenario(seed, true, false, true, &chosen);
    expect_same(plain, recorded);
    EXPECT_EQ(plain.rated, recorded.rated);
    // The verified refilling ran (it re-rates fewer flows than refilling whole components), so
    // its changes are among those recorded.
    EXPECT_LT(recorded.rated, run_random_scenario(seed, true, false, false).rated);
    int checked = 0;
    for (LinkId l = 0; l < fabric.topology.num_links(); ++l) {
      const auto& series = recorded.series[l];
      if (std::find(chosen.begin(), chosen.end(), l) == chosen.end()) {
        EXPECT_TRUE(series.empty()) << "link " << l;
        continue;
      }
      const LinkStats& st = recorded.stats[l];
      if (st.bytes == 0) {
        EXPECT_TRUE(series.empty()) << "link " << l;
        continue;
      }
      ASSERT_GE(series.size(), 2U) << "link " << l;
      EXPECT_EQ(series.back().rate, Bandwidth{}) << "link " << l;
      double bytes = 0;
      Time busy;
      for (std::size_t i = 0; i + 1 < series.size(); ++i) {
        const Time span = series[i + 1].at - series[i].at;
        bytes += series[i].rate.bytes_per_s() * span.to_seconds();
        if (series[i].rate.bytes_per_s() > 0) busy += span;
      }
      EXPECT_NEAR(bytes, st.bytes, 1e-6 * st.bytes) << "link " << l;
      EXPECT_EQ(busy, st.busy) << "link " << l;
      ++checked;
    }
    EXPECT_GE(checked, 10) << seed;
  }
  Simulator sim(fabric.topology);
  const std::vector<LinkId> beyond{static_cast<LinkId>(fabric.topology.num_links())};
  EXPECT_THROW(sim.record_utilization(beyond), Error);
}

TEST(Simulator, RandomScenarioConservesBytes) {
  // Every byte of every flow crosses each link of its route once: the bytes on host up-links
  // sum to the total bytes sent.
  const LeafSpine fabric;
  Rng rng(3);
  Simulator sim(fabric.topology);
  std::vector<std::vector<LinkId>> routes;
  double total = 0;
  for (int i = 0; i < 200; ++i) {
    const auto src = static_cast<int>(rng.below(LeafSpine::kHosts));
    const auto dst =
        static_cast<int>((src + 1 + rng.below(LeafSpine::kHosts - 1)) % LeafSpine::kHosts);
    routes.push_back(fabric.route(src, dst, i % 2));
  }
  for (int i = 0; i < 200; ++i) {
    const auto size = static_cast<std::int64_t>(1000 + rng.below(1'000'000));
    total += static_cast<double>(size);
    sim.start_flow(routes[static_cast<std::size_t>(i)], Bytes(size), nullptr);
  }
  sim.run();
  double up = 0;
  for (int h = 0; h < LeafSpine::kHosts; ++h) up += sim.link_stats(fabric.up(h)).bytes;
  EXPECT_EQ(up, total);
  EXPECT_EQ(sim.active_flows(), 0U);
}

// A simulator reset in the middle of a run (flows draining, events pending, series recorded)
// then runs a second workload exactly as a fresh simulator does: deliveries, every link's
// statistics and series, events, rate work and the clock.
TEST(Simulator, ResetRunsLikeAFreshSimulator) {
  const LeafSpine fabric;
  struct Run {
    Scenario scenario;
    std::vector<std::vector<UtilizationSample>> series;
    Time end;
  };
  const auto workload = [&fabric](Simulator& sim, std::uint64_t seed, Time until) {
    Rng rng(seed);
    auto out = std::make_shared<Run>();
    out->scenario.deliveries.resize(150);
    auto routes = std::make_shared<std::vector<std::vector<LinkId>>>();
    for (int i = 0; i < 150; ++i) {
      const auto src = static_cast<int>(rng.below(LeafSpine::kHosts));
      auto dst = static_cast<int>(rng.below(LeafSpine::kHosts - 1));
      if (dst >= src) ++dst;
      routes->push_back(fabric.route(src, dst, static_cast<int>(rng.below(LeafSpine::kSpines))));
    }
    for (std::size_t i = 0; i < routes->size(); ++i) {
      const Time start = Time::nanoseconds(static_cast<double>(rng.below(40'000)));
      const Bytes size(static_cast<std::int64_t>(1 + rng.below(3'000'000)));
      sim.schedule(start, [&sim, out, routes, i, size] {
        sim.start_flow((*routes)[i], size,
                       [out, i](FlowId, Time at) { out->scenario.deliveries[i] = at; });
      });
    }
    if (until == Time::max()) {
      sim.run();
    } else {
      sim.run_until(until);
    }
    for (LinkId l = 0; l < fabric.topology.num_links(); ++l) {
      out->scenario.stats.push_back(sim.link_stats(l));
      const auto samples = sim.utilization(l);
      out->series.emplace_back(samples.begin(), samples.end());
    }
    out->scenario.events = sim.events_processed();
    out->scenario.rated = sim.flows_rated();
    out->end = sim.now();
    return out;
  };
  Simulator reused(fabric.topology);
  reused.record_utilization(true);
  const auto first = workload(reused, 5, us(20));
  EXPECT_GT(reused.active_flows(), 0U);  // reset with flows in flight
  reused.reset();
  EXPECT_EQ(reused.now(), Time::zero());
  EXPECT_EQ(reused.active_flows(), 0U);
  const auto second = workload(reused, 6, Time::max());

  Simulator fresh(fabric.topology);
  fresh.record_utilization(true);
  const auto expected = workload(fresh, 6, Time::max());
  expect_same(second->scenario, expected->scenario);
  EXPECT_EQ(second->scenario.rated, expected->scenario.rated);
  EXPECT_EQ(second->end, expected->end);
  ASSERT_EQ(second->series.size(), expected->series.size());
  for (std::size_t l = 0; l < expected->series.size(); ++l) {
    ASSERT_EQ(second->series[l].size(), expected->series[l].size()) << "link " << l;
    for (std::size_t i = 0; i < expected->series[l].size(); ++i) {
      EXPECT_EQ(second->series[l][i].at, expected->series[l][i].at) << "link " << l;
      EXPECT_EQ(second->series[l][i].rate, expected->series[l][i].rate) << "link " << l;
    }
  }
}

TEST(Simulator, ReusingLowerLevelsMatchesFullRefilling) {
  // Keeping the rates of flows below the departed level is exact in exact arithmetic; in
  // floating point the times may differ by the rounding of a few drain events. Staggered starts
  // mix arrivals with departures; starting all at once makes every later update departures
  // only, where the refilling is restricted and must do less work.
  // Both restricted refillings are checked: the kept levels alone (verified refills off) and
  // with the verified refilling first (the default).
  for (const bool verified : {false, true}) {
    for (const bool all_at_once : {false, true}) {
      for (const std::uint64_t seed : {1, 2, 3, 4}) {
        const Scenario reused = run_random_scenario(seed, true, all_at_once, verified);
        const Scenario full = run_random_scenario(seed, false, all_at_once);
        ASSERT_EQ(reused.deliveries.size(), full.deliveries.size());
        for (std::size_t i = 0; i < full.deliveries.size(); ++i) {
          EXPECT_LE(std::abs((reused.deliveries[i] - full.deliveries[i]).ps()), 2)
              << seed << " " << i << " verified " << verified;
        }
        EXPECT_LE(reused.rated, full.rated);
        if (all_at_once) {
          EXPECT_LT(reused.rated * 2, full.rated) << seed;
        }
      }
    }
  }
}

// 200 random runs on random switched fabrics (10-60 devices on 1-6 chained switches, every cable
// with its own rate, 0-200 ps latencies, 20-320 flows in batches that start together, ECMP over
// up to 4 paths): the verified refilling, the kept levels alone and the full refilling deliver
// every flow within 2 ps of each other, with the same link peaks; the restricted ones rate
// fewer flows in all.
TEST(Simulator, RestrictedRefillingsMatchFullRefillingOnRandomFabrics) {
  std::uint64_t rated_verified = 0;
  std::uint64_t rated_kept = 0;
  std::uint64_t rated_full = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    const auto pick = [&rng](const auto& values) { return values[rng.below(values.size())]; };
    const std::vector<double> rates{1e9, 3e9, 7.3e9, 10e9, 10e9, 20e9, 25e9, 100e9, 2.5e9, 1.1e9};
    const std::vector<std::int64_t> sizes{1, 3, 1000, 1003, 100000, 1000000, 123457, 7777777};
    const auto devices = static_cast<int>(10 + rng.below(50));
    topo::Topology t("random", topo::Family::kExplicit);
    for (int d = 0; d < devices; ++d) t.add_device("d" + std::to_string(d));
    std::vector<topo::NodeId> switches;
    for (std::uint64_t i = 1 + rng.below(6); i > 0; --i) {
      switches.push_back(t.add_switch("s" + std::to_string(switches.size()), 1));
    }
    const auto rate = [&] { return Bandwidth::bytes_per_second(pick(rates)); };
    const auto latency = [&] { return ps(static_cast<std::int64_t>(rng.below(3) * 100)); };
    for (int d = 0; d < devices; ++d) {
      t.add_link(static_cast<topo::NodeId>(d), pick(switches), rate(), latency(), rate(),
                 latency());
    }
    for (std::size_t i = 1; i < switches.size(); ++i) {
      t.add_link(switches[i - 1], switches[i], rate(), ps(100));
    }
    topo::Router router(t, seed);
    struct Planned {
      std::span<const LinkId> route;
      Bytes size;
      Time at;
    };
    std::vector<Planned> planned;
    for (std::uint64_t f = 20 + rng.below(300); f > 0; --f) {
      const auto a = static_cast<topo::DeviceId>(rng.below(devices));
      auto b = static_cast<topo::DeviceId>(rng.below(devices));
      if (a == b) b = (a + 1) % static_cast<topo::DeviceId>(devices);
      planned.push_back({router.route(a, b, rng.below(4)), Bytes(pick(sizes)),
                         ps(static_cast<std::int64_t>(rng.below(40)) * 100000)});
    }
    const auto run = [&](bool reuse, bool verified, std::uint64_t& rated) {
      Simulator sim(t);
      sim.reuse_lower_levels(reuse);
      sim.verified_refills(verified);
      std::vector<Time> done(planned.size());
      for (std::size_t f = 0; f < planned.size(); ++f) {
        sim.schedule(planned[f].at, [&sim, &planned, &done, f] {
          sim.start_flow(planned[f].route, planned[f].size,
                         [&done, f](FlowId, Time at) { done[f] = at; });
        });
      }
      sim.run();
      rated += sim.flows_rated();
      std::vector<std::uint32_t> peaks;
      for (LinkId l = 0; l < t.num_links(); ++l) peaks.push_back(sim.link_stats(l).peak_flows);
      return std::make_pair(done, peaks);
    };
    const auto verified = run(true, true, rated_verified);
    const auto kept = run(true, false, rated_kept);
    const auto full = run(false, false, rated_full);
    for (std::size_t f = 0; f < planned.size(); ++f) {
      ASSERT_LE(std::abs((verified.first[f] - full.first[f]).ps()), 2) << seed << " flow " << f;
      ASSERT_LE(std::abs((kept.first[f] - full.first[f]).ps()), 2) << seed << " flow " << f;
    }
    EXPECT_EQ(verified.second, full.second) << seed;
    EXPECT_EQ(kept.second, full.second) << seed;
  }
  EXPECT_LT(rated_verified, rated_kept);
  EXPECT_LT(rated_kept, rated_full);
}

/// Zero-latency chains: each delivery starts the next flow of its chain at the same instant, so
/// departures and arrivals meet in one component at one timestamp.
std::vector<Time> run_chains(bool reuse_levels, bool verified = true) {
  const LeafSpine fabric(Time::zero());
  Rng rng(21);
  std::vector<std::vector<LinkId>> routes;
  std::vector<Bytes> sizes;
  for (int i = 0; i < 300; ++i) {
    const auto src = static_cast<int>(rng.below(LeafSpine::kHosts));
    const auto dst =
        static_cast<int>((src + 1 + rng.below(LeafSpine::kHosts - 1)) % LeafSpine::kHosts);
    routes.push_back(fabric.route(src, dst, static_cast<int>(rng.below(LeafSpine::kSpines))));
    sizes.emplace_back(static_cast<std::int64_t>(1 + rng.below(2'000'000)));
  }
  Simulator sim(fabric.topology);
  sim.reuse_lower_levels(reuse_levels);
  sim.verified_refills(verified);
  std::vector<Time> delivered(routes.size());
  // 30 chains of 10 flows: flow c + 30 k follows flow c + 30 (k - 1).
  std::function<void(std::size_t)> start = [&](std::size_t i) {
    sim.start_flow(routes[i], sizes[i], [&, i](FlowId, Time at) {
      delivered[i] = at;
      if (i + 30 < routes.size()) start(i + 30);
    });
  };
  for (std::size_t c = 0; c < 30; ++c) start(c);
  sim.run();
  return delivered;
}

TEST(Simulator, ReusingLowerLevelsMatchesFullRefillingWhenFlowsArriveAsOthersLeave) {
  const auto full = run_chains(false);
  for (const bool verified : {true, false}) {
    const auto reused = run_chains(true, verified);
    for (std::size_t i = 0; i < full.size(); ++i) {
      EXPECT_GT(full[i], Time::zero()) << i;
      EXPECT_LE(std::abs((reused[i] - full[i]).ps()), 2) << i << " verified " << verified;
    }
  }
}

/// Textbook progressive filling (no heap, no component search, no private links, no kept
/// levels): the max-min rates of `routes` over links of `capacity`.
std::vector<double> textbook_max_min(const std::vector<std::vector<LinkId>>& routes,
                                     std::vector<double> capacity) {
  std::vector<double> rate(routes.size(), -1);
  for (;;) {
    std::vector<int> unfrozen(capacity.size(), 0);
    for (std::size_t f = 0; f < routes.size(); ++f) {
      if (rate[f] < 0) {
        for (const LinkId l : routes[f]) ++unfrozen[l];
      }
    }
    double share = std::numeric_limits<double>::infinity();
    std::size_t bottleneck = capacity.size();
    for (std::size_t l = 0; l < capacity.size(); ++l) {
      if (unfrozen[l] > 0 && capacity[l] / unfrozen[l] < share) {
        share = capacity[l] / unfrozen[l];
        bottleneck = l;
      }
    }
    if (bottleneck == capacity.size()) return rate;
    for (std::size_t f = 0; f < routes.size(); ++f) {
      if (rate[f] >= 0) continue;
      if (std::find(routes[f].begin(), routes[f].end(), bottleneck) == routes[f].end()) continue;
      rate[f] = share;
      for (const LinkId l : routes[f]) capacity[l] -= share;
    }
  }
}

// Random flows with staggered starts on a two-tier fabric whose every cable has its own rate
// (10-100 GB/s: host cables often slower than the uplinks, so caps of private links bind while
// their flows still share other links). At 40 instants the simulator's rates of the draining
// flows must be the textbook max-min rates of exactly those flows.
TEST(Simulator, RatesAreTheTextbookMaxMinRatesThroughoutARandomRun) {
  for (const std::uint64_t seed : {11, 12, 13, 14, 15, 16}) {
    const bool verified = seed % 2 == 1;  // both restricted refillings
    Rng rng(seed);
    constexpr int kHosts = 24;
    constexpr int kLeaves = 4;
    constexpr int kSpines = 3;
    topo::Topology t("random-rates", topo::Family::kExplicit);
    for (int h = 0; h < kHosts; ++h) t.add_device("h" + std::to_string(h));
    std::vector<topo::NodeId> leaves;
    std::vector<topo::NodeId> spines;
    for (int l = 0; l < kLeaves; ++l) leaves.push_back(t.add_switch("l" + std::to_string(l), 1));
    for (int s = 0; s < kSpines; ++s) spines.push_back(t.add_switch("s" + std::to_string(s), 2));
    const auto random_rate = [&] { return gbps(10.0 * static_cast<double>(1 + rng.below(10))); };
    std::vector<LinkId> up(kHosts);  // cable i: links 2i (a -> b) and 2i + 1 (b -> a)
    for (int h = 0; h < kHosts; ++h) {
      up[h] = t.add_link(static_cast<topo::NodeId>(h), leaves[h % kLeaves], random_rate(), us(1));
    }
    std::vector<std::vector<LinkId>> uplink(kLeaves, std::vector<LinkId>(kSpines));
    for (int l = 0; l < kLeaves; ++l) {
      for (int s = 0; s < kSpines; ++s) {
        uplink[l][s] = t.add_link(leaves[l], spines[s], random_rate(), us(1));
      }
    }
    std::vector<double> capacity;
    for (const topo::Link& link : t.links()) capacity.push_back(link.bandwidth.bytes_per_s());

    Simulator sim(t);
    sim.verified_refills(verified);
    std::vector<std::vector<LinkId>> routes;
    std::map<std::size_t, FlowId> ids;  // started flows
    for (int i = 0; i < 120; ++i) {
      const auto src = static_cast<int>(rng.below(kHosts));
      const auto dst = static_cast<int>((src + 1 + rng.below(kHosts - 1)) % kHosts);
      std::vector<LinkId> route{up[src]};
      if (src % kLeaves != dst % kLeaves) {
        const auto s = static_cast<int>(rng.below(kSpines));
        route.push_back(uplink[src % kLeaves][s]);
        route.push_back(uplink[dst % kLeaves][s] + 1);
      }
      route.push_back(up[dst] + 1);
      routes.push_back(std::move(route));
    }
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const Bytes size(static_cast<std::int64_t>(10'000 + rng.below(2'000'000)));
      sim.schedule(us(static_cast<double>(rng.below(200))), [&sim, &routes, &ids, i, size] {
        ids[i] = sim.start_flow(routes[i], size, nullptr);
      });
    }
    int compared = 0;
    for (int k = 1; k <= 40; ++k) {
      sim.run_until(us(7.0 * k));
      std::vector<std::vector<LinkId>> draining;
      std::vector<double> simulated;
      for (const auto& [i, id] : ids) {
        const double r = sim.flow_rate(id).bytes_per_s();
        if (r == 0) continue;
        draining.push_back(routes[i]);
        simulated.push_back(r);
      }
      const std::vector<double> expected = textbook_max_min(draining, capacity);
      for (std::size_t f = 0; f < expected.size(); ++f) {
        EXPECT_NEAR(simulated[f], expected[f], expected[f] * 1e-9)
            << "seed " << seed << " at " << 7 * k << " us, flow " << f;
        ++compared;
      }
    }
    EXPECT_GT(compared, 500) << seed;
  }
}

TEST(Simulator, ArrivalsKeepTheLevelsBelowTheirEqualShare) {
  // Staggered starts: most updates are single arrivals. An arrival's rate is at least the
  // smallest capacity / flows over its links, and every level below it is kept, so the
  // restricted refilling rates fewer flows than refilling whole components, with the same
  // delivery times (up to the rounding of a few drain events).
  std::uint64_t reused_rated = 0;
  std::uint64_t full_rated = 0;
  for (const std::uint64_t seed : {5, 6, 7}) {
    const Scenario reused = run_random_scenario(seed, true);
    const Scenario full = run_random_scenario(seed, false);
    ASSERT_EQ(reused.deliveries.size(), full.deliveries.size());
    for (std::size_t i = 0; i < full.deliveries.size(); ++i) {
      EXPECT_LE(std::abs((reused.deliveries[i] - full.deliveries[i]).ps()), 2) << seed << " " << i;
    }
    EXPECT_EQ(reused.events, full.events);
    reused_rated += reused.rated;
    full_rated += full.rated;
  }
  EXPECT_LT(reused_rated * 2, full_rated);
}

TEST(Simulator, ArrivalKeepsTheLowerFlowsAndRefillsTheUpperOnes) {
  // Hand-computed, H = a host link's capacity: a1, a2, a3 leave host 0 for hosts 2, 3 and 4 (its
  // up-link: H/3 each); b (host 1 -> 2) shares host 2's down-link with a1 and gets H - H/3. Then
  // c (host 1 -> 3) arrives: its floor is H/2 (host 1's up-link and host 3's down-link, 2 flows
  // each), so the a flows (H/3) keep their rates and only b and c are refilled: H/2 each. Full
  // refilling rates the whole component (5 flows) to the same rates. The verified refilling
  // (on by default) re-rates c alone first (H/3 on host 1's up-link, next to b's 2H/3), finds b
  // faster than c there, and re-rates {b, c}: 1 + 2 flows rated.
  const LeafSpine fabric;
  const double host = fabric.topology.links()[fabric.up(0)].bandwidth.bytes_per_s();
  struct Mode {
    bool reuse;
    bool verified;
    std::uint64_t rated;
  };
  for (const Mode mode : {Mode{true, false, 2}, Mode{false, false, 5}, Mode{true, true, 3}}) {
    Simulator sim(fabric.topology);
    sim.reuse_lower_levels(mode.reuse);
    sim.verified_refills(mode.verified);
    const std::vector<std::vector<LinkId>> routes{fabric.route(0, 2, 0), fabric.route(0, 3, 0),
                                                  fabric.route(0, 4, 0), fabric.route(1, 2, 0),
                                                  fabric.route(1, 3, 0)};
    std::vector<FlowId> ids;
    for (std::size_t i = 0; i < 4; ++i) {
      ids.push_back(sim.start_flow(routes[i], Bytes(1'000'000'000), nullptr));
    }
    sim.run_until(Time::nanoseconds(1));
    EXPECT_DOUBLE_EQ(sim.flow_rate(ids[3]).bytes_per_s(), host - host / 3);
    ids.push_back(sim.start_flow(routes[4], Bytes(1'000'000'000), nullptr));
    const std::uint64_t before = sim.flows_rated();
    sim.run_until(Time::nanoseconds(2));
    EXPECT_EQ(sim.flows_rated() - before, mode.rated);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_DOUBLE_EQ(sim.flow_rate(ids[i]).bytes_per_s(), host / 3) << i;
    }
    EXPECT_DOUBLE_EQ(sim.flow_rate(ids[3]).bytes_per_s(), host / 2);
    EXPECT_DOUBLE_EQ(sim.flow_rate(ids[4]).bytes_per_s(), host / 2);
  }
}

TEST(Simulator, TwoSimulatorsInTwoThreadsMatchSequentialRuns) {
  const Scenario alone_a = run_random_scenario(11);
  const Scenario alone_b = run_random_scenario(12);
  Scenario threaded_a, threaded_b;
  std::thread ta([&] { threaded_a = run_random_scenario(11); });
  std::thread tb([&] { threaded_b = run_random_scenario(12); });
  ta.join();
  tb.join();
  expect_same(alone_a, threaded_a);
  expect_same(alone_b, threaded_b);
}

TEST(Simulator, OversubscribedUplinkHalvesCrossLeafFlows) {
  // Hosts 0 and 1 (leaf 0) send 1 MB each to hosts 4 and 5 (leaf 1) through spine 0: the
  // 50 GB/s leaf-spine link is shared, 25 GB/s each: 40 us + 2 us of latency (4 hops).
  const LeafSpine fabric;
  Simulator sim(fabric.topology);
  const auto r0 = fabric.route(0, 4, 0);
  const auto r1 = fabric.route(1, 5, 0);
  Completions done;
  const FlowId f0 = sim.start_flow(r0, Bytes(1'000'000), done.callback());
  const FlowId f1 = sim.start_flow(r1, Bytes(1'000'000), done.callback());
  sim.run();
  EXPECT_EQ(done.at.at(f0), us(42));
  EXPECT_EQ(done.at.at(f1), us(42));
  EXPECT_EQ(sim.link_stats(fabric.leaf_to_spine(0, 0)).bytes, 2'000'000);
  EXPECT_EQ(sim.link_stats(fabric.leaf_to_spine(0, 0)).peak_flows, 2U);
  EXPECT_EQ(sim.link_stats(fabric.leaf_to_spine(0, 1)).bytes, 0);
}

}  // namespace
}  // namespace nest::net
