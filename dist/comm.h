// The process group of data-parallel training (issue: data-parallel training): which rank this process is among how
// many, and the collectives the step needs. One process is a world of one whose collectives do nothing. Under
// `mpirun` (Open MPI) or `srun` (Slurm, through Open MPI's PMIx) -- their environment variables say so -- the world
// is MPI's COMM_WORLD, reached through a plugin (libonnxtrain_mpi.so, dist/mpi/) that is loaded only then, so that
// a binary without Open MPI installed still runs as one process. MPI is never initialized as a singleton.
//
// Thread safety: any thread may call the collectives. The MPI world makes every MPI call on a communication thread
// of its own (outside --threads), which issues the collectives in the order they were asked for and progresses a
// started one while the caller goes on (Open MPI 4.1 has no progress thread of its own): MPI_THREAD_SERIALIZED,
// which it asks for and names in description().
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace ot::dist {

// A collective started and not yet waited for.
class Request {
 public:
  virtual ~Request() = default;
  // Blocks until the collective is complete (its buffer then holds the result).
  virtual void Wait() = 0;
};

// A collective that completed when it was started.
struct Completed final : Request {
  void Wait() override {}
};

// What the collectives cost since the last ResetStats: how many, the time from their start to their completion, and
// the part of that time a caller spent blocked in Request::Wait (the rest was hidden behind other work).
struct CommStats {
  int64_t collectives = 0;
  double busy_ms = 0, waited_ms = 0;
};

// When a started collective ran, in ns after StartAllReduceSum returned it: issued (the communication thread took
// it up) and completed. For --profile's communication lane.
struct CollectiveTiming {
  int64_t issued_ns = 0, done_ns = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "one process", or e.g. "MPI (Open MPI v4.1.4), thread level MPI_THREAD_SERIALIZED".
  virtual std::string description() const = 0;
  // Sums `n` values over the ranks, in place, on every rank.
  virtual void AllReduceSum(float* data, int64_t n) = 0;
  virtual void AllReduceSum(double* data, int64_t n) = 0;
  // Starts the same sum and returns at once; `data` must stay untouched until the request's Wait returns. The
  // collectives of a process are issued in the order they were started (blocking ones included), one at a time.
  virtual std::shared_ptr<Request> StartAllReduceSum(float* data, int64_t n) = 0;
  // --shard-optimizer's halves of an all-reduce. StartReduceScatterSum: `n` a multiple of size(); once the request
  // is waited for, data[0, n / size()) holds block rank() of the sum over the ranks (elements
  // [rank() * n / size(), (rank() + 1) * n / size())), the rest of `data` unspecified. AllGatherBlocks: data holds
  // size() blocks of `block` values; rank r's own block r is sent to every rank (blocking), in place. The defaults
  // build both from AllReduceSum; the MPI world issues MPI's own collectives.
  virtual std::shared_ptr<Request> StartReduceScatterSum(float* data, int64_t n) {
    const int64_t block = n / size();
    AllReduceSum(data, n);
    if (rank() > 0) std::memmove(data, data + rank() * block, static_cast<size_t>(block) * sizeof(float));
    return std::make_shared<Completed>();
  }
  virtual void AllGatherBlocks(float* data, int64_t block) {
    for (int r = 0; r < size(); ++r)  // every block but this rank's zeroed, then summed: each block its owner's
      if (r != rank()) std::memset(data + r * block, 0, static_cast<size_t>(block) * sizeof(float));
    AllReduceSum(data, block * size());
  }
  virtual CommStats stats() const { return {}; }
  virtual void ResetStats() {}
  // Recording the started collectives' timings (off by default), and taking those recorded since the last call,
  // in the order they were started.
  virtual void RecordTimings(bool) {}
  virtual std::vector<CollectiveTiming> TakeTimings() { return {}; }
  // Every rank's `s`, indexed by rank.
  virtual std::vector<std::string> AllGather(const std::string& s) = 0;
  // Ends every rank of the job with `code` (MPI_Abort); the world of one exits.
  [[noreturn]] virtual void Abort(int code) = 0;
  // MPI_Finalize (once, at a normal exit; nothing after it).
  virtual void Finalize() = 0;
};

// True when this process was started by a launcher that sets up an MPI world: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE)
// or Slurm's srun (SLURM_NTASKS with PMIX_RANK or PMI_RANK).
bool LaunchedByMpi();
// This process's rank among the ranks on its machine, from the launcher's environment (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID); 0 when none says. Each rank takes GPU local_rank % GPUs.
int LocalRank();
// Sets the process's world up: an MPI world when LaunchedByMpi(), else a world of one. Call it first thing in main,
// before any thread starts. Throws Error when the launcher asked for MPI and the plugin or MPI cannot start.
void InitWorld(int* argc, char*** argv);
// The world (a world of one before InitWorld).
Comm& World();
// Replaces the world (tests: a fake group of ranks inside one process). Not thread-safe; the caller keeps `c` alive.
void SetWorldForTesting(Comm* c);

}  // namespace ot::dist
