// Executor tests: plan-time folding of shape arithmetic, arena reuse, concurrent execution equal to sequential,
// plan cache per input signature, and the errors a caller can cause.
#include "executor/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "tests/test_util.h"

namespace ot {
namespace {

Value* Input(Graph& g, const std::string& name, DataType t, std::vector<Dim> dims) {
  Value* v = g.AddValue(name);
  v->dtype = t;
  v->shape = Shape(std::move(dims));
  g.inputs.push_back(v);
  return v;
}

Node* Op(Graph& g, const std::string& op, std::vector<Value*> ins, int nout = 1) {
  std::vector<Value*> outs;
  for (int i = 0; i < nout; ++i) outs.push_back(g.AddValue(g.UniqueName(op)));
  return g.AddNode(op, ins, outs, g.UniqueName("n_" + op));
}

// x:[batch,6] -> Reshape(x, Concat(Gather(Shape(x), 0), [2,3])) -> [batch,2,3], then Relu.
// The whole Shape/Gather/Unsqueeze/Concat chain folds when the plan is made: only Reshape and Relu run.
TEST(Plan, FoldsExporterShapeArithmetic) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = Input(g, "x", DataType::kFloat32, {Dim::Symbol("batch"), Dim(6)});
  Value* shape = Op(g, "Shape", {x})->outputs[0];
  Value* zero = g.AddInitializer("zero", Tensor::FromInt64({0}, {}));
  Value* batch = Op(g, "Gather", {shape, zero})->outputs[0];
  Value* axes = g.AddInitializer("axes", Tensor::FromInt64({0}, {1}));
  Value* batch1 = Op(g, "Unsqueeze", {batch, axes})->outputs[0];
  Value* tail = g.AddInitializer("tail", Tensor::FromInt64({2, 3}, {2}));
  Node* concat = Op(g, "Concat", {batch1, tail});
  concat->attrs["axis"] = Attribute::Int(0);
  Value* r = Op(g, "Reshape", {x, concat->outputs[0]})->outputs[0];
  Value* y = Op(g, "Relu", {r})->outputs[0];
  g.outputs.push_back(y);

  Executor ex(g);
  for (int64_t b : {4, 7}) {
    Tensor in = test::RandomTensor(DataType::kFloat32, {b, 6});
    std::vector<Tensor> out = ex.Run({{"x", in}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{b, 2, 3}));
    for (int64_t i = 0; i < in.numel(); ++i) EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, in.data<float>()[i]));
    EXPECT_EQ(ex.last_kernel_count(), 2) << "Shape/Gather/Unsqueeze/Concat should fold at plan time";
  }
}

// A chain of ten elementwise ops on 1 MiB tensors: the arena reuses memory (far less than ten buffers), and the
// result matches a reference computed in double.
TEST(Plan, ArenaReusesDeadBuffers) {
  Graph g;
  g.opset_imports[""] = 17;
  const int64_t n = 256 * 1024;
  Value* x = Input(g, "x", DataType::kFloat32, {Dim(n)});
  Value* v = x;
  for (int i = 0; i < 10; ++i) v = Op(g, i % 2 ? "Tanh" : "Neg", {v})->outputs[0];
  g.outputs.push_back(v);
  Executor ex(g);
  Tensor in = test::RandomTensor(DataType::kFloat32, {n});
  Tensor out = ex.Run({{"x", in}})[0];
  for (int64_t i = 0; i < n; i += 997) {
    double r = in.data<float>()[i];
    for (int k = 0; k < 10; ++k) r = k % 2 ? std::tanh(r) : -r;
    EXPECT_NEAR(out.data<float>()[i], r, 1e-6);
  }
  // Nine intermediates of 1 MiB (the last value is the caller's output); two live at a time suffice.
  EXPECT_LE(ex.last_arena_bytes(), 2 * n * 4);
  EXPECT_GE(ex.last_arena_bytes(), n * 4);
}

// Many independent branches joined by a sum: with several threads the flow graph runs branches side by side,
// and memory reuse between branches must not let one branch overwrite another's live value. The result must
// equal, bit for bit, the single-threaded run.
TEST(Plan, ConcurrentRunEqualsSequential) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = Input(g, "x", DataType::kFloat32, {Dim(64), Dim(257)});
  std::vector<Value*> branches;
  for (int b = 0; b < 12; ++b) {
    Value* v = x;
    for (int k = 0; k < 4; ++k) {
      const char* ops[] = {"Sigmoid", "Tanh", "Neg", "Abs"};
      v = Op(g, ops[(b + k) % 4], {v})->outputs[0];
    }
    branches.push_back(v);
  }
  Value* s = Op(g, "Sum", branches)->outputs[0];
  g.outputs.push_back(s);
  Tensor in = test::RandomTensor(DataType::kFloat32, {64, 257}, -3, 3);

  SetThreadCount(1);
  Tensor ref = Executor(g).Run({{"x", in}})[0];
  SetThreadCount(4);
  Executor ex(g);
  for (int rep = 0; rep < 20; ++rep) {
    Tensor out = ex.Run({{"x", in}})[0];
    ASSERT_EQ(0, std::memcmp(out.raw(), ref.raw(), ref.nbytes())) << "run " << rep;
  }
  SetThreadCount(0);
}

// A value read after a view of it was made: X = Neg(x), V = Reshape(X) (a view: X's bytes), R = Exp(X) (X's last
// reader, after V), A = Abs(V) (in place: V and X are read for the last time there), C = Neg(Transpose(A)). A's
// writer depends on V's producer, not on R: the plan must still order R before A (V and X are one occupant of that
// memory, alive until the last reader of either), or with several threads Abs overwrites X under Exp. The
// ordering is checked over the plan (CheckMemoryOrder), and the threaded runs equal the sequential one bit for bit.
TEST(Plan, ViewOfAValueStillReadKeepsItsMemoryOrdered) {
  Graph g;
  g.opset_imports[""] = 17;
  const int64_t n = 1 << 18;
  Value* x = Input(g, "x", DataType::kFloat32, {Dim(n)});
  Value* big = Op(g, "Neg", {x})->outputs[0];
  Value* shape = g.AddInitializer("shape", Tensor::FromInt64({n / 2, 2}, {2}));
  Value* v = Op(g, "Reshape", {big, shape})->outputs[0];
  Value* r = Op(g, "Exp", {big})->outputs[0];
  Value* a = Op(g, "Abs", {v})->outputs[0];
  Value* c = Op(g, "Neg", {Op(g, "Transpose", {a})->outputs[0]})->outputs[0];
  g.outputs = {r, c};
  InferShapes(g, true);
  std::map<std::string, TensorDesc> descs;
  descs["x"] = TensorDesc{DataType::kFloat32, {n}, true};
  std::unique_ptr<Plan> plan = Plan::Compile(g, descs, {}, 0);
  EXPECT_EQ(plan->CheckMemoryOrder(), "");
  // The case is the one above: A took X's bytes, in place.
  int64_t x_off = -1, a_off = -2;
  bool a_shares = false;
  for (const Plan::BufferView& bv : plan->buffer_views()) {
    if (bv.name == big->name) x_off = bv.offset;
    if (bv.name == a->name) a_off = bv.offset, a_shares = bv.shares >= 0;
  }
  EXPECT_EQ(x_off, a_off);
  EXPECT_TRUE(a_shares);
  Tensor in = test::RandomTensor(DataType::kFloat32, {n}, -2, 2);
  SetThreadCount(1);
  const std::vector<Tensor> ref = Executor(g).Run({{"x", in}});
  SetThreadCount(2);
  Executor ex(g);
  for (int rep = 0; rep < 10; ++rep) {
    const std::vector<Tensor> out = ex.Run({{"x", in}});
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(0, std::memcmp(out[i].raw(), ref[i].raw(), ref[i].nbytes())) << "run " << rep << " output " << i;
  }
  SetThreadCount(0);
  for (int64_t i = 0; i < n; i += 4099) {
    const double want = std::exp(-static_cast<double>(in.data<float>()[i]));
    EXPECT_NEAR(ref[0].data<float>()[i], want, 1e-6 * want);
  }
}

TEST(Plan, CachesPlansPerShapeAndRecompilesForNewShapes) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* a = Input(g, "a", DataType::kFloat32, {Dim::Symbol("n"), Dim(3)});
  Value* b = Input(g, "b", DataType::kFloat32, {Dim(3)});
  g.outputs.push_back(Op(g, "Add", {a, b})->outputs[0]);
  Executor ex(g);
  for (int64_t n : {2, 5, 2}) {
    Tensor ta = test::RandomTensor(DataType::kFloat32, {n, 3});
    Tensor tb = test::RandomTensor(DataType::kFloat32, {3});
    Tensor out = ex.Run({{"a", ta}, {"b", tb}})[0];
    ASSERT_EQ(out.dims(), (std::vector<int64_t>{n, 3}));
    for (int64_t i = 0; i < n * 3; ++i)
      EXPECT_FLOAT_EQ(out.data<float>()[i], ta.data<float>()[i] + tb.data<float>()[i % 3]);
  }
}

TEST(Plan, ErrorsNameTheInput) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* a = Input(g, "a", DataType::kFloat32, {Dim(2), Dim(3)});
  Value* b = Input(g, "b", DataType::kFloat32, {Dim(4)});
  g.outputs.push_back(Op(g, "Add", {a, b})->outputs[0]);
  Executor ex(g);
  Tensor ta = test::RandomTensor(DataType::kFloat32, {2, 3});
  auto msg = [&](const std::map<std::string, Tensor>& feeds) -> std::string {
    try {
      ex.Run(feeds);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(msg({{"a", ta}}).find("input 'b' was not given"), std::string::npos);
  EXPECT_NE(msg({{"a", ta}, {"b", test::RandomTensor(DataType::kInt64, {4})}}).find("'b' is int64"), std::string::npos);
  EXPECT_NE(msg({{"a", ta}, {"b", test::RandomTensor(DataType::kFloat32, {5})}}).find("declares [4]"),
            std::string::npos);
  EXPECT_NE(msg({{"a", ta}, {"b", test::RandomTensor(DataType::kFloat32, {4})}, {"c", ta}}).find("'c' is not an input"),
            std::string::npos);
  // [2,3] + [4] does not broadcast: the error names the node.
  std::string m = msg({{"a", ta}, {"b", test::RandomTensor(DataType::kFloat32, {4})}});
  EXPECT_NE(m.find("n_Add"), std::string::npos) << m;
  EXPECT_NE(m.find("broadcast"), std::string::npos) << m;
}

// Reshape to a shape computed from input data (Cast and Relu of a float input): the input's value enters the
// plan signature, so each distinct value gets its own plan with the right shapes.
TEST(Plan, ShapeInputsComputedFromDataEnterThePlanSignature) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = Input(g, "x", DataType::kFloat32, {Dim(6)});
  Value* s = Input(g, "s", DataType::kFloat32, {Dim(2)});
  Node* cast = Op(g, "Cast", {s});
  cast->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kInt64));
  Value* sq = Op(g, "Relu", {cast->outputs[0]})->outputs[0];
  Value* r = Op(g, "Reshape", {x, sq})->outputs[0];
  g.outputs.push_back(r);
  Executor ex(g);
  Tensor out = ex.Run({{"x", test::RandomTensor(DataType::kFloat32, {6})}, {"s", Tensor::FromFloat({3, 2}, {2})}})[0];
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 2}));
  out = ex.Run({{"x", test::RandomTensor(DataType::kFloat32, {6})}, {"s", Tensor::FromFloat({2, 3}, {2})}})[0];
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 3}));
}

}  // namespace
}  // namespace ot

namespace ot {
namespace {
// Training state is read at run time: a plan made once sees the new values after the state changes in place,
// while a plain initializer folds (Neg of a constant costs no kernel).
TEST(Plan, StateIsReadAtRunTimeAndNeverFolded) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* w = g.AddInitializer("w", Tensor::FromFloat({1, 2, 3}, {3}));
  Value* c = g.AddInitializer("c", Tensor::FromFloat({10, 20, 30}, {3}));
  Value* negw = g.AddValue("negw");
  g.AddNode("Neg", {w}, {negw}, "negw");
  Value* negc = g.AddValue("negc");
  g.AddNode("Neg", {c}, {negc}, "negc");
  Value* y = g.AddValue("y");
  g.AddNode("Add", {negw, negc}, {y}, "add");
  g.outputs.push_back(y);
  g.update_bindings.push_back({w, negw});
  Executor ex(g);
  Tensor out = ex.Run({})[0];
  EXPECT_FLOAT_EQ(out.data<float>()[2], -33.0f);
  EXPECT_EQ(ex.last_kernel_count(), 2) << "Neg(w) and Add run; Neg(c) folds";
  w->initializer->data<float>()[2] = 5.0f;  // the trainer writes the next state in place
  out = ex.Run({})[0];
  EXPECT_FLOAT_EQ(out.data<float>()[2], -35.0f);
}
}  // namespace
}  // namespace ot
