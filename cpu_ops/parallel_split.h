// Fixed splits of a loop into TBB tasks: the same split on every run and thread count, so what a task computes
// never depends on scheduling.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cstdint>

namespace ot::cpu {

// Runs body(b, e) over [0, n) in ranges of `grain` items (the last one shorter), each range one TBB task.
template <typename F>
void ForFixedChunks(int64_t n, int64_t grain, F&& body) {
  grain = std::max<int64_t>(1, grain);
  const int64_t tasks = (n + grain - 1) / grain;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, tasks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t t = r.begin(); t != r.end(); ++t) body(t * grain, std::min(n, (t + 1) * grain));
      },
      tbb::simple_partitioner());
}

// Runs body(r0, r1) over [0, rows) for rows of row_bytes each: on the calling thread when all of them hold fewer
// than parallel_bytes, else in tasks of about chunk_bytes of whole rows.
template <typename F>
void ForRowChunks(int64_t rows, int64_t row_bytes, F&& body, int64_t parallel_bytes = 1 << 18,
                  int64_t chunk_bytes = 1 << 16) {
  if (rows <= 1 || rows * row_bytes < parallel_bytes) {
    body(int64_t{0}, rows);
    return;
  }
  ForFixedChunks(rows, chunk_bytes / std::max<int64_t>(1, row_bytes), body);
}

}  // namespace ot::cpu
