// CPU kernel factories of the norm family: Softmax/LogSoftmax/Hardmax, BatchNormalization, LayerNormalization,
// InstanceNormalization, MeanVarianceNormalization, LpNormalization, NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss.
#include "cpu_ops/norm.h"

#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/loss.h"
#include "cpu_ops/softmax.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "graph/infer_util.h"

namespace ot {

namespace {

void RequireFloatInput(const KernelContext& ctx, int i) {
  if (!DispatchFloat(ctx.in(i).dtype, [](auto) {}))
    ctx.Unsupported("input " + std::to_string(i) + " dtype " + DataTypeName(ctx.in(i).dtype) + " is not supported");
}

void LoadDoubles(const void* p, DataType t, int64_t n, double* out) {
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    const T* q = static_cast<const T*>(p);
    using L = std::conditional_t<std::is_same_v<T, double>, double, float>;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(static_cast<L>(q[i]));
  });
}

void StoreDoubles(void* p, DataType t, int64_t n, const double* in) {
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    T* q = static_cast<T*>(p);
    using L = std::conditional_t<std::is_same_v<T, double>, double, float>;
    // Half types: rounded once from the double (cpu_ops/half_convert.h), not double -> float -> half.
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
      for (int64_t i = 0; i < n; ++i) q[i] = cpu::HalfFromDouble<T>(in[i]);
    else
      for (int64_t i = 0; i < n; ++i) q[i] = T(static_cast<L>(in[i]));
  });
}

int64_t Prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p *= d[i];
  return p;
}

// ---- Softmax / LogSoftmax / Hardmax -------------------------------------------------------------------------

KernelInfo MakeSoftmax(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloatInput(ctx, 0);
  const cpu::SoftmaxKind kind = n.op_type == "Softmax"      ? cpu::SoftmaxKind::kSoftmax
                                : n.op_type == "LogSoftmax" ? cpu::SoftmaxKind::kLogSoftmax
                                                            : cpu::SoftmaxKind::kHardmax;
  const auto& dims = ctx.in(0).dims;
  const int rank = static_cast<int>(dims.size());
  int64_t outer, len, inner;
  if (n.opset < 13) {
    // Coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] and normalised over each row.
    const int64_t a = n.attr_int("axis", 1);
    const int axis = a == rank ? rank : NormalizeAxis(a, rank, n.Describe());
    outer = Prod(dims, 0, axis);
    len = Prod(dims, axis, dims.size());
    inner = 1;
  } else {
    if (rank == 0) ctx.Fail("input must have rank >= 1");
    const int axis = NormalizeAxis(n.attr_int("axis", -1), rank, n.Describe());
    outer = Prod(dims, 0, axis);
    len = dims[axis];
    inner = Prod(dims, axis + 1, dims.size());
  }
  const DataType dt = ctx.in(0).dtype;
  return {[=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::Softmax<T>(kind, outer, len, inner, io.In<T>(0), io.Out<T>(0));
    });
  }};
}

// ---- BatchNormalization -------------------------------------------------------------------------------------

KernelInfo MakeBatchNorm(const KernelContext& ctx) {
  const Node& n = ctx.node;
  for (int i = 0; i < 5; ++i) RequireFloatInput(ctx, i);
  const auto& dims = ctx.in(0).dims;
  if (dims.size() < 2) ctx.Fail("X must have rank >= 2 (N, C, ...)");
  const double eps = n.attr_float("epsilon", 1e-5f);
  const double momentum = n.attr_float("momentum", 0.9f);
  // ai.onnxtrain.BatchNormRelu (passes/fuse_batch_norm.h): Relu(BatchNormalization) in one pass, its mode in
  // training_mode whatever the opset.
  const bool relu = n.domain == kInternalDomain && n.op_type == "BatchNormRelu";
  bool training;
  if (relu) {
    training = n.attr_int("training_mode", 0) != 0;
  } else if (n.opset >= 14) {
    training = n.attr_int("training_mode", 0) != 0;
  } else if (n.opset >= 7) {
    training = ctx.has_output(1) || ctx.has_output(2) || ctx.has_output(3) || ctx.has_output(4);
  } else {
    training = n.attr_int("is_test", 0) == 0;
  }
  if (ctx.has_output(3) || ctx.has_output(4))
    ctx.Unsupported("the saved_mean/saved_var outputs of BatchNormalization before opset 14");
  if ((n.opset >= 14 || relu) && !training && (ctx.has_output(1) || ctx.has_output(2)))
    ctx.Fail("running_mean/running_var outputs require training_mode = 1");
  // spatial = 0 (opsets 6-8): one statistic per (c, d1, ...): fold the spatial dims into the channels.
  const bool spatial = n.opset >= 9 || relu || n.attr_int("spatial", 1) != 0;
  // channels_last = 1 (the channels_last pass): X [N, spatial..., C], normalised as N*S rows of C channels.
  const bool last = n.attr_int("channels_last", 0) != 0;
  if (last && !spatial) ctx.Fail("channels_last with spatial = 0");
  const int64_t N = dims[0];
  int64_t C = last ? dims.back() : dims[1], S = last ? Prod(dims, 1, dims.size() - 1) : Prod(dims, 2, dims.size());
  if (!spatial) {
    C *= S;
    S = 1;
  }
  for (int i = 1; i < 5; ++i)
    if (ctx.in(i).numel() != C)
      ctx.Fail("input " + std::to_string(i) + " has " + std::to_string(ctx.in(i).numel()) + " elements, expected " +
               std::to_string(C));
  const DataType dt = ctx.in(0).dtype;
  std::vector<DataType> pt;
  for (int i = 1; i < 5; ++i) pt.push_back(ctx.in(i).dtype);
  const bool out_mean = ctx.has_output(1), out_var = ctx.has_output(2);
  const DataType mt = out_mean ? ctx.out(1).dtype : DataType::kFloat32;
  const DataType vt = out_var ? ctx.out(2).dtype : DataType::kFloat32;
  return {[=](const KernelIO& io) {
    std::vector<double> p(4 * C);
    for (int i = 0; i < 4; ++i) LoadDoubles(io.in[i + 1], pt[i], C, p.data() + i * C);
    const double *scale = p.data(), *bias = p.data() + C, *rmean = p.data() + 2 * C, *rvar = p.data() + 3 * C;
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      auto apply = [&](const double* m, const double* v) {
        if (last)
          cpu::BatchNormApplyLast<T>(N * S, C, io.In<T>(0), scale, bias, m, v, eps, io.Out<T>(0), relu);
        else
          cpu::BatchNormApply<T>(N, C, S, io.In<T>(0), scale, bias, m, v, eps, io.Out<T>(0), relu);
      };
      if (!training) {
        apply(rmean, rvar);
        return;
      }
      std::vector<double> bm(C), bv(C);
      if (last)
        cpu::ChannelMomentsLast<T>(N * S, C, io.In<T>(0), bm.data(), bv.data());
      else
        cpu::ChannelMoments<T>(N, C, S, io.In<T>(0), bm.data(), bv.data());
      apply(bm.data(), bv.data());
      // Running statistics: momentum * running + (1 - momentum) * batch (the batch variance is biased, as in
      // the ONNX reference).
      std::vector<double> o(C);
      if (out_mean) {
        for (int64_t c = 0; c < C; ++c) o[c] = momentum * rmean[c] + (1 - momentum) * bm[c];
        StoreDoubles(io.out[1], mt, C, o.data());
      }
      if (out_var) {
        for (int64_t c = 0; c < C; ++c) o[c] = momentum * rvar[c] + (1 - momentum) * bv[c];
        StoreDoubles(io.out[2], vt, C, o.data());
      }
    });
  }};
}

// ---- LayerNormalization -------------------------------------------------------------------------------------

// For each element of the normalized dims `nd`, the element of a parameter of dims `pd` (right-aligned,
// broadcast); empty when the parameter already has the normalized shape.
std::vector<int64_t> ParamIndex(const KernelContext& ctx, const std::vector<int64_t>& nd,
                                const std::vector<int64_t>& pd) {
  const int64_t cols = Prod(nd, 0, nd.size());
  if (NumElements(pd) == cols && (pd.size() <= nd.size())) {
    bool same = true;
    for (size_t i = 0; i < pd.size(); ++i) same &= pd[pd.size() - 1 - i] == nd[nd.size() - 1 - i];
    if (same) return {};
  }
  if (pd.size() > nd.size()) ctx.Fail("Scale/B has more dims than the normalized shape");
  const size_t off = nd.size() - pd.size();
  std::vector<int64_t> st(nd.size(), 0);
  int64_t s = 1;
  for (size_t i = pd.size(); i-- > 0;) {
    if (pd[i] != 1 && pd[i] != nd[off + i]) ctx.Fail("Scale/B does not broadcast to the normalized shape");
    st[off + i] = pd[i] == 1 ? 0 : s;
    s *= pd[i];
  }
  std::vector<int64_t> idx(cols);
  for (int64_t j = 0; j < cols; ++j) {
    int64_t r = j, k = 0;
    for (size_t d = nd.size(); d-- > 0;) {
      k += (r % nd[d]) * st[d];
      r /= nd[d];
    }
    idx[j] = k;
  }
  return idx;
}

KernelInfo MakeLayerNorm(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloatInput(ctx, 0);
  const DataType dt = ctx.in(0).dtype;
  if (ctx.in(1).dtype != dt || (ctx.has_input(2) && ctx.in(2).dtype != dt))
    ctx.Unsupported("Scale/B of a dtype other than X's");
  if (n.attr_int("stash_type", 1) != 1) ctx.Unsupported("stash_type other than 1 (float32)");
  const auto& dims = ctx.in(0).dims;
  const int rank = static_cast<int>(dims.size());
  const int axis = NormalizeAxis(n.attr_int("axis", -1), rank, n.Describe());
  const int64_t rows = Prod(dims, 0, axis), cols = Prod(dims, axis, dims.size());
  const std::vector<int64_t> nd(dims.begin() + axis, dims.end());
  const std::vector<int64_t> sidx = ParamIndex(ctx, nd, ctx.in(1).dims);
  const std::vector<int64_t> bidx = ctx.has_input(2) ? ParamIndex(ctx, nd, ctx.in(2).dims) : std::vector<int64_t>{};
  const bool has_b = ctx.has_input(2), om = ctx.has_output(1), oi = ctx.has_output(2);
  const double eps = n.attr_float("epsilon", 1e-5f);
  if (n.domain == kInternalDomain && n.op_type == "ResidualLayerNorm") {
    // The residual fold (passes/fuse_residual_norm.h): S = X + R, Y = LayerNorm(S), float32 only.
    if (dt != DataType::kFloat32) ctx.Unsupported("ResidualLayerNorm of " + DataTypeName(dt) + " (float32 only)");
    if (!ctx.has_input(3) || ctx.in(3).dtype != dt || ctx.in(3).dims != dims)
      ctx.Fail("R (input 3) must have X's dtype and shape");
    if (!ctx.has_output(3)) ctx.Fail("S (output 3, X + R) must be present");
    KernelInfo k{[=](const KernelIO& io) {
      cpu::ResidualLayerNormF32(rows, cols, io.In<float>(0), io.In<float>(3), io.In<float>(1),
                                has_b ? io.In<float>(2) : nullptr, sidx, bidx, eps, io.Out<float>(3), io.Out<float>(0),
                                om ? io.Out<float>(1) : nullptr, oi ? io.Out<float>(2) : nullptr);
    }};
    AllowInPlace(k, ctx, 3, 0);  // S[i] = X[i] + R[i]: each read before its element is written
    AllowInPlace(k, ctx, 3, 3);
    return k;
  }
  return {[=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::LayerNorm<T>(rows, cols, io.In<T>(0), io.In<T>(1), has_b ? io.In<T>(2) : nullptr, sidx, bidx, eps,
                        io.Out<T>(0), om ? io.Out<float>(1) : nullptr, oi ? io.Out<float>(2) : nullptr);
    });
  }};
}

// ---- InstanceNormalization, MeanVarianceNormalization, LpNormalization --------------------------------------

KernelInfo MakeInstanceNorm(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloatInput(ctx, 0);
  const DataType dt = ctx.in(0).dtype;
  if (ctx.in(1).dtype != dt || ctx.in(2).dtype != dt) ctx.Unsupported("scale/B of a dtype other than the input's");
  const auto& dims = ctx.in(0).dims;
  if (dims.size() < 2) ctx.Fail("input must have rank >= 2 (N, C, ...)");
  const int64_t N = dims[0], C = dims[1], S = Prod(dims, 2, dims.size());
  if (ctx.in(1).numel() != C || ctx.in(2).numel() != C) ctx.Fail("scale and B must have C elements");
  const double eps = n.attr_float("epsilon", 1e-5f);
  return {[=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::InstanceNorm<T>(N, C, S, io.In<T>(0), io.In<T>(1), io.In<T>(2), eps, io.Out<T>(0));
    });
  }};
}

KernelInfo MakeMvn(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloatInput(ctx, 0);
  const DataType dt = ctx.in(0).dtype;
  const std::vector<int64_t> dims = ctx.in(0).dims;
  std::vector<bool> red(dims.size(), false);
  for (int64_t a : n.attr_ints("axes", {0, 2, 3}))
    red[NormalizeAxis(a, static_cast<int>(dims.size()), n.Describe())] = true;
  return {[=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::MeanVarianceNorm<T>(dims, red, io.In<T>(0), io.Out<T>(0));
    });
  }};
}

KernelInfo MakeLpNorm(const KernelContext& ctx) {
  const Node& n = ctx.node;
  RequireFloatInput(ctx, 0);
  const DataType dt = ctx.in(0).dtype;
  const auto& dims = ctx.in(0).dims;
  const int p = static_cast<int>(n.attr_int("p", 2));
  if (p != 1 && p != 2) ctx.Fail("p must be 1 or 2");
  const int axis = NormalizeAxis(n.attr_int("axis", -1), static_cast<int>(dims.size()), n.Describe());
  const int64_t outer = Prod(dims, 0, axis), len = dims.empty() ? 1 : dims[axis],
                inner = Prod(dims, axis + 1, dims.size());
  return {[=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::LpNorm<T>(p, outer, len, inner, io.In<T>(0), io.Out<T>(0));
    });
  }};
}

// ---- Losses ------------------------------------------------------------------------------------------------

KernelInfo MakeLoss(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const bool sce = n.op_type == "SoftmaxCrossEntropyLoss";
  RequireFloatInput(ctx, 0);
  const DataType dt = ctx.in(0).dtype;
  const DataType it = ctx.in(1).dtype;
  if (it != DataType::kInt32 && it != DataType::kInt64) ctx.Unsupported("target dtype " + DataTypeName(it));
  if (ctx.has_input(2) && ctx.in(2).dtype != dt) ctx.Unsupported("weight of a dtype other than the input's");
  const auto& dims = ctx.in(0).dims;
  if (dims.size() < 2) ctx.Fail("input must have rank >= 2 (N, C, ...)");
  const int64_t N = dims[0], C = dims[1], D = Prod(dims, 2, dims.size());
  if (ctx.in(1).numel() != N * D) ctx.Fail("target does not match the input's shape");
  const std::string rs = n.attr_string("reduction", "mean");
  const cpu::LossReduction red = rs == "none"  ? cpu::LossReduction::kNone
                                 : rs == "sum" ? cpu::LossReduction::kSum
                                               : cpu::LossReduction::kMean;
  const int64_t ii = n.has_attr("ignore_index") ? n.attr_int("ignore_index", 0) : std::numeric_limits<int64_t>::min();
  const bool has_w = ctx.has_input(2), has_lp = sce && ctx.has_output(1);
  const std::string what = n.Describe();
  KernelInfo info;
  // The log-probabilities nobody reads: float rows compute only the targets' (no buffer); others need all of them.
  const bool picks = dt == DataType::kFloat32 && D == 1;
  if (sce && !has_lp && !picks) info.workspace_bytes = static_cast<size_t>(N * C * D) * SizeOf(dt);
  info.fn = [=](const KernelIO& io) {
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* w = has_w ? io.In<T>(2) : nullptr;
      auto run = [&](auto itag) {
        using I = decltype(itag);
        try {
          if (!sce) {
            cpu::NllLoss<T, I>(red, N, C, D, io.In<T>(0), io.In<I>(1), w, ii, io.Out<T>(0));
          } else if (has_lp) {
            cpu::SoftmaxCrossEntropyLoss<T, I>(red, N, C, D, io.In<T>(0), io.In<I>(1), w, ii, io.Out<T>(0),
                                               io.Out<T>(1));
          } else {
            // The declared workspace, or null: the loss then picks (float rows) or allocates its own.
            T* lp = picks ? nullptr : static_cast<T*>(io.workspace);
            cpu::SoftmaxCrossEntropyLoss<T, I>(red, N, C, D, io.In<T>(0), io.In<I>(1), w, ii, io.Out<T>(0), lp);
          }
        } catch (const std::out_of_range& e) {
          throw Error(what + ": " + e.what());
        }
      };
      if (it == DataType::kInt32)
        run(int32_t{});
      else
        run(int64_t{});
    });
  };
  return info;
}

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  r.Register("Softmax", MakeSoftmax);
  r.Register("LogSoftmax", MakeSoftmax);
  r.Register("Hardmax", MakeSoftmax);
  r.Register("BatchNormalization", MakeBatchNorm);
  r.Register("BatchNormRelu", MakeBatchNorm, kInternalDomain);
  r.Register("ResidualLayerNorm", MakeLayerNorm, kInternalDomain);
  r.Register("LayerNormalization", MakeLayerNorm);
  r.Register("InstanceNormalization", MakeInstanceNorm);
  r.Register("MeanVarianceNormalization", MakeMvn);
  r.Register("LpNormalization", MakeLpNorm);
  r.Register("NegativeLogLikelihoodLoss", MakeLoss);
  r.Register("SoftmaxCrossEntropyLoss", MakeLoss);
}

}  // namespace ot
