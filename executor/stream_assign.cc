#include "executor/stream_assign.h"

#include <algorithm>

#include "graph/error.h"

namespace ot {

int StreamSchedule::wait_count() const {
  int n = 0;
  for (const auto& w : waits) n += static_cast<int>(w.size());
  return n;
}

StreamSchedule AssignStreams(const std::vector<std::vector<int>>& deps, const std::vector<double>& cost,
                             int max_streams, double event_cost) {
  const size_t n = deps.size();
  if (cost.size() != n) throw Error("AssignStreams: one cost per kernel");
  const int S = std::max(1, max_streams);
  std::vector<int> stream(n, 0);
  if (S > 1) {
    std::vector<double> finish(n, 0), avail(static_cast<size_t>(S), 0);
    for (size_t j = 0; j < n; ++j) {
      // The dependency that finishes last (latest in plan order among equals): its stream is preferred on a tie.
      int pref = -1;
      for (int d : deps[j]) {
        if (d < 0 || static_cast<size_t>(d) >= j) throw Error("AssignStreams: a dependency that is not earlier");
        if (pref < 0 || finish[static_cast<size_t>(d)] > finish[static_cast<size_t>(pref)] ||
            (finish[static_cast<size_t>(d)] == finish[static_cast<size_t>(pref)] && d > pref))
          pref = d;
      }
      const int pref_stream = pref >= 0 ? stream[static_cast<size_t>(pref)] : -1;
      int best = -1;
      double best_start = 0;
      for (int s = 0; s < S; ++s) {
        double start = avail[static_cast<size_t>(s)];
        for (int d : deps[j])
          start =
              std::max(start, finish[static_cast<size_t>(d)] + (stream[static_cast<size_t>(d)] != s ? event_cost : 0));
        const bool better =
            best < 0 || start < best_start || (start == best_start && s == pref_stream && best != pref_stream);
        if (better) {
          best = s;
          best_start = start;
        }
      }
      stream[j] = best;
      finish[j] = best_start + std::max(0.0, cost[j]);
      avail[static_cast<size_t>(best)] = finish[j];
    }
  }
  int used = 1;
  for (int s : stream) used = std::max(used, s + 1);
  return ScheduleEvents(deps, std::move(stream), used);
}

StreamSchedule ScheduleEvents(const std::vector<std::vector<int>>& deps, std::vector<int> stream, int streams) {
  const size_t n = deps.size();
  const size_t S = static_cast<size_t>(std::max(1, streams));
  if (stream.size() != n) throw Error("ScheduleEvents: one stream per kernel");
  StreamSchedule r;
  r.streams = static_cast<int>(S);
  r.stream = std::move(stream);
  r.waits.assign(n, {});
  r.event.assign(n, -1);
  // known[t][s]: the last kernel of stream s that stream t's next kernel is sure to start after (-1: none).
  // after[i]: what a stream knows once it has waited for kernel i's event -- what i's stream knew when i started,
  // and i itself.
  std::vector<std::vector<int>> known(S, std::vector<int>(S, -1));
  std::vector<std::vector<int>> after(n);
  for (size_t j = 0; j < n; ++j) {
    const size_t t = static_cast<size_t>(r.stream[j]);
    if (t >= S) throw Error("ScheduleEvents: a stream id beyond the stream count");
    std::vector<int>& k = known[t];
    // Per other stream, the latest dependency on it; waited for latest first (a later kernel's event implies more).
    std::vector<int> latest(S, -1);
    for (int d : deps[j]) {
      if (d < 0 || static_cast<size_t>(d) >= j) throw Error("ScheduleEvents: a dependency that is not earlier");
      const size_t sd = static_cast<size_t>(r.stream[static_cast<size_t>(d)]);
      if (sd != t) latest[sd] = std::max(latest[sd], d);
    }
    std::vector<int> cand;
    for (size_t s = 0; s < S; ++s)
      if (latest[s] >= 0) cand.push_back(latest[s]);
    std::sort(cand.rbegin(), cand.rend());
    for (int d : cand) {
      const size_t sd = static_cast<size_t>(r.stream[static_cast<size_t>(d)]);
      if (k[sd] >= d) continue;  // implied by stream order and the waits so far
      r.waits[j].push_back(d);
      if (r.event[static_cast<size_t>(d)] < 0) r.event[static_cast<size_t>(d)] = r.events++;
      const std::vector<int>& a = after[static_cast<size_t>(d)];
      for (size_t s = 0; s < S; ++s) k[s] = std::max(k[s], a[s]);
    }
    after[j] = k;
    after[j][t] = static_cast<int>(j);
    k[t] = static_cast<int>(j);
  }
  return r;
}

std::string CheckSchedule(const std::vector<std::vector<int>>& deps, const StreamSchedule& sc) {
  const size_t n = deps.size();
  const size_t S = static_cast<size_t>(std::max(1, sc.streams));
  if (sc.stream.size() != n || sc.waits.size() != n || sc.event.size() != n) return "the schedule has another size";
  auto name = [&](size_t i) { return std::to_string(i) + " (stream " + std::to_string(sc.stream[i]) + ")"; };
  // Vector clocks from the waits as listed, nothing skipped: clock[i][s] = the last kernel of stream s that is
  // sure to have finished before kernel i starts.
  std::vector<std::vector<int>> cur(S, std::vector<int>(S, -1)), done(n);
  for (size_t j = 0; j < n; ++j) {
    const int t = sc.stream[j];
    if (t < 0 || static_cast<size_t>(t) >= S) return "kernel " + std::to_string(j) + " has no valid stream";
    std::vector<int>& c = cur[static_cast<size_t>(t)];
    for (int w : sc.waits[j]) {
      if (w < 0 || static_cast<size_t>(w) >= j) return "kernel " + name(j) + " waits for a later kernel";
      if (sc.stream[static_cast<size_t>(w)] == t)
        return "kernel " + name(j) + " waits for its own stream's " + name(static_cast<size_t>(w));
      if (sc.event[static_cast<size_t>(w)] < 0) return "kernel " + name(static_cast<size_t>(w)) + " records no event";
      for (size_t s = 0; s < S; ++s) c[s] = std::max(c[s], done[static_cast<size_t>(w)][s]);
    }
    for (int d : deps[j])
      if (c[static_cast<size_t>(sc.stream[static_cast<size_t>(d)])] < d && sc.stream[static_cast<size_t>(d)] != t)
        return "kernel " + name(j) + " does not wait for its dependency " + name(static_cast<size_t>(d));
    done[j] = c;
    done[j][static_cast<size_t>(t)] = static_cast<int>(j);
    c[static_cast<size_t>(t)] = static_cast<int>(j);
  }
  return "";
}

}  // namespace ot
