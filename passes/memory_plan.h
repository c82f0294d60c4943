// Memory plan (DESIGN.md "memory plan"): liveness of every buffer over the execution order of a step, best-fit
// offsets in one arena, in-place reuse where an elementwise op's input dies at it, and each kernel's declared
// workspace as a buffer live only while that kernel runs. Resident buffers (parameters, optimizer state, fed
// inputs, constants) are accounted apart from the arena: they live for the whole step.
//
// The planner works on sizes and step indices only, so the executor (which knows concrete shapes) and cluster
// fusion (which prices a hypothetical merge) ask the same model:
//   a buffer written by step d and last read by step l occupies [d, l] (a buffer nobody reads: [d, d]);
//   a graph output (`to_end`) lives from its writer to the end of the step;
//   a workspace of step s occupies [s, s];
//   an in-place candidate (step s may write output o into input i's memory) is taken when i is an arena buffer of
//   the same aligned size whose last reader is s, not itself an output that must survive, and not already
//   shared by another taker; o then gets i's offset and the pair counts once. "Dies" means the whole group of
//   buffers sharing i's memory (in-place takers and views) is last read at s;
//   a view (step s's output o is input i's bytes, unchanged: Reshape, Flatten, an identity ReduceToShape) is taken
//   when i is an arena buffer of the same aligned size and o is not a graph output: o gets i's offset whether or
//   not i dies at s, and the shared region lives until the last of them is read. Nothing writes a group's memory
//   again while any member is live (the in-place rule above), so a view is never overwritten under its reader.
// peak_live_bytes is the largest sum of live arena bytes at any step plus the resident bytes; arena_bytes is the
// best-fit arena (>= the live peak of the arena buffers; equal when fit is perfect).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ot {

struct PlanBuffer {
  int64_t bytes = 0;
  bool resident = false;  // not in the arena: lives the whole step (state, parameters, inputs, constants)
  bool to_end = false;    // lives until the end of the step once written (a graph output written in the arena)
  int def = -1;           // the step that writes it (-1: resident, or written before the step)
  int last = -1;          // the last step that reads it (-1: nobody)
};

struct PlanStep {
  std::vector<int> inputs, outputs;          // buffer indices (-1 = absent)
  int64_t workspace = 0;                     // bytes the kernel needs while it runs
  std::vector<std::pair<int, int>> inplace;  // (output buffer, input buffer) pairs the kernel allows
  std::vector<std::pair<int, int>> views;    // (output buffer, input buffer): the output is the input's bytes
};

struct MemoryPlan {
  std::vector<int64_t> offsets;            // per buffer; -1 for resident buffers
  std::vector<int> shares;                 // per buffer: the buffer whose memory it reuses in place, or -1
  std::vector<int64_t> workspace_offsets;  // per step; -1 when the step has no workspace
  int64_t arena_bytes = 0;
  int64_t resident_bytes = 0;
  int64_t peak_live_bytes = 0;  // resident + the largest live arena bytes (workspaces included)
  int peak_step = -1;
  int64_t inplace_saved_bytes = 0;  // bytes of the outputs that took an input's memory (in place or as a view)
};

// Alignment of every arena offset and size.
constexpr int64_t kPlanAlign = 64;

// Above this many regions (groups of buffers sharing memory, and workspaces) the offsets come from a sweep over the
// steps (a best-fit allocator that knows every lifetime, O(R log R)) instead of the best fit over lifetimes, which is
// tighter but quadratic in the regions live at once: a graph of 100,000 nodes plans in a second.
constexpr int kBestFitRegionLimit = 20000;

// The plan of `bufs` over `steps` (in execution order). Throws std::invalid_argument for an index out of range or
// a buffer read before it is written.
MemoryPlan PlanMemoryArena(const std::vector<PlanBuffer>& bufs, const std::vector<PlanStep>& steps,
                           int best_fit_limit = kBestFitRegionLimit);

// Only the liveness peak (resident + largest live arena bytes, workspaces and in-place sharing included), without
// placing offsets: what cluster fusion asks for each candidate merge. Same model as PlanMemoryArena.
int64_t LivenessPeak(const std::vector<PlanBuffer>& bufs, const std::vector<PlanStep>& steps, int* peak_step = nullptr);

}  // namespace ot
