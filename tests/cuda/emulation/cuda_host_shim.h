// Just enough of CUDA to run generated cluster kernels (cuda_ops/cluster_codegen.h) on the host, for
// tests/cuda/cluster_emulation_test.cc: a block is run as blockDim.x std::threads, __syncthreads is a barrier of
// the block, __shfl_down_sync an exchange among the 32 threads of a warp between two barriers of that warp (every
// lane calls it, as on the GPU), and dynamic shared memory is one host array. Blocks run one after another. The
// generated code is compiled as it is otherwise (kernel_common's host definitions of the scalar math, which are
// the CPU interpreter's), so the test checks the generated indexing, phases, reductions, rounding and stores --
// not the GPU's libdevice (logf, sqrtf, pow), whose results the gpu-labelled tests compare.
// Include only in a translation unit without CUDA headers: it defines __global__ and friends as macros.
#pragma once
#include <math.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernel_common/scalar_math.h"

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __grid_constant__

namespace ot::emu {

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline double g_shared[64];  // >= the 33 doubles of ot_block_reduce

inline std::barrier<>* g_block_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> g_warp_barriers;
inline double g_lanes[32][32];  // [warp][lane]: float and double values both fit a double exactly

inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }

template <typename T>
T __shfl_down_sync(unsigned /*mask*/, T v, int offset) {
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  g_lanes[warp][lane] = static_cast<double>(v);
  g_warp_barriers[warp]->arrive_and_wait();
  const T r = lane + offset < 32 ? static_cast<T>(g_lanes[warp][lane + offset]) : v;
  g_warp_barriers[warp]->arrive_and_wait();  // every lane has read before any lane writes again
  return r;
}

// Runs `kernel(words, ptrs)` as a grid of `grid` blocks of `block` threads (a multiple of 32).
template <typename F>
void LaunchOnHost(F kernel, int64_t grid, int block) {
  blockDim.x = static_cast<unsigned>(block);
  gridDim.x = static_cast<unsigned>(grid);
  for (int64_t b = 0; b < grid; ++b) {
    std::barrier<> block_barrier(block);
    g_block_barrier = &block_barrier;
    g_warp_barriers.clear();
    for (int w = 0; w < block / 32; ++w) g_warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<std::thread> threads;
    for (int t = 0; t < block; ++t)
      threads.emplace_back([&, t, b] {
        threadIdx.x = static_cast<unsigned>(t);
        blockIdx.x = static_cast<unsigned>(b);
        kernel();
      });
    for (std::thread& th : threads) th.join();
  }
}

}  // namespace ot::emu
