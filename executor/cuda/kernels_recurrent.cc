// RNN, GRU and LSTM forward and their backward ai.onnxtrain.RecurrentGrad on the GPU through cuDNN
// (cuda_ops/cudnn_rnn.h). The operands are read as the CPU kernels read them (executor/kernels/recurrent_geometry.h:
// the same dims checks, layout 1 from opset 14, RecurrentGrad's `cell` and `layout` attributes; inputs 0-7 the
// forward's, 8-10 dY, dY_h, dY_c). float32 (exact, or TF32 with --tf32), float16 and bfloat16 (fp32 math inside cuDNN).
//
// Refused with UnsupportedError naming the option ("no GPU kernel yet"; run with --device cpu): what cuDNN's cells do
// not compute -- LSTM peepholes (P), clip (ONNX clamps every gate's input; cuDNN can only clip the cell state),
// LSTM input_forget, GRU linear_before_reset = 0 (cuDNN's GRU is the linear_before_reset = 1 form) -- float64, and
// an empty sequence axis or batch. The activations are the defaults (the schema refuses others).
//
// sequence_lens: cuDNN needs the lengths on the host. Absent, or known when the plan is made (an initializer), they
// cost nothing per run; computed at run time (a batch input), each run copies them to the host and waits for that
// copy (a stream synchronisation), which a CUDA graph cannot record: when the plan captures its run, this kernel
// invalidates the capture (the plan then runs directly from then on, see executor/plan.h). A length outside
// [0, seq] is an Error naming the node, as on the CPU.
//
// RecurrentGrad of an LSTM also has dP (output 6): P is refused, so it is absent, and dP is nothing's gradient
// (the rule never hands it on); it is written as zeros, where the CPU writes the gradient at P = 0.
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/cudnn_rnn.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/device.h"
#include "executor/kernels/recurrent_geometry.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace ot {
namespace {

// The desc of a node from its geometry (recurrent_geometry.h: operands checked as the CPU does), what cuDNN cannot
// run refused.
cuda::CudnnRnnDesc DescOf(const KernelContext& ctx, const cpu::RnnSpec& s) {
  cuda::CudnnRnnDesc d;
  d.cell = s.cell == cpu::RnnCell::kLstm  ? cuda::RnnCellKind::kLstm
           : s.cell == cpu::RnnCell::kGru ? cuda::RnnCellKind::kGru
                                          : cuda::RnnCellKind::kTanh;
  const bool lstm = d.cell == cuda::RnnCellKind::kLstm;
  const std::string cell = lstm ? "LSTM" : d.cell == cuda::RnnCellKind::kGru ? "GRU" : "RNN";
  d.directions = s.directions;
  d.reverse = s.reverse;
  d.batch_major = s.batch_major;
  d.seq = s.seq;
  d.batch = s.batch;
  d.input = s.input;
  d.hidden = s.hidden;
  // What cuDNN's cells do not compute.
  if (s.clip > 0)
    ctx.Unsupported("clip on the GPU: no GPU kernel yet (ONNX clamps every gate's input, cuDNN only the cell state)");
  if (s.input_forget) ctx.Unsupported("LSTM input_forget = 1 on the GPU: no GPU kernel yet");
  if (lstm && ctx.has_input(7)) ctx.Unsupported("LSTM peepholes (input P) on the GPU: no GPU kernel yet");
  if (d.cell == cuda::RnnCellKind::kGru && !s.linear_before_reset)
    ctx.Unsupported(
        "GRU linear_before_reset = 0 on the GPU: no GPU kernel yet (cuDNN's GRU is the linear_before_reset = 1 form)");
  const DataType dt = ctx.in(0).dtype;
  if (dt == DataType::kFloat64) ctx.Unsupported("float64 " + cell + " on the GPU: no GPU kernel yet");
  d.type = DeviceFloatType(ctx, dt, cell);
  d.tf32 = d.type == cuda::FloatType::kF32 && ctx.device && ctx.device->options().tf32;
  if (d.seq == 0 || d.batch == 0) ctx.Unsupported("an empty sequence axis or batch on the GPU: no GPU kernel yet");
  try {
    cuda::ValidateCudnnRnn(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("a recurrent layer cuDNN cannot describe: ") + e.what());
  }
  return d;
}

std::shared_ptr<const cuda::CudnnRnn> MakeRnn(const KernelContext& ctx, const cuda::CudnnRnnDesc& d) {
  try {
    return std::make_shared<const cuda::CudnnRnn>(d);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  } catch (const std::runtime_error& e) {
    ctx.Unsupported(std::string("cuDNN refuses this recurrent layer: ") + e.what());
  }
}

double Flops(const cuda::CudnnRnnDesc& d) {
  return 2.0 * static_cast<double>(d.directions * d.seq * d.batch * d.gates() * d.hidden * (d.input + d.hidden));
}

// sequence_lens on the host for cuDNN's descriptors: a plan-time constant, or a per-run copy into pinned memory.
class HostLengths {
 public:
  HostLengths(const KernelContext& ctx, int input, int64_t batch) : batch_(batch) {
    if (!ctx.has_input(input)) return;
    present_ = true;
    if (input < static_cast<int>(ctx.input_values.size()) && ctx.input_values[static_cast<size_t>(input)]) {
      const Tensor& t = *ctx.input_values[static_cast<size_t>(input)];
      if (t.dtype() != DataType::kInt32) ctx.Fail("sequence_lens must be int32");
      constant_.assign(t.data<int32_t>(), t.data<int32_t>() + t.numel());
      return;
    }
    int32_t* p = nullptr;
    CudaCheck(cudaMallocHost(reinterpret_cast<void**>(&p), static_cast<size_t>(batch) * sizeof(int32_t)),
              "pinned sequence_lens");
    pinned_ = std::shared_ptr<int32_t>(p, [](int32_t* q) { cudaFreeHost(q); });
  }
  bool present() const { return present_; }
  bool constant() const { return !pinned_; }

  // This run's lengths (null when absent). *skip: a graph is being captured, which cannot wait for the copy: the
  // capture is invalidated here and the caller issues nothing (the plan runs the work again directly).
  const int32_t* Get(const void* dev, void* stream, bool* skip) const {
    *skip = false;
    if (!present_) return nullptr;
    if (!pinned_) return constant_.data();
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CudaCheck(cudaStreamIsCapturing(st, &cs), "capture status");
    if (cs != cudaStreamCaptureStatusNone) {
      (void)cudaStreamSynchronize(st);  // not recordable: invalidates the capture
      (void)cudaGetLastError();
      *skip = true;
      return nullptr;
    }
    CudaCheck(
        cudaMemcpyAsync(pinned_.get(), dev, static_cast<size_t>(batch_) * sizeof(int32_t), cudaMemcpyDeviceToHost, st),
        "copy sequence_lens to the host");
    CudaCheck(cudaStreamSynchronize(st), "wait for sequence_lens");
    return pinned_.get();
  }

 private:
  int64_t batch_ = 0;
  bool present_ = false;
  std::vector<int32_t> constant_;
  std::shared_ptr<int32_t> pinned_;
};

KernelInfo RecurrentKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cuda::CudnnRnnDesc d =
      DescOf(ctx, RecurrentGeometry(ctx, n.op_type, n.opset >= 14 && n.attr_int("layout", 0) == 1));
  const bool lstm = d.cell == cuda::RnnCellKind::kLstm;
  for (int i = 0; i < 3; ++i)
    if (ctx.has_output(i) && ctx.out(i).dtype != ctx.in(0).dtype) ctx.Fail("outputs must have X's dtype");
  const auto rnn = MakeRnn(ctx, d);
  const auto lens = std::make_shared<const HostLengths>(ctx, 4, d.batch);
  const bool has_b = ctx.has_input(3), has_h0 = ctx.has_input(5), has_c0 = lstm && ctx.has_input(6);
  const bool y = ctx.has_output(0), y_h = ctx.has_output(1), y_c = lstm && ctx.has_output(2);
  const size_t ws = rnn->ForwardWorkspaceBytes();
  const std::string what = n.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    bool skip = false;
    const int32_t* host = lens->Get(io.in[4], io.stream, &skip);
    if (skip) return;
    cuda::RnnForwardArgs a;
    a.x = io.in[0];
    a.w = io.in[1];
    a.r = io.in[2];
    a.b = has_b ? io.in[3] : nullptr;
    a.lens = lens->present() ? static_cast<const int32_t*>(io.in[4]) : nullptr;
    a.h0 = has_h0 ? io.in[5] : nullptr;
    a.c0 = has_c0 ? io.in[6] : nullptr;
    a.y = y ? io.out[0] : nullptr;
    a.y_h = y_h ? io.out[1] : nullptr;
    a.y_c = y_c ? io.out[2] : nullptr;
    RunLauncher(what, [&] { rnn->Forward(a, host, io.workspace, ws, io.stream); });
  });
  info.workspace_bytes = ws;
  info.flops = Flops(d);
  return info;
}

// ai.onnxtrain.RecurrentGrad (graph/grad/recurrent_grad.cc): inputs 0-7 the forward's, 8-10 dY, dY_h, dY_c; outputs
// dX, dW, dR, dB, dInitial_h (, dInitial_c, dP for LSTM).
KernelInfo RecurrentGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cuda::CudnnRnnDesc d = DescOf(ctx, RecurrentGradGeometry(ctx));
  const bool lstm = d.cell == cuda::RnnCellKind::kLstm;
  for (int i = 0; i < 7; ++i)
    if (ctx.has_output(i) && ctx.out(i).dtype != ctx.in(0).dtype) ctx.Fail("outputs must have X's dtype");
  const auto rnn = MakeRnn(ctx, d);
  const auto lens = std::make_shared<const HostLengths>(ctx, 4, d.batch);
  std::vector<bool> in(11), out(7);
  for (int i = 0; i < 11; ++i) in[static_cast<size_t>(i)] = ctx.has_input(i) && (lstm || (i != 6 && i != 7 && i != 10));
  for (int i = 0; i < 7; ++i) out[static_cast<size_t>(i)] = ctx.has_output(i) && (lstm || i < 5);
  const size_t dp_bytes = out[6] ? ctx.out(6).nbytes() : 0;
  const size_t ws = rnn->BackwardWorkspaceBytes();
  const std::string what = n.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    bool skip = false;
    const int32_t* host = lens->Get(io.in[4], io.stream, &skip);
    if (skip) return;
    auto i_ = [&](int i) { return in[static_cast<size_t>(i)] ? io.in[i] : nullptr; };
    auto o_ = [&](int i) { return out[static_cast<size_t>(i)] ? io.out[i] : nullptr; };
    cuda::RnnBackwardArgs a;
    a.x = io.in[0];
    a.w = io.in[1];
    a.r = io.in[2];
    a.b = i_(3);
    a.lens = lens->present() ? static_cast<const int32_t*>(io.in[4]) : nullptr;
    a.h0 = i_(5);
    a.c0 = i_(6);
    a.dy = i_(8);
    a.dy_h = i_(9);
    a.dy_c = i_(10);
    a.dx = o_(0);
    a.dw = o_(1);
    a.dr = o_(2);
    a.db = o_(3);
    a.dh0 = o_(4);
    a.dc0 = o_(5);
    RunLauncher(what, [&] { rnn->Backward(a, host, io.workspace, ws, io.stream); });
    if (dp_bytes) CudaCheck(cudaMemsetAsync(io.out[6], 0, dp_bytes, static_cast<cudaStream_t>(io.stream)), "zero dP");
  });
  info.workspace_bytes = ws;
  info.flops = 2 * Flops(d);
  return info;
}

}  // namespace

void RegisterCudaRecurrentKernels(KernelRegistry& r) {
  r.Register("RNN", RecurrentKernel);
  r.Register("GRU", RecurrentKernel);
  r.Register("LSTM", RecurrentKernel);
  r.Register("RecurrentGrad", RecurrentGradKernel, kInternalDomain);
}

}  // namespace ot
