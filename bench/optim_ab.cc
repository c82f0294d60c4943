// bench_optim_ab: the CPU optimizer update (cpu::MultiTensorUpdate, as the OptimizerUpdate kernel calls it) against
// the memory traffic it cannot avoid, in ONE process, paired call by call so that this VM's drift slows both alike.
//
//   bench_optim_ab [--params 11700000] [--tensors 62] [--threads 2] [--pairs 21] [--kind adam]
//
// The parameters are split into TENSORS tensors of equal size (ResNet-18: 11.7M in 62). The peer is one pass that
// reads what the update must read (parameter, gradient, and the kind's states) and writes what it must write
// (parameter and states) with a trivial float formula, chunked and threaded as the update is: its time is the
// memory-bandwidth floor. Printed: both medians, the update's bytes per second, and the median ratio update / floor
// (1.0: the update runs at memory bandwidth).
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "graph/ops/optimizer_layout.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t params = 11700000, tensors = 62;
  int threads = 2, pairs = 21;
  std::string kind = "adam";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--params")
      params = std::atoll(argv[i + 1]);
    else if (a == "--tensors")
      tensors = std::atoll(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--pairs")
      pairs = std::atoi(argv[i + 1]);
    else if (a == "--kind")
      kind = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  tbb::global_control tc(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  ot::cpu::OptimHyper h;
  if (!ot::OptimizerKindOf(kind, &h.kind)) {
    std::fprintf(stderr, "unknown kind %s\n", kind.c_str());
    return 2;
  }
  const int k = ot::cpu::OptimStatesPerParam(h.kind);
  const int64_t per = params / tensors;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Parameters, gradients, states: each tensor's own buffers, updated in place (as the plan runs the update).
  std::vector<std::vector<float>> p(tensors), g(tensors), s0(tensors), s1(tensors);
  for (int64_t t = 0; t < tensors; ++t) {
    p[t].resize(per);
    g[t].resize(per);
    for (int64_t i = 0; i < per; ++i) p[t][i] = nd(rng), g[t][i] = 1e-2f * nd(rng);
    if (k >= 1) s0[t].assign(per, 0.f);
    if (k >= 2) s1[t].assign(per, 0.f);
  }
  std::vector<ot::cpu::OptimTensor> ts(tensors);
  for (int64_t t = 0; t < tensors; ++t) {
    ts[t].n = per;
    ts[t].p = ts[t].p_out = p[t].data();
    ts[t].g = g[t].data();
    if (k >= 1) ts[t].s0 = ts[t].s0_out = s0[t].data();
    if (k >= 2) ts[t].s1 = ts[t].s1_out = s1[t].data();
  }
  // The floor: the same streams, one pass, a trivial formula (x' = x + c g per stream).
  auto floor_pass = [&] {
    constexpr int64_t kChunk = 1 << 15;
    const int64_t chunks = (per + kChunk - 1) / kChunk;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tensors * chunks, 1), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t c = r.begin(); c < r.end(); ++c) {
        const int64_t t = c / chunks, b = c % chunks * kChunk, e = std::min(per, b + kChunk);
        float* __restrict pp = p[t].data();
        const float* __restrict gg = g[t].data();
        float* __restrict a = k >= 1 ? s0[t].data() : nullptr;
        float* __restrict v = k >= 2 ? s1[t].data() : nullptr;
        if (k == 0)
          for (int64_t i = b; i < e; ++i) pp[i] -= 1e-9f * gg[i];
        else if (k == 1)
          for (int64_t i = b; i < e; ++i) a[i] += 1e-9f * gg[i], pp[i] -= 1e-9f * a[i];
        else
          for (int64_t i = b; i < e; ++i) a[i] += 1e-9f * gg[i], v[i] += 1e-9f * gg[i], pp[i] -= 1e-9f * (a[i] + v[i]);
      }
    });
  };
  auto ms = [](auto f) {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  int64_t step = 0;
  auto update = [&] { ot::cpu::MultiTensorUpdate(h, 1e-4, step++, ts); };
  update();
  floor_pass();
  std::vector<double> tu, tf, ratio;
  for (int i = 0; i < pairs; ++i) {
    double u, f;
    if (i % 2) {
      u = ms(update);
      f = ms(floor_pass);
    } else {
      f = ms(floor_pass);
      u = ms(update);
    }
    tu.push_back(u);
    tf.push_back(f);
    ratio.push_back(u / f);
  }
  // Bytes the update must move: p, g, states read; p, states written.
  const double bytes = static_cast<double>(tensors * per) * 4 * (2 + k + 1 + k);
  std::printf("%s, %lld parameters in %lld tensors, %d threads, %d pairs\n", kind.c_str(),
              static_cast<long long>(tensors * per), static_cast<long long>(tensors), threads, pairs);
  std::printf("update %.2f ms (%.1f GB/s), memory floor %.2f ms (%.1f GB/s), update / floor %.2fx\n", Median(tu),
              bytes / Median(tu) / 1e6, Median(tf), bytes / Median(tf) / 1e6, Median(ratio));
  return 0;
}
