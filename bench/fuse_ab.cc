// bench_fuse_ab: the training step of one model under two --fuse modes (off and lite unless told), in ONE process,
// paired block by block so that this VM's drift (whole minutes ~25% slower at times) slows both sides alike.
//
//   bench_fuse_ab MODEL DATA [--batch 32] [--threads 1] [--pairs 41] [--block 5] [--modes off,lite] [--amp bf16]
//                 [--instances 4] [--logits logits] [--labels y] [--ops]
//
// Each mode has INSTANCES Trainers (same seed, Adam lr 1e-3, cross-entropy on LOGITS/LABELS), each walking the data
// in file order. After a warm-up block each, pair p is one block of BLOCK steps of each mode's instance p mod
// INSTANCES, back to back, in alternating order (AB, BA, ...); a block's time is the median of its steps but the
// first (which pays for the other mode's data in the caches). Several instances because one Trainer's buffers can
// land luckier in the caches than another's: two trainers of the same mode differed by up to 0.8%, consistently
// within a process, which one pair of trainers would have read as an effect of fusion. Printed: each mode's median
// block time, the median of the per-pair ratios A/B with its 95% confidence interval (order statistics of the
// pairs: no assumption on the noise), how many pairs B won, and each instance's median ratio. Both modes see the same
// batches in the same order, so their losses must agree step by step (the fusion issue's 1e-5 relative); the largest
// relative difference is printed and an excess fails the run.
// --ops adds each op's time per step in both modes. The same mode twice (--modes off,off) is the control: its
// ratio must come out at 1 within its interval. (It found that the first trainer of a process ran its GEMMs up to
// twice as slow: oneDNN primitives made for the machine's thread count, not --threads; see cpu_ops/dnnl_util.h.)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/onnxtrain.h"
#include "passes/amp.h"
#include "training/fusion.h"

namespace {

struct Args {
  std::string model, data, modes = "off,lite", amp, logits = "logits", labels = "y";
  int64_t batch = 32, pairs = 41, block = 5, instances = 4;
  int threads = 1;
  bool ops = false;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "bench_fuse_ab: %s\nusage: bench_fuse_ab MODEL DATA [--batch N] [--threads N] [--pairs N] "
               "[--block N] [--modes A,B] [--amp bf16|fp16] [--instances N] [--logits NAME] [--labels NAME] [--ops]\n",
               why);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--ops") {
      a.ops = true;
      continue;
    }
    if (k.rfind("--", 0) != 0) {
      pos.push_back(k);
      continue;
    }
    if (i + 1 >= argc) Usage(("option " + k + " needs a value").c_str());
    const std::string v = argv[++i];
    auto num = [&](int64_t lo) {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end || n < lo)
        Usage((k + ": '" + v + "' is not an integer >= " + std::to_string(lo)).c_str());
      return static_cast<int64_t>(n);
    };
    if (k == "--batch")
      a.batch = num(1);
    else if (k == "--threads")
      a.threads = static_cast<int>(num(0));
    else if (k == "--pairs")
      a.pairs = num(5);
    else if (k == "--block")
      a.block = num(2);
    else if (k == "--instances")
      a.instances = num(1);
    else if (k == "--modes")
      a.modes = v;
    else if (k == "--amp")
      a.amp = v;
    else if (k == "--logits")
      a.logits = v;
    else if (k == "--labels")
      a.labels = v;
    else
      Usage(("unknown option " + k).c_str());
  }
  if (pos.size() != 2) Usage("MODEL and DATA are required");
  a.model = pos[0];
  a.data = pos[1];
  return a;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  // As in onnx-train: oneDNN's OpenMP workers must sleep between parallel regions (tools/main.cc).
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  const Args a = Parse(argc, argv);
  const size_t comma = a.modes.find(',');
  if (comma == std::string::npos) Usage("--modes takes two modes, A,B");
  const std::string mode[2] = {a.modes.substr(0, comma), a.modes.substr(comma + 1)};
  try {
    ot::SetThreadCount(a.threads);
    const int64_t K = a.instances;
    std::vector<std::unique_ptr<ot::Trainer>> trainer[2];
    for (int64_t k = 0; k < K; ++k)  // interleaved: instance k of both modes made one after the other
      for (int m = 0; m < 2; ++m) {
        ot::TrainerOptions o;
        o.loss = {"", "cross_entropy", a.logits, a.labels};
        o.optimizer.kind = ot::OptimizerKind::kAdam;
        o.optimizer.lr = 1e-3;
        if (!a.amp.empty()) o.amp.half = ot::ParseAmpDtype(a.amp);
        o.fuse.mode = ot::ParseFuseMode(mode[m]);
        o.profile = a.ops;
        o.fuse.memory_budget = ot::DefaultMemoryBudget();
        trainer[m].push_back(std::make_unique<ot::Trainer>(ot::LoadModel(a.model), o));
      }
    const std::vector<std::string> inputs = trainer[0][0]->input_names();
    ot::Arrays arrays;
    for (ot::NamedTensor& nt : ot::ReadNpz(a.data))
      if (std::find(inputs.begin(), inputs.end(), nt.name) != inputs.end()) arrays[nt.name] = std::move(nt.tensor);
    ot::DataLoader data(std::move(arrays), a.batch, /*shuffle=*/false, 0, a.data);
    const int64_t per_epoch = data.batches_per_epoch();
    if (per_epoch < 1) Usage("the data has fewer samples than one batch");

    std::vector<int64_t> next[2] = {std::vector<int64_t>(K, 0), std::vector<int64_t>(K, 0)};  // next batch
    std::vector<std::vector<double>> losses[2] = {std::vector<std::vector<double>>(K),        // per instance and step
                                                  std::vector<std::vector<double>>(K)};
    auto run_block = [&](int m, int64_t k) {  // the median step time of a block but its first step, in ms
      std::vector<double> t;
      for (int64_t s = 0; s < a.block; ++s) {
        const int64_t i = next[m][k]++;
        ot::Batch b = data.Get(i / per_epoch, i % per_epoch);
        const auto t0 = std::chrono::steady_clock::now();
        const ot::StepResult r = trainer[m][k]->Step(b.arrays);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        losses[m][k].push_back(r.loss);
        if (s > 0) t.push_back(ms);
      }
      return Median(t);
    };
    for (int64_t k = 0; k < K; ++k) {  // warm-up: plans, oneDNN's JIT, fusion
      run_block(0, k);
      run_block(1, k);
    }
    std::vector<double> ta, tb, ratio;
    for (int64_t p = 0; p < a.pairs; ++p) {
      double t[2];
      // Instances rotate with p; the order alternates from one round of the K instances to the next, so each
      // instance runs A first and B first in turn.
      const int first = static_cast<int>((p / K) % 2);
      const int64_t k = p % K;
      t[first] = run_block(first, k);
      t[1 - first] = run_block(1 - first, k);
      ta.push_back(t[0]);
      tb.push_back(t[1]);
      ratio.push_back(t[0] / t[1]);
    }
    if (a.ops) {  // each op's time per step in both modes (warm-up included)
      std::map<std::string, double> per[2];
      for (int m = 0; m < 2; ++m)
        for (int64_t k = 0; k < K; ++k)
          for (const ot::OpTime& t : trainer[m][k]->executor().kernel_profile())
            per[m][t.op] += t.ms / static_cast<double>(next[m][k] * K);
      for (int m = 0; m < 2; ++m)
        for (auto& [op, ms] : per[m]) per[1 - m].emplace(op, 0.0);
      std::printf("%-28s %10s %10s   ms per step\n", "op", mode[0].c_str(), mode[1].c_str());
      for (auto& [op, ms] : per[0]) std::printf("%-28s %10.3f %10.3f\n", op.c_str(), ms, per[1][op]);
    }
    // The 95% interval of the median ratio: ranks n/2 -+ 1.96 sqrt(n)/2 of the sorted ratios (sign-test interval).
    std::vector<double> sorted = ratio;
    std::sort(sorted.begin(), sorted.end());
    const double n = static_cast<double>(sorted.size());
    const auto lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - 0.98 * std::sqrt(n))));
    const auto hi = static_cast<size_t>(std::min(n - 1, std::ceil(n / 2 + 0.98 * std::sqrt(n)) - 1));
    const auto b_won = std::count_if(ratio.begin(), ratio.end(), [](double r) { return r > 1; });
    double worst = 0;
    for (int64_t k = 0; k < K; ++k)
      for (size_t i = 0; i < std::min(losses[0][k].size(), losses[1][k].size()); ++i)
        worst =
            std::max(worst, std::fabs(losses[0][k][i] - losses[1][k][i]) / std::max(std::fabs(losses[0][k][i]), 1e-30));
    std::printf("%s batch %lld, %d thread(s)%s, %lld pairs of %lld-step blocks over %lld instances per mode\n",
                a.model.c_str(), static_cast<long long>(a.batch), a.threads,
                a.amp.empty() ? "" : (", amp " + a.amp).c_str(), static_cast<long long>(a.pairs),
                static_cast<long long>(a.block), static_cast<long long>(K));
    std::printf("median step: %s %.3f ms, %s %.3f ms\n", mode[0].c_str(), Median(ta), mode[1].c_str(), Median(tb));
    std::printf("%s/%s per pair: median %.4f, 95%% interval [%.4f, %.4f]; %s faster in %lld of %lld pairs\n",
                mode[0].c_str(), mode[1].c_str(), Median(ratio), sorted[lo], sorted[hi], mode[1].c_str(),
                static_cast<long long>(b_won), static_cast<long long>(a.pairs));
    if (K > 1) {  // the spread of the instances' own medians shows what is left of their placement luck
      std::printf("median per instance:");
      for (int64_t k = 0; k < K; ++k) {
        std::vector<double> rk;
        for (size_t i = static_cast<size_t>(k); i < ratio.size(); i += static_cast<size_t>(K)) rk.push_back(ratio[i]);
        std::printf(" %.4f", Median(rk));
      }
      std::printf("\n");
    }
    std::printf("losses of the two modes, step by step: largest relative difference %.3g\n", worst);
    // fp32 modes must match to the 1e-5; half precision rounds differently once clusters keep values fp32.
    const double tol = a.amp.empty() ? 1e-5 : 1e-2;
    if (!(worst <= tol)) {
      std::fprintf(stderr, "bench_fuse_ab: the losses of %s and %s differ by %.3g relative (more than %g)\n",
                   mode[0].c_str(), mode[1].c_str(), worst, tol);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fuse_ab: %s\n", e.what());
    return 1;
  }
  return 0;
}
