#include "executor/kernels/sharded_optim.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "dist/comm.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "kernel_common/half.h"

namespace ot {

ShardedUpdate ShardedUpdate::Make(const KernelContext& ctx, const OptimizerHyperparams& a, const cpu::OptimHyper& h) {
  ShardedUpdate u;
  u.l = OptimizerLayout::Of(ctx.node);
  u.a = a;
  u.h = h;
  const OptimizerLayout& l = u.l;
  if (h.kind == cpu::OptimKind::kLamb) ctx.Unsupported("a sharded LAMB update");
  for (int i = 0; i < l.n; ++i) {
    const bool whole = ctx.node.has_input(l.param_in(i));
    if (!whole && !l.shard_master) ctx.Fail("parameter " + std::to_string(i) + " has no input");
    const int from = whole ? l.param_in(i) : l.grad_in(i);  // a gradient is shaped as its parameter
    if (ctx.in(from).dtype != DataType::kFloat32)
      ctx.Unsupported("a sharded update of " + DataTypeName(ctx.in(from).dtype) + " parameters");
    u.numel.push_back(ctx.in(from).numel());
    u.whole.push_back(whole);
  }
  try {
    u.shards = OptimizerShards(static_cast<int>(l.shard_world), l.shard_groups, u.numel);
  } catch (const Error& e) {
    ctx.Fail(e.what());
  }
  for (int j = 0; j < l.k; ++j)
    if (ctx.in(l.state_in(j, 0)).numel() != u.shards.size())
      ctx.Fail("sharded state " + std::to_string(j) + " holds " + std::to_string(ctx.in(l.state_in(j, 0)).numel()) +
               " values, the shard " + std::to_string(u.shards.size()));
  if (l.shard_master && ctx.in(l.master_in()).numel() != u.shards.size())
    ctx.Fail("the master shard holds " + std::to_string(ctx.in(l.master_in()).numel()) + " values, the shard " +
             std::to_string(u.shards.size()));
  for (int r = 0; r < u.shards.world(); ++r) u.slices.push_back(u.shards.Slices(r));
  u.half.assign(l.n, cpu::HalfKind::kNone);
  u.half_slot.assign(l.n, -1);
  for (int j = 0; j < l.m(); ++j) {
    const int64_t i = l.half_params[j];
    if (i < 0 || i >= l.n) ctx.Fail("half_params[" + std::to_string(j) + "] is out of range");
    u.half[i] =
        l.half_dtype == static_cast<int64_t>(DataType::kBFloat16) ? cpu::HalfKind::kBFloat16 : cpu::HalfKind::kFloat16;
    u.half_slot[i] = l.half_out(j);
  }
  for (int i = 0; i < l.n; ++i)
    if (!u.whole[i] && u.half_slot[i] < 0)
      ctx.Fail("parameter " + std::to_string(i) + " is only in the master shard but has no half copy");
  u.lr_f64 = ctx.in(0).dtype == DataType::kFloat64;
  return u;
}

// The workspace: the all-gather's blocks (of the largest group), then (accumulating) the ranks' summed gradients.
size_t ShardedUpdate::gather_bytes() const {
  int64_t largest = 0;
  for (size_t g = 0; g < shards.groups().size(); ++g) largest = std::max(largest, shards.block(g));
  return (static_cast<size_t>(largest * shards.world()) * 4 + 63) / 64 * 64;
}

size_t ShardedUpdate::workspace_bytes() const {
  int64_t total = 0;
  for (int64_t n : numel) total += n;
  return gather_bytes() + (l.accumulating() ? static_cast<size_t>(total) * 4 : 0);
}

namespace {

void CopyIfOther(void* dst, const void* src, size_t bytes) {
  if (dst && src && dst != src && bytes) std::memcpy(dst, src, bytes);
}

}  // namespace

void ShardedUpdate::Gather(const KernelIO& io, int rank, float* blocks) const {
  dist::Comm& world = dist::World();
  const int W = shards.world();
  const bool master = l.shard_master;
  float* m_out = master ? static_cast<float*>(io.out[l.master_out()]) : nullptr;
  auto p_out = [&](int i) { return static_cast<float*>(io.out[l.param_out(i)]); };
  // Block q of `blocks` is rank q's part of the group.
  for (size_t g = 0; g < shards.groups().size(); ++g) {
    const int64_t C = shards.block(g), at = shards.block_at(g);
    for (const ShardSlice& s : slices[rank])
      if (s.group == static_cast<int>(g))
        std::memcpy(blocks + rank * C + (s.at - at), master ? m_out + s.at : p_out(s.param) + s.offset,
                    static_cast<size_t>(s.len) * 4);
    world.AllGatherBlocks(blocks, C);
    for (int q = 0; q < W; ++q)
      for (const ShardSlice& s : slices[q]) {
        if (s.group != static_cast<int>(g)) continue;
        const float* src = blocks + q * C + (s.at - at);
        if (whole[s.param]) {
          if ((q != rank || master) && p_out(s.param))
            std::memcpy(p_out(s.param) + s.offset, src, static_cast<size_t>(s.len) * 4);
        } else if (void* h = io.out[half_slot[s.param]]) {  // only its half copy is whole
          uint16_t* hp = static_cast<uint16_t*>(h) + s.offset;
          if (half[s.param] == cpu::HalfKind::kBFloat16)
            for (int64_t e = 0; e < s.len; ++e) hp[e] = FloatToBf16Bits(src[e]);
          else
            for (int64_t e = 0; e < s.len; ++e) hp[e] = FloatToHalfBits(src[e]);
        }
      }
  }
}

void ShardedUpdate::Run(const KernelIO& io) const {
  dist::Comm& world = dist::World();
  const int W = shards.world();
  if (world.size() != W)
    throw Error("OptimizerUpdate: the optimizer was sharded over " + std::to_string(W) + " ranks, this job has " +
                std::to_string(world.size()));
  const int rank = world.rank();
  const int n = l.n, k = l.k;
  const bool master = l.shard_master;
  const double base_lr = lr_f64 ? *io.In<double>(0) : static_cast<double>(*io.In<float>(0));
  const int64_t step = *io.In<int64_t>(1);
  const double lr = base_lr * LrScheduleFactor(a.lr_schedule, step, a.warmup, a.total_steps);
  float scale = 1.f;
  double gs = 1.0;
  if (l.scaling()) {
    scale = *io.In<float>(l.scale_in());
    gs = 1.0 / static_cast<double>(scale);
  }
  const int64_t micro = l.accumulating() ? *io.In<int64_t>(l.micro_in()) : 0;
  const bool last = !l.accumulating() || micro == l.accumulate - 1;
  const size_t state_bytes = static_cast<size_t>(shards.size()) * 4;
  for (int j = 0; j < k; ++j) CopyIfOther(io.out[l.state_out(j, 0)], io.in[l.state_in(j, 0)], state_bytes);
  if (master) CopyIfOther(io.out[l.master_out()], io.in[l.master_in()], state_bytes);
  // Where this rank's slice s of the parameters is read and written: the master shard, or the whole parameter.
  auto p_in = [&](const ShardSlice& s) {
    return master ? io.In<float>(l.master_in()) + s.at : io.In<float>(l.param_in(s.param)) + s.offset;
  };
  auto p_at = [&](const ShardSlice& s) {
    return master ? static_cast<float*>(io.out[l.master_out()]) + s.at
                  : static_cast<float*>(io.out[l.param_out(s.param)]) + s.offset;
  };
  uint8_t* ws = static_cast<uint8_t*>(io.workspace);
  std::vector<uint8_t> own;
  if (!ws) {
    own.resize(workspace_bytes());
    ws = own.data();
  }
  float* blocks = reinterpret_cast<float*>(ws);
  cpu::OptimResult r;
  double param_sq = 0, zeros = 0, elems = 0;
  if (!last) {
    // A micro-step that accumulates: every rank sums its whole gradients (the ranks' sums meet at the K-th).
    for (int i = 0; i < n; ++i) {
      const float* g = io.In<float>(l.grad_in(i));
      const float* acc = io.In<float>(l.acc_in(i));
      float* acc_out = static_cast<float*>(io.out[l.acc_out(i)]);
      for (int64_t e = 0; e < numel[i]; ++e) {
        zeros += g[e] == 0.f;
        acc_out[e] = static_cast<float>(acc[e] + static_cast<double>(g[e]) * gs);
      }
      elems += static_cast<double>(numel[i]);
      if (whole[i]) CopyIfOther(io.out[l.param_out(i)], io.in[l.param_in(i)], static_cast<size_t>(numel[i]) * 4);
    }
    // The half copies are outputs of every call: those of parameters only in the master shard need its gathering.
    if (master) Gather(io, rank, blocks);
    r.applied = false;
    r.step = step;
    r.micro = micro + 1;
  } else {
    // The gradients this rank's slices read: the reduce-scattered means (only this rank's blocks hold them), or,
    // accumulating, the ranks' mean of the sums (all-reduced whole, in the workspace after the gather's blocks).
    std::vector<const float*> grads(n);
    for (int i = 0; i < n; ++i) grads[i] = io.In<float>(l.grad_in(i));
    if (l.accumulating()) {
      float* sums = reinterpret_cast<float*>(ws + gather_bytes());
      int64_t o = 0;
      for (int i = 0; i < n; ++i) {
        const float* g = grads[i];
        const float* acc = io.In<float>(l.acc_in(i));
        for (int64_t e = 0; e < numel[i]; ++e)
          sums[o + e] = static_cast<float>(acc[e] + static_cast<double>(g[e]) * gs);
        std::memset(io.out[l.acc_out(i)], 0, static_cast<size_t>(numel[i]) * 4);
        grads[i] = sums + o;
        o += numel[i];
      }
      world.AllReduceSum(sums, o);
      const double inv = 1.0 / (static_cast<double>(W) * static_cast<double>(l.accumulate));
      for (int64_t e = 0; e < o; ++e) sums[e] = static_cast<float>(static_cast<double>(sums[e]) * inv);
      gs = 1.0;
    }
    std::vector<cpu::OptimTensor> ts;
    for (const ShardSlice& s : slices[rank]) {
      cpu::OptimTensor t;
      t.n = s.len;
      t.p = p_in(s);
      t.g = grads[s.param] + s.offset;
      t.p_out = p_at(s);
      if (k >= 1) {
        t.s0 = io.In<float>(l.state_in(0, 0)) + s.at;
        t.s0_out = static_cast<float*>(io.out[l.state_out(0, 0)]) + s.at;
      }
      if (k >= 2) {
        t.s1 = io.In<float>(l.state_in(1, 0)) + s.at;
        t.s1_out = static_cast<float*>(io.out[l.state_out(1, 0)]) + s.at;
      }
      ts.push_back(t);
    }
    cpu::OptimStepOptions x;
    x.grad_scale = gs;
    x.stats = l.stats;
    x.reduce = [&world](double* v, int count) { world.AllReduceSum(v, count); };
    r = cpu::MultiTensorUpdate(h, lr, step, ts, 1, 0, x);
    Gather(io, rank, blocks);
    r.micro = 0;
  }
  // Half copies of whole parameters and, on a micro-step, the parameter norm: the same on every rank.
  for (int i = 0; i < n; ++i) {
    if (!whole[i]) continue;
    const float* p = static_cast<const float*>(io.out[l.param_out(i)]);
    if (half_slot[i] >= 0 && io.out[half_slot[i]]) {
      uint16_t* hp = static_cast<uint16_t*>(io.out[half_slot[i]]);
      if (half[i] == cpu::HalfKind::kBFloat16)
        for (int64_t e = 0; e < numel[i]; ++e) hp[e] = FloatToBf16Bits(p[e]);
      else
        for (int64_t e = 0; e < numel[i]; ++e) hp[e] = FloatToHalfBits(p[e]);
    }
    if (l.stats && !last && !master)
      for (int64_t e = 0; e < numel[i]; ++e) param_sq += static_cast<double>(p[e]) * p[e];
  }
  if (l.stats && !last && master) {  // each rank's slices, summed over the ranks
    for (const ShardSlice& s : slices[rank]) {
      const float* p = p_at(s);
      for (int64_t e = 0; e < s.len; ++e) param_sq += static_cast<double>(p[e]) * p[e];
    }
    world.AllReduceSum(&param_sq, 1);
  }
  if (l.accumulating() && io.out[l.micro_out()]) *io.Out<int64_t>(l.micro_out()) = r.micro;
  const int base = l.step_out();
  if (io.out[base]) *io.Out<int64_t>(base) = r.step;
  if (io.out[base + 1])
    *io.Out<float>(base + 1) = r.applied ? static_cast<float>(r.grad_norm) : std::numeric_limits<float>::quiet_NaN();
  if (io.out[base + 2]) *io.Out<bool>(base + 2) = r.skipped;
  if (l.scaling()) {
    int64_t good = *io.In<int64_t>(l.scale_in() + 1), bad = *io.In<int64_t>(l.scale_in() + 2);
    if (l.loss_scaling == "dynamic" && r.applied)
      LossScaleUpdate<float>(!r.skipped, scale, good, bad, a.growth_factor, a.backoff_factor, a.growth_interval,
                             a.overflows_to_backoff, a.min_scale);
    if (io.out[l.scale_out()]) *io.Out<float>(l.scale_out()) = scale;
    if (io.out[l.scale_out() + 1]) *io.Out<int64_t>(l.scale_out() + 1) = good;
    if (io.out[l.scale_out() + 2]) *io.Out<int64_t>(l.scale_out() + 2) = bad;
  }
  if (l.stats) {
    if (!last) {
      r.param_norm = std::sqrt(param_sq);
      r.zero_fraction = elems > 0 ? zeros / elems : 0.0;
    }
    if (io.out[l.param_norm_out()]) *io.Out<float>(l.param_norm_out()) = static_cast<float>(r.param_norm);
    if (io.out[l.zero_fraction_out()]) *io.Out<float>(l.zero_fraction_out()) = static_cast<float>(r.zero_fraction);
  }
}

}  // namespace ot
