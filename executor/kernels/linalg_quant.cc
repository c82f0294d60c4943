// CPU kernel factories of the integer and quantized linear ops: MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv (uint8/int8). Zero points are subtracted into a wide type, the product is computed exactly with
// the loop kernels (int64 GEMM; the float64 convolution, exact for these magnitudes), and QLinear* outputs are
// requantized in float with round-half-to-even and saturation, as onnxruntime does.
#include <cmath>
#include <memory>

#include "cpu_ops/conv.h"
#include "cpu_ops/matmul.h"
#include "cpu_ops/matmul_integer.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/conv_geometry.h"
#include "graph/tensor.h"

namespace ot {

cpu::MatMulSpec NumpyMatMulSpec(const KernelContext& ctx, int ai, int bi);  // linalg.cc

namespace {

bool IsQuant(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// The element count of optional input i (0 when absent); input i must have dtype `like` when present.
int64_t ZeroPointCount(const KernelContext& ctx, int i, DataType like) {
  if (!ctx.has_input(i)) return 0;
  if (ctx.in(i).dtype != like) ctx.Fail("zero point " + std::to_string(i) + " must have its input's dtype");
  return ctx.in(i).numel();
}

template <typename D>
void ShiftRows(DataType t, const void* src, int64_t n, const void* zp, int64_t zp_count, int64_t inner, D* dst) {
  if (t == DataType::kUint8)
    cpu::SubtractZeroPoint(static_cast<const uint8_t*>(src), n, static_cast<const uint8_t*>(zp), zp_count, inner, dst);
  else
    cpu::SubtractZeroPoint(static_cast<const int8_t*>(src), n, static_cast<const int8_t*>(zp), zp_count, inner, dst);
}

void ShiftCols(DataType t, const void* src, int64_t n, const void* zp, int64_t zp_count, int64_t k, int64_t cols,
               int64_t* dst) {
  if (t == DataType::kUint8)
    cpu::SubtractZeroPointCols(static_cast<const uint8_t*>(src), n, static_cast<const uint8_t*>(zp), zp_count, k, cols,
                               dst);
  else
    cpu::SubtractZeroPointCols(static_cast<const int8_t*>(src), n, static_cast<const int8_t*>(zp), zp_count, k, cols,
                               dst);
}

int32_t ZeroPointValue(DataType t, const void* zp) {
  return t == DataType::kUint8 ? *static_cast<const uint8_t*>(zp) : *static_cast<const int8_t*>(zp);
}

void Store(DataType t, const std::vector<double>& acc, const std::vector<float>& mult, int64_t inner, int32_t zp,
           void* y) {
  if (t == DataType::kUint8)
    cpu::Requantize(acc.data(), static_cast<int64_t>(acc.size()), mult.data(), static_cast<int64_t>(mult.size()), inner,
                    zp, static_cast<uint8_t*>(y));
  else
    cpu::Requantize(acc.data(), static_cast<int64_t>(acc.size()), mult.data(), static_cast<int64_t>(mult.size()), inner,
                    zp, static_cast<int8_t*>(y));
}

// Shared by MatMulInteger (a=0, b=1, zps 2/3) and QLinearMatMul (a=0, b=3, zps 2/5).
KernelInfo IntegerMatMul(const KernelContext& ctx, bool qlinear) {
  const int ai = 0, bi = qlinear ? 3 : 1, azi = 2, bzi = qlinear ? 5 : 3;
  const DataType ta = ctx.in(ai).dtype, tb = ctx.in(bi).dtype;
  if (!IsQuant(ta) || !IsQuant(tb)) ctx.Unsupported("only uint8/int8 inputs are supported");
  const cpu::MatMulSpec spec = NumpyMatMulSpec(ctx, ai, bi);
  const auto& ad = ctx.in(ai).dims;
  const auto& bd = ctx.in(bi).dims;
  const int64_t na = ctx.in(ai).numel(), nb = ctx.in(bi).numel(), nc = ctx.out(0).numel();
  const int64_t k = ad.back(), m = ad.size() >= 2 ? ad[ad.size() - 2] : 1;
  const int64_t n = bd.size() >= 2 ? bd.back() : 1;
  const int64_t a_zc = ZeroPointCount(ctx, azi, ta), b_zc = ZeroPointCount(ctx, bzi, tb);
  if (a_zc > 1 && (na / k) % a_zc != 0 && a_zc != m) ctx.Unsupported("a_zero_point shape is not supported");
  if (b_zc > 1 && b_zc % n != 0) ctx.Unsupported("b_zero_point shape is not supported");
  DataType ty = DataType::kInt32;
  int64_t scale_count = 1;
  if (qlinear) {
    ty = ctx.out(0).dtype;
    if (!IsQuant(ty)) ctx.Unsupported("output dtype " + DataTypeName(ty) + " is not supported");
    if (ctx.in(1).numel() != 1 || ctx.in(6).numel() != 1) ctx.Unsupported("per-row a_scale / y_scale");
    if (ctx.in(1).dtype != DataType::kFloat32) ctx.Unsupported("scales must be float32");
    scale_count = ctx.in(4).numel();
    if (scale_count != 1 && scale_count != n) ctx.Unsupported("b_scale shape is not supported");
  }
  KernelInfo info;
  info.fn = [=](const KernelIO& io) {
    std::vector<int64_t> a(na), b(nb), c(nc);
    ShiftRows(ta, io.in[ai], na, a_zc ? io.in[azi] : nullptr, std::max<int64_t>(a_zc, 1), k, a.data());
    ShiftCols(tb, io.in[bi], nb, b_zc ? io.in[bzi] : nullptr, std::max<int64_t>(b_zc, 1),
              bd.size() >= 2 ? bd[bd.size() - 2] : nb, n, b.data());
    cpu::NaiveMatMul<int64_t, int64_t>(spec, a.data(), b.data(), c.data());
    if (!qlinear) {
      int32_t* y = io.Out<int32_t>(0);
      for (int64_t i = 0; i < nc; ++i) y[i] = static_cast<int32_t>(c[i]);
      return;
    }
    const float a_scale = *io.In<float>(1), y_scale = *io.In<float>(6);
    const float* b_scale = io.In<float>(4);
    std::vector<float> mult(scale_count);
    for (int64_t j = 0; j < scale_count; ++j) mult[j] = a_scale * b_scale[j] / y_scale;
    std::vector<double> acc(c.begin(), c.end());
    Store(ty, acc, mult, 1, ZeroPointValue(ty, io.in[7]), io.out[0]);
  };
  return info;
}

// Shared by ConvInteger (x=0, w=1, zps 2/3) and QLinearConv (x=0, w=3, zps 2/5, bias 8).
KernelInfo IntegerConv(const KernelContext& ctx, bool qlinear) {
  const int xi = 0, wi = qlinear ? 3 : 1, xzi = 2, wzi = qlinear ? 5 : 3, bi = qlinear ? 8 : -1;
  const DataType tx = ctx.in(xi).dtype, tw = ctx.in(wi).dtype;
  if (!IsQuant(tx) || !IsQuant(tw)) ctx.Unsupported("only uint8/int8 inputs are supported");
  if (ctx.node.op_type == "ConvTranspose") ctx.Unsupported("transposed");
  cpu::ConvSpec spec = BuildConvSpec(ctx, xi, wi, bi);
  const int64_t nx = ctx.in(xi).numel(), nw = ctx.in(wi).numel(), ny = ctx.out(0).numel();
  const int64_t oc = spec.c_out, per_oc = nw / std::max<int64_t>(oc, 1);
  int64_t out_sp = 1;
  for (int64_t d : spec.out_spatial) out_sp *= d;
  const int64_t x_zc = ZeroPointCount(ctx, xzi, tx), w_zc = ZeroPointCount(ctx, wzi, tw);
  if (x_zc > 1) ctx.Unsupported("per-channel x_zero_point");
  if (w_zc > 1 && w_zc != oc) ctx.Unsupported("w_zero_point shape is not supported");
  DataType ty = DataType::kInt32;
  int64_t scale_count = 1;
  if (qlinear) {
    ty = ctx.out(0).dtype;
    if (!IsQuant(ty)) ctx.Unsupported("output dtype " + DataTypeName(ty) + " is not supported");
    if (ctx.in(1).numel() != 1 || ctx.in(6).numel() != 1) ctx.Unsupported("per-channel x_scale / y_scale");
    scale_count = ctx.in(4).numel();
    if (scale_count != 1 && scale_count != oc) ctx.Unsupported("w_scale shape is not supported");
    if (spec.has_bias && ctx.in(bi).dtype != DataType::kInt32) ctx.Fail("bias must be int32");
  }
  KernelInfo info;
  info.fn = [=](const KernelIO& io) {
    std::vector<double> x(nx), w(nw), bias(spec.has_bias ? oc : 0), y(ny);
    ShiftRows(tx, io.in[xi], nx, x_zc ? io.in[xzi] : nullptr, 1, 1, x.data());
    ShiftRows(tw, io.in[wi], nw, w_zc ? io.in[wzi] : nullptr, std::max<int64_t>(w_zc, 1), per_oc, w.data());
    for (int64_t i = 0; i < static_cast<int64_t>(bias.size()); ++i) bias[i] = io.In<int32_t>(bi)[i];
    cpu::NaiveConv<double>(spec, x.data(), w.data(), bias.data(), y.data());
    if (!qlinear) {
      int32_t* out = io.Out<int32_t>(0);
      for (int64_t i = 0; i < ny; ++i) out[i] = static_cast<int32_t>(std::llround(y[i]));
      return;
    }
    const float x_scale = *io.In<float>(1), y_scale = *io.In<float>(6);
    const float* w_scale = io.In<float>(4);
    std::vector<float> mult(scale_count);
    for (int64_t j = 0; j < scale_count; ++j) mult[j] = x_scale * w_scale[j] / y_scale;
    Store(ty, y, mult, out_sp, ZeroPointValue(ty, io.in[7]), io.out[0]);
  };
  return info;
}

}  // namespace

void RegisterLinalgQuantKernels(KernelRegistry& r) {
  r.Register("MatMulInteger", [](const KernelContext& ctx) { return IntegerMatMul(ctx, false); });
  r.Register("QLinearMatMul", [](const KernelContext& ctx) { return IntegerMatMul(ctx, true); });
  r.Register("ConvInteger", [](const KernelContext& ctx) { return IntegerConv(ctx, false); });
  r.Register("QLinearConv", [](const KernelContext& ctx) { return IntegerConv(ctx, true); });
}

}  // namespace ot
