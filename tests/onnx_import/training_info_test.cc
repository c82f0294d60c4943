// TrainingInfoProto: import keeps the initialization and algorithm graphs and both bindings (the algorithm shares
// the main graph's initializer tensors), export writes the same ModelProto back (and a second round trip is
// byte-identical); malformed bindings are errors naming the binding and the name. AttachStepGraph /
// CombinedStepGraph: a step graph exported as a standard training model and made runnable again, its update
// computed on the executor against a double reference.
#include "onnx_import/training_info.h"

#include <google/protobuf/util/message_differencer.h>

#include <cmath>

#include "executor/executor.h"
#include "onnx_import/model_io.h"
#include "tests/onnx_import/import_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

void AddTensorInfo(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* sh = tt->mutable_shape();
  for (int64_t d : dims) sh->add_dim()->set_dim_value(d);
}

void AddFloatTensor(onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<float>& values) {
  if (!name.empty()) t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& ins,
                         const std::vector<std::string>& outs) {
  auto* n = g->add_node();
  n->set_name(outs[0] + "_node");
  n->set_op_type(op);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

// Main: y = x * W. Algorithm: W_new = W - lr * x (lr its own initializer), ny = -y (a main-graph value);
// update_binding W <- W_new. Initialization: W_init = Constant; initialization_binding W <- W_init.
onnx::ModelProto TrainingModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("main");
  AddFloatTensor(g->add_initializer(), "W", {3}, {0.5f, -1.0f, 2.0f});
  AddTensorInfo(g->add_input(), "x", {3});
  AddTensorInfo(g->add_output(), "y", {3});
  AddNode(g, "Mul", {"x", "W"}, {"y"});
  auto* ti = m.add_training_info();
  auto* alg = ti->mutable_algorithm();
  alg->set_name("step");
  AddFloatTensor(alg->add_initializer(), "lr", {}, {0.25f});
  AddNode(alg, "Mul", {"lr", "x"}, {"delta"});
  AddNode(alg, "Sub", {"W", "delta"}, {"W_new"});
  AddNode(alg, "Neg", {"y"}, {"ny"});
  AddTensorInfo(alg->add_output(), "W_new", {3});
  AddTensorInfo(alg->add_output(), "ny", {3});
  auto* init = ti->mutable_initialization();
  init->set_name("init");
  auto* c = AddNode(init, "Constant", {}, {"W_init"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  AddFloatTensor(a->mutable_t(), "", {3}, {1.0f, 2.0f, 3.0f});
  AddTensorInfo(init->add_output(), "W_init", {3});
  auto* ub = ti->add_update_binding();
  ub->set_key("W");
  ub->set_value("W_new");
  auto* ib = ti->add_initialization_binding();
  ib->set_key("W");
  ib->set_value("W_init");
  auto* md = m.add_metadata_props();
  md->set_key("author");
  md->set_value("someone");
  return m;
}

std::string Bytes(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

TEST(TrainingInfo, ImportKeepsEveryField) {
  auto g = ParseModel(Bytes(TrainingModel()), "", "t.onnx");
  ASSERT_EQ(g->training_info.size(), 1u);
  const Graph::TrainingInfo& ti = g->training_info[0];
  ASSERT_TRUE(ti.algorithm && ti.initialization);
  const Graph& alg = *ti.algorithm;
  EXPECT_EQ(alg.name, "step");
  EXPECT_EQ(alg.nodes().size(), 3u);
  ASSERT_EQ(alg.update_bindings.size(), 1u);
  EXPECT_EQ(alg.update_bindings[0].state->name, "W");
  EXPECT_EQ(alg.update_bindings[0].next->name, "W_new");
  // The algorithm's W is the main graph's tensor, not a copy; its own lr stays its own.
  EXPECT_EQ(alg.update_bindings[0].state->initializer, g->FindValue("W")->initializer);
  ASSERT_TRUE(alg.FindValue("lr") && alg.FindValue("lr")->is_initializer());
  EXPECT_EQ(g->FindValue("lr"), nullptr);
  EXPECT_EQ(alg.FindValue("y")->dtype, DataType::kFloat32);  // a main-graph value, typed from it
  ASSERT_EQ(ti.initialization->update_bindings.size(), 1u);
  EXPECT_EQ(ti.initialization->update_bindings[0].next->name, "W_init");
  ASSERT_EQ(g->metadata_props.size(), 1u);
  EXPECT_EQ(g->metadata_props[0].second, "someone");
}

TEST(TrainingInfo, RoundTripWritesTheSameModel) {
  const onnx::ModelProto orig = TrainingModel();
  const std::string once = SerializeModel(*ParseModel(Bytes(orig), "", "t.onnx"));
  onnx::ModelProto back;
  ASSERT_TRUE(back.ParseFromString(once));
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(orig, back)) << diff;
  EXPECT_EQ(SerializeModel(*ParseModel(once, "", "t.onnx")), once);  // byte-stable
}

TEST(TrainingInfo, MalformedBindingsNameTheCulprit) {
  auto expect_error = [](const onnx::ModelProto& m, const std::vector<std::string>& pieces) {
    try {
      ParseModel(Bytes(m), "", "bad.onnx");
      ADD_FAILURE() << "no error; expected one with " << pieces[0];
    } catch (const Error& e) {
      for (const auto& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  onnx::ModelProto m = TrainingModel();
  m.mutable_training_info(0)->mutable_update_binding(0)->set_key("nope");
  expect_error(m, {"bad.onnx", "training_info[0].update_binding[0]", "'nope'", "not an initializer"});
  m = TrainingModel();
  m.mutable_training_info(0)->mutable_update_binding(0)->set_value("delta");  // not an output
  expect_error(m, {"training_info[0].update_binding[0]", "'delta'", "not an output"});
  m = TrainingModel();
  m.mutable_training_info(0)->mutable_initialization_binding(0)->set_key("x");  // an input, not an initializer
  expect_error(m, {"training_info[0].initialization_binding[0]", "'x'"});
  m = TrainingModel();
  AddNode(m.mutable_training_info(0)->mutable_algorithm(), "Neg", {"missing"}, {"q"});
  expect_error(m, {"training_info[0].algorithm", "'missing'"});
}

// A code-built step graph: forward y = x * W (names shared with the model), loss = ReduceSum(y),
// W_new = W - lr * x * W (lr a constant of the step), update binding W <- W_new.
TEST(TrainingInfo, StepGraphExportsAndRunsAgain) {
  auto model = ParseModel(Bytes(TrainingModel()), "", "t.onnx");
  model->training_info.clear();
  Graph step;
  step.opset_imports[""] = 17;
  Value* x = step.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({3});
  step.inputs.push_back(x);
  Tensor w0 = *model->FindValue("W")->initializer;
  Value* w = step.AddInitializer("W", w0);
  Value* lr = step.AddInitializer("lr", Tensor::Scalar(0.5f));
  auto op = [&](const std::string& t, std::vector<Value*> ins, const std::string& out) {
    Value* o = step.AddValue(out);
    o->dtype = DataType::kFloat32;
    step.AddNode(t, ins, {o}, out + "_node");
    return o;
  };
  Value* y = op("Mul", {x, w}, "y");
  Value* loss = op("ReduceSum", {y}, "loss");
  loss->producer->attrs["keepdims"] = Attribute::Int(0);
  Value* d = op("Mul", {lr, y}, "d");
  Value* w_new = op("Sub", {w, d}, "W_new");
  step.outputs = {loss};
  step.update_bindings.push_back({w, w_new});

  StepOutputNames names = AttachStepGraph(*model, step, {"loss", "", "", "", ""});
  EXPECT_EQ(names.loss, "loss");
  ASSERT_TRUE(model->FindValue("lr") && model->FindValue("lr")->is_initializer());  // state moved to main
  const Graph& alg = *model->training_info.at(0).algorithm;
  EXPECT_TRUE(alg.FindValue("y__step")) << "the step's forward must not redefine the main graph's 'y'";
  EXPECT_TRUE(alg.inputs.empty()) << "x is the main graph's input";
  onnx::ModelProto exported;
  ASSERT_TRUE(exported.ParseFromString(SerializeModel(*model)));
  EXPECT_EQ(exported.training_info(0).algorithm().initializer_size(), 0);
  EXPECT_EQ(exported.graph().initializer_size(), 2);  // W and lr
  bool has_loss_key = false;
  for (const auto& kv : exported.metadata_props()) has_loss_key |= kv.key() == kLossKey && kv.value() == "loss";
  EXPECT_TRUE(has_loss_key);

  auto back = ParseModel(SerializeModel(*model), "", "step.onnx");
  StepOutputNames got;
  auto combined = CombinedStepGraph(*back, &got, "step.onnx");
  EXPECT_EQ(got.loss, "loss");
  ASSERT_EQ(combined->update_bindings.size(), 1u);
  EXPECT_EQ(combined->update_bindings[0].state->initializer, back->FindValue("W")->initializer);
  Tensor tx = test::RandomTensor(DataType::kFloat32, {3});
  Executor ex(*combined);
  auto out = ex.Run({{"x", tx}});
  double want_loss = 0;
  Tensor want_w(DataType::kFloat32, {3});
  for (int64_t i = 0; i < 3; ++i) {
    const double yi = tx.GetDouble(i) * w0.GetDouble(i);
    want_loss += yi;
    want_w.SetDouble(i, w0.GetDouble(i) - 0.5 * yi);
  }
  bool saw_loss = false, saw_w = false;
  for (size_t i = 0; i < combined->outputs.size(); ++i) {
    if (combined->outputs[i]->name == "loss") {
      EXPECT_NEAR(out[i].GetDouble(0), want_loss, 1e-5);
      saw_loss = true;
    }
    if (combined->outputs[i] == combined->update_bindings[0].next) {
      test::ExpectClose(out[i], want_w, 1e-6, 1e-6);
      saw_w = true;
    }
  }
  EXPECT_TRUE(saw_loss && saw_w);
  // A model without training_info is not a step model.
  model->training_info.clear();
  EXPECT_THROW(CombinedStepGraph(*model, &got, "plain.onnx"), Error);
}

}  // namespace
}  // namespace ot
