#include "cpu_ops/rnn_kernel.h"

#include <cstdlib>
#include <string>

#include "cpu_ops/rnn_dnnl.h"
#include "cpu_ops/rnn_gemm.h"

namespace ot::cpu {

RnnPath GetRnnPath() {
  static const RnnPath path = [] {
    const char* e = std::getenv("ONNXTRAIN_CPU_RNN");
    const std::string v = e ? e : "";
    return v == "gemm" ? RnnPath::kGemm : v == "primitive" ? RnnPath::kPrimitive : RnnPath::kAuto;
  }();
  return path;
}

std::unique_ptr<RnnKernel> MakeRnnKernel(const RnnSpec& s, DnnType io, bool lens, bool peepholes, RnnPath path) {
  if (path == RnnPath::kAuto) path = GetRnnPath();
  // The GEMM path by default: the primitives' step is shorter on a bidirectional node (the speech example's BiLSTM:
  // 0.67x at 2 threads, its directions side by side) but oneDNN's scratchpad and workspace grow as ~9 floats per
  // gate value of the sequence, where the GEMM path's tape keeps ~1.5: that model's fp32 plan at batch 64 peaks at
  // 245 MiB instead of 39 (bench/rnn_ab.py, bench/RESULTS.md).
  if (path == RnnPath::kPrimitive)
    if (auto p = RnnPrimitive::Create(s, io, lens, peepholes)) return p;
  return std::make_unique<RnnGemm>(s, io);
}

}  // namespace ot::cpu
