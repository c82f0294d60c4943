// CPU kernels of the norm/loss backward internal ops (schemas and math in graph/grad/norm_grad.cc):
// SoftmaxGrad, LossGrad, LayerNormGrad, BatchNormGrad. Each loads a row (or the needed inputs) into double,
// computes in double, and stores in the output dtype (float32, float64, float16, bfloat16).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/norm.h"
#include "cpu_ops/row_grad.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/tensor.h"

namespace ot {

namespace {

void RequireFloat(const KernelContext& ctx, int i) {
  if (!DispatchFloat(ctx.in(i).dtype, [](auto) {}))
    ctx.Unsupported("input " + std::to_string(i) + " dtype " + DataTypeName(ctx.in(i).dtype) + " is not supported");
}

// Mixed precision: the data operands of a norm backward (dY and X) share one dtype; a parameter (scale) or saved
// statistic may be that dtype or float32 (the amp pass keeps them fp32 when X is half). Anything else -- a
// bfloat16 X with a float16 scale -- is an error naming the node.
void RequireSameDType(const KernelContext& ctx, int i, int like, const char* what) {
  if (ctx.in(i).dtype != ctx.in(like).dtype)
    ctx.Fail(std::string(what) + " has dtype " + DataTypeName(ctx.in(i).dtype) + ", expected " +
             DataTypeName(ctx.in(like).dtype) + " (X's)");
}
void RequireXTypeOrFloat32(const KernelContext& ctx, int i, const char* what) {
  const DataType t = ctx.in(i).dtype, x = ctx.in(1).dtype;
  if (t != x && t != DataType::kFloat32)
    ctx.Fail(std::string(what) + " has dtype " + DataTypeName(t) + ", expected " + DataTypeName(x) +
             " (X's) or float32");
}

// Loads n elements starting at element `off` of a float buffer of dtype t into out (as double).
void Load(const void* p, DataType t, int64_t off, int64_t n, double* out) {
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    const T* q = static_cast<const T*>(p) + off;
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      // Widened in float tiles (vectorized), then to double.
      float buf[cpu::kHalfTile];
      for (int64_t b = 0; b < n; b += cpu::kHalfTile) {
        const int64_t len = std::min(cpu::kHalfTile, n - b);
        cpu::LoadFloats(q + b, buf, len);
        for (int64_t i = 0; i < len; ++i) out[b + i] = buf[i];
      }
    } else {
      using L = std::conditional_t<std::is_same_v<T, double>, double, float>;
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(static_cast<L>(q[i]));
    }
  });
}

void Store(void* p, DataType t, int64_t off, int64_t n, const double* in) {
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    T* q = static_cast<T*>(p) + off;
    using L = std::conditional_t<std::is_same_v<T, double>, double, float>;
    // Half types: rounded once from the double (a round-to-odd float, cpu_ops/half_convert.h), not double ->
    // float -> half; narrowed in float tiles.
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      float buf[cpu::kHalfTile];
      for (int64_t b = 0; b < n; b += cpu::kHalfTile) {
        const int64_t len = std::min(cpu::kHalfTile, n - b);
        cpu::DoublesToFloatsRoundOdd(in + b, buf, len);
        cpu::StoreFloats(buf, q + b, len);
      }
    } else
      for (int64_t i = 0; i < n; ++i) q[i] = T(static_cast<L>(in[i]));
  });
}

std::vector<double> LoadAll(const void* p, DataType t, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  Load(p, t, 0, n, v.data());
  return v;
}

int64_t Prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p *= d[i];
  return p;
}

// ---- SoftmaxGrad(dY, Y) ----------------------------------------------------------------------------------------

KernelInfo SoftmaxGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloat(ctx, 0);
  RequireFloat(ctx, 1);
  if (ctx.in(0).dims != ctx.in(1).dims) ctx.Fail("dY and Y shapes differ");
  const auto& dims = ctx.in(1).dims;
  const int rank = static_cast<int>(dims.size());
  const int axis = NormalizeAxis(n.attr_int("axis", -1), rank, n.Describe());
  const bool log = n.attr_int("log", 0) != 0, legacy = n.attr_int("legacy", 0) != 0;
  const int64_t outer = Prod(dims, 0, axis);
  const int64_t len = legacy ? Prod(dims, axis, dims.size()) : dims[axis];
  const int64_t inner = legacy ? 1 : Prod(dims, axis + 1, dims.size());
  const DataType tdy = ctx.in(0).dtype, ty = ctx.in(1).dtype, to = ctx.out(0).dtype;
  KernelInfo k;
  if (!log && inner == 1 && tdy == DataType::kFloat32 && ty == DataType::kFloat32 && to == DataType::kFloat32) {
    // float32 rows: cpu_ops/row_grad's parallel, vectorized form of the loop below.
    k.fn = [=](const KernelIO& io) {
      cpu::SoftmaxGradF32(outer, len, io.In<float>(0), io.In<float>(1), io.Out<float>(0));
    };
    return k;
  }
  if (!log && inner == 1 && len <= cpu::kHalfRowChunk && tdy == ty && ty == to &&
      (to == DataType::kFloat16 || to == DataType::kBFloat16)) {
    // Half rows (AMP): the same float rows on widened blocks, rounded once (cpu_ops/row_grad.h).
    k.fn = [=](const KernelIO& io) {
      if (to == DataType::kFloat16)
        cpu::SoftmaxGradHalf(outer, len, io.In<float16>(0), io.In<float16>(1), io.Out<float16>(0));
      else
        cpu::SoftmaxGradHalf(outer, len, io.In<bfloat16>(0), io.In<bfloat16>(1), io.Out<bfloat16>(0));
    };
    return k;
  }
  k.fn = [=](const KernelIO& io) {
    const int64_t blk = len * inner;
    std::vector<double> dy(static_cast<size_t>(blk)), y(static_cast<size_t>(blk)), dx(static_cast<size_t>(blk));
    for (int64_t o = 0; o < outer; ++o) {
      Load(io.in[0], tdy, o * blk, blk, dy.data());
      Load(io.in[1], ty, o * blk, blk, y.data());
      for (int64_t in = 0; in < inner; ++in) {
        double s = 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t i = j * inner + in;
          s += log ? dy[i] : dy[i] * y[i];
        }
        for (int64_t j = 0; j < len; ++j) {
          const int64_t i = j * inner + in;
          dx[i] = log ? dy[i] - std::exp(y[i]) * s : y[i] * (dy[i] - s);
        }
      }
      Store(io.out[0], to, o * blk, blk, dx.data());
    }
  };
  return k;
}

// ---- LossGrad(dLoss, X, labels[, weights]) --------------------------------------------------------------------

KernelInfo LossGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloat(ctx, 0);
  RequireFloat(ctx, 1);
  const DataType it = ctx.in(2).dtype;
  if (it != DataType::kInt32 && it != DataType::kInt64) ctx.Unsupported("target dtype " + DataTypeName(it));
  const bool has_w = ctx.has_input(3);
  if (has_w) RequireFloat(ctx, 3);
  const auto& dims = ctx.in(1).dims;
  if (dims.size() < 2) ctx.Fail("input must have rank >= 2 (N, C, ...)");
  const int64_t N = dims[0], C = dims[1], D = Prod(dims, 2, dims.size());
  if (ctx.in(2).numel() != N * D) ctx.Fail("target does not match the input's shape");
  if (has_w && ctx.in(3).numel() != C) ctx.Fail("weights must have C elements");
  const std::string rs = n.attr_string("reduction", "mean");
  if (rs != "none" && rs != "sum" && rs != "mean") ctx.Fail("unknown reduction '" + rs + "'");
  const bool none = rs == "none", mean = rs == "mean";
  if (none ? ctx.in(0).numel() != N * D : ctx.in(0).numel() != 1) ctx.Fail("dLoss has the wrong number of elements");
  const int64_t ii = n.has_attr("ignore_index") ? n.attr_int("ignore_index", 0) : std::numeric_limits<int64_t>::min();
  const bool softmax = n.attr_int("softmax", 0) != 0;
  const DataType tg = ctx.in(0).dtype, tx = ctx.in(1).dtype, tw = has_w ? ctx.in(3).dtype : DataType::kFloat32,
                 to = ctx.out(0).dtype;
  const std::string what = n.Describe();
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    std::vector<int64_t> t(static_cast<size_t>(N * D));
    for (int64_t i = 0; i < N * D; ++i) t[i] = it == DataType::kInt32 ? io.In<int32_t>(2)[i] : io.In<int64_t>(2)[i];
    std::vector<double> w = has_w ? LoadAll(io.in[3], tw, C) : std::vector<double>(static_cast<size_t>(C), 1.0);
    std::vector<double> g = LoadAll(io.in[0], tg, none ? N * D : 1);
    double wsum = 0;
    for (int64_t i = 0; i < N * D; ++i) {
      if (t[i] == ii) continue;
      if (t[i] < 0 || t[i] >= C)
        throw Error(what + ": target " + std::to_string(t[i]) + " at element " + std::to_string(i) +
                    " is outside [0, " + std::to_string(C) + ")");
      wsum += w[t[i]];
    }
    const double scale = mean ? (wsum != 0 ? 1.0 / wsum : 0.0) : 1.0;
    // Each position's factor f (its class weight times dLoss and the mean's 1/sum; 0 where ignored) for the row
    // kernels of cpu_ops/row_grad.
    auto factors = [&] {
      std::vector<double> f(static_cast<size_t>(N * D));
      for (int64_t i = 0; i < N * D; ++i) f[i] = t[i] == ii ? 0.0 : w[t[i]] * g[none ? i : 0] * scale;
      return f;
    };
    if (softmax && tx == DataType::kFloat32 && to == DataType::kFloat32) {
      // float32 scores: cpu_ops/row_grad's parallel, vectorized form of the loops below.
      const std::vector<double> f = factors();
      if (it == DataType::kInt32)
        cpu::SoftmaxCrossEntropyGradF32(N, C, D, io.In<float>(1), io.In<int32_t>(2), f.data(), io.Out<float>(0));
      else
        cpu::SoftmaxCrossEntropyGradF32(N, C, D, io.In<float>(1), io.In<int64_t>(2), f.data(), io.Out<float>(0));
      return;
    }
    if (softmax && tx == DataType::kFloat32 && D == 1 && (to == DataType::kBFloat16 || to == DataType::kFloat16)) {
      // A half gradient (passes/half_loss_grad.h): each row in float as above, rounded once when stored.
      const std::vector<double> f = factors();
      auto rows = [&](auto htag) {
        using H = decltype(htag);
        if (it == DataType::kInt32)
          cpu::SoftmaxCrossEntropyGradRowsToHalf(N, C, io.In<float>(1), io.In<int32_t>(2), f.data(), io.Out<H>(0));
        else
          cpu::SoftmaxCrossEntropyGradRowsToHalf(N, C, io.In<float>(1), io.In<int64_t>(2), f.data(), io.Out<H>(0));
      };
      if (to == DataType::kBFloat16)
        rows(bfloat16{});
      else
        rows(float16{});
      return;
    }
    const int64_t blk = C * D;
    std::vector<double> x(static_cast<size_t>(blk)), dx(static_cast<size_t>(blk));
    for (int64_t b = 0; b < N; ++b) {
      if (softmax) {
        Load(io.in[1], tx, b * blk, blk, x.data());
        for (int64_t d = 0; d < D; ++d) {
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t c = 0; c < C; ++c) m = std::max(m, x[c * D + d]);
          double s = 0;
          for (int64_t c = 0; c < C; ++c) s += (x[c * D + d] = std::exp(x[c * D + d] - m));
          for (int64_t c = 0; c < C; ++c) x[c * D + d] /= s;
        }
      }
      for (int64_t d = 0; d < D; ++d) {
        const int64_t tt = t[b * D + d];
        const double f = tt == ii ? 0.0 : w[tt] * g[none ? b * D + d : 0] * scale;
        for (int64_t c = 0; c < C; ++c) {
          const double onehot = c == tt ? 1.0 : 0.0;
          dx[c * D + d] = f == 0.0 ? 0.0 : (softmax ? x[c * D + d] - onehot : -onehot) * f;
        }
      }
      Store(io.out[0], to, b * blk, blk, dx.data());
    }
  };
  return k;
}

// ---- Shared backward of a normalization over groups ------------------------------------------------------------
// For each group (a set of `cnt` elements with statistics mu, r = 1/sqrt(var + eps)), xhat = (x - mu) r,
// g = dy * s: dx = r (g - mean(g) - xhat mean(g xhat)).

// ---- LayerNormGrad(dY, X, Scale[, Mean, InvStdDev][, G]) -> dX, dScale, dB --------------------------------------
// With the forward's saved Mean and InvStdDev (float32, one per row: LayerNormalization's outputs 1 and 2) the
// statistics are read instead of recomputed from X. G (input 5, float32 only): the residual fold of
// passes/fuse_residual_norm.h, dX = (the gradient, rounded) + G, as Sum adds them.

KernelInfo LayerNormGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  for (int i = 0; i < 3; ++i) RequireFloat(ctx, i);
  RequireSameDType(ctx, 0, 1, "dY");
  RequireXTypeOrFloat32(ctx, 2, "Scale");
  const auto& dims = ctx.in(1).dims;
  const int rank = static_cast<int>(dims.size());
  const int axis = NormalizeAxis(n.attr_int("axis", -1), rank, n.Describe());
  const int64_t rows = Prod(dims, 0, axis), cols = Prod(dims, axis, dims.size());
  if (ctx.in(0).dims != dims) ctx.Fail("dY and X shapes differ");
  const bool saved = ctx.has_input(3) || ctx.has_input(4);
  if (saved) {
    if (!ctx.has_input(3) || !ctx.has_input(4)) ctx.Fail("Mean and InvStdDev must be given together");
    for (int i = 3; i < 5; ++i) {
      if (ctx.in(i).dtype != DataType::kFloat32 && ctx.in(i).dtype != DataType::kFloat64)
        ctx.Fail(std::string(i == 3 ? "Mean" : "InvStdDev") + " must be float32 (the forward's statistics), got " +
                 DataTypeName(ctx.in(i).dtype));
      if (ctx.in(i).numel() != rows)
        ctx.Fail(std::string(i == 3 ? "Mean" : "InvStdDev") + " has " + std::to_string(ctx.in(i).numel()) +
                 " elements, expected " + std::to_string(rows) + " (one per normalized row)");
    }
  }
  const bool addend = ctx.has_input(5);
  const DataType tmean = saved ? ctx.in(3).dtype : DataType::kFloat32, tinv = saved ? ctx.in(4).dtype : tmean;
  // sidx[j]: the Scale element of normalized element j (Scale broadcast, numpy-style, to X.shape[axis:]).
  const std::vector<int64_t> nd(dims.begin() + axis, dims.end()), pd = ctx.in(2).dims;
  if (pd.size() > nd.size()) ctx.Fail("Scale has more dims than the normalized shape");
  std::vector<int64_t> sidx(static_cast<size_t>(cols));
  {
    const size_t off = nd.size() - pd.size();
    std::vector<int64_t> st(nd.size(), 0);
    int64_t stride = 1;
    for (size_t i = pd.size(); i-- > 0;) {
      if (pd[i] != 1 && pd[i] != nd[off + i]) ctx.Fail("Scale does not broadcast to the normalized shape");
      st[off + i] = pd[i] == 1 ? 0 : stride;
      stride *= pd[i];
    }
    for (int64_t j = 0; j < cols; ++j) {
      int64_t rem = j, k = 0;
      for (size_t d = nd.size(); d-- > 0;) {
        k += (rem % nd[d]) * st[d];
        rem /= nd[d];
      }
      sidx[j] = k;
    }
  }
  const int64_t scount = ctx.in(2).numel();
  const double eps = n.attr_float("epsilon", 1e-5f);
  const DataType tdy = ctx.in(0).dtype, tx = ctx.in(1).dtype, ts = ctx.in(2).dtype;
  const bool o1 = ctx.has_output(1), o2 = ctx.has_output(2);
  const DataType t0 = ctx.out(0).dtype, t1 = o1 ? ctx.out(1).dtype : ts, t2 = o2 ? ctx.out(2).dtype : ts;
  const bool stats32 = !saved || (tmean == DataType::kFloat32 && tinv == DataType::kFloat32);
  const bool fast = tdy == DataType::kFloat32 && tx == DataType::kFloat32 && t0 == DataType::kFloat32 && stats32;
  if (addend && (!fast || ctx.in(5).dtype != DataType::kFloat32 || ctx.in(5).dims != dims))
    ctx.Fail("G (input 5) needs float32 dY, X, dX and statistics, and G of X's shape");
  // Half rows (AMP): the float rows on widened blocks, dX rounded once (cpu_ops/row_grad.h).
  const bool half = tdy == tx && tx == t0 && (t0 == DataType::kFloat16 || t0 == DataType::kBFloat16) && stats32 &&
                    cols <= cpu::kHalfRowChunk;
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    std::vector<double> sp = LoadAll(io.in[2], ts, scount), s(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) s[j] = sp[sidx[j]];
    std::vector<double> ds(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
    if (fast) {
      // float32 rows: cpu_ops/row_grad's parallel, vectorized form of the loop below.
      cpu::LayerNormGradF32(rows, cols, io.In<float>(0), io.In<float>(1), s.data(), saved ? io.In<float>(3) : nullptr,
                            saved ? io.In<float>(4) : nullptr, eps, io.Out<float>(0), ds.data(), db.data(),
                            addend ? io.In<float>(5) : nullptr);
      if (o1) Store(io.out[1], t1, 0, cols, ds.data());
      if (o2) Store(io.out[2], t2, 0, cols, db.data());
      return;
    }
    if (half) {
      auto run = [&](auto tag) {
        using T = decltype(tag);
        cpu::LayerNormGradHalf(rows, cols, io.In<T>(0), io.In<T>(1), s.data(), saved ? io.In<float>(3) : nullptr,
                               saved ? io.In<float>(4) : nullptr, eps, io.Out<T>(0), ds.data(), db.data());
      };
      if (t0 == DataType::kFloat16)
        run(float16{});
      else
        run(bfloat16{});
      if (o1) Store(io.out[1], t1, 0, cols, ds.data());
      if (o2) Store(io.out[2], t2, 0, cols, db.data());
      return;
    }
    std::vector<double> x(static_cast<size_t>(cols)), dy(static_cast<size_t>(cols)), dx(static_cast<size_t>(cols));
    for (int64_t row = 0; row < rows; ++row) {
      Load(io.in[1], tx, row * cols, cols, x.data());
      Load(io.in[0], tdy, row * cols, cols, dy.data());
      double mu = 0, r = 0;
      if (saved) {
        Load(io.in[3], tmean, row, 1, &mu);
        Load(io.in[4], tinv, row, 1, &r);
      } else {
        for (int64_t j = 0; j < cols; ++j) mu += x[j];
        mu /= static_cast<double>(cols);
        double var = 0;
        for (int64_t j = 0; j < cols; ++j) var += (x[j] - mu) * (x[j] - mu);
        var /= static_cast<double>(cols);
        r = 1.0 / std::sqrt(var + eps);
      }
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double xh = (x[j] - mu) * r, g = dy[j] * s[j];
        x[j] = xh;
        mg += g;
        mgx += g * xh;
        ds[j] += dy[j] * xh;
        db[j] += dy[j];
      }
      mg /= static_cast<double>(cols);
      mgx /= static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j) dx[j] = r * (dy[j] * s[j] - mg - x[j] * mgx);
      Store(io.out[0], t0, row * cols, cols, dx.data());
    }
    if (o1) Store(io.out[1], t1, 0, cols, ds.data());
    if (o2) Store(io.out[2], t2, 0, cols, db.data());
  };
  if (addend) AllowInPlace(k, ctx, 0, 5);  // each row's G[j] is read where its dX[j] is written
  return k;
}

// ---- BatchNormGrad(dY, X, scale[, mean, var][, R]) {relu} -> dX, dScale, dB[, dX_sum] -------------------------
// Folds of passes/fuse_batch_norm.h: relu = 1: dY is the gradient of R = Relu(BN(X)) (input 5), masked as ReluGrad
// does; output 3: dX summed per channel (a convolution's bias gradient), as ReduceSum sums it.

KernelInfo BatchNormGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const bool training = n.attr_int("training", 1) != 0;
  const bool relu = n.attr_int("relu", 0) != 0;
  if (relu && !ctx.has_input(5)) ctx.Fail("relu = 1 needs Relu's output R as input 5");
  if (relu && (ctx.in(5).dims != ctx.in(1).dims || ctx.in(5).dtype != ctx.in(0).dtype))
    ctx.Fail("R (input 5) must have dY's dtype and X's shape");
  const bool o3 = ctx.has_output(3);
  for (int i = 0; i < (training ? 3 : 5); ++i) RequireFloat(ctx, i);
  RequireSameDType(ctx, 0, 1, "dY");
  RequireXTypeOrFloat32(ctx, 2, "scale");
  if (!training) {
    RequireXTypeOrFloat32(ctx, 3, "mean");
    RequireXTypeOrFloat32(ctx, 4, "var");
  }
  const auto& dims = ctx.in(1).dims;
  if (dims.size() < 2) ctx.Fail("X must have rank >= 2 (N, C, ...)");
  if (ctx.in(0).dims != dims) ctx.Fail("dY and X shapes differ");
  // channels_last = 1: X, dY [N, spatial..., C] (cpu::BatchNormGradLast), no dX-sum output.
  const bool last = n.attr_int("channels_last", 0) != 0;
  const int64_t N = dims[0], C = last ? dims.back() : dims[1];
  const int64_t S = last ? Prod(dims, 1, dims.size() - 1) : Prod(dims, 2, dims.size());
  for (int i = 2; i < (training ? 3 : 5); ++i)
    if (ctx.in(i).numel() != C) ctx.Fail("input " + std::to_string(i) + " must have C elements");
  const double eps = n.attr_float("epsilon", 1e-5f);
  const DataType tx = ctx.in(1).dtype, ts = ctx.in(2).dtype;
  const DataType tm = training ? ts : ctx.in(3).dtype, tv = training ? ts : ctx.in(4).dtype;
  const bool o1 = ctx.has_output(1), o2 = ctx.has_output(2);
  const DataType t0 = ctx.out(0).dtype, t1 = o1 ? ctx.out(1).dtype : ts, t2 = o2 ? ctx.out(2).dtype : ts;
  if (t0 != tx) ctx.Fail("dX has dtype " + DataTypeName(t0) + ", expected X's (" + DataTypeName(tx) + ")");
  const bool half = tx == DataType::kFloat16 || tx == DataType::kBFloat16;
  if (o3 && half) ctx.Fail("the dX-sum output (3) needs float32 or float64 dY, X and dX");
  if (o3 && last) ctx.Fail("the dX-sum output (3) is not made for channels_last");
  if (o3 && ctx.out(3).numel() != C) ctx.Fail("the dX-sum output (3) must have C elements");
  const DataType t3 = o3 ? ctx.out(3).dtype : tx;
  KernelInfo k;
  // cpu::BatchNormGrad reads the planes in place (half planes widened to float), one task per channel in a fixed
  // order: deterministic. The per-channel parameters and results pass through double.
  k.fn = [=](const KernelIO& io) {
    const std::vector<double> s = LoadAll(io.in[2], ts, C);
    std::vector<double> mu_in, var_in;
    if (!training) {
      mu_in = LoadAll(io.in[3], tm, C);
      var_in = LoadAll(io.in[4], tv, C);
    }
    std::vector<double> db(static_cast<size_t>(C), 0.0), ds(static_cast<size_t>(C), 0.0), dsum;
    if (o3) dsum.assign(static_cast<size_t>(C), 0.0);
    DispatchFloat(tx, [&](auto tag) {
      using T = decltype(tag);
      if (last)
        cpu::BatchNormGradLast<T>(N * S, C, static_cast<const T*>(io.in[0]), static_cast<const T*>(io.in[1]), s.data(),
                                  training ? nullptr : mu_in.data(), training ? nullptr : var_in.data(), eps,
                                  static_cast<T*>(io.out[0]), ds.data(), db.data(),
                                  relu ? static_cast<const T*>(io.in[5]) : nullptr);
      else
        cpu::BatchNormGrad<T>(N, C, S, static_cast<const T*>(io.in[0]), static_cast<const T*>(io.in[1]), s.data(),
                              training ? nullptr : mu_in.data(), training ? nullptr : var_in.data(), eps,
                              static_cast<T*>(io.out[0]), ds.data(), db.data(),
                              relu ? static_cast<const T*>(io.in[5]) : nullptr, o3 ? dsum.data() : nullptr);
    });
    if (o1) Store(io.out[1], t1, 0, C, ds.data());
    if (o2) Store(io.out[2], t2, 0, C, db.data());
    if (o3) Store(io.out[3], t3, 0, C, dsum.data());
  };
  return k;
}

}  // namespace

void RegisterNormGradKernels(KernelRegistry& r) {
  r.Register("SoftmaxGrad", SoftmaxGradKernel, kInternalDomain);
  r.Register("LossGrad", LossGradKernel, kInternalDomain);
  r.Register("LayerNormGrad", LayerNormGradKernel, kInternalDomain);
  r.Register("BatchNormGrad", BatchNormGradKernel, kInternalDomain);
}

}  // namespace ot
