// Multi-stream issue of a device plan: which stream each kernel goes to, and the events between streams.
//
// Input: the plan's kernels in plan order (a topological order) with their dependencies -- Plan::Step::deps, which
// hold the data edges (a reader after the writer of its input), the memory edges the arena's reuse implies (a step
// that writes a region after every step that read or wrote an earlier occupant of it: WAR/WAW; workspaces
// included) and the in-place state edges (every other reader of a state before the step that overwrites it) -- and
// an estimated cost per kernel. Output: a stream per kernel and, per kernel, the events it waits for.
//
// Issue model (CUDA's): the host issues the kernels in plan order; each stream runs its own kernels in that order;
// an event recorded after kernel i on stream s and waited for on stream t before kernel j makes j start after i
// (and, since streams are in order, after everything before i on s, and -- transitively -- after everything s had
// waited for before i). Stream 0 is the origin: the caller forks the other streams from it at the start of a run
// and joins them back into it at the end, so kernels need no events for what happened before the run or after it.
//
// Invariant checked by CheckSchedule (and the unit tests on random DAGs): for every dependency d of kernel j, d
// happens before j through stream order and the waits. The set of waits is minimal per kernel in this sense: a
// wait is added only when the dependency is not already implied by the waits issued earlier on j's stream (their
// transitive closure included).
#pragma once
#include <string>
#include <vector>

namespace ot {

struct StreamSchedule {
  int streams = 1;                      // streams used (stream ids are 0 .. streams-1)
  std::vector<int> stream;              // per kernel: its stream
  std::vector<std::vector<int>> waits;  // per kernel: the kernels whose events it waits for first (other streams)
  std::vector<int> event;               // per kernel: the index of the event recorded after it, or -1
  int events = 0;                       // events recorded per run (one per kernel that another stream waits for)
  int wait_count() const;               // total waits (for reports and tests)
};

// Assigns streams by list scheduling over the DAG, deterministically (no clocks, no hashing of pointers):
// in plan order, each kernel goes to the stream on which it could start earliest by the cost estimate -- its
// start is the later of the stream's last finish and each dependency's finish, plus `event_cost` for a dependency
// on another stream (a wait's latency) -- ties broken towards the stream of its latest-finishing dependency (a
// chain stays on its stream, so a pure chain never needs an event) and then the lowest stream id. Independent
// branches (a layer's weight- and data-gradient GEMMs) thus start side by side on different streams.
// `max_streams` <= 1 gives everything stream 0 and no events (the single-stream issue). `deps[j]` must only name
// kernels before j; `cost` has one entry per kernel (any unit, >= 0).
StreamSchedule AssignStreams(const std::vector<std::vector<int>>& deps, const std::vector<double>& cost,
                             int max_streams, double event_cost = 0);

// The events of a given assignment (`stream` per kernel, ids < streams): per kernel, the waits that make every
// dependency happen before it, skipping those already implied (stream order, earlier waits on the same stream,
// and what the waited-for kernels had themselves waited for). Among several dependencies on other streams the
// latest-issued is waited for first, so that it can imply the others.
StreamSchedule ScheduleEvents(const std::vector<std::vector<int>>& deps, std::vector<int> stream, int streams);

// "" when every dependency happens before its kernel under the schedule; else a description of the first that does
// not ("kernel 7 (stream 1) does not wait for its dependency 5 (stream 0)"). Also checks that every waited-for
// kernel records an event and runs on another stream.
std::string CheckSchedule(const std::vector<std::vector<int>>& deps, const StreamSchedule& s);

}  // namespace ot
