// Training data: the arrays of an .npz named after the step graph's inputs, axis 0 the sample axis.
// Batches follow DESIGN.md's rule: with shuffling off, step k of an epoch takes samples k*B ... k*B+B-1 in file
// order; with shuffling on, a permutation drawn from the seed and the epoch number. The remainder of an epoch
// that does not fill a batch is dropped. The next batch is gathered on a TBB task while the step runs.
// Data-parallel (N ranks, DDP's rule): the global batch `index` is N x B samples taken as above, and rank r's batch
// is its r-th slice of B: samples (index * N + r) * B ... + B - 1 of the epoch's order, which every rank draws alike
// from the seed. An epoch then has samples / (N x B) batches.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace ot {

struct Batch {
  int64_t epoch = 0, index = 0;  // index: batch number within the epoch
  std::map<std::string, Tensor> arrays;
};

// Checks the arrays of a data set: each has a sample axis, all the same number of samples (at least one), every
// float value finite (else an error naming `what`, the array and the sample). Returns the sample count.
int64_t CheckSampleArrays(const std::map<std::string, Tensor>& arrays, const std::string& what);

class DataLoader {
 public:
  // `arrays`: name -> tensor with the samples on axis 0 (all the same count). Float arrays are checked for
  // NaN/inf once here: a non-finite value is an error naming the file, array and sample.
  DataLoader(std::map<std::string, Tensor> arrays, int64_t batch, bool shuffle, uint64_t seed, const std::string& what,
             int ranks = 1, int rank = 0);
  ~DataLoader();  // waits for a prefetch in flight
  int64_t samples() const { return samples_; }
  int64_t batches_per_epoch() const { return samples_ / (batch_ * ranks_); }
  // The batch `index` of `epoch` (deterministic for a given seed).
  Batch Get(int64_t epoch, int64_t index) const;
  // Starts gathering (epoch, index) on a TBB task; Take() returns it.
  void Prefetch(int64_t epoch, int64_t index);
  Batch Take();
  // Called on the prefetch task with each batch as soon as it is gathered, before Take returns it (the trainer's
  // Stage: the batch's upload to the device starts while the current step runs). An exception reaches Take.
  void set_on_ready(std::function<void(const Batch&)> f) { on_ready_ = std::move(f); }

 private:
  std::vector<int64_t> Order(int64_t epoch) const;
  std::map<std::string, Tensor> arrays_;
  int64_t batch_;
  int ranks_, rank_;
  int64_t samples_ = 0;
  bool shuffle_;
  uint64_t seed_;
  std::string what_;
  std::future<Batch> next_;
  std::function<void(const Batch&)> on_ready_;
  struct Tasks;
  std::unique_ptr<Tasks> tasks_;
};

}  // namespace ot
