#include "training/data_loader.h"

#include <tbb/task_group.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>

#include "graph/error.h"

namespace ot {

struct DataLoader::Tasks {
  tbb::task_group group;
};

DataLoader::~DataLoader() { tasks_->group.wait(); }

int64_t CheckSampleArrays(const std::map<std::string, Tensor>& arrays, const std::string& what) {
  int64_t samples = -1;
  for (const auto& [name, t] : arrays) {
    if (t.rank() == 0) throw Error(what + ": array '" + name + "' is a scalar; axis 0 must be the sample axis");
    if (samples < 0)
      samples = t.dims()[0];
    else if (t.dims()[0] != samples)
      throw Error(what + ": array '" + name + "' has " + std::to_string(t.dims()[0]) + " samples, others have " +
                  std::to_string(samples));
    if (IsFloat(t.dtype())) {
      const int64_t per = t.numel() / std::max<int64_t>(samples, 1);
      for (int64_t i = 0; i < t.numel(); ++i)
        if (!std::isfinite(t.GetDouble(i)))
          throw Error(what + ": array '" + name + "' has a non-finite value (" + std::to_string(t.GetDouble(i)) +
                      ") in sample " + std::to_string(per ? i / per : 0));
    }
  }
  if (samples == 0) throw Error(what + ": no samples (axis 0 of every array is 0 long)");
  return std::max<int64_t>(samples, 0);
}

DataLoader::DataLoader(std::map<std::string, Tensor> arrays, int64_t batch, bool shuffle, uint64_t seed,
                       const std::string& what, int ranks, int rank)
    : arrays_(std::move(arrays)),
      batch_(batch),
      ranks_(ranks),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      what_(what),
      tasks_(std::make_unique<Tasks>()) {
  if (batch_ <= 0) throw Error("--batch must be positive");
  if (arrays_.empty()) throw Error(what_ + ": no arrays");
  samples_ = CheckSampleArrays(arrays_, what_);
  if (ranks_ < 1 || rank_ < 0 || rank_ >= ranks_) throw Error("data loader: rank out of range");
  if (samples_ < batch_ * ranks_)
    throw Error(what_ + ": " + std::to_string(samples_) + " samples, fewer than one batch of " +
                (ranks_ > 1 ? std::to_string(ranks_) + " ranks x " : std::string()) + std::to_string(batch_));
}

std::vector<int64_t> DataLoader::Order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(samples_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) {
    // Fisher-Yates with a fixed generator (std::shuffle's algorithm is implementation-defined).
    std::mt19937_64 rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch));
    for (int64_t i = samples_ - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(order[i], order[j]);
    }
  }
  return order;
}

Batch DataLoader::Get(int64_t epoch, int64_t index) const {
  if (index < 0 || index >= batches_per_epoch()) throw Error("batch index out of range");
  std::vector<int64_t> order = Order(epoch);
  const int64_t first = (index * ranks_ + rank_) * batch_;  // this rank's slice of the global batch `index`
  Batch b;
  b.epoch = epoch;
  b.index = index;
  for (const auto& [name, t] : arrays_) {
    std::vector<int64_t> dims = t.dims();
    dims[0] = batch_;
    Tensor out(t.dtype(), dims);
    const size_t row = t.nbytes() / static_cast<size_t>(samples_);
    for (int64_t i = 0; i < batch_; ++i)
      std::memcpy(static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(i) * row,
                  static_cast<const uint8_t*>(t.raw()) + static_cast<size_t>(order[first + i]) * row, row);
    b.arrays[name] = std::move(out);
  }
  return b;
}

void DataLoader::Prefetch(int64_t epoch, int64_t index) {
  auto promise = std::make_shared<std::promise<Batch>>();
  next_ = promise->get_future();
  // A TBB task: it runs beside the step on the executor's threads.
  tasks_->group.run([this, promise, epoch, index] {
    try {
      Batch b = Get(epoch, index);
      if (on_ready_) on_ready_(b);
      promise->set_value(std::move(b));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
}

Batch DataLoader::Take() {
  if (!next_.valid()) throw Error("DataLoader::Take without Prefetch");
  // Wait through the task group, not on the future alone: wait() runs the prefetch here if no other thread has
  // taken it (with --threads 1 this thread is the only one TBB may use, and blocking would never end).
  tasks_->group.wait();
  return next_.get();
}

}  // namespace ot
