#include "executor/batch_stager.h"

#include <cstring>

#include "graph/error.h"

namespace ot {

BatchStager::BatchStager(std::shared_ptr<DeviceBackend> device) : dev_(std::move(device)) {
  if (!dev_) throw Error("BatchStager needs a device");
  for (Slot& s : slots_) {
    s.uploaded = dev_->CreateEvent();
    s.consumed = dev_->CreateEvent();
  }
}

BatchStager::~BatchStager() {
  std::lock_guard<std::mutex> l(mu_);
  for (Slot& s : slots_) {
    try {
      dev_->SynchronizeEvent(s.uploaded);
      dev_->SynchronizeEvent(s.consumed);
    } catch (...) {
      // A failed device: free what we hold anyway.
    }
    for (auto& [name, a] : s.arrays) {
      dev_->Free(a.device);
      dev_->FreeHost(a.pinned);
    }
    dev_->DestroyEvent(s.uploaded);
    dev_->DestroyEvent(s.consumed);
  }
}

void BatchStager::Stage(const std::map<std::string, Tensor>& batch) {
  std::lock_guard<std::mutex> l(mu_);
  Slot& s = slots_[next_];
  next_ ^= 1;
  const int cs = dev_->CopyStream();
  s.valid = false;
  // The pinned memory is rewritten below: its previous upload (batch i-2) must have read it.
  dev_->SynchronizeEvent(s.uploaded);
  // The device buffers are overwritten by this upload: after the previous batch's consumer copied them out. Where
  // they are reallocated, the host waits for that instead (the memory is freed now).
  bool waited = false;
  auto wait_consumer = [&] {
    if (!waited) dev_->SynchronizeEvent(s.consumed);
    waited = true;
  };
  for (auto it = s.arrays.begin(); it != s.arrays.end();) {
    if (batch.count(it->first)) {
      ++it;
      continue;
    }
    wait_consumer();
    dev_->Free(it->second.device);
    dev_->FreeHost(it->second.pinned);
    it = s.arrays.erase(it);
  }
  dev_->WaitEvent(cs, s.consumed);
  for (const auto& [name, t] : batch) {
    Array& a = s.arrays[name];
    const size_t n = t.nbytes();
    if (a.capacity < n || !a.device) {
      wait_consumer();
      dev_->Free(a.device);
      dev_->FreeHost(a.pinned);
      a.device = a.pinned = nullptr;
      a.capacity = 0;
      a.pinned = dev_->AllocHost(n);
      a.device = dev_->Alloc(n, "staged batch array '" + name + "'");
      a.capacity = n;
    }
    if (n) std::memcpy(a.pinned, t.raw(), n);
    a.host = t;
    dev_->CopyToDeviceOn(cs, a.device, a.pinned, n);
  }
  dev_->RecordEvent(s.uploaded, cs);
  s.valid = true;
  ++staged_;
}

bool BatchStager::Consume(const std::map<std::string, Tensor>& feeds, const std::vector<Input>& inputs) {
  std::lock_guard<std::mutex> l(mu_);
  for (Slot& s : slots_) {
    if (!s.valid || inputs.empty()) continue;
    bool match = true;
    for (const Input& in : inputs) {
      auto f = feeds.find(in.name);
      auto a = s.arrays.find(in.name);
      // The same tensor that was staged (a caller does not write a batch it handed over), of the plan's size.
      if (f == feeds.end() || a == s.arrays.end() || f->second.raw() != a->second.host.raw() ||
          f->second.nbytes() != in.bytes || a->second.host.nbytes() != in.bytes) {
        match = false;
        break;
      }
    }
    if (!match) continue;
    dev_->WaitEvent(0, s.uploaded);
    for (const Input& in : inputs) dev_->CopyOnDeviceOn(0, in.device, s.arrays.at(in.name).device, in.bytes);
    dev_->RecordEvent(s.consumed, 0);
    ++consumed_;
    return true;
  }
  return false;
}

}  // namespace ot
