// CPU kernel factories of the linalg family. MatMul, Gemm, ai.onnxtrain.MatMulTrans, Conv and ConvTranspose in
// f32/f16/bf16 run through oneDNN (primitives created here, once per plan; exclusive kernels where oneDNN runs an
// OpenMP team -- not a GEMM in row blocks on TBB's threads, cpu_ops/matmul.h); float64 and integer types use plain
// loops. Pooling is in linalg_pool.cc, Einsum in linalg_einsum.cc.
#include <algorithm>
#include <memory>

#include "cpu_ops/conv.h"
#include "cpu_ops/matmul.h"
#include "cpu_ops/reduce.h"
#include "cpu_ops/small_gemm.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/conv_geometry.h"
#include "graph/graph.h"
#include "graph/ops/linalg_util.h"
#include "graph/tensor.h"

namespace ot {

void RegisterLinalgPoolKernels(KernelRegistry& r);   // linalg_pool.cc
void RegisterLinalgQuantKernels(KernelRegistry& r);  // linalg_quant.cc
cpu::MatMulSpec NumpyMatMulSpec(const KernelContext& ctx, int ai, int bi);
void RegisterLinalgEinsumKernels(KernelRegistry& r);  // linalg_einsum.cc

namespace {

bool IsDnnType(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

cpu::DnnType ToDnnType(DataType t) {
  return t == DataType::kFloat16    ? cpu::DnnType::kF16
         : t == DataType::kBFloat16 ? cpu::DnnType::kBF16
                                    : cpu::DnnType::kF32;
}

// A GEMM kernel for spec over dtype t: oneDNN for float types, loops otherwise. `prefill(io)` (may be empty)
// runs first and writes the addend into the output when spec.accumulate.
KernelInfo MakeGemmKernel(const KernelContext& ctx, DataType t, const cpu::MatMulSpec& spec,
                          std::function<void(const KernelIO&)> prefill) {
  KernelInfo info;
  if (IsDnnType(t)) {
    cpu::MatMulSpec s = spec;
    s.type = ToDnnType(t);
    if (cpu::SmallGemmApplies(s)) {  // many small float32 matrices (attention heads): our register-tiled kernel
      info.fn = [s, prefill](const KernelIO& io) {
        if (prefill) prefill(io);
        cpu::SmallBatchedGemm(s, static_cast<const float*>(io.in[0]), static_cast<const float*>(io.in[1]),
                              static_cast<float*>(io.out[0]));
      };
      info.flops = cpu::GemmFlops(spec);
      return info;
    }
    auto mm = std::make_shared<cpu::DnnlMatMul>(s);
    info.fn = [mm, prefill](const KernelIO& io) {
      if (prefill) prefill(io);
      mm->Run(io.in[0], io.in[1], io.out[0], io.workspace);
    };
    // oneDNN's scratchpad and the f32 copies of converted half operands come from the plan.
    info.workspace_bytes = mm->workspace_bytes();
    info.heap_bytes = mm->heap_bytes();
    // A GEMM in blocks runs on TBB's threads only (cpu_ops/matmul.h), so it may run beside other kernels;
    // exclusive, it would leave a thread waiting for the lock that could run its second block.
    info.exclusive = mm->blocks() == 1;
    info.flops = cpu::GemmFlops(spec);
    return info;
  }
  auto loops = [&](auto tag, auto acc_tag) -> KernelInfo {
    using T = decltype(tag);
    using Acc = decltype(acc_tag);
    KernelInfo k;
    k.fn = [spec, prefill](const KernelIO& io) {
      if (prefill) prefill(io);
      cpu::NaiveMatMul<T, Acc>(spec, io.In<T>(0), io.In<T>(1), io.Out<T>(0));
    };
    return k;
  };
  switch (t) {
    case DataType::kFloat64:
      return loops(double{}, double{});
    case DataType::kInt32:
      return loops(int32_t{}, int64_t{});
    case DataType::kInt64:
      return loops(int64_t{}, int64_t{});
    case DataType::kUint32:
      return loops(uint32_t{}, uint64_t{});
    case DataType::kUint64:
      return loops(uint64_t{}, uint64_t{});
    default:
      break;
  }
  ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
}

}  // namespace

// numpy matmul of inputs ai and bi as a batched GEMM spec (1-D operands promoted, batch dims broadcast).
cpu::MatMulSpec NumpyMatMulSpec(const KernelContext& ctx, int ai, int bi) {
  std::vector<int64_t> a = ctx.in(ai).dims, b = ctx.in(bi).dims;
  if (a.empty() || b.empty()) ctx.Fail("MatMul operands must have rank >= 1");
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const size_t rank = std::max(a.size(), b.size());
  cpu::MatMulSpec spec;
  spec.m = a[a.size() - 2];
  spec.k = a[a.size() - 1];
  spec.n = b[b.size() - 1];
  if (b[b.size() - 2] != spec.k)
    ctx.Fail("inner dimensions differ: A " + DimsToString(ctx.in(ai).dims) + ", B " + DimsToString(ctx.in(bi).dims));
  spec.a_batch.assign(rank - a.size(), 1);
  spec.a_batch.insert(spec.a_batch.end(), a.begin(), a.end() - 2);
  spec.b_batch.assign(rank - b.size(), 1);
  spec.b_batch.insert(spec.b_batch.end(), b.begin(), b.end() - 2);
  for (size_t i = 0; i < spec.a_batch.size(); ++i)
    if (spec.a_batch[i] != spec.b_batch[i] && spec.a_batch[i] != 1 && spec.b_batch[i] != 1)
      ctx.Fail("batch dims do not broadcast: A " + DimsToString(ctx.in(ai).dims) + ", B " +
               DimsToString(ctx.in(bi).dims));
  // B shared by every batch (a weight matrix): one GEMM with the batch folded into M.
  if (std::all_of(spec.b_batch.begin(), spec.b_batch.end(), [](int64_t d) { return d == 1; })) {
    for (int64_t d : spec.a_batch) spec.m *= d;
    spec.a_batch.clear();
    spec.b_batch.clear();
  }
  return spec;
}

// ai.onnxtrain.MatMulTrans(A, B) {trans_a, trans_b} as a batched GEMM spec: numpy batching as MatMul (both ranks
// >= 2), the operands read in place through the spec's transposes. A weight B shared by every batch folds the batch
// into M when A is not transposed (A's rows are then contiguous across the batch).
cpu::MatMulSpec MatMulTransSpec(const KernelContext& ctx) {
  const std::vector<int64_t>& a = ctx.in(0).dims;
  const std::vector<int64_t>& b = ctx.in(1).dims;
  const bool ta = ctx.node.attr_int("trans_a", 0) != 0, tb = ctx.node.attr_int("trans_b", 0) != 0;
  if (a.size() < 2 || b.size() < 2) ctx.Fail("MatMulTrans operands must have rank >= 2");
  const size_t ra = a.size(), rb = b.size(), rank = std::max(ra, rb);
  cpu::MatMulSpec spec;
  spec.trans_a = ta;
  spec.trans_b = tb;
  spec.m = a[ta ? ra - 1 : ra - 2];
  spec.k = a[ta ? ra - 2 : ra - 1];
  spec.n = b[tb ? rb - 2 : rb - 1];
  if (b[tb ? rb - 1 : rb - 2] != spec.k)
    ctx.Fail("inner dimensions differ: A " + DimsToString(a) + (ta ? " (trans_a)" : "") + ", B " + DimsToString(b) +
             (tb ? " (trans_b)" : ""));
  spec.a_batch.assign(rank - ra, 1);
  spec.a_batch.insert(spec.a_batch.end(), a.begin(), a.end() - 2);
  spec.b_batch.assign(rank - rb, 1);
  spec.b_batch.insert(spec.b_batch.end(), b.begin(), b.end() - 2);
  for (size_t i = 0; i < spec.a_batch.size(); ++i)
    if (spec.a_batch[i] != spec.b_batch[i] && spec.a_batch[i] != 1 && spec.b_batch[i] != 1)
      ctx.Fail("batch dims do not broadcast: A " + DimsToString(a) + ", B " + DimsToString(b));
  if (!ta && std::all_of(spec.b_batch.begin(), spec.b_batch.end(), [](int64_t d) { return d == 1; })) {
    for (int64_t d : spec.a_batch) spec.m *= d;
    spec.a_batch.clear();
    spec.b_batch.clear();
  }
  return spec;
}

namespace {

KernelInfo MatMulTransKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t) ctx.Fail("inputs have different dtypes");
  if (!IsFloat(t)) ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported (float types are)");
  return MakeGemmKernel(ctx, t, MatMulTransSpec(ctx), nullptr);
}

KernelInfo MatMulKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t) ctx.Fail("inputs have different dtypes");
  return MakeGemmKernel(ctx, t, NumpyMatMulSpec(ctx, 0, 1), nullptr);
}

template <typename T>
std::function<void(const KernelIO&)> MakeGemmPrefill(int64_t cs_m, int64_t cs_n, float beta, int64_t m, int64_t n) {
  return [=](const KernelIO& io) { cpu::FillScaledBroadcast2D<T>(io.In<T>(2), cs_m, cs_n, beta, m, n, io.Out<T>(0)); };
}

}  // namespace

// A Gemm node's operands as a GEMM spec (transposes, alpha; beta through `beta`): shared with the GPU's Gemm.
cpu::MatMulSpec GemmOpSpec(const KernelContext& ctx, float* beta) {
  const Node& node = ctx.node;
  const auto& a = ctx.in(0).dims;
  const auto& b = ctx.in(1).dims;
  if (a.size() != 2 || b.size() != 2) ctx.Fail("Gemm operands must be 2-D");
  cpu::MatMulSpec spec;
  spec.trans_a = node.attr_int("transA", 0) != 0;
  spec.trans_b = node.attr_int("transB", 0) != 0;
  spec.m = spec.trans_a ? a[1] : a[0];
  spec.k = spec.trans_a ? a[0] : a[1];
  spec.n = spec.trans_b ? b[0] : b[1];
  if ((spec.trans_b ? b[1] : b[0]) != spec.k) ctx.Fail("inner dimensions differ");
  spec.alpha = node.attr_float("alpha", 1.0f);
  *beta = node.attr_float("beta", 1.0f);
  return spec;
}

namespace {

KernelInfo GemmKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  float beta = 1.0f;
  cpu::MatMulSpec spec = GemmOpSpec(ctx, &beta);
  std::function<void(const KernelIO&)> prefill;
  if (ctx.has_input(2) && beta != 0.0f) {
    const auto& c = ctx.in(2).dims;
    if (c.size() > 2) ctx.Fail("C must have rank <= 2");
    std::vector<int64_t> c2(2 - c.size(), 1);
    c2.insert(c2.end(), c.begin(), c.end());
    if ((c2[0] != 1 && c2[0] != spec.m) || (c2[1] != 1 && c2[1] != spec.n))
      ctx.Fail("C " + DimsToString(c) + " does not broadcast to [" + std::to_string(spec.m) + "," +
               std::to_string(spec.n) + "]");
    const int64_t cs_m = c2[0] == 1 ? 0 : c2[1], cs_n = c2[1] == 1 ? 0 : 1;
    spec.accumulate = true;
    switch (t) {
      case DataType::kFloat32:
        prefill = MakeGemmPrefill<float>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kFloat16:
        prefill = MakeGemmPrefill<float16>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kBFloat16:
        prefill = MakeGemmPrefill<bfloat16>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kFloat64:
        prefill = MakeGemmPrefill<double>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kInt32:
        prefill = MakeGemmPrefill<int32_t>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kInt64:
        prefill = MakeGemmPrefill<int64_t>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kUint32:
        prefill = MakeGemmPrefill<uint32_t>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      case DataType::kUint64:
        prefill = MakeGemmPrefill<uint64_t>(cs_m, cs_n, beta, spec.m, spec.n);
        break;
      default:
        ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
    }
  }
  return MakeGemmKernel(ctx, t, spec, prefill);
}

}  // namespace

// GemmSum's operands: the Gemm spec, and the input summed ([rows, cols] as stored, its K axis first) -- shared with
// the GPU's GemmSum.
cpu::GemmSumGeometry GemmSumOpGeometry(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t) ctx.Fail("inputs have different dtypes");
  if (!IsFloat(t)) ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported (float types are)");
  float beta = 1.0f;
  cpu::GemmSumGeometry g;
  g.spec = GemmOpSpec(ctx, &beta);
  g.sum_input = static_cast<int>(ctx.node.attr_int("sum_input", 0));
  if ((g.sum_input == 0 && !g.spec.trans_a) || (g.sum_input == 1 && g.spec.trans_b) ||
      (g.sum_input != 0 && g.sum_input != 1))
    ctx.Fail("sum_input must name an operand stored [K, X] (A with transA = 1 or B with transB = 0)");
  g.rows = ctx.in(g.sum_input).dims[0];
  g.cols = ctx.in(g.sum_input).dims[1];
  if (ctx.out(1).dims != std::vector<int64_t>{g.cols}) ctx.Fail("S must be [" + std::to_string(g.cols) + "]");
  return g;
}

namespace {

// ai.onnxtrain.GemmSum(A, B) {transA, transB, alpha, sum_input}: the Gemm, then the column sums of input sum_input
// ([K, X] as stored) with ReduceToShape's summation (cpu::SumRowsToColumns), so the fused pair gives the unfused
// Gemm + ReduceToShape bit for bit.
KernelInfo GemmSumKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const cpu::GemmSumGeometry geo = GemmSumOpGeometry(ctx);
  const int si = geo.sum_input;
  const int64_t rows = geo.rows, cols = geo.cols;
  KernelInfo info = MakeGemmKernel(ctx, t, geo.spec, nullptr);
  auto gemm = info.fn;
  info.fn = [gemm, t, si, rows, cols](const KernelIO& io) {
    gemm(io);
    DispatchFloat(t, [&](auto tag) {
      using T = decltype(tag);
      cpu::SumRowsToColumns<T>(io.In<T>(si), rows, cols, io.Out<T>(1));
    });
  };
  return info;
}

}  // namespace

// Geometry of a Conv/ConvTranspose node over X = input xi, W = input wi, bias = input bi (-1: none), whose output 0
// is Y; with y_from_geometry (a forward convolution whose output 0 is not Y: ConvEpilogue) Y's dims are computed.
cpu::ConvSpec BuildConvSpec(const KernelContext& ctx, int xi, int wi, int bi, bool y_from_geometry) {
  const Node& node = ctx.node;
  const bool transpose = node.op_type == "ConvTranspose";
  const auto& x = ctx.in(xi).dims;
  const auto& w = ctx.in(wi).dims;
  if (y_from_geometry && (transpose || w.empty())) ctx.Fail("Y's geometry is computed for a forward convolution only");
  const std::vector<int64_t> y = y_from_geometry ? std::vector<int64_t>{x.empty() ? 0 : x[0], w[0]} : ctx.out(0).dims;
  const int r = static_cast<int>(x.size()) - 2;
  if (r < 1 || static_cast<int>(w.size()) != r + 2) ctx.Fail("X and W must have the same rank >= 3");
  if (r > 3) ctx.Unsupported(std::to_string(r) + "-D convolution is not supported (1-D to 3-D are)");
  cpu::ConvSpec spec;
  spec.transpose = transpose;
  spec.group = node.attr_int("group", 1);
  spec.channels_last = node.attr_int("channels_last", 0) != 0;  // X, Y [N, spatial..., C]
  if (spec.channels_last && (transpose || y_from_geometry))
    ctx.Unsupported("channels_last on a transposed or fused convolution");
  const std::vector<int64_t> xl = spec.channels_last ? ChannelsFirst(x) : x;
  const std::vector<int64_t> yl = spec.channels_last ? ChannelsFirst(y) : y;
  spec.n = xl[0];
  spec.c_in = xl[1];
  spec.c_out = yl[1];
  spec.has_bias = bi >= 0 && ctx.has_input(bi);
  spec.in_spatial.assign(xl.begin() + 2, xl.end());
  if (!y_from_geometry) spec.out_spatial.assign(yl.begin() + 2, yl.end());
  spec.kernel.assign(w.begin() + 2, w.end());
  spec.strides = node.attr_ints("strides", std::vector<int64_t>(r, 1));
  spec.dilations = node.attr_ints("dilations", std::vector<int64_t>(r, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  auto op = node.attr_ints("output_padding", std::vector<int64_t>(r, 0));
  auto os = node.attr_ints("output_shape");
  if (static_cast<int>(os.size()) == r + 2) os.erase(os.begin(), os.begin() + 2);
  for (int i = 0; i < r; ++i) {
    const auto g = transpose ? linalg::ConvTransposeAxis(xl[2 + i], spec.kernel[i], spec.strides[i], spec.dilations[i],
                                                         pads[i], pads[r + i], op[i], os.empty() ? -1 : os[i], auto_pad)
                             : linalg::ConvAxis(xl[2 + i], spec.kernel[i], spec.strides[i], spec.dilations[i], pads[i],
                                                pads[r + i], auto_pad, false);
    if (y_from_geometry) {
      spec.out_spatial.push_back(g.out);
    } else if (g.out != spec.out_spatial[i]) {
      ctx.Fail("output shape disagrees with the convolution geometry");
    }
    spec.pad_begin.push_back(g.pad_begin);
    spec.pad_end.push_back(g.pad_end);
  }
  const int64_t cin_w = transpose ? w[0] : w[1] * spec.group;
  if (cin_w != spec.c_in) ctx.Fail("X's channels do not match W");
  if (spec.c_out % spec.group != 0 || spec.c_in % spec.group != 0) ctx.Fail("channels not divisible by group");
  return spec;
}

namespace {

KernelInfo ConvKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (!IsDnnType(t) && t != DataType::kFloat64) ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
  cpu::ConvSpec spec = BuildConvSpec(ctx, 0, 1, 2);
  spec.type = ToDnnType(t);
  KernelInfo info;
  if (t == DataType::kFloat64) {
    if (spec.channels_last) ctx.Unsupported("a channels-last float64 convolution (the reference loops read NCHW)");
    info.fn = [spec](const KernelIO& io) {
      cpu::NaiveConv<double>(spec, io.In<double>(0), io.In<double>(1), io.In<double>(2), io.Out<double>(0));
    };
    return info;
  }
  // W known for the plan's lifetime (an initializer): the primitive may keep it in its own layout.
  const Tensor* w_const = ctx.input_values.size() > 1 ? ctx.input_values[1] : nullptr;
  auto conv = std::make_shared<cpu::DnnlConv>(spec, w_const ? w_const->raw() : nullptr);
  info.fn = [conv](const KernelIO& io) { conv->Run(io.in[0], io.in[1], io.in[2], io.out[0]); };
  info.heap_bytes = cpu::DnnlCallHeapBytes(5);
  info.exclusive = true;
  return info;
}

}  // namespace

void RegisterLinalgKernels(KernelRegistry& r) {
  r.Register("MatMul", MatMulKernel);
  r.Register("Gemm", GemmKernel);
  r.Register("MatMulTrans", MatMulTransKernel, kInternalDomain);
  r.Register("GemmSum", GemmSumKernel, kInternalDomain);
  r.Register("Conv", ConvKernel);
  r.Register("ConvTranspose", ConvKernel);
  RegisterLinalgPoolKernels(r);
  RegisterLinalgEinsumKernels(r);
  RegisterLinalgQuantKernels(r);
}

}  // namespace ot
