// A fake device whose "device memory" is host memory and whose kernels are the CPU's (tests of the executor's
// device side without a GPU: tests/executor/host_device_test.cc, device_graph_test.cc). Allocations are filled with
// 0xff bytes (NaN), so a read of memory nothing wrote shows up in the results; the bytes copied each way are
// counted.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "executor/device.h"
#include "executor/kernel_registry.h"

namespace ot::test {

class HostDevice : public DeviceBackend {
 public:
  std::string name() const override { return "host-fake"; }
  std::optional<KernelInfo> MakeKernel(const KernelContext& ctx) const override {
    const KernelFactory* f = KernelRegistry::Cpu().Find(ctx.node.domain, ctx.node.op_type);
    if (!f) return std::nullopt;
    return (*f)(ctx);
  }
  void* Alloc(size_t bytes, const std::string&) override {
    const size_t n = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, n);
    std::memset(p, 0xff, n);  // NaN-filled: a read of memory nothing wrote shows up in the results
    std::lock_guard<std::mutex> l(mu_);
    sizes_[p] = n;
    return p;
  }
  void Free(void* p) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      sizes_.erase(p);
    }
    std::free(p);
  }
  void CopyToDevice(void* dst, const void* src, size_t n) override {
    to_device += n;
    std::memcpy(dst, src, n);
  }
  void CopyToHost(void* dst, const void* src, size_t n) override {
    to_host += n;
    std::memcpy(dst, src, n);
  }
  void CopyOnDevice(void* dst, const void* src, size_t n) override {
    if (dst != src) std::memmove(dst, src, n);
  }
  void Synchronize() override {}
  void* stream() override { return nullptr; }
  size_t to_device = 0, to_host = 0;

 private:
  std::mutex mu_;
  std::map<void*, size_t> sizes_;
};

}  // namespace ot::test
