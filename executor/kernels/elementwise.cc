// CPU kernel factories of the elementwise family, unary half: activations and math, Identity, Not,
// IsNaN/IsInf, Cast/CastLike, Clip, Dropout. The binary half is in elementwise_binary.cc.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "cpu_ops/elementwise_cast.h"
#include "cpu_ops/elementwise_unary.h"
#include "executor/kernel_registry.h"
#include "graph/tensor.h"

namespace ot {

void RegisterElementwiseBinaryKernels(KernelRegistry& r);  // elementwise_binary.cc

namespace {

bool IsTensorType(DataType t) { return t != DataType::kUndefined && t != DataType::kString && SizeOf(t) > 0; }

void RequireTensorType(const KernelContext& ctx, int i) {
  DataType t = ctx.in(i).dtype;
  if (!IsTensorType(t))
    ctx.Unsupported("input " + std::to_string(i) + " type " + DataTypeName(t) + " is not supported");
}

// Copies input 0 to output 0 unless the executor placed them in the same buffer.
Kernel CopyKernel(size_t nbytes) {
  return [nbytes](const KernelIO& io) {
    if (io.out[0] != io.in[0] && nbytes) std::memcpy(io.out[0], io.in[0], nbytes);
  };
}

using ParamsFn = cpu::UnaryParams (*)(const Node&);

cpu::UnaryParams NoParams(const Node&) { return {}; }

KernelInfo MakeUnary(const KernelContext& ctx, cpu::UnaryOp op, cpu::UnaryParams p) {
  const DataType t = ctx.in(0).dtype;
  const bool ok = IsFloat(t) || (IsInteger(t) && cpu::UnarySupportsIntegers(op));
  if (!ok) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  const int64_t n = ctx.in(0).numel();
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Unsupported("bool input");
    } else {
      KernelInfo k{[=](const KernelIO& io) { cpu::Unary<T>(op, io.In<T>(0), io.Out<T>(0), n, p); }};
      AllowInPlace(k, ctx, 0, 0);  // Map: each tile is read, then written at the same place
      return k;
    }
  });
}

void RegUnary(KernelRegistry& r, const char* op_type, cpu::UnaryOp op, ParamsFn params = NoParams) {
  r.Register(op_type, [op, params](const KernelContext& ctx) { return MakeUnary(ctx, op, params(ctx.node)); });
}

KernelInfo MakeCast(const KernelContext& ctx) {
  RequireTensorType(ctx, 0);
  const DataType from = ctx.in(0).dtype, to = ctx.out(0).dtype;
  if (!IsTensorType(to)) ctx.Unsupported("cast to " + DataTypeName(to) + " is not supported");
  const int64_t n = ctx.in(0).numel();
  return DispatchDType(from, [&](auto stag) -> KernelInfo {
    using S = decltype(stag);
    return DispatchDType(to, [&](auto dtag) -> KernelInfo {
      using D = decltype(dtag);
      KernelInfo k{[n](const KernelIO& io) { cpu::Cast<S, D>(io.In<S>(0), io.Out<D>(0), n); }};
      // In place only where no element changes size or C++ type but through float tiles (the same dtype: the
      // copy is skipped; float16 <-> bfloat16: each tile is loaded, then stored): a plain y[i] = x[i] loop over
      // two types of one size would alias across types.
      constexpr bool kTiles = (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>)&&(
          std::is_same_v<D, float16> || std::is_same_v<D, bfloat16>);
      if constexpr (std::is_same_v<S, D> || kTiles)
        if (ctx.in(0).dims == ctx.out(0).dims) k.inplace.push_back({0, 0});
      return k;
    });
  });
}

// Clip bounds: opset < 11 attributes `min`/`max`; later optional scalar inputs 1 and 2, read each call.
KernelInfo MakeClip(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (!IsFloat(t) && !IsInteger(t)) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  const int64_t n = ctx.in(0).numel();
  const bool legacy = ctx.node.opset < 11;
  const float attr_lo = ctx.node.attr_float("min", -std::numeric_limits<float>::infinity());
  const float attr_hi = ctx.node.attr_float("max", std::numeric_limits<float>::infinity());
  const bool has_lo = ctx.has_input(1), has_hi = ctx.has_input(2);
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Unsupported("bool input");
    } else {
      T lo, hi;
      if constexpr (std::is_integral_v<T>) {
        lo = std::numeric_limits<T>::lowest();
        hi = std::numeric_limits<T>::max();
      } else {
        lo = static_cast<T>(-std::numeric_limits<float>::infinity());
        hi = static_cast<T>(std::numeric_limits<float>::infinity());
      }
      if constexpr (std::is_integral_v<T>) {
        if (legacy) ctx.Unsupported("integer Clip before opset 11");
      }
      if (legacy) {
        lo = static_cast<T>(attr_lo);
        hi = static_cast<T>(attr_hi);
      }
      return KernelInfo{[=](const KernelIO& io) {
        T l = lo, h = hi;
        if (!legacy && has_lo) l = *io.In<T>(1);
        if (!legacy && has_hi) h = *io.In<T>(2);
        cpu::Clip<T>(io.In<T>(0), io.Out<T>(0), n, l, h);
      }};
    }
  });
}

// Dropout. Opset <= 6: `is_test` (0 = training) and `ratio` attributes; 7-11: `ratio`, always inference;
// >= 12: ratio (input 1, default 0.5) and training_mode (input 2, default false), known at plan time.
// Inference (or ratio 0) is an exact copy with an all-true mask. Training draws a fresh mask each call from a
// counter-based stream keyed by the run seed, the node's `seed` attribute and the executor's run counter.
KernelInfo MakeDropout(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (!IsFloat(t)) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  const Node& node = ctx.node;
  float ratio = 0.5f;
  bool training = false;
  if (node.opset <= 6) {
    training = node.attr_int("is_test", 0) == 0;
    ratio = node.attr_float("ratio", 0.5f);
  } else if (node.opset < 12) {
    ratio = node.attr_float("ratio", 0.5f);
  } else {
    auto known = [&](int i) -> const Tensor* {
      if (!ctx.has_input(i)) return nullptr;
      const Tensor* v = i < static_cast<int>(ctx.input_values.size()) ? ctx.input_values[i] : nullptr;
      if (!v) ctx.Unsupported(std::string(i == 1 ? "ratio" : "training_mode") + " must be known when the plan is made");
      return v;
    };
    if (const Tensor* m = known(2)) training = m->GetDouble(0) != 0;
    if (training)  // the ratio matters only in training mode
      if (const Tensor* r = known(1)) ratio = static_cast<float>(r->GetDouble(0));
  }
  if (training && !(ratio >= 0.f && ratio < 1.f)) ctx.Fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
  const int64_t n = ctx.in(0).numel();
  const bool has_mask = ctx.has_output(1);
  const DataType mask_t = has_mask ? ctx.out(1).dtype : DataType::kBool;
  if (!training) ratio = 0.f;
  const uint64_t key = cpu::MixBits(ctx.seed ^ cpu::MixBits(static_cast<uint64_t>(node.attr_int("seed", 0))));
  KernelInfo info = DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<T> && !std::is_same_v<T, float16> && !std::is_same_v<T, bfloat16>) {
      ctx.Unsupported("input type");
    } else {
      return KernelInfo{[=](const KernelIO& io) {
        const uint64_t k = cpu::MixBits(key + io.run);
        if (has_mask && mask_t != DataType::kBool)
          cpu::DropoutTrain<T, T>(io.In<T>(0), io.Out<T>(0), io.Out<T>(1), n, ratio, k);
        else
          cpu::DropoutTrain<T, bool>(io.In<T>(0), io.Out<T>(0), has_mask ? io.Out<bool>(1) : nullptr, n, ratio, k);
      }};
    }
  });
  info.random = training && ratio > 0.f;
  return info;
}

cpu::UnaryParams Alpha(const Node& n, float def) {
  cpu::UnaryParams p;
  p.alpha = n.attr_float("alpha", def);
  return p;
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  using U = cpu::UnaryOp;
  RegUnary(r, "Abs", U::kAbs);
  RegUnary(r, "Neg", U::kNeg);
  RegUnary(r, "Sign", U::kSign);
  RegUnary(r, "Relu", U::kRelu);
  RegUnary(r, "Exp", U::kExp);
  RegUnary(r, "Log", U::kLog);
  RegUnary(r, "Sqrt", U::kSqrt);
  RegUnary(r, "Reciprocal", U::kReciprocal);
  RegUnary(r, "Sigmoid", U::kSigmoid);
  RegUnary(r, "Tanh", U::kTanh);
  RegUnary(r, "Erf", U::kErf);
  RegUnary(r, "Softplus", U::kSoftplus);
  RegUnary(r, "Softsign", U::kSoftsign);
  RegUnary(r, "Sin", U::kSin);
  RegUnary(r, "Cos", U::kCos);
  RegUnary(r, "Tan", U::kTan);
  RegUnary(r, "Asin", U::kAsin);
  RegUnary(r, "Acos", U::kAcos);
  RegUnary(r, "Atan", U::kAtan);
  RegUnary(r, "Sinh", U::kSinh);
  RegUnary(r, "Cosh", U::kCosh);
  RegUnary(r, "Asinh", U::kAsinh);
  RegUnary(r, "Acosh", U::kAcosh);
  RegUnary(r, "Atanh", U::kAtanh);
  RegUnary(r, "Floor", U::kFloor);
  RegUnary(r, "Ceil", U::kCeil);
  RegUnary(r, "Round", U::kRound);
  RegUnary(r, "HardSwish", U::kHardSwish);
  RegUnary(r, "Mish", U::kMish);
  RegUnary(r, "LeakyRelu", U::kLeakyRelu, [](const Node& n) { return Alpha(n, 0.01f); });
  RegUnary(r, "Elu", U::kElu, [](const Node& n) { return Alpha(n, 1.0f); });
  RegUnary(r, "ThresholdedRelu", U::kThresholdedRelu, [](const Node& n) { return Alpha(n, 1.0f); });
  RegUnary(r, "Celu", U::kCelu, [](const Node& n) { return Alpha(n, 1.0f); });
  RegUnary(r, "Selu", U::kSelu, [](const Node& n) {
    cpu::UnaryParams p;
    p.alpha = n.attr_float("alpha", 1.67326319217681884765625f);
    p.gamma = n.attr_float("gamma", 1.05070102214813232421875f);
    return p;
  });
  RegUnary(r, "HardSigmoid", U::kHardSigmoid, [](const Node& n) {
    cpu::UnaryParams p;
    p.alpha = n.attr_float("alpha", 0.2f);
    p.beta = n.attr_float("beta", 0.5f);
    return p;
  });
  RegUnary(r, "Shrink", U::kShrink, [](const Node& n) {
    cpu::UnaryParams p;
    p.alpha = n.attr_float("lambd", 0.5f);
    p.beta = n.attr_float("bias", 0.0f);
    return p;
  });
  r.Register("Gelu", [](const KernelContext& ctx) {
    std::string approx = ctx.node.attr_string("approximate", "none");
    if (approx != "none" && approx != "tanh") ctx.Fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
    return MakeUnary(ctx, approx == "tanh" ? U::kGeluTanh : U::kGelu, {});
  });
  r.Register("Identity", [](const KernelContext& ctx) {
    RequireTensorType(ctx, 0);
    KernelInfo info{CopyKernel(ctx.in(0).nbytes())};
    AllowInPlace(info, ctx, 0, 0);  // where the input dies here, no copy
    // Where it stays live, the output as a view of its bytes (as Reshape's; a Dropout of ratio 0 becomes an
    // Identity whose input the residual path reads on).
    if (ctx.in(0).dtype == ctx.out(0).dtype && ctx.in(0).dims == ctx.out(0).dims) info.views.push_back({0, 0});
    return info;
  });
  r.Register("Not", [](const KernelContext& ctx) {
    ctx.RequireDType(0, {DataType::kBool});
    const int64_t n = ctx.in(0).numel();
    return KernelInfo{[n](const KernelIO& io) { cpu::LogicalNot(io.In<bool>(0), io.Out<bool>(0), n); }};
  });
  r.Register("IsNaN", [](const KernelContext& ctx) {
    ctx.RequireDType(0, {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16});
    const int64_t n = ctx.in(0).numel();
    return DispatchDType(ctx.in(0).dtype, [&](auto tag) -> KernelInfo {
      using T = decltype(tag);
      if constexpr (!std::is_floating_point_v<T> && !std::is_same_v<T, float16> && !std::is_same_v<T, bfloat16>) {
        ctx.Unsupported("input type");
      } else {
        return KernelInfo{[n](const KernelIO& io) { cpu::IsNaN<T>(io.In<T>(0), io.Out<bool>(0), n); }};
      }
    });
  });
  r.Register("IsInf", [](const KernelContext& ctx) {
    ctx.RequireDType(0, {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16});
    const int64_t n = ctx.in(0).numel();
    const bool pos = ctx.node.attr_int("detect_positive", 1) != 0;
    const bool neg = ctx.node.attr_int("detect_negative", 1) != 0;
    return DispatchDType(ctx.in(0).dtype, [&](auto tag) -> KernelInfo {
      using T = decltype(tag);
      if constexpr (!std::is_floating_point_v<T> && !std::is_same_v<T, float16> && !std::is_same_v<T, bfloat16>) {
        ctx.Unsupported("input type");
      } else {
        return KernelInfo{[=](const KernelIO& io) { cpu::IsInf<T>(io.In<T>(0), io.Out<bool>(0), n, pos, neg); }};
      }
    });
  });
  r.Register("Cast", MakeCast);
  r.Register("CastLike", MakeCast);
  r.Register("Clip", MakeClip);
  r.Register("Dropout", MakeDropout);
  RegisterElementwiseBinaryKernels(r);
}

}  // namespace ot
