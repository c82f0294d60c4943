// Pinned, double-buffered batch uploads: the next batch goes to the device on its own copy stream while the current
// step runs (DeviceBackend::CopyStream), instead of at the start of its own step on stream 0.
//
// Stage(batch) -- called as soon as the batch is ready, on the data loader's prefetch task (DataLoader::set_on_ready)
// -- copies it into one of two pinned host slots and queues its upload into that slot's device buffers on the copy
// stream, followed by the slot's `uploaded` event. A plan run whose feeds are a staged batch (the same tensors)
// takes them with Consume: stream 0 waits for `uploaded`, copies the slot's device buffers into the plan's input
// buffers (device to device), and records the slot's `consumed` event. So the upload over the host link overlaps
// the previous step; what remains on the step's own path is a copy at device memory speed.
//
// Invariants (slot i is used by batches i, i+2, i+4, ...):
// - a pinned slot is rewritten by the host only after its previous upload has run (the host waits for `uploaded`:
//   the copy reads the pinned memory asynchronously);
// - a slot's device buffers are overwritten by an upload only after the previous batch's consumer copied them out
//   (the copy stream waits for `consumed`; a batch never consumed is simply replaced);
// - Consume and Stage hold one mutex, so a run never takes a slot that is being restaged: it finds the batch it
//   was given, or falls back to the plan's direct upload.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/device.h"
#include "graph/tensor.h"

namespace ot {

class BatchStager {
 public:
  explicit BatchStager(std::shared_ptr<DeviceBackend> device);
  ~BatchStager();  // waits for uploads in flight, then frees the slots
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  // Thread-safe; the tensors are kept (shared) until the slot is reused, so a run can recognise them.
  void Stage(const std::map<std::string, Tensor>& batch);

  // On stream 0, for a run whose feeds include the staged batch: for each (name, device buffer, bytes) of `inputs`,
  // the staged device copy of feeds[name] is copied into the buffer after the upload has run. Returns false, doing
  // nothing, when some input's feed is not part of one staged batch (or changed size): the caller uploads itself.
  struct Input {
    std::string name;
    void* device = nullptr;
    size_t bytes = 0;
  };
  bool Consume(const std::map<std::string, Tensor>& feeds, const std::vector<Input>& inputs);

  int64_t staged() const { return staged_; }      // batches staged so far
  int64_t consumed() const { return consumed_; }  // runs that took a staged batch

 private:
  struct Array {
    Tensor host;  // the batch's tensor (kept: identity check in Consume)
    void* pinned = nullptr;
    void* device = nullptr;
    size_t capacity = 0;  // bytes of pinned and device
  };
  struct Slot {
    std::map<std::string, Array> arrays;
    bool valid = false;  // holds a batch not yet replaced
    void* uploaded = nullptr;
    void* consumed = nullptr;
  };
  std::shared_ptr<DeviceBackend> dev_;
  std::mutex mu_;
  Slot slots_[2];
  int next_ = 0;
  int64_t staged_ = 0, consumed_ = 0;
};

}  // namespace ot
