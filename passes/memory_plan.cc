// Memory plan: see memory_plan.h for the model. The planner has three parts, shared by PlanMemoryArena and
// LivenessPeak so both answer for the same model:
//   1. lifetimes: [start, end] per arena buffer (checked against the steps that read it);
//   2. in-place and views: steps in order take their allowed (output, input) pairs where the input's group dies
//      there (in place) or anywhere (views); a taken pair joins the output to the input's group, and a group is
//      one region of the arena whose lifetime is the union of its members';
//   3. a sweep over the steps of the live bytes of groups and workspaces (difference array), and, for the plan,
//      best-fit offsets of groups and workspaces largest first.
// Every arena size is rounded up to kPlanAlign, so the live sums are the bytes the arena must hold.
#include "passes/memory_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace ot {

namespace {

int64_t Align(int64_t n) { return (n + kPlanAlign - 1) / kPlanAlign * kPlanAlign; }

struct Region {
  int64_t size = 0;
  int start = 0, end = 0;  // steps, inclusive
  int buf = -1;            // the group's first buffer, or -1 for a workspace
  int step = -1;           // the workspace's step
};

struct Liveness {
  std::vector<int> start, end;  // per buffer (arena buffers only)
  std::vector<int> shares;      // per buffer: the buffer whose memory it took, or -1
  std::vector<int> root;        // per buffer: the first buffer of its group
  std::vector<Region> regions;  // groups (one per root) then workspaces
  int64_t resident = 0;
  int64_t saved = 0;
};

[[noreturn]] void Bad(const std::string& msg) { throw std::invalid_argument("memory plan: " + msg); }

Liveness Analyze(const std::vector<PlanBuffer>& bufs, const std::vector<PlanStep>& steps) {
  const int nb = static_cast<int>(bufs.size());
  const int ns = static_cast<int>(steps.size());
  const int last_step = std::max(ns - 1, 0);
  Liveness L;
  L.start.assign(nb, 0);
  L.end.assign(nb, 0);
  L.shares.assign(nb, -1);
  L.root.resize(nb);
  for (int b = 0; b < nb; ++b) {
    const PlanBuffer& B = bufs[b];
    L.root[b] = b;
    if (B.bytes < 0) Bad("buffer " + std::to_string(b) + " has a negative size");
    if (B.def >= ns || B.last >= ns) Bad("buffer " + std::to_string(b) + " names a step past the last one");
    if (B.resident) {
      L.resident += B.bytes;
      continue;
    }
    L.start[b] = std::max(B.def, 0);
    L.end[b] = B.to_end ? last_step : std::max(L.start[b], B.last);
  }
  // Readers extend a lifetime (a caller's `last` may be stale); a read before the write is an error.
  for (int s = 0; s < ns; ++s) {
    for (int b : steps[s].inputs) {
      if (b < -1 || b >= nb)
        Bad("step " + std::to_string(s) + " reads buffer " + std::to_string(b) + " of " + std::to_string(nb));
      if (b < 0 || bufs[b].resident) continue;
      if (bufs[b].def > s || (bufs[b].def == s && !std::count(steps[s].outputs.begin(), steps[s].outputs.end(), b)))
        Bad("step " + std::to_string(s) + " reads buffer " + std::to_string(b) + " before step " +
            std::to_string(bufs[b].def) + " writes it");
      L.end[b] = std::max(L.end[b], s);
    }
    for (int b : steps[s].outputs)
      if (b < -1 || b >= nb)
        Bad("step " + std::to_string(s) + " writes buffer " + std::to_string(b) + " of " + std::to_string(nb));
    if (steps[s].workspace < 0) Bad("step " + std::to_string(s) + " has a negative workspace");
  }
  // In-place takers and views, in step order: a group grows one member at a time; gend[root] is the last step
  // that reads any member so far (a later member starts at or after its own step, so no future member of a group
  // can read it before a step that sees the group dead).
  std::vector<char> taken(nb, 0);
  std::vector<int> gend(L.end);
  std::vector<char> pinned(nb, 0);  // per root: the group holds a graph output (its memory must survive the step)
  for (int b = 0; b < nb; ++b) pinned[b] = bufs[b].to_end;
  const auto usable = [&](int s, int o, int i, const char* what) {
    if (o < 0 || o >= nb || i < 0 || i >= nb)
      Bad("step " + std::to_string(s) + " allows " + what + " pair of unknown buffers");
    const PlanBuffer &O = bufs[o], &I = bufs[i];
    if (o == i || O.resident || I.resident || L.shares[o] >= 0) return false;
    if (O.def != s || I.def >= s || Align(O.bytes) != Align(I.bytes) || I.bytes == 0) return false;
    return std::count(steps[s].inputs.begin(), steps[s].inputs.end(), i) &&
           std::count(steps[s].outputs.begin(), steps[s].outputs.end(), o);
  };
  const auto join = [&](int o, int i) {
    L.shares[o] = i;
    L.root[o] = L.root[i];
    gend[L.root[o]] = std::max(gend[L.root[o]], L.end[o]);
    pinned[L.root[o]] |= bufs[o].to_end;
    L.saved += Align(bufs[o].bytes);
  };
  for (int s = 0; s < ns; ++s) {
    for (auto [o, i] : steps[s].inplace) {
      if (!usable(s, o, i, "an in-place")) continue;
      if (taken[i] || pinned[L.root[i]] || gend[L.root[i]] != s) continue;
      taken[i] = 1;
      join(o, i);
    }
    for (auto [o, i] : steps[s].views) {
      if (!usable(s, o, i, "a view")) continue;
      if (bufs[o].to_end) continue;
      join(o, i);
    }
  }
  std::vector<int> region_of(nb, -1);
  for (int b = 0; b < nb; ++b) {
    if (bufs[b].resident) continue;
    const int r = L.root[b];  // roots come first: a taker's index may be smaller than its root's, so look up
    if (region_of[r] < 0) {
      region_of[r] = static_cast<int>(L.regions.size());
      L.regions.push_back({Align(bufs[r].bytes), L.start[r], L.end[r], r, -1});
    }
    Region& g = L.regions[region_of[r]];
    g.start = std::min(g.start, L.start[b]);
    g.end = std::max(g.end, L.end[b]);
  }
  for (int s = 0; s < ns; ++s)
    if (steps[s].workspace > 0) L.regions.push_back({Align(steps[s].workspace), s, s, -1, s});
  return L;
}

// Largest live bytes over the steps (first step reaching it in *at), from the regions' lifetimes.
int64_t Sweep(const std::vector<Region>& regions, int ns, int* at) {
  std::vector<int64_t> delta(std::max(ns, 1) + 1, 0);
  for (const Region& r : regions) {
    delta[r.start] += r.size;
    delta[r.end + 1] -= r.size;
  }
  int64_t cur = 0, best = 0;
  *at = ns > 0 ? 0 : -1;
  for (int s = 0; s < std::max(ns, 1); ++s) {
    cur += delta[s];
    if (cur > best) {
      best = cur;
      *at = s;
    }
  }
  return best;
}

// Best fit, largest region first (ties: earlier start, then index, so the plan is deterministic): each region goes
// into the smallest gap between regions whose lifetimes overlap its own, else above all of them. Quadratic in the
// regions that overlap in time.
std::vector<int64_t> PlaceBestFit(const std::vector<Region>& regions) {
  std::vector<int> order(regions.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (regions[a].size != regions[b].size) return regions[a].size > regions[b].size;
    return regions[a].start < regions[b].start;
  });
  std::vector<int64_t> off(regions.size(), 0);
  std::vector<int> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (int k : order) {
    const Region& r = regions[k];
    busy.clear();
    for (int q : placed) {
      const Region& Q = regions[q];
      if (Q.end < r.start || r.end < Q.start || Q.size == 0) continue;
      busy.push_back({off[q], off[q] + Q.size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = INT64_MAX, cur = 0;
    for (auto [lo, hi] : busy) {
      if (lo >= cur + r.size && lo - cur - r.size < best_gap) {
        best = cur;
        best_gap = lo - cur - r.size;
      }
      cur = std::max(cur, hi);
    }
    off[k] = best >= 0 ? best : cur;
    placed.push_back(k);
  }
  return off;
}

// For graphs with more regions than the best fit can take in good time: a sweep over the steps, like an allocator
// that knows every lifetime. At each step the regions that ended before it are freed (adjacent free blocks
// merge), then the step's new regions, largest first, take the smallest free block that holds them, else the top
// of the arena. O(R log R).
std::vector<int64_t> PlaceByTime(const std::vector<Region>& regions, int steps) {
  std::vector<std::vector<int>> starting(static_cast<size_t>(steps) + 1), ending(static_cast<size_t>(steps) + 1);
  for (size_t k = 0; k < regions.size(); ++k) {
    const Region& r = regions[k];
    if (r.size == 0) continue;
    starting[static_cast<size_t>(std::clamp(r.start, 0, steps))].push_back(static_cast<int>(k));
    ending[static_cast<size_t>(std::clamp(r.end, 0, steps))].push_back(static_cast<int>(k));
  }
  std::vector<int64_t> off(regions.size(), 0);
  std::map<int64_t, int64_t> free_at;             // offset -> size of each free block below the top
  std::set<std::pair<int64_t, int64_t>> by_size;  // (size, offset) of the same blocks
  int64_t top = 0;
  auto release = [&](int64_t lo, int64_t size) {
    auto next = free_at.lower_bound(lo);
    if (next != free_at.end() && next->first == lo + size) {  // merge with the block above
      size += next->second;
      by_size.erase({next->second, next->first});
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {  // merge with the block below
      auto prev = std::prev(next);
      if (prev->first + prev->second == lo) {
        lo = prev->first;
        size += prev->second;
        by_size.erase({prev->second, prev->first});
        free_at.erase(prev);
      }
    }
    if (lo + size == top) {  // the top block returns to the top
      top = lo;
      return;
    }
    free_at[lo] = size;
    by_size.insert({size, lo});
  };
  for (int t = 0; t <= steps; ++t) {
    std::vector<int>& now = starting[static_cast<size_t>(t)];
    std::stable_sort(now.begin(), now.end(), [&](int a, int b) { return regions[a].size > regions[b].size; });
    for (int k : now) {
      const int64_t size = regions[k].size;
      auto fit = by_size.lower_bound({size, INT64_MIN});
      if (fit == by_size.end()) {
        off[k] = top;
        top += size;
        continue;
      }
      const auto [block, lo] = *fit;
      by_size.erase(fit);
      free_at.erase(lo);
      off[k] = lo;
      if (block > size) {
        free_at[lo + size] = block - size;
        by_size.insert({block - size, lo + size});
      }
    }
    // Regions whose last step is t are free from t + 1 on.
    for (int k : ending[static_cast<size_t>(t)]) release(off[k], regions[k].size);
  }
  return off;
}

}  // namespace

MemoryPlan PlanMemoryArena(const std::vector<PlanBuffer>& bufs, const std::vector<PlanStep>& steps,
                           int best_fit_limit) {
  const int ns = static_cast<int>(steps.size());
  Liveness L = Analyze(bufs, steps);
  MemoryPlan p;
  p.shares = L.shares;
  p.resident_bytes = L.resident;
  p.inplace_saved_bytes = L.saved;
  p.peak_live_bytes = L.resident + Sweep(L.regions, ns, &p.peak_step);

  std::vector<int64_t> off =
      L.regions.size() > static_cast<size_t>(best_fit_limit) ? PlaceByTime(L.regions, ns) : PlaceBestFit(L.regions);
  for (size_t k = 0; k < off.size(); ++k) p.arena_bytes = std::max(p.arena_bytes, off[k] + L.regions[k].size);
  p.offsets.assign(bufs.size(), -1);
  p.workspace_offsets.assign(steps.size(), -1);
  std::vector<int64_t> root_off(bufs.size(), -1);
  for (size_t k = 0; k < L.regions.size(); ++k) {
    if (L.regions[k].buf >= 0)
      root_off[L.regions[k].buf] = off[k];
    else
      p.workspace_offsets[L.regions[k].step] = off[k];
  }
  for (size_t b = 0; b < bufs.size(); ++b)
    if (!bufs[b].resident) p.offsets[b] = root_off[L.root[b]];
  return p;
}

int64_t LivenessPeak(const std::vector<PlanBuffer>& bufs, const std::vector<PlanStep>& steps, int* peak_step) {
  Liveness L = Analyze(bufs, steps);
  int at = -1;
  const int64_t peak = L.resident + Sweep(L.regions, static_cast<int>(steps.size()), &at);
  if (peak_step) *peak_step = at;
  return peak;
}

}  // namespace ot
