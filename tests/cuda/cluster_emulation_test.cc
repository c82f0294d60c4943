// The generated CUDA C of cluster programs (cuda_ops/cluster_codegen.h), compiled with the host compiler and run
// with threads standing in for a block (tests/cuda/emulation/cuda_host_shim.h), against the CPU interpreter
// (cpu_ops/fused_elementwise.h) on the same seeded inputs: every output element must have the same bits (NaN may
// differ in payload). This checks what the generator decides -- indexing and broadcasting, the phases of row
// reductions and their block-wide combine, rounding to each dtype, converting loads, bool storage, stores in
// place -- on machines without a GPU; what a GPU adds (libdevice's logf/sqrtf/pow) the gpu-labelled tests compare.
// The kernels come from tests/cuda/emulation/generate_kernels.cc at build time (the cases of cases.h).
#include <gtest/gtest.h>

#include "tests/cuda/emulation/cuda_host_shim.h"  // first: no CUDA header may follow (it defines __global__...)

namespace ot::emu {
#include "emulated_kernels.inc"
}  // namespace ot::emu

#include <cstdio>
#include <random>
#include <string>

#include "cpu_ops/fused_elementwise.h"
#include "cuda_ops/cluster_codegen.h"
#include "tests/cuda/emulation/cases.h"

namespace ot::emu {
namespace {

size_t SizeOf(DType t) { return t == DType::kF32 ? 4 : t == DType::kBool ? 1 : 2; }

float ToFloat(DType t, const uint8_t* p) {
  uint16_t h;
  float f;
  switch (t) {
    case DType::kF32:
      std::memcpy(&f, p, 4);
      return f;
    case DType::kF16:
      std::memcpy(&h, p, 2);
      return HalfBitsToFloat(h);
    case DType::kBF16:
      std::memcpy(&h, p, 2);
      return Bf16BitsToFloat(h);
    case DType::kBool:
      return *p != 0 ? 1.f : 0.f;
  }
  return 0;
}

// Uniform in [-2, 2); with `special`, also NaN, inf and -0 at fixed positions and bool bytes other than 1.
std::vector<uint8_t> Random(DType t, int64_t n, std::mt19937& rng, bool special) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<uint8_t> b(static_cast<size_t>(n) * SizeOf(t) + 1);
  for (int64_t i = 0; i < n; ++i) {
    float v = u(rng);
    if (special && i % 17 == 5) v = NAN;
    if (special && i % 23 == 7) v = INFINITY;
    if (special && i % 29 == 3) v = -0.f;
    uint8_t* p = b.data() + i * SizeOf(t);
    if (t == DType::kF32) {
      std::memcpy(p, &v, 4);
    } else if (t == DType::kBool) {
      *p = v > 0.f ? (special && i % 3 == 0 ? 7 : 1) : 0;
    } else {
      const uint16_t h = t == DType::kF16 ? FloatToHalfBits(v) : FloatToBf16Bits(v);
      std::memcpy(p, &h, 2);
    }
  }
  return b;
}

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

void RunCase(size_t index, const Case& c, bool special) {
  SCOPED_TRACE(c.name + (special ? " (NaN/inf/-0 inputs)" : ""));
  std::mt19937 rng(static_cast<uint32_t>(17 + index));
  std::vector<std::vector<uint8_t>> inputs;
  for (int k = 0; k < c.p.num_inputs; ++k) inputs.push_back(Random(c.types[k], Numel(c.dims[k]), rng, special));
  cpu::FusedKernel cpu(c.p, c.domain, c.dims, c.types, 1);
  std::vector<std::vector<uint8_t>> want, got;
  std::vector<const void*> cpu_in;
  std::vector<void*> cpu_out;
  for (auto& b : inputs) cpu_in.push_back(b.data());
  std::vector<int64_t> count;
  for (int32_t o : c.p.outputs) {
    count.push_back(c.p.code[o].row ? cpu.rows() : cpu.numel());
    const size_t bytes = static_cast<size_t>(count.back()) * SizeOf(c.p.code[o].dtype) + 1;
    want.emplace_back(bytes);
    got.emplace_back(bytes, 0xcd);
    cpu_out.push_back(want.back().data());
  }
  std::vector<uint8_t> ws(cpu.workspace_bytes() + 128);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) / 64 * 64);
  cpu.Run(cpu_in.data(), cpu_out.data(), aligned);

  cuda::ClusterKernelSpec spec;
  spec.input_types = c.types;
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(c.p, c.name, spec);
  const cuda::ClusterArgs args = cuda::MakeClusterArgs(c.p, c.domain, c.dims);
  const cuda::ClusterLaunch l = k.Launch(args.numel, args.rows, args.row_len);
  std::vector<std::vector<uint8_t>> dev_in = inputs;
  std::vector<void*> ptrs;
  for (auto& b : dev_in) ptrs.push_back(b.data());
  for (size_t j = 0; j < got.size(); ++j) ptrs.push_back(c.inplace && j == 0 ? dev_in[0].data() : got[j].data());
  LaunchOnHost([&] { kLaunch[index](args.words.data(), ptrs.data()); }, l.grid, l.block);
  if (c.inplace) got[0] = dev_in[0];

  for (size_t j = 0; j < want.size(); ++j) {
    const DType t = c.p.code[c.p.outputs[j]].dtype;
    int bad = 0;
    for (int64_t i = 0; i < count[j] && bad < 3; ++i) {
      const uint8_t *g = got[j].data() + i * SizeOf(t), *w = want[j].data() + i * SizeOf(t);
      if (std::memcmp(g, w, SizeOf(t)) == 0 || (std::isnan(ToFloat(t, g)) && std::isnan(ToFloat(t, w)))) continue;
      ++bad;
      ADD_FAILURE() << "output " << j << " (" << cluster::DTypeName(t) << ") element " << i << ": generated kernel "
                    << ToFloat(t, g) << ", interpreter " << ToFloat(t, w);
    }
  }
}

TEST(ClusterEmulation, GeneratedKernelsMatchTheInterpreterBitForBit) {
  const std::vector<Case> cases = Cases();
  ASSERT_EQ(sizeof(kLaunch) / sizeof(kLaunch[0]), cases.size()) << "emulated_kernels.inc is stale";
  for (size_t i = 0; i < cases.size(); ++i)
    for (bool special : {false, true}) RunCase(i, cases[i], special);
}

}  // namespace
}  // namespace ot::emu
