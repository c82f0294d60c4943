// PlanMemoryArena / LivenessPeak against brute force on random buffer and step sets (fresh seeds each run), and
// hand-made cases for in-place reuse (taken exactly where legal) and the errors.
#include "passes/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>

namespace ot {
namespace {

int64_t Al(int64_t n) { return (n + kPlanAlign - 1) / kPlanAlign * kPlanAlign; }

struct Case {
  std::vector<PlanBuffer> bufs;
  std::vector<PlanStep> steps;
};

// A random step list: each step reads some earlier buffers (or resident ones) and writes 1-2 new buffers, may
// declare a workspace and some in-place pairs (legal or not: the planner must sort them out).
Case RandomCase(std::mt19937_64& rng) {
  Case c;
  const int ns = 1 + static_cast<int>(rng() % 40);
  auto size = [&] {
    const int64_t sizes[] = {0, 4, 64, 100, 128, 1000, 4096, 4100, 65536};
    return sizes[rng() % 9];
  };
  for (int r = 0; r < 3; ++r) c.bufs.push_back({size(), true, false, -1, -1});
  c.steps.resize(ns);
  for (int s = 0; s < ns; ++s) {
    PlanStep& st = c.steps[s];
    const int nin = static_cast<int>(rng() % 4);
    for (int k = 0; k < nin; ++k) {
      int b = static_cast<int>(rng() % c.bufs.size());
      st.inputs.push_back(b);
      if (!c.bufs[b].resident) c.bufs[b].last = std::max(c.bufs[b].last, s);
    }
    if (rng() % 5 == 0) st.inputs.push_back(-1);
    const int nout = 1 + static_cast<int>(rng() % 2);
    for (int k = 0; k < nout; ++k) {
      PlanBuffer b;
      // Half the outputs copy an input's size, so in-place candidates are often of equal size.
      b.bytes = (!st.inputs.empty() && st.inputs[0] >= 0 && rng() % 2) ? c.bufs[st.inputs[0]].bytes : size();
      b.to_end = rng() % 8 == 0;
      b.def = s;
      st.outputs.push_back(static_cast<int>(c.bufs.size()));
      c.bufs.push_back(b);
    }
    if (rng() % 3 == 0) st.workspace = size();
    for (int o : st.outputs)
      for (int i : st.inputs) {
        if (i >= 0 && rng() % 2) st.inplace.push_back({o, i});
        if (i >= 0 && rng() % 4 == 0) st.views.push_back({o, i});
      }
  }
  return c;
}

// Lifetime by brute force: from the writer (or step 0) to the last reader, or to the end for a to_end buffer.
std::pair<int, int> Life(const Case& c, int b) {
  const int ns = static_cast<int>(c.steps.size());
  int start = std::max(c.bufs[b].def, 0), end = start;
  for (int s = 0; s < ns; ++s)
    for (int i : c.steps[s].inputs)
      if (i == b) end = std::max(end, s);
  if (c.bufs[b].to_end) end = ns - 1;
  return {start, end};
}

int Root(const MemoryPlan& p, int b) {
  while (p.shares[b] >= 0) b = p.shares[b];
  return b;
}

void CheckCase(const Case& c, int best_fit_limit = kBestFitRegionLimit) {
  const MemoryPlan p = PlanMemoryArena(c.bufs, c.steps, best_fit_limit);
  const int nb = static_cast<int>(c.bufs.size()), ns = static_cast<int>(c.steps.size());
  ASSERT_EQ(p.offsets.size(), c.bufs.size());
  ASSERT_EQ(p.shares.size(), c.bufs.size());
  ASSERT_EQ(p.workspace_offsets.size(), c.steps.size());

  // In-place pairs and views: each is legal, each input has one in-place taker, and an in-place taker writes a
  // group's memory only when every earlier member is dead (a view only shares bytes, it writes nothing).
  std::vector<int> takers(nb, 0);
  int64_t saved = 0;
  for (int o = 0; o < nb; ++o) {
    const int i = p.shares[o];
    if (i < 0) continue;
    const int s = c.bufs[o].def;
    ASSERT_GE(s, 0);
    const auto& pairs = c.steps[s].inplace;
    const auto& views = c.steps[s].views;
    const bool inplace = std::find(pairs.begin(), pairs.end(), std::make_pair(o, i)) != pairs.end();
    const bool view = std::find(views.begin(), views.end(), std::make_pair(o, i)) != views.end();
    EXPECT_TRUE(inplace || view) << o << " took " << i;
    EXPECT_FALSE(c.bufs[i].resident || c.bufs[o].resident);
    EXPECT_EQ(Al(c.bufs[i].bytes), Al(c.bufs[o].bytes));
    EXPECT_LT(c.bufs[i].def, s);
    EXPECT_EQ(p.offsets[o], p.offsets[i]);
    saved += Al(c.bufs[o].bytes);
    // A pair listed both ways may have been taken as either: it must meet the rules of one of them.
    if (view && !c.bufs[o].to_end) continue;  // a view's rules (the output is not a graph output)
    EXPECT_TRUE(inplace) << "view " << o << " is a graph output";
    EXPECT_EQ(++takers[i], 1) << "buffer " << i << " has two takers";
    const int r = Root(p, o);
    for (int m = 0; m < nb; ++m) {
      if (m == o || c.bufs[m].resident || Root(p, m) != r || c.bufs[m].def >= s) continue;
      EXPECT_FALSE(c.bufs[m].to_end) << "buffer " << m << " must survive, but " << o << " took its memory";
      EXPECT_LE(Life(c, m).second, s) << "buffer " << m << " is read after step " << s << " where " << o
                                      << " overwrites its memory";
    }
  }
  EXPECT_EQ(p.inplace_saved_bytes, saved);

  // Regions: groups (by root) and workspaces, with brute-force lifetimes.
  struct R {
    int64_t off, size;
    int start, end, root;
  };
  std::vector<R> regions;
  int64_t resident = 0;
  std::vector<int> group_start(nb, INT32_MAX), group_end(nb, -1);
  for (int b = 0; b < nb; ++b) {
    if (c.bufs[b].resident) {
      resident += c.bufs[b].bytes;
      EXPECT_EQ(p.offsets[b], -1);
      continue;
    }
    const int r = Root(p, b);
    auto [st, en] = Life(c, b);
    group_start[r] = std::min(group_start[r], st);
    group_end[r] = std::max(group_end[r], en);
    ASSERT_GE(p.offsets[b], 0);
    EXPECT_EQ(p.offsets[b] % kPlanAlign, 0);
    EXPECT_LE(p.offsets[b] + Al(c.bufs[b].bytes), p.arena_bytes);
  }
  for (int b = 0; b < nb; ++b)
    if (group_end[b] >= 0) regions.push_back({p.offsets[b], Al(c.bufs[b].bytes), group_start[b], group_end[b], b});
  for (int s = 0; s < ns; ++s) {
    if (c.steps[s].workspace == 0) continue;
    ASSERT_GE(p.workspace_offsets[s], 0) << "step " << s;
    EXPECT_LE(p.workspace_offsets[s] + Al(c.steps[s].workspace), p.arena_bytes);
    regions.push_back({p.workspace_offsets[s], Al(c.steps[s].workspace), s, s, -1});
  }
  EXPECT_EQ(p.resident_bytes, resident);
  // No two regions whose lifetimes overlap share a byte.
  for (size_t a = 0; a < regions.size(); ++a)
    for (size_t b = a + 1; b < regions.size(); ++b) {
      const R &A = regions[a], &B = regions[b];
      if (A.end < B.start || B.end < A.start || A.size == 0 || B.size == 0) continue;
      EXPECT_TRUE(A.off + A.size <= B.off || B.off + B.size <= A.off)
          << "regions of " << A.root << " [" << A.start << "," << A.end << "] and " << B.root << " [" << B.start << ","
          << B.end << "] overlap in memory";
    }
  // Peak by a sweep over the steps.
  int64_t peak = 0;
  int peak_step = ns > 0 ? 0 : -1;
  for (int s = 0; s < ns; ++s) {
    int64_t live = 0;
    for (const R& r : regions)
      if (r.start <= s && s <= r.end) live += r.size;
    if (live > peak) {
      peak = live;
      peak_step = s;
    }
  }
  EXPECT_EQ(p.peak_live_bytes, resident + peak);
  EXPECT_EQ(p.peak_step, peak_step);
  EXPECT_GE(p.arena_bytes, peak);
  int at = -2;
  EXPECT_EQ(LivenessPeak(c.bufs, c.steps, &at), p.peak_live_bytes);
  EXPECT_EQ(at, p.peak_step);
}

// 400 random cases from a fresh seed, each checked against brute force (CheckCase) and then handed to `each` with
// its plan, made with `best_fit_limit`.
void ForRandomCases(int best_fit_limit, const std::function<void(const Case&, const MemoryPlan&)>& each) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 400; ++k) {
    Case c = RandomCase(rng);
    CheckCase(c, best_fit_limit);
    if (testing::Test::HasFatalFailure() || testing::Test::HasFailure()) {
      ADD_FAILURE() << "case " << k;
      return;
    }
    each(c, PlanMemoryArena(c.bufs, c.steps, best_fit_limit));
  }
}

TEST(MemoryPlan, RandomCasesAgainstBruteForce) {
  int64_t shared = 0, with_ws = 0;
  ForRandomCases(kBestFitRegionLimit, [&](const Case& c, const MemoryPlan& p) {
    for (int s : p.shares) shared += s >= 0;
    for (const PlanStep& st : c.steps) with_ws += st.workspace > 0;
  });
  // The generator must exercise both features, or the checks above prove little.
  EXPECT_GT(shared, 150);
  EXPECT_GT(with_ws, 100);
}

// The placement by a sweep over the steps (what graphs of more than kBestFitRegionLimit regions get) meets every
// rule too, and stays within twice the live peak on these cases.
TEST(MemoryPlan, SweepPlacementAgainstBruteForce) {
  int64_t arena = 0, best_fit = 0;
  ForRandomCases(0, [&](const Case& c, const MemoryPlan& p) {
    EXPECT_LE(p.arena_bytes, 2 * (p.peak_live_bytes - p.resident_bytes));
    arena += p.arena_bytes;
    best_fit += PlanMemoryArena(c.bufs, c.steps).arena_bytes;
  });
  std::printf("arena bytes over 400 cases: sweep %lld, best fit %lld\n", static_cast<long long>(arena),
              static_cast<long long>(best_fit));
}

// x -> Relu -> y -> Relu -> z: both outputs take their input's memory; the chain is one region of one size.
TEST(MemoryPlan, InPlaceChain) {
  std::vector<PlanBuffer> b = {{4000, false, false, 0, 1}, {4000, false, false, 1, 2}, {4000, false, true, 2, -1}};
  std::vector<PlanStep> s(3);
  s[0].outputs = {0};
  s[1] = {{0}, {1}, 0, {{1, 0}}};
  s[2] = {{1}, {2}, 0, {{2, 1}}};
  const MemoryPlan p = PlanMemoryArena(b, s);
  EXPECT_EQ(p.shares, (std::vector<int>{-1, 0, 1}));
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(p.arena_bytes, Al(4000));
  EXPECT_EQ(p.peak_live_bytes, Al(4000));
  EXPECT_EQ(p.inplace_saved_bytes, 2 * Al(4000));
}

// The negative twins: each breaks one condition, and no pair is taken.
TEST(MemoryPlan, NoInPlaceWhenIllegal) {
  auto plan = [](std::vector<PlanBuffer> b, std::vector<PlanStep> s) { return PlanMemoryArena(b, s); };
  // The input is read by a later step.
  {
    std::vector<PlanStep> s(3);
    s[0].outputs = {0};
    s[1] = {{0}, {1}, 0, {{1, 0}}};
    s[2].inputs = {0, 1};
    const MemoryPlan p = plan({{256, false, false, 0, 2}, {256, false, false, 1, 2}}, s);
    EXPECT_EQ(p.shares[1], -1);
    EXPECT_NE(p.offsets[0], p.offsets[1]);
    EXPECT_EQ(p.inplace_saved_bytes, 0);
  }
  // The input is a graph output that must survive.
  {
    std::vector<PlanStep> s(2);
    s[0].outputs = {0};
    s[1] = {{0}, {1}, 0, {{1, 0}}};
    EXPECT_EQ(plan({{256, false, true, 0, 1}, {256, false, false, 1, -1}}, s).shares[1], -1);
  }
  // Sizes differ (after alignment).
  {
    std::vector<PlanStep> s(2);
    s[0].outputs = {0};
    s[1] = {{0}, {1}, 0, {{1, 0}}};
    EXPECT_EQ(plan({{256, false, false, 0, 1}, {257, false, false, 1, -1}}, s).shares[1], -1);
    EXPECT_EQ(plan({{250, false, false, 0, 1}, {256, false, false, 1, -1}}, s).shares[1], 0);  // same 256 bytes
  }
  // Two takers of one input: only the first gets it.
  {
    std::vector<PlanStep> s(2);
    s[0].outputs = {0};
    s[1] = {{0}, {1, 2}, 0, {{1, 0}, {2, 0}}};
    const MemoryPlan p = plan({{256, false, false, 0, 1}, {256, false, false, 1, -1}, {256, false, false, 1, -1}}, s);
    EXPECT_EQ(p.shares, (std::vector<int>{-1, 0, -1}));
    EXPECT_NE(p.offsets[2], p.offsets[0]);
  }
  // A resident input (a parameter) is never taken.
  {
    std::vector<PlanStep> s(1);
    s[0] = {{0}, {1}, 0, {{1, 0}}};
    const MemoryPlan p = plan({{256, true, false, -1, -1}, {256, false, false, 0, -1}}, s);
    EXPECT_EQ(p.shares[1], -1);
    EXPECT_EQ(p.resident_bytes, 256);
    EXPECT_EQ(p.peak_live_bytes, 512);
  }
}

// A workspace is live during its step only: it may reuse memory of buffers dead by then, and adds to that step.
TEST(MemoryPlan, WorkspaceLiveDuringItsStep) {
  std::vector<PlanBuffer> b = {{1024, false, false, 0, 1}, {1024, false, true, 1, -1}, {1024, false, true, 2, -1}};
  std::vector<PlanStep> s(3);
  s[0].outputs = {0};
  s[1] = {{0}, {1}, 4096, {}};
  s[2] = {{}, {2}, 2048, {}};
  const MemoryPlan p = PlanMemoryArena(b, s);
  EXPECT_EQ(p.peak_step, 1);
  EXPECT_EQ(p.peak_live_bytes, 1024 + 1024 + 4096);
  EXPECT_EQ(p.arena_bytes, 1024 + 1024 + 4096);  // step 2's workspace fits in step 1's (and buffer 0's) place
  EXPECT_GE(p.workspace_offsets[2], 0);
  EXPECT_EQ(LivenessPeak(b, s), p.peak_live_bytes);
}

TEST(MemoryPlan, ErrorsNameTheStepAndBuffer) {
  std::vector<PlanStep> s(2);
  s[0].inputs = {1};  // buffer 1 is written by step 1
  s[0].outputs = {0};
  s[1].outputs = {1};
  try {
    PlanMemoryArena({{64, false, false, 0, -1}, {64, false, false, 1, 0}}, s);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("step 0 reads buffer 1 before step 1"), std::string::npos) << e.what();
  }
  s[0].inputs = {7};
  EXPECT_THROW(LivenessPeak({{64, false, false, 0, -1}, {64, false, false, 1, -1}}, s), std::invalid_argument);
  s[0].inputs = {};
  s[1].inplace = {{1, 9}};
  EXPECT_THROW(PlanMemoryArena({{64, false, false, 0, -1}, {64, false, false, 1, -1}}, s), std::invalid_argument);
}

}  // namespace
}  // namespace ot

namespace ot {
namespace {

// x -> Flatten (a view: x stays live) -> v; Relu(v) may not write over v while x is still read; once x and v are
// dead, a later step's in-place output takes the group's memory.
TEST(MemoryPlan, ViewSharesTheLiveInputsMemory) {
  //                    x (0)                      v (1)                      y (2)                     z (3)
  std::vector<PlanBuffer> b = {
      {4096, false, false, 0, 3}, {4096, false, false, 1, 2}, {4096, false, false, 2, 3}, {4096, false, true, 3, -1}};
  std::vector<PlanStep> s(4);
  s[0].outputs = {0};
  s[1].inputs = {0};
  s[1].outputs = {1};
  s[1].views = {{1, 0}};
  s[2] = {{1}, {2}, 0, {{2, 1}}};     // v dies here but x is read at step 3: no in-place
  s[3] = {{0, 2}, {3}, 0, {{3, 0}}};  // the group {x, v} dies here: z takes it
  const MemoryPlan p = PlanMemoryArena(b, s);
  EXPECT_EQ(p.shares, (std::vector<int>{-1, 0, -1, 0}));
  EXPECT_EQ(p.offsets[1], p.offsets[0]);
  EXPECT_EQ(p.offsets[3], p.offsets[0]);
  EXPECT_NE(p.offsets[2], p.offsets[0]);
  EXPECT_EQ(p.peak_live_bytes, 2 * 4096);
  // The negative twin: without the view, v is a copy of its own (and y, v's only reader, may take it).
  s[1].views.clear();
  const MemoryPlan q = PlanMemoryArena(b, s);
  EXPECT_EQ(q.shares, (std::vector<int>{-1, -1, 1, 0}));
  EXPECT_NE(q.offsets[1], q.offsets[0]);
}

// A view of a graph output pins the group: nothing writes over it in place, even at the last step.
TEST(MemoryPlan, ViewOfAGraphOutputIsNeverOverwritten) {
  std::vector<PlanBuffer> b = {{256, false, true, 0, 1}, {256, false, false, 1, 2}, {256, false, false, 2, -1}};
  std::vector<PlanStep> s(3);
  s[0].outputs = {0};
  s[1] = {{0}, {1}, 0, {}};
  s[1].views = {{1, 0}};
  s[2] = {{1}, {2}, 0, {{2, 1}}};
  const MemoryPlan p = PlanMemoryArena(b, s);
  EXPECT_EQ(p.shares[1], 0);
  EXPECT_EQ(p.shares[2], -1);
  EXPECT_NE(p.offsets[2], p.offsets[0]);
  // A view output that is itself a graph output stays a copy (Run hands it out as its own tensor).
  b[1].to_end = true;
  b[0].to_end = false;
  EXPECT_EQ(PlanMemoryArena(b, s).shares[1], -1);
}

}  // namespace
}  // namespace ot
