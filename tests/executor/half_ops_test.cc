// The CPU kernels of every op the amp pass runs in half precision (issue 4, point 5), in float16 and bfloat16:
// each case draws fresh random inputs, rounds them to the half type, runs the op once on the half tensors and
// once in float32 on the same (exactly widened) values, and compares. Since the half kernels compute in fp32
// (or double) inside and round once when storing, the difference is the output's own rounding: rtol 1e-3 for
// fp16 (half an ulp is 2^-11), 1e-2 for bf16 (2^-8), and an atol that grows with the reduction length where a
// dot product's fp32 summation order may differ. Data movement (the AMP "clear" ops) must be bit-exact.
//
// The kernels run directly from the registry (schema inference, then the CPU factory) with every float output
// prefilled with NaN, so an element a kernel forgets to write fails the comparison: no half output may be NaN.
// Mixed dtypes: BatchNormalization and BatchNormGrad with half X and float32 scale/statistics, LayerNorm's fp32
// Mean/InvStdDev; a scale of another half type is an error naming the node.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cpu_ops/conv.h"
#include "cpu_ops/half_convert.h"
#include "cpu_ops/matmul.h"
#include "executor/executor.h"
#include "executor/kernel_registry.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "kernel_common/half.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::RandomTensor;

constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kI64 = DataType::kInt64;

// How an input enters the half run: kHalf is rounded to the half dtype (the float32 run gets the same values
// widened back), kF32 stays float32 in both runs (BatchNorm's parameters), kKeep is passed unchanged (indices,
// masks, shapes).
enum class Kind { kHalf, kF32, kKeep };

struct Arg {
  Tensor value;
  Kind kind = Kind::kHalf;
  bool constant = false;  // an initializer: its value is known when the kernel is made (shapes, axes)
};

Arg H(std::vector<int64_t> dims, double lo = -1, double hi = 1) { return {RandomTensor(kF32, dims, lo, hi)}; }
Arg F32(std::vector<int64_t> dims, double lo = -1, double hi = 1) {
  return {RandomTensor(kF32, dims, lo, hi), Kind::kF32};
}
Arg Keep(Tensor t) { return {std::move(t), Kind::kKeep}; }
Arg Const(Tensor t) { return {std::move(t), Kind::kKeep, true}; }
Arg Ints(std::vector<int64_t> v) { return Const(Tensor::FromInt64(v, {static_cast<int64_t>(v.size())})); }
Arg IntScalar(int64_t v) { return Const(Tensor::FromInt64({v}, {})); }
Arg None() { return {Tensor(), Kind::kKeep}; }

Tensor RandomInts(std::vector<int64_t> dims, int64_t lo, int64_t hi) {
  Tensor t(kI64, dims);
  std::uniform_int_distribution<int64_t> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = u(test::Rng());
  return t;
}

Tensor RandomBools(std::vector<int64_t> dims) {
  Tensor t(DataType::kBool, dims);
  std::bernoulli_distribution b(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = b(test::Rng());
  return t;
}

struct Call {
  std::string op;
  std::map<std::string, Attribute> attrs = {};
  int outputs = 1;
  int opset = 17;
  std::string domain = "";
};

Attribute I(int64_t v) { return Attribute::Int(v); }
Attribute Is(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }
Attribute Fl(float v) { return Attribute::Float(v); }

// One node run through the registry's inference and its CPU kernel factory, outputs prefilled with NaN (float
// outputs) or 0x5a bytes (others). Errors of the schema or the factory propagate (they name the node).
std::vector<Tensor> RunKernel(const Call& c, const std::vector<Tensor>& ins, const std::vector<bool>& constant) {
  Graph g;
  g.opset_imports[""] = c.opset;
  if (!c.domain.empty()) g.opset_imports[c.domain] = 1;
  std::vector<Value*> iv, ov;
  std::vector<TypeShape> ts;
  std::vector<const Tensor*> vals;
  std::vector<TensorDesc> descs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].empty_tensor()) {
      iv.push_back(nullptr);
      ts.push_back({});
      vals.push_back(nullptr);
      descs.push_back({});
      continue;
    }
    Value* v = g.AddValue("in" + std::to_string(i));
    v->dtype = ins[i].dtype();
    v->shape = Shape::Static(ins[i].dims());
    iv.push_back(v);
    ts.push_back({ins[i].dtype(), Shape::Static(ins[i].dims()), true});
    vals.push_back(constant[i] ? &ins[i] : nullptr);
    descs.push_back({ins[i].dtype(), ins[i].dims(), true});
  }
  for (int i = 0; i < c.outputs; ++i) ov.push_back(g.AddValue("out" + std::to_string(i)));
  Node* n = g.AddNode(c.op, iv, ov, "node");
  n->domain = c.domain;
  n->opset = c.domain.empty() ? c.opset : 1;
  n->attrs = c.attrs;
  const OpSchema* schema = OpRegistry::Global().Find(c.domain, c.op);
  if (!schema) throw Error("no schema for " + c.op);
  InferContext ictx(*n, ts, vals, c.outputs);
  schema->infer(ictx);
  std::vector<TensorDesc> outs;
  for (int i = 0; i < c.outputs; ++i) {
    const TypeShape& o = ictx.outputs()[i];
    if (!o.present || !o.shape.is_static())
      throw Error(n->Describe() + ": output " + std::to_string(i) + " not inferred");
    outs.push_back({o.dtype, o.shape.StaticDims(), true});
  }
  KernelContext kctx{*n, descs, vals, outs, 1234};
  const KernelFactory* f = KernelRegistry::Cpu().Find(c.domain, c.op);
  if (!f) throw Error("no kernel for " + c.op);
  KernelInfo k = (*f)(kctx);
  std::vector<Tensor> result;
  for (const TensorDesc& d : outs) {
    Tensor t(d.dtype, d.dims);
    if (IsFloat(d.dtype)) {
      for (int64_t i = 0; i < t.numel(); ++i) t.SetDouble(i, std::numeric_limits<double>::quiet_NaN());
    } else if (t.nbytes()) {
      std::memset(t.raw(), 0x5a, t.nbytes());
    }
    result.push_back(std::move(t));
  }
  std::vector<const void*> in_ptrs(std::max<size_t>(ins.size(), 16), nullptr);
  std::vector<void*> out_ptrs(std::max<size_t>(outs.size(), 16), nullptr);
  for (size_t i = 0; i < ins.size(); ++i) in_ptrs[i] = ins[i].empty_tensor() ? nullptr : ins[i].raw();
  for (size_t i = 0; i < result.size(); ++i) out_ptrs[i] = result[i].raw();
  k.fn(KernelIO{in_ptrs.data(), out_ptrs.data(), 0});
  return result;
}

struct Tol {
  double k = 1;               // reduction length (dot products): widens atol
  bool exact = false;         // data movement: bit-exact
  std::set<int> fp32_outs{};  // outputs that stay float32 in the half run
  bool allow_nan = false;     // inputs contain NaN on purpose
};

std::string Where(const Call& c, DataType h, int out) {
  return c.op + " in " + DataTypeName(h) + ", output " + std::to_string(out);
}

// Runs `c` on `args` in half type h and in float32 (same rounded values); compares output by output.
void Check(DataType h, const Call& c, const std::vector<Arg>& args, const Tol& tol = {}) {
  std::vector<Tensor> hin, fin;
  std::vector<bool> constant;
  for (const Arg& a : args) {
    constant.push_back(a.constant);
    if (a.kind == Kind::kHalf) {
      Tensor r = a.value.CastTo(h);
      fin.push_back(r.CastTo(kF32));
      hin.push_back(std::move(r));
    } else {
      hin.push_back(a.value);
      fin.push_back(a.value);
    }
  }
  std::vector<Tensor> got = RunKernel(c, hin, constant);
  std::vector<Tensor> want = RunKernel(c, fin, constant);
  ASSERT_EQ(got.size(), want.size());
  const double rtol = h == DataType::kFloat16 ? 1e-3 : 1e-2;
  for (size_t o = 0; o < got.size(); ++o) {
    SCOPED_TRACE(Where(c, h, static_cast<int>(o)));
    const Tensor& x = got[o];
    const Tensor& y = want[o];
    ASSERT_EQ(DimsToString(x.dims()), DimsToString(y.dims()));
    const bool stays = tol.fp32_outs.count(static_cast<int>(o)) > 0;
    if (y.dtype() == kF32) {
      ASSERT_EQ(DataTypeName(x.dtype()), DataTypeName(stays ? kF32 : h));
    } else {
      ASSERT_EQ(DataTypeName(x.dtype()), DataTypeName(y.dtype()));
    }
    if (!IsFloat(x.dtype())) {
      ASSERT_EQ(0, std::memcmp(x.raw(), y.raw(), x.nbytes())) << "non-float output differs";
      continue;
    }
    int bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double a = x.GetDouble(i), b = y.GetDouble(i);
      if (std::isnan(a) || std::isnan(b)) {
        if (!(tol.allow_nan && std::isnan(a) && std::isnan(b)) && ++bad <= 5)
          ADD_FAILURE() << "element " << i << " is NaN (unwritten?): got " << a << ", float32 run " << b;
        continue;
      }
      double lim;
      if (tol.exact)
        lim = 0;
      else if (x.dtype() == kF32)
        lim = 1e-5 * std::fabs(b) + 1e-6 * tol.k;
      else
        lim = rtol * std::fabs(b) + 1e-6 * tol.k;
      if (!(std::fabs(a - b) <= lim) && !(std::isinf(a) && a == b) && ++bad <= 5)
        ADD_FAILURE() << "element " << i << ": got " << a << ", float32 run " << b;
    }
    EXPECT_EQ(bad, 0);
  }
}

class HalfOps : public ::testing::TestWithParam<DataType> {
 protected:
  DataType h() const { return GetParam(); }
};

// ---- allow: GEMM and convolution ------------------------------------------------------------------------------

TEST_P(HalfOps, MatMul) {
  Check(h(), {"MatMul"}, {H({5, 7}), H({7, 3})}, {7});
  Check(h(), {"MatMul"}, {H({2, 3, 17, 33}), H({33, 9})}, {33});
  Check(h(), {"MatMul"}, {H({2, 1, 4, 65}), H({3, 65, 5})}, {65});
  Check(h(), {"MatMul"}, {H({31}), H({31, 6})}, {31});
}

TEST_P(HalfOps, Gemm) {
  Check(h(), {"Gemm"}, {H({6, 40}), H({40, 11})}, {40});
  Check(h(), {"Gemm", {{"transA", I(1)}, {"transB", I(1)}, {"alpha", Fl(0.5f)}, {"beta", Fl(1.f)}}},
        {H({37, 9}), H({13, 37}), H({13})}, {37});
  Check(h(), {"Gemm", {{"transB", I(1)}, {"beta", Fl(2.f)}}}, {H({8, 64}), H({5, 64}), H({8, 1})}, {64});
}

TEST_P(HalfOps, Conv) {
  Check(h(), {"Conv", {{"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}}},
        {H({2, 3, 9, 9}), H({4, 3, 3, 3}), H({4})}, {27});
  Check(h(), {"Conv", {{"group", I(2)}, {"dilations", Is({2, 1})}}}, {H({1, 4, 11, 7}), H({6, 2, 3, 3})}, {18});
  Check(h(), {"Conv", {{"pads", Is({2, 1})}}}, {H({3, 5, 13}), H({2, 5, 4}), H({2})}, {20});
  // Weights known at plan time (the path that may keep them in oneDNN's blocked layout).
  Arg w = H({8, 3, 3, 3});
  w.constant = true;
  Check(h(), {"Conv", {{"pads", Is({1, 1, 1, 1})}}}, {H({2, 3, 10, 10}), w}, {27});
}

TEST_P(HalfOps, ConvTranspose) {
  Check(h(), {"ConvTranspose", {{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}, {"output_padding", Is({1, 1})}}},
        {H({2, 4, 5, 6}), H({4, 3, 3, 3}), H({3})}, {36});
  Check(h(), {"ConvTranspose", {{"group", I(2)}}}, {H({1, 4, 7}), H({4, 1, 3})}, {6});
}

TEST_P(HalfOps, Einsum) {
  Check(h(), {"Einsum", {{"equation", Attribute::String("ij,jk->ik")}}}, {H({7, 19}), H({19, 5})}, {19});
  Check(h(), {"Einsum", {{"equation", Attribute::String("bij,bkj->bik")}}}, {H({3, 4, 23}), H({3, 6, 23})}, {23});
  Check(h(), {"Einsum", {{"equation", Attribute::String("i,i->")}}}, {H({101}), H({101})}, {101});
  Check(h(), {"Einsum", {{"equation", Attribute::String("ij->ji")}}}, {H({3, 5})});
}

TEST_P(HalfOps, ConvGradData) {
  const std::map<std::string, Attribute> geo = {{"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}};
  // X [2,3,9,9], W [4,3,3,3] -> Y [2,4,5,5].
  Check(h(), {"ConvGradData", geo, 1, 17, kInternalDomain}, {H({2, 4, 5, 5}), H({4, 3, 3, 3}), Ints({2, 3, 9, 9})},
        {36});
  Check(h(), {"ConvGradData", {{"group", I(2)}}, 1, 17, kInternalDomain},
        {H({1, 6, 5, 3}), H({6, 2, 3, 3}), Ints({1, 4, 7, 5})}, {27});
}

TEST_P(HalfOps, ConvGradWeight) {
  const std::map<std::string, Attribute> geo = {{"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}};
  Check(h(), {"ConvGradWeight", geo, 1, 17, kInternalDomain}, {H({2, 4, 5, 5}), H({2, 3, 9, 9}), Ints({4, 3, 3, 3})},
        {50});
  Check(h(), {"ConvGradWeight", {{"group", I(2)}}, 1, 17, kInternalDomain},
        {H({3, 6, 5, 3}), H({3, 4, 7, 5}), Ints({6, 2, 3, 3})}, {45});
  // Depthwise 5x5 (EfficientNet's): oneDNN's half primitive for it is gemm-based, so cpu_ops/depthwise_grad.h runs on
  // widened copies; 3x3 stays in oneDNN's jit_dw.
  for (int64_t k : {5, 3}) {
    const int64_t p = k / 2;
    Check(h(), {"ConvGradWeight", {{"group", I(6)}, {"pads", Is({p, p, p, p})}}, 1, 17, kInternalDomain},
          {H({2, 6, 9, 9}), H({2, 6, 9, 9}), Ints({6, 1, k, k})}, {2 * 81});
  }
}

// ---- infer: element-wise ---------------------------------------------------------------------------------------

TEST_P(HalfOps, BinaryArithmetic) {
  for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"}) {
    Check(h(), {op}, {H({3, 1, 5}, -2, 2), H({4, 5}, -2, 2)});
    Check(h(), {op}, {H({1031}, -2, 2), H({1031}, -2, 2)});
    Check(h(), {op}, {H({2, 3, 4, 5}), H({3, 1, 1})});
  }
  Check(h(), {"Div"}, {H({3, 1, 5}, -2, 2), H({4, 5}, 0.5, 2)});
  Check(h(), {"Div"}, {H({40000}, -2, 2), H({40000}, 0.5, 2)});  // several parallel chunks
  Check(h(), {"Div"}, {H({3, 5}, 0.5, 2), H({}, 0.5, 2)});
  Check(h(), {"PRelu"}, {H({2, 3, 4, 5}), H({3, 1, 1})});
}

TEST_P(HalfOps, Variadic) {
  for (const char* op : {"Sum", "Max", "Min", "Mean"}) {
    Check(h(), {op}, {H({3, 1, 5}), H({4, 5}), H({5})});
    Check(h(), {op}, {H({7, 9})});
  }
}

TEST_P(HalfOps, Where) {
  Check(h(), {"Where"}, {Keep(RandomBools({4, 1, 6})), H({3, 6}), H({4, 3, 1})});
  Check(h(), {"Where"}, {Keep(RandomBools({333})), H({333}), H({333})});
}

TEST_P(HalfOps, Unary) {
  struct U {
    const char* op;
    double lo, hi;
    std::map<std::string, Attribute> attrs;
  };
  const std::vector<U> ops = {
      {"Neg", -3, 3, {}},
      {"Abs", -3, 3, {}},
      {"Relu", -3, 3, {}},
      {"LeakyRelu", -3, 3, {{"alpha", Fl(0.07f)}}},
      {"Elu", -3, 3, {{"alpha", Fl(1.3f)}}},
      {"Selu", -3, 3, {}},
      {"Celu", -3, 3, {{"alpha", Fl(0.7f)}}},
      {"Sigmoid", -6, 6, {}},
      {"HardSigmoid", -6, 6, {}},
      {"HardSwish", -5, 5, {}},
      {"Tanh", -3, 3, {}},
      {"Softplus", -6, 6, {}},
      {"Softsign", -5, 5, {}},
      {"Mish", -5, 5, {}},
      {"Erf", -2, 2, {}},
      {"Sqrt", 0.01, 9, {}},
      {"Reciprocal", 0.1, 4, {}},
      {"Floor", -4, 4, {}},
      {"Ceil", -4, 4, {}},
      {"Round", -4, 4, {}},
      {"Sign", -2, 2, {}},
  };
  for (const U& u : ops) {
    Check(h(), {u.op, u.attrs}, {H({2, 3, 5}, u.lo, u.hi)});
    Check(h(), {u.op, u.attrs}, {H({20001}, u.lo, u.hi)});
  }
  Check(h(), {"Gelu", {}, 1, 20}, {H({4, 77}, -4, 4)});
  Check(h(), {"Gelu", {{"approximate", Attribute::String("tanh")}}, 1, 20}, {H({4, 77}, -4, 4)});
  // Round: exact halves go to even (2.5 -> 2), representable in both half types.
  Tensor halves = Tensor::FromFloat({0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.5f}, {6});
  Check(h(), {"Round"}, {{halves}});
}

TEST_P(HalfOps, Clip) {
  Check(h(), {"Clip", {}, 1, 13}, {H({5, 9}, -2, 2), H({}, -1, -0.5), H({}, 0.2, 1)});
  Check(h(), {"Clip", {}, 1, 13}, {H({5, 9}, -2, 2), None(), H({}, 0.2, 1)});
  Arg lo = H({}, -1, -0.5);
  lo.constant = true;
  Check(h(), {"Clip", {}, 1, 13}, {H({1000}, -2, 2), lo});
}

TEST_P(HalfOps, Dropout) {
  Arg ratio = F32({}, 0.3, 0.3);
  ratio.kind = Kind::kHalf;
  ratio.constant = true;
  // Inference: identity (and an all-true mask).
  Check(h(), {"Dropout", {}, 2, 13}, {H({6, 7}), ratio});
  // Training: the same seed gives the same mask in both runs; kept elements scaled by 1/(1 - ratio).
  Tensor on(DataType::kBool, {});
  on.data<bool>()[0] = true;
  Check(h(), {"Dropout", {}, 2, 13}, {H({6, 1001}), ratio, Const(on)});
}

// ---- infer: pooling, softmax, norms ----------------------------------------------------------------------------

TEST_P(HalfOps, Pooling) {
  Check(h(), {"MaxPool", {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}, 2},
        {H({2, 3, 9, 9})});
  Check(h(), {"MaxPool", {{"kernel_shape", Is({2, 2})}, {"ceil_mode", I(1)}}}, {H({1, 2, 7, 5})});
  Check(h(), {"MaxPool", {{"kernel_shape", Is({3})}, {"dilations", Is({2})}}}, {H({2, 3, 17})});
  Check(h(), {"AveragePool", {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}},
        {H({2, 3, 9, 9})}, {9});
  Check(h(), {"AveragePool", {{"kernel_shape", Is({3, 2})}, {"pads", Is({1, 1, 1, 1})}, {"count_include_pad", I(1)}}},
        {H({2, 3, 7, 6})}, {6});
  Check(h(), {"GlobalAveragePool"}, {H({2, 5, 13, 11})}, {143});
  Check(h(), {"GlobalMaxPool"}, {H({2, 5, 13, 11})});
}

TEST_P(HalfOps, Softmax) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    Check(h(), {op}, {H({3, 4, 37}, -4, 4)}, {37});
    Check(h(), {op, {{"axis", I(1)}}}, {H({3, 7, 5}, -4, 4)}, {7});
    Check(h(), {op, {{"axis", I(1)}}, 1, 11}, {H({3, 7, 5}, -4, 4)}, {35});
  }
}

TEST_P(HalfOps, InstanceNormalization) {
  Check(h(), {"InstanceNormalization", {{"epsilon", Fl(1e-3f)}}}, {H({2, 3, 7, 5}, -2, 3), H({3}), H({3})}, {35});
}

TEST_P(HalfOps, LayerNormalization) {
  Tol t{19, false, {1, 2}};
  Check(h(), {"LayerNormalization", {}, 3}, {H({3, 5, 19}, -2, 3), H({19}), H({19})}, t);
  t.k = 95;
  Check(h(), {"LayerNormalization", {{"axis", I(1)}, {"epsilon", Fl(1e-3f)}}, 3},
        {H({3, 5, 19}, -2, 3), H({5, 19}), H({19})}, t);
  Check(h(), {"LayerNormalization", {{"axis", I(-2)}}, 1}, {H({2, 4, 6}), H({1, 6}), None()}, {24});
}

TEST_P(HalfOps, BatchNormalizationInference) {
  // X half; scale, B, mean and var float32 (ONNX's T1, T2).
  Check(h(), {"BatchNormalization", {{"epsilon", Fl(1e-3f)}}, 1, 15},
        {H({2, 3, 5, 4}, -2, 3), F32({3}), F32({3}), F32({3}), F32({3}, 0.5, 2)});
  // All half (T1 = T2 = T) is also allowed.
  Check(h(), {"BatchNormalization", {}, 1, 15}, {H({2, 3, 6}), H({3}), H({3}), H({3}), H({3}, 0.5, 2)});
}

TEST_P(HalfOps, BatchNormalizationTrainingMode) {
  // Y half; running_mean and running_var stay float32 (from the fp32 inputs), statistics in double.
  Tol t{40, false, {1, 2}};
  Check(h(), {"BatchNormalization", {{"training_mode", I(1)}, {"momentum", Fl(0.8f)}}, 3, 15},
        {H({4, 3, 5, 2}, -2, 3), F32({3}), F32({3}), F32({3}), F32({3}, 0.5, 2)}, t);
  Check(h(), {"BatchNormalization", {{"training_mode", I(1)}}, 3, 15},
        {H({3, 5, 7}, -2, 3), F32({5}), F32({5}), F32({5}), F32({5}, 0.5, 2)}, t);
}

// ---- infer: internal backward ops ------------------------------------------------------------------------------

TEST_P(HalfOps, ReluGrad) {
  Check(h(), {"ReluGrad", {}, 1, 17, kInternalDomain}, {H({3, 7, 11}), H({3, 7, 11})});
  Check(h(), {"ReluGrad", {}, 1, 17, kInternalDomain}, {H({70001}), H({70001})});
}

TEST_P(HalfOps, PoolGrads) {
  const std::map<std::string, Attribute> geo = {
      {"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}};
  Check(h(), {"MaxPoolGrad", geo, 1, 17, kInternalDomain}, {H({2, 3, 5, 5}), H({2, 3, 9, 9})}, {4});
  Check(h(), {"MaxPoolGrad", {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}, 1, 17, kInternalDomain},
        {H({2, 3, 4, 3}), H({2, 3, 8, 6})});
  Check(h(), {"AveragePoolGrad", geo, 1, 17, kInternalDomain}, {H({2, 3, 5, 5}), Ints({2, 3, 9, 9})}, {4});
  auto inc = geo;
  inc["count_include_pad"] = I(1);
  Check(h(), {"AveragePoolGrad", inc, 1, 17, kInternalDomain}, {H({2, 3, 5, 5}), Ints({2, 3, 9, 9})}, {4});
  // 21 planes of 100 x 100: widened in blocks of 6 planes (the last one of 3); the relu fold's mask on X.
  const std::map<std::string, Attribute> two = {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}};
  auto relu = two;
  relu["relu"] = I(1);
  Check(h(), {"MaxPoolGrad", two, 1, 17, kInternalDomain}, {H({3, 7, 50, 50}), H({3, 7, 100, 100})});
  Check(h(), {"MaxPoolGrad", relu, 1, 17, kInternalDomain}, {H({3, 7, 50, 50}), H({3, 7, 100, 100})});
  Check(h(), {"AveragePoolGrad", two, 1, 17, kInternalDomain}, {H({3, 7, 50, 50}), Ints({3, 7, 100, 100})}, {4});
}

TEST_P(HalfOps, SoftmaxGrad) {
  Check(h(), {"SoftmaxGrad", {{"axis", I(-1)}}, 1, 17, kInternalDomain}, {H({3, 4, 29}), H({3, 4, 29}, 0, 0.2)}, {29});
  Check(h(), {"SoftmaxGrad", {{"axis", I(1)}, {"log", I(1)}}, 1, 17, kInternalDomain},
        {H({3, 6, 5}), H({3, 6, 5}, -4, -0.5)}, {6});
}

TEST_P(HalfOps, ReduceToShape) {
  Check(h(), {"ReduceToShape", {}, 1, 17, kInternalDomain}, {H({4, 5, 6}), Ints({5, 1})}, {24});
  Check(h(), {"ReduceToShape", {}, 1, 17, kInternalDomain}, {H({64, 33}), Ints({33})}, {64});
  Check(h(), {"ReduceToShape", {}, 1, 17, kInternalDomain}, {H({3, 4}), Ints({3, 4})});
}

TEST_P(HalfOps, LayerNormGrad) {
  // dX half; dScale and dB like Scale (half), summed over the rows in double.
  Check(h(), {"LayerNormGrad", {{"axis", I(-1)}}, 3, 17, kInternalDomain},
        {H({6, 5, 21}), H({6, 5, 21}, -2, 3), H({21})}, {30});
  Check(h(), {"LayerNormGrad", {{"axis", I(1)}, {"epsilon", Fl(1e-3f)}}, 3, 17, kInternalDomain},
        {H({4, 3, 7}), H({4, 3, 7}, -2, 3), H({7})}, {4});
}

// Enough rows for several blocks of the float row kernels that the half rows are widened for (cpu_ops/row_grad.h:
// 16384 elements a block; norm.cc's LayerNorm: 32768; chunks of 2048 within them), so each block's and chunk's rows
// land at their own offset.
TEST_P(HalfOps, RowKernelsOverSeveralBlocks) {
  for (const char* op : {"Softmax", "LogSoftmax"}) Check(h(), {op}, {H({3, 1100, 16}, -4, 4)}, {16});
  Check(h(), {"LayerNormalization", {}, 3}, {H({2, 2100, 16}, -2, 3), H({16}), H({16})}, {16, false, {1, 2}});
  Check(h(), {"SoftmaxGrad", {{"axis", I(-1)}}, 1, 17, kInternalDomain}, {H({3, 1100, 16}), H({3, 1100, 16}, 0, 0.2)},
        {16});
  Check(h(), {"LayerNormGrad", {{"axis", I(-1)}}, 3, 17, kInternalDomain},
        {H({2, 1500, 16}), H({2, 1500, 16}, -2, 3), H({16})}, {3000});
}

TEST_P(HalfOps, LayerNormGradWithSavedStatistics) {
  // The forward's fp32 Mean and InvStdDev as inputs 3 and 4: the same gradients as recomputing them from X.
  const DataType t = h();
  Tensor x = RandomTensor(kF32, {5, 3, 17}, -2, 3).CastTo(t);
  Tensor scale = RandomTensor(kF32, {17}).CastTo(t), bias = RandomTensor(kF32, {17}).CastTo(t);
  auto fwd = RunKernel({"LayerNormalization", {}, 3}, {x, scale, bias}, {false, false, false});
  ASSERT_EQ(fwd[1].dtype(), kF32);
  Tensor dy = RandomTensor(kF32, {5, 3, 17}).CastTo(t);
  Call c{"LayerNormGrad", {{"axis", I(-1)}}, 3, 17, kInternalDomain};
  auto saved = RunKernel(c, {dy, x, scale, fwd[1], fwd[2]}, {false, false, false, false, false});
  auto recomputed = RunKernel(c, {dy, x, scale}, {false, false, false});
  const double rtol = t == DataType::kFloat16 ? 2e-3 : 2e-2;
  for (int o = 0; o < 3; ++o) {
    ASSERT_EQ(saved[o].dtype(), t);
    test::ExpectClose(saved[o].CastTo(kF32), recomputed[o].CastTo(kF32), rtol, 1e-3);
  }
}

TEST_P(HalfOps, BatchNormGrad) {
  // dY and X half; scale (and the inference-mode mean/var) float32 -> dX half, dScale and dBias float32.
  Tol t{60, false, {1, 2}};
  Check(h(), {"BatchNormGrad", {{"epsilon", Fl(1e-3f)}, {"training", I(1)}}, 3, 17, kInternalDomain},
        {H({4, 3, 5, 3}), H({4, 3, 5, 3}, -2, 3), F32({3})}, t);
  Check(h(), {"BatchNormGrad", {{"training", I(0)}}, 3, 17, kInternalDomain},
        {H({4, 3, 5}), H({4, 3, 5}, -2, 3), F32({3}), F32({3}), F32({3}, 0.5, 2)}, t);
}

// ---- clear: data movement and comparisons (bit-exact) ----------------------------------------------------------

TEST_P(HalfOps, DataMovement) {
  const Tol ex{1, true};
  Check(h(), {"Reshape"}, {H({3, 4, 5}), Ints({5, -1})}, ex);
  Check(h(), {"Transpose", {{"perm", Is({2, 0, 1})}}}, {H({3, 4, 5})}, ex);
  Check(h(), {"Transpose", {{"perm", Is({1, 0})}}}, {H({67, 45})}, ex);
  Check(h(), {"Flatten", {{"axis", I(2)}}}, {H({2, 3, 4, 5})}, ex);
  Check(h(), {"Squeeze"}, {H({3, 1, 5}), Ints({1})}, ex);
  Check(h(), {"Unsqueeze"}, {H({3, 5}), Ints({0, 3})}, ex);
  Check(h(), {"Concat", {{"axis", I(1)}}}, {H({2, 3, 4}), H({2, 1, 4}), H({2, 5, 4})}, ex);
  Check(h(), {"Split", {{"axis", I(1)}}, 2}, {H({2, 7, 3}), Ints({3, 4})}, ex);
  Check(h(), {"Slice"}, {H({5, 9}), Ints({1, -1}), Ints({4, 0}), Ints({0, 1}), Ints({2, -2})}, ex);
  Check(h(), {"Gather", {{"axis", I(1)}}}, {H({3, 7, 2}), Keep(RandomInts({4, 2}, -7, 6))}, ex);
  Check(h(), {"GatherElements", {{"axis", I(0)}}}, {H({4, 5}), Keep(RandomInts({3, 5}, 0, 3))}, ex);
  Check(h(), {"GatherND"}, {H({3, 4, 5}), Keep(RandomInts({6, 2}, 0, 2))}, ex);
  Check(h(), {"Expand"}, {H({3, 1}), Ints({2, 3, 4})}, ex);
  Check(h(), {"Identity"}, {H({7, 3})}, ex);
  Check(h(), {"Tile"}, {H({2, 3}), Ints({2, 3})}, ex);
  Check(h(), {"Pad"}, {H({3, 4}), Ints({1, 0, 2, 3}), H({})}, ex);
  Check(h(), {"Pad", {{"mode", Attribute::String("reflect")}}}, {H({3, 4}), Ints({1, 2, 1, 2})}, ex);
  Check(h(), {"Pad", {{"mode", Attribute::String("edge")}}}, {H({3, 4}), Ints({0, 2, 1, 0})}, ex);
  Check(h(), {"DepthToSpace", {{"blocksize", I(2)}}}, {H({2, 8, 3, 5})}, ex);
  Check(h(), {"DepthToSpace", {{"blocksize", I(2)}, {"mode", Attribute::String("CRD")}}}, {H({1, 4, 3, 2})}, ex);
  Check(h(), {"SpaceToDepth", {{"blocksize", I(2)}}}, {H({2, 3, 4, 6})}, ex);
  Check(h(), {"ScatterND"}, {H({4, 5, 3}), Keep(Tensor::FromInt64({2, 0, 3, 1}, {2, 2})), H({2, 3})}, ex);
  Check(h(), {"ScatterElements", {{"axis", I(1)}}},
        {H({3, 5}), Keep(Tensor::FromInt64({4, 0, 1, 3, 2, 0}, {3, 2})), H({3, 2})}, ex);
  Check(h(), {"Trilu"}, {H({2, 5, 6}), IntScalar(1)}, ex);
  Check(h(), {"Trilu", {{"upper", I(0)}}}, {H({5, 4}), IntScalar(-1)}, ex);
}

TEST_P(HalfOps, SelectionAndComparison) {
  const Tol ex{1, true};
  Check(h(), {"TopK", {}, 2}, {H({3, 17}), Ints({5})}, ex);
  Check(h(), {"TopK", {{"axis", I(0)}, {"largest", I(0)}}, 2}, {H({9, 4}), Ints({3})}, ex);
  Check(h(), {"ArgMax", {{"axis", I(1)}}}, {H({4, 13, 3})}, ex);
  Check(h(), {"ArgMin", {{"axis", I(-1)}, {"keepdims", I(0)}, {"select_last_index", I(1)}}}, {H({4, 13})}, ex);
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    // Few distinct values, so equal pairs occur.
    Tensor a = RandomInts({5, 6}, -2, 2).CastTo(kF32), b = RandomInts({6}, -2, 2).CastTo(kF32);
    Check(h(), {op}, {{a}, {b}}, ex);
    Check(h(), {op}, {H({3, 1, 4}), H({5, 4})}, ex);
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor special = Tensor::FromFloat({1.f, -inf, nan, inf, 0.f, -2.f, 70000.f}, {7});
  Tol nan_ok = ex;
  nan_ok.allow_nan = true;
  Check(h(), {"IsNaN"}, {{special}}, nan_ok);
  Check(h(), {"IsInf"}, {{special}}, nan_ok);
  Check(h(), {"IsInf", {{"detect_negative", I(0)}}}, {{special}}, nan_ok);
}

// ---- Cast between float32, float16, bfloat16 and float64 ------------------------------------------------------

// Expected bits of v in half type t, by kernel_common/half.h's scalar conversions.
uint16_t HalfBits(DataType t, float v) { return t == DataType::kFloat16 ? FloatToHalfBits(v) : FloatToBf16Bits(v); }

TEST_P(HalfOps, CastFromFloat32RoundsToNearestEven) {
  const DataType t = h();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f,     -0.f,    1.f,   inf,   -inf,   std::numeric_limits<float>::quiet_NaN(),
                          65504.f, 65520.f, 1e-8f, 3e-5f, 1e-30f, 3.4e38f};
  // Ties and near-ties of both formats: 1 + 2^-11 (fp16 tie), 1 + 3*2^-11, 1 + 2^-8, 1 + 3*2^-8 (bf16 ties).
  for (float e : {0x1p-11f, 3 * 0x1p-11f, 0x1p-8f, 3 * 0x1p-8f}) {
    v.push_back(1.f + e);
    v.push_back(-(1.f + e));
  }
  const size_t fixed = v.size();
  Tensor r = RandomTensor(kF32, {3001}, -100, 100);
  for (int64_t i = 0; i < r.numel(); ++i) v.push_back(r.data<float>()[i]);
  Tensor x = Tensor::FromFloat(v, {static_cast<int64_t>(v.size())});
  auto y = RunKernel({"Cast", {{"to", I(static_cast<int64_t>(t))}}}, {x}, {false});
  ASSERT_EQ(y[0].dtype(), t);
  const uint16_t* bits = static_cast<const uint16_t*>(y[0].raw());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      const float back = t == DataType::kFloat16 ? HalfBitsToFloat(bits[i]) : Bf16BitsToFloat(bits[i]);
      EXPECT_TRUE(std::isnan(back)) << "NaN must stay NaN";
      continue;
    }
    ASSERT_EQ(bits[i], HalfBits(t, v[i])) << "element " << i << " (" << v[i] << ")" << (i < fixed ? " fixed" : "");
  }
  // Known values: ties go to the even neighbour (fp16: 1 + 2^-11 -> 1.0, 1 + 3*2^-11 -> 1 + 2^-9; bf16: 1 + 2^-8
  // -> 1.0, 1 + 3*2^-8 -> 1 + 2^-6); 65520 overflows fp16 to infinity.
  if (t == DataType::kFloat16) {
    EXPECT_EQ(bits[12], 0x3c00);
    EXPECT_EQ(bits[14], 0x3c02);
    EXPECT_EQ(bits[7], 0x7c00);
  } else {
    EXPECT_EQ(bits[16], 0x3f80);
    EXPECT_EQ(bits[18], 0x3f82);
  }
}

TEST_P(HalfOps, CastAllDirections) {
  const DataType t = h(), other = t == DataType::kFloat16 ? DataType::kBFloat16 : DataType::kFloat16;
  auto cast = [](const Tensor& x, DataType to) {
    return RunKernel({"Cast", {{"to", I(static_cast<int64_t>(to))}}}, {x}, {false})[0];
  };
  Tensor x = RandomTensor(kF32, {1025}, -8, 8).CastTo(t);
  // Widening is exact: half -> float32 and -> float64 give the same values, and back again gives the same bits.
  Tensor f = cast(x, kF32), d = cast(x, DataType::kFloat64);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(f.GetDouble(i), x.GetDouble(i));
    ASSERT_EQ(d.GetDouble(i), x.GetDouble(i));
  }
  for (const Tensor& w : {f, d}) {
    Tensor back = cast(w, t);
    ASSERT_EQ(0, std::memcmp(back.raw(), x.raw(), x.nbytes()));
  }
  // half -> the other half type: one rounding of the exact value.
  Tensor o = cast(x, other);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint16_t want = HalfBits(other, static_cast<float>(x.GetDouble(i)));
    ASSERT_EQ(static_cast<const uint16_t*>(o.raw())[i], want) << i;
  }
  // float64 -> half rounds once from the double value: 1 + 2^-11 + 2^-40 is just above fp16's tie (-> 1 + 2^-10),
  // though double -> float -> fp16 would see the exact tie and round to 1.0; the same for bf16 at 1 + 2^-8 + 2^-40.
  Tensor dd(DataType::kFloat64, {4});
  const double e = t == DataType::kFloat16 ? 0x1p-11 : 0x1p-8;
  dd.data<double>()[0] = 1 + e + 0x1p-40;
  dd.data<double>()[1] = -(1 + e + 0x1p-40);
  dd.data<double>()[2] = std::numeric_limits<double>::infinity();
  dd.data<double>()[3] = std::numeric_limits<double>::quiet_NaN();
  Tensor hd = cast(dd, t);
  EXPECT_EQ(hd.GetDouble(0), 1 + 2 * e);
  EXPECT_EQ(hd.GetDouble(1), -(1 + 2 * e));
  EXPECT_TRUE(std::isinf(hd.GetDouble(2)));
  EXPECT_TRUE(std::isnan(hd.GetDouble(3)));
  // Random doubles: the nearest half value (checked against the two neighbours of float rounding).
  Tensor rd = RandomTensor(DataType::kFloat64, {2000}, -3, 3);
  Tensor rh = cast(rd, t);
  for (int64_t i = 0; i < rd.numel(); ++i) {
    const double v = rd.GetDouble(i), got = rh.GetDouble(i);
    // The spacing at got's binade; below the smallest normal (fp16 2^-14, bf16 2^-126) the subnormals' fixed one.
    const int min_exp = t == DataType::kFloat16 ? -14 : -126;
    const double ulp =
        std::ldexp(1.0, std::max(std::ilogb(got == 0 ? v : got), min_exp) - (t == DataType::kFloat16 ? 10 : 7));
    ASSERT_LE(std::fabs(got - v), ulp / 2 + 1e-300) << v;
  }
}

// The bulk conversions (F16C/AVX2 eight at a time, scalar tails) against kernel_common/half.h's scalar ones: every
// 16-bit pattern widened, and random float bit patterns (NaNs, infinities, subnormals of both formats included)
// narrowed, bit for bit (NaN only as NaN: hardware may quiet a signalling NaN's payload differently).
TEST(HalfConvert, BulkMatchesScalarBitForBit) {
  std::vector<float16> h(65536 + 5);
  std::vector<bfloat16> b(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = float16::FromBits(static_cast<uint16_t>(i));
    b[i] = bfloat16::FromBits(static_cast<uint16_t>(i));
  }
  std::vector<float> f(h.size());
  const int64_t n = static_cast<int64_t>(h.size());
  cpu::HalfToFloat(h.data(), f.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float want = HalfBitsToFloat(h[i].bits);
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(f[i])) << i;
    else
      ASSERT_EQ(FloatBits(f[i]), FloatBits(want)) << i;
  }
  cpu::Bf16ToFloat(b.data(), f.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(f[i]), FloatBits(Bf16BitsToFloat(b[i].bits))) << i;

  std::vector<float> x(200003);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> pick(0, 3);
  for (float& v : x) {
    uint32_t u = bits(test::Rng());
    // A quarter each: any pattern, fp16's normal/subnormal range, ties of fp16 and bf16 (low bits 0x1000 / 0x8000).
    switch (pick(test::Rng())) {
      case 1:
        u = (u & 0x807fffffu) | ((100u + (u >> 23) % 45u) << 23);
        break;
      case 2:
        u = (u & 0xffffe000u) | 0x1000u;
        break;
      case 3:
        u = (u & 0xffff0000u) | 0x8000u;
        break;
      default:
        break;
    }
    v = BitsFloat(u);
  }
  const int64_t m = static_cast<int64_t>(x.size());
  std::vector<float16> hx(x.size());
  std::vector<bfloat16> bx(x.size());
  cpu::FloatToHalf(x.data(), hx.data(), m);
  cpu::FloatToBf16(x.data(), bx.data(), m);
  for (int64_t i = 0; i < m; ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(HalfBitsToFloat(hx[i].bits)));
      ASSERT_TRUE(std::isnan(Bf16BitsToFloat(bx[i].bits)));
      continue;
    }
    ASSERT_EQ(hx[i].bits, FloatToHalfBits(x[i])) << "fp16 of " << x[i];
    ASSERT_EQ(bx[i].bits, FloatToBf16Bits(x[i])) << "bf16 of " << x[i];
  }
  // double -> round-to-odd float, bulk against scalar: doubles near floats, exact floats, specials, overflow.
  std::vector<double> d;
  std::uniform_int_distribution<int> ulps(-3, 3);
  for (int64_t i = 0; i < 20000; ++i) {
    const double base = static_cast<double>(x[static_cast<size_t>(i)]);
    d.push_back(base);
    d.push_back(base + ulps(test::Rng()) * std::ldexp(std::fabs(base), -40));
  }
  for (double v : {0.0, -0.0, 1e300, -1e300, 1e-300, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), 1 + 0x1p-11 + 0x1p-40})
    d.push_back(v);
  std::vector<float> odd(d.size());
  cpu::DoublesToFloatsRoundOdd(d.data(), odd.data(), static_cast<int64_t>(d.size()));
  for (size_t i = 0; i < d.size(); ++i) {
    if (std::isnan(d[i])) {
      ASSERT_TRUE(std::isnan(odd[i]));
      continue;
    }
    ASSERT_EQ(FloatBits(odd[i]), FloatBits(cpu::RoundToOddFloat(d[i]))) << d[i];
  }
}

// ---- errors ----------------------------------------------------------------------------------------------------

TEST_P(HalfOps, MixedHalfTypesAreRejectedNamingTheNode) {
  const DataType t = h(), other = t == DataType::kFloat16 ? DataType::kBFloat16 : DataType::kFloat16;
  Tensor x = RandomTensor(kF32, {2, 3, 4}).CastTo(t);
  Tensor s = RandomTensor(kF32, {3}).CastTo(other), f = RandomTensor(kF32, {3});
  try {
    test::RunOp("BatchNormalization", {x, s, f, f, RandomTensor(kF32, {3}, 0.5, 2)}, {}, 1, 15);
    FAIL() << "a " << DataTypeName(other) << " scale for " << DataTypeName(t) << " X was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("BatchNormalization"), std::string::npos) << m;
    EXPECT_NE(m.find("node"), std::string::npos) << m;
    EXPECT_NE(m.find(DataTypeName(other)), std::string::npos) << m;
  }
  try {
    RunKernel({"BatchNormGrad", {{"training", I(1)}}, 3, 17, kInternalDomain}, {x, x, s}, {false, false, false});
    FAIL() << "BatchNormGrad accepted a " << DataTypeName(other) << " scale";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("BatchNormGrad"), std::string::npos) << m;
    EXPECT_NE(m.find("node"), std::string::npos) << m;
  }
  // dY of another half type than X.
  EXPECT_THROW(RunKernel({"LayerNormGrad", {}, 3, 17, kInternalDomain}, {x.CastTo(other), x, s.CastTo(t)},
                         {false, false, false}),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Half, HalfOps, ::testing::Values(DataType::kFloat16, DataType::kBFloat16),
                         [](const auto& info) { return DataTypeName(info.param); });

// ---- timing (not an assertion): disabled by default -----------------------------------------------------------

double TimeOp(const std::string& op, const std::vector<Tensor>& ins, const std::vector<bool>& constant,
              const std::map<std::string, Attribute>& attrs, int reps, const std::string& domain = "") {
  Graph g;
  g.opset_imports[""] = 17;
  if (!domain.empty()) g.opset_imports[domain] = 1;
  std::vector<Value*> iv;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    Value* v;
    if (constant[i]) {
      v = g.AddInitializer(name, ins[i]);
    } else {
      v = g.AddValue(name);
      v->dtype = ins[i].dtype();
      v->shape = Shape::Static(ins[i].dims());
      g.inputs.push_back(v);
      feeds[name] = ins[i];
    }
    iv.push_back(v);
  }
  Value* out = g.AddValue("out");
  g.outputs.push_back(out);
  Node* n = g.AddNode(op, iv, {out}, "node");
  n->attrs = attrs;
  n->opset = op == "Gelu" ? 20 : 17;
  g.opset_imports[""] = n->opset;
  if (!domain.empty()) {
    n->domain = domain;
    n->opset = 1;
  }
  Executor ex(g);
  ex.Run(feeds);  // plan + warm-up
  ex.Run(feeds);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) ex.Run(feeds);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
}

TEST(HalfOps, DISABLED_TimingReport) {
  for (DataType t : {kF32, DataType::kBFloat16, DataType::kFloat16}) {
    Tensor a = RandomTensor(kF32, {512, 512}).CastTo(t), b = RandomTensor(kF32, {512, 512}).CastTo(t);
    const double gemm = TimeOp("Gemm", {a, b}, {false, true}, {}, 20);
    Tensor x = RandomTensor(kF32, {8, 64, 32, 32}).CastTo(t), w = RandomTensor(kF32, {64, 64, 3, 3}).CastTo(t);
    const double conv = TimeOp("Conv", {x, w}, {false, true}, {{"pads", Is({1, 1, 1, 1})}}, 10);
    const double conv_rt = TimeOp("Conv", {x, w}, {false, false}, {{"pads", Is({1, 1, 1, 1})}}, 10);
    // Which oneDNN implementation ran (ONNXTRAIN_CPU_HALF_GEMM=native|f32 forces one way for a comparison).
    const cpu::DnnType dt = t == kF32                 ? cpu::DnnType::kF32
                            : t == DataType::kFloat16 ? cpu::DnnType::kF16
                                                      : cpu::DnnType::kBF16;
    cpu::MatMulSpec ms;
    ms.type = dt;
    ms.m = ms.n = ms.k = 512;
    cpu::ConvSpec cs;
    cs.type = dt;
    cs.n = 8;
    cs.c_in = cs.c_out = 64;
    cs.in_spatial = cs.out_spatial = {32, 32};
    cs.kernel = {3, 3};
    cs.strides = cs.dilations = {1, 1};
    cs.pad_begin = cs.pad_end = {1, 1};
    // Memory-bound ops, where half storage moves half the bytes (elementwise tiles and softmax rows in fp32).
    Tensor u = RandomTensor(kF32, {4, 1 << 20}).CastTo(t), v = RandomTensor(kF32, {4, 1 << 20}).CastTo(t);
    const double add = TimeOp("Add", {u, v}, {false, false}, {}, 20);
    const double gelu = TimeOp("Gelu", {u}, {false}, {}, 10);
    const double softmax = TimeOp("Softmax", {u.Reshaped({4096, 1024})}, {false}, {}, 10);
    std::printf("%-9s Add 4M: %6.2f ms   Gelu 4M: %6.2f ms   Softmax 4096x1024: %6.2f ms\n", DataTypeName(t).c_str(),
                add, gelu, softmax);
    // BatchNormalization in training mode (X half, parameters float32) and its backward.
    Tensor bx = RandomTensor(kF32, {64, 32, 28, 28}).CastTo(t), p = RandomTensor(kF32, {32}, 0.5, 1.5);
    const double bn =
        TimeOp("BatchNormalization", {bx, p, p, p, p}, {false, true, true, true, true}, {{"training_mode", I(1)}}, 10);
    const double bng =
        TimeOp("BatchNormGrad", {bx, bx, p}, {false, false, true}, {{"training", I(1)}}, 10, kInternalDomain);
    std::printf("%-9s BatchNormalization training 64x32x28x28: %6.2f ms   BatchNormGrad (dX only): %6.2f ms\n",
                DataTypeName(t).c_str(), bn, bng);
    std::printf("%-9s Gemm 512x512x512: %7.2f ms [%s]\n", DataTypeName(t).c_str(), gemm,
                cpu::DnnlMatMul(ms).impl_name().c_str());
    std::printf("%-9s Conv 3x3 64->64 32x32 batch 8: %7.2f ms W constant [%s], %7.2f ms W fed [%s]\n",
                DataTypeName(t).c_str(), conv, cpu::DnnlConv(cs, w.raw()).impl_name().c_str(), conv_rt,
                cpu::DnnlConv(cs).impl_name().c_str());
  }
}

}  // namespace
}  // namespace ot
