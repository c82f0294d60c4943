// executor/stream_assign: the stream of each kernel and the events between streams, on small DAGs in code and on
// seeded random DAGs (every dependency ordered, every wait needed, the same answer every time).
#include "executor/stream_assign.h"

#include <gtest/gtest.h>

#include <random>

namespace ot {
namespace {

using Deps = std::vector<std::vector<int>>;

TEST(StreamAssign, AChainStaysOnOneStreamWithoutEvents) {
  const Deps deps = {{}, {0}, {1}, {2}, {3}};
  const StreamSchedule s = AssignStreams(deps, std::vector<double>(5, 1.0), 4, 0.5);
  EXPECT_EQ(s.streams, 1);
  EXPECT_EQ(s.stream, std::vector<int>(5, 0));
  EXPECT_EQ(s.events, 0);
  EXPECT_EQ(s.wait_count(), 0);
  EXPECT_EQ(CheckSchedule(deps, s), "");
}

TEST(StreamAssign, OneStreamIsThePlanOrder) {
  const Deps deps = {{}, {}, {0, 1}, {}, {2, 3}};
  const StreamSchedule s = AssignStreams(deps, std::vector<double>(5, 1.0), 1);
  EXPECT_EQ(s.streams, 1);
  EXPECT_EQ(s.events, 0);
  EXPECT_EQ(CheckSchedule(deps, s), "");
}

// One layer's backward: dY (0) feeds the data-gradient GEMM (1) and the weight-gradient GEMM (2); the next layer's
// backward continues from dX (3 after 1), the update needs both (4). The GEMMs overlap: one continues dY's stream,
// the other starts on the second; the update waits once for the branch it is not on.
TEST(StreamAssign, TheTwoGradientGemmsOfALayerOverlap) {
  const Deps deps = {{}, {0}, {0}, {1}, {2, 3}};
  const std::vector<double> cost = {1, 10, 10, 1, 1};
  const StreamSchedule s = AssignStreams(deps, cost, 2, 0.5);
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.stream[1], s.stream[0]) << "dY's first consumer continues its stream";
  EXPECT_NE(s.stream[2], s.stream[1]) << "the weight-gradient GEMM runs beside the data-gradient GEMM";
  EXPECT_EQ(s.stream[3], s.stream[1]);
  EXPECT_EQ(s.waits[2], std::vector<int>({0}));
  EXPECT_EQ(s.wait_count(), 2);  // the second GEMM waits for dY; the update for the other branch
  EXPECT_EQ(CheckSchedule(deps, s), "");
}

// Waits implied by earlier ones are skipped: k2 (stream 2) needs k0 (stream 0) and k1 (stream 1), and k1 waited
// for k0 -- one wait, for k1. k3 (stream 1) needs k0 again: stream 1 already waited for it.
TEST(StreamAssign, TransitivelyImpliedWaitsAreSkipped) {
  const Deps deps = {{}, {0}, {0, 1}, {0}};
  const StreamSchedule s = ScheduleEvents(deps, {0, 1, 2, 1}, 3);
  EXPECT_EQ(s.waits[1], std::vector<int>({0}));
  EXPECT_EQ(s.waits[2], std::vector<int>({1}));
  EXPECT_TRUE(s.waits[3].empty());
  EXPECT_EQ(s.events, 2);
  EXPECT_EQ(s.event[2], -1);
  EXPECT_EQ(s.event[3], -1);
  EXPECT_EQ(CheckSchedule(deps, s), "");
}

// A wait for a later kernel of a stream implies the earlier ones of that stream.
TEST(StreamAssign, TheLatestKernelOfAStreamIsWaitedFor) {
  const Deps deps = {{}, {0}, {}, {0, 1, 2}};
  const StreamSchedule s = ScheduleEvents(deps, {0, 0, 1, 1}, 2);
  EXPECT_EQ(s.waits[3], std::vector<int>({1}));
  EXPECT_EQ(s.event[0], -1);
  EXPECT_EQ(CheckSchedule(deps, s), "");
}

TEST(StreamAssign, CheckScheduleNamesAMissingWait) {
  const Deps deps = {{}, {0}};
  StreamSchedule s = ScheduleEvents(deps, {0, 1}, 2);
  ASSERT_EQ(CheckSchedule(deps, s), "");
  s.waits[1].clear();
  EXPECT_NE(CheckSchedule(deps, s).find("does not wait for its dependency 0"), std::string::npos);
}

Deps RandomDag(std::mt19937_64& rng, int n) {
  Deps deps(static_cast<size_t>(n));
  for (int j = 1; j < n; ++j) {
    const int k = static_cast<int>(rng() % 4);
    for (int q = 0; q < k; ++q) {
      // Mostly near dependencies (a network's locality), sometimes far ones (skip connections, the update).
      const int back = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % static_cast<uint64_t>(j))
                                      : 1 + static_cast<int>(rng() % std::min<uint64_t>(static_cast<uint64_t>(j), 4));
      deps[static_cast<size_t>(j)].push_back(j - back);
    }
  }
  return deps;
}

// On random DAGs with 1..5 streams: every dependency is ordered; no wait can be dropped (each is needed by its own
// kernel); the same input gives the same schedule.
TEST(StreamAssign, RandomDagsAreOrderedMinimalAndDeterministic) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int n = 2 + static_cast<int>(rng() % 80);
    const Deps deps = RandomDag(rng, n);
    std::vector<double> cost;
    for (int i = 0; i < n; ++i) cost.push_back(static_cast<double>(1 + rng() % 20));
    const int streams = 1 + static_cast<int>(rng() % 5);
    const StreamSchedule s = AssignStreams(deps, cost, streams, 1.0);
    ASSERT_EQ(CheckSchedule(deps, s), "");
    EXPECT_LE(s.streams, streams);
    const StreamSchedule again = AssignStreams(deps, cost, streams, 1.0);
    EXPECT_EQ(again.stream, s.stream);
    EXPECT_EQ(again.waits, s.waits);
    for (int j = 0; j < n; ++j)
      for (size_t w = 0; w < s.waits[static_cast<size_t>(j)].size(); ++w) {
        StreamSchedule fewer = s;
        fewer.waits[static_cast<size_t>(j)].erase(fewer.waits[static_cast<size_t>(j)].begin() + static_cast<long>(w));
        EXPECT_NE(CheckSchedule(deps, fewer), "") << "kernel " << j << "'s wait " << w << " was not needed";
      }
    // Any other assignment gets its events too (the plan could take streams from elsewhere).
    std::vector<int> other;
    for (int i = 0; i < n; ++i) other.push_back(static_cast<int>(rng() % 3));
    EXPECT_EQ(CheckSchedule(deps, ScheduleEvents(deps, other, 3)), "");
  }
}

// Independent work spreads: four equal independent chains on four streams each stay on one stream.
TEST(StreamAssign, IndependentChainsGetTheirOwnStreams) {
  Deps deps;
  for (int i = 0; i < 16; ++i) deps.push_back(i >= 4 ? std::vector<int>{i - 4} : std::vector<int>{});
  const StreamSchedule s = AssignStreams(deps, std::vector<double>(16, 1.0), 4, 0.5);
  EXPECT_EQ(s.streams, 4);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(s.stream[static_cast<size_t>(i)], s.stream[static_cast<size_t>(i - 4)]);
  EXPECT_EQ(s.wait_count(), 0);
}

}  // namespace
}  // namespace ot
