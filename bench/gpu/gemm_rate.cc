// GEMM throughput of cuda_ops/gemm.h (cuBLASLt) on the GPU: one JSON line per case.
//
//   build-cuda/bench_gemm_rate [--warmup 10] [--iters 50] [--filter SUBSTRING]
//
// Cases: 4096^3 in fp16, bf16, TF32 and exact fp32; the GEMMs of a BERT-base encoder layer at batch 32 x seq 128
// (4096 tokens) in fp16, written as the Linear layers run them (x [tokens, in] · Wᵀ, W stored [out, in]: trans_b):
// QKV 4096x2304x768, attention output 4096x768x768, FFN up 4096x3072x768 (also with the bias+GELU epilogue), FFN
// down 4096x768x3072, the FFN-up weight gradient with the bias-gradient epilogue; and the batched attention
// GEMMs over 32*12 heads: scores Q·Kᵀ 128x128x64 and context P·V 128x64x128.
// Each case: inputs uniform [-1, 1] (never zero; host fill + copy), 10 warm-up runs, then 50 runs each timed with
// its own pair of cudaEvents on one stream; reported: median and minimum ms, TFLOP/s = 2·m·n·k·batch / median.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/device_info.h"
#include "cuda_ops/gemm.h"
#include "kernel_common/half.h"

namespace {

using ot::cuda::GemmDesc;
using ot::cuda::GemmEpilogue;
using ot::cuda::GemmRunner;
using ot::cuda::GemmType;

void CudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Case {
  std::string name;
  GemmDesc g;
};

GemmDesc Make(GemmType t, bool tf32, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t batch = 1,
              GemmEpilogue e = GemmEpilogue::kNone) {
  GemmDesc g;
  g.type = t;
  g.tf32 = tf32;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = ta;
  g.trans_b = tb;
  g.batch = batch;
  if (batch > 1) {
    g.stride_a = m * k;
    g.stride_b = k * n;
    g.stride_d = m * n;
  }
  g.epilogue = e;
  return g;
}

std::vector<Case> Cases() {
  const GemmType h = GemmType::kF16;
  const int64_t tokens = 32 * 128, heads = 32 * 12;
  return {
      {"square_4096_f16", Make(h, false, 4096, 4096, 4096, false, false)},
      {"square_4096_bf16", Make(GemmType::kBF16, false, 4096, 4096, 4096, false, false)},
      {"square_4096_tf32", Make(GemmType::kF32, true, 4096, 4096, 4096, false, false)},
      {"square_4096_f32", Make(GemmType::kF32, false, 4096, 4096, 4096, false, false)},
      {"bert_qkv_f16", Make(h, false, tokens, 2304, 768, false, true)},
      {"bert_attn_out_f16", Make(h, false, tokens, 768, 768, false, true)},
      {"bert_ffn_up_f16", Make(h, false, tokens, 3072, 768, false, true)},
      {"bert_ffn_up_bias_gelu_f16", Make(h, false, tokens, 3072, 768, false, true, 1, GemmEpilogue::kBiasGelu)},
      {"bert_ffn_down_f16", Make(h, false, tokens, 768, 3072, false, true)},
      // dW[out=3072, in=768] = dYᵀ·X with db from dY: A = dY [tokens, 3072] transposed, B = X [tokens, 768].
      {"bert_ffn_up_wgrad_bgrad_f16", Make(h, false, 3072, 768, tokens, true, false, 1, GemmEpilogue::kBiasGradA)},
      {"bert_attn_scores_f16", Make(h, false, 128, 128, 64, false, true, heads)},
      {"bert_attn_context_f16", Make(h, false, 128, 64, 128, false, false, heads)},
  };
}

size_t ElemBytes(GemmType t) { return t == GemmType::kF32 ? 4 : 2; }

// Uniform [-1, 1], never zero, in the type's bytes (a small LCG: the fill of 16M elements stays well under a second).
std::vector<uint8_t> Fill(GemmType t, size_t n, uint64_t seed) {
  std::vector<uint8_t> b(n * ElemBytes(t));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float v = static_cast<float>(static_cast<int32_t>(s >> 33) - (1 << 30)) / static_cast<float>(1 << 30);
    if (v == 0.f) v = 0.5f;
    if (t == GemmType::kF32) {
      std::memcpy(b.data() + 4 * i, &v, 4);
    } else {
      const uint16_t x = t == GemmType::kF16 ? ot::FloatToHalfBits(v) : ot::FloatToBf16Bits(v);
      std::memcpy(b.data() + 2 * i, &x, 2);
    }
  }
  return b;
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { CudaCheck(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

void RunCase(GemmRunner& runner, const Case& c, void* workspace, cudaStream_t stream, int warmup, int iters,
             const std::string& device) {
  const GemmDesc& g = c.g;
  const size_t es = ElemBytes(g.type);
  const size_t na = static_cast<size_t>(g.m * g.k * g.batch), nb = static_cast<size_t>(g.k * g.n * g.batch);
  const size_t nd = static_cast<size_t>(g.m * g.n * g.batch);
  const size_t nvec = static_cast<size_t>(std::max(g.m, g.n));
  DevBuf a(na * es), b(nb * es), d(nd * es), vec(nvec * es);
  const auto ha = Fill(g.type, na, 1), hb = Fill(g.type, nb, 2), hv = Fill(g.type, nvec, 3);
  CudaCheck(cudaMemcpy(a.p, ha.data(), ha.size(), cudaMemcpyHostToDevice), "copy A");
  CudaCheck(cudaMemcpy(b.p, hb.data(), hb.size(), cudaMemcpyHostToDevice), "copy B");
  CudaCheck(cudaMemcpy(vec.p, hv.data(), hv.size(), cudaMemcpyHostToDevice), "copy bias");
  const bool grad = g.epilogue == GemmEpilogue::kBiasGrad || g.epilogue == GemmEpilogue::kBiasGradA;
  auto run = [&] {
    runner.Run(g, a.p, b.p, d.p, grad ? nullptr : vec.p, workspace, GemmRunner::WorkspaceBytes(), stream,
               grad ? vec.p : nullptr);
  };
  for (int i = 0; i < warmup; ++i) run();
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) CudaCheck(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < iters; ++i) {
    CudaCheck(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    run();
    CudaCheck(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) CudaCheck(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "elapsed");
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  const double median = iters % 2 ? ms[iters / 2] : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]);
  const double flops = 2.0 * static_cast<double>(g.m) * g.n * g.k * g.batch;
  const char* type = g.type == GemmType::kF16 ? "f16" : g.type == GemmType::kBF16 ? "bf16" : g.tf32 ? "tf32" : "f32";
  std::printf(
      "{\"case\": \"%s\", \"device\": \"%s\", \"type\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"batch\": "
      "%lld, "
      "\"trans_a\": %s, \"trans_b\": %s, \"epilogue\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"tflops\": %.2f}\n",
      c.name.c_str(), device.c_str(), type, static_cast<long long>(g.m), static_cast<long long>(g.n),
      static_cast<long long>(g.k), static_cast<long long>(g.batch), g.trans_a ? "true" : "false",
      g.trans_b ? "true" : "false", static_cast<int>(g.epilogue), median, ms[0], flops / (median * 1e-3) / 1e12);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int warmup = 10, iters = 50;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--warmup" && i + 1 < argc)
      warmup = std::atoi(argv[++i]);
    else if (a == "--iters" && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--warmup N] [--iters N] [--filter SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 1) iters = 1;
  if (ot::cuda::DeviceCount() == 0) {
    std::fprintf(stderr, "bench_gemm_rate: no CUDA device\n");
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    CudaCheck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    GemmRunner runner;
    DevBuf workspace(GemmRunner::WorkspaceBytes());
    cudaStream_t stream = nullptr;
    CudaCheck(cudaStreamCreate(&stream), "cudaStreamCreate");
    int failed = 0;
    for (const Case& c : Cases()) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      try {
        RunCase(runner, c, workspace.p, stream, warmup, iters, prop.name);
      } catch (const std::exception& e) {
        std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", c.name.c_str(), e.what());
        ++failed;
      }
    }
    cudaStreamDestroy(stream);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm_rate: %s\n", e.what());
    return 1;
  }
}
