// ModelProto <-> Graph: code-built graphs and every backend-test model survive export and re-import unchanged;
// malformed and hostile files fail with one-line ot::Error messages naming the file and the culprit.
#include "onnx_import/model_io.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/onnx_import/import_test_util.h"

namespace ot {
namespace {

using test::ExpectSameGraph;
using test::SameTensor;
using test::TempDir;

// Expects `f` to throw ot::Error (not Unsupported unless `unsupported`) whose message contains every piece.
template <typename F>
void ExpectError(F&& f, const std::vector<std::string>& pieces, bool unsupported = false) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one containing '" << pieces.at(0) << "'";
  } catch (const UnsupportedError& e) {
    EXPECT_TRUE(unsupported) << "unexpected UnsupportedError: " << e.what();
    for (const auto& p : pieces)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  } catch (const Error& e) {
    EXPECT_FALSE(unsupported) << "expected UnsupportedError, got: " << e.what();
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "message is not one line: " << m;
    for (const auto& p : pieces) EXPECT_NE(m.find(p), std::string::npos) << m << "  [lacks: " << p << "]";
  }
}

std::unique_ptr<Graph> RoundTrip(const Graph& g) { return ParseModel(SerializeModel(g), "", "roundtrip.onnx"); }

// --- a graph built in code ---------------------------------------------------------------------------------

std::unique_ptr<Graph> BuildSample() {
  auto g = std::make_unique<Graph>();
  g->name = "sample";
  g->producer_name = "unit-test";
  g->producer_version = "1.2.3";
  g->doc_string = "a doc string";
  g->ir_version = 8;
  g->opset_imports[""] = 17;
  g->opset_imports["com.example"] = 2;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("batch"), Dim(3), Dim()});
  g->inputs.push_back(x);
  Value* w = g->AddInitializer("w", Tensor::FromFloat({1, 2, 3, 4, 5, 6}, {2, 3}));
  g->inputs.push_back(w);  // an initializer listed as an input (overridable default)
  Value* b = g->AddInitializer("b", Tensor::FromInt64({7, -8}, {2}));
  Value* h = g->AddValue("h");
  h->dtype = DataType::kFloat32;
  h->shape = Shape({Dim::Symbol("batch"), Dim(2)});
  Value* m = g->AddValue("mask");
  Value* y = g->AddValue("y");
  y->dtype = DataType::kFloat32;
  y->shape = Shape({Dim::Symbol("batch"), Dim(2)});
  Node* n1 = g->AddNode("MatMul", {x, w}, {h}, "mm");
  n1->doc_string = "first";
  Node* n2 = g->AddNode("Dropout", {h, nullptr, nullptr}, {y, m}, "drop");
  n2->attrs["seed"] = Attribute::Int(42);
  Node* n3 = g->AddNode("Custom", {y, b}, {g->AddValue("z"), nullptr}, "custom");
  n3->domain = "com.example";
  n3->opset = 2;
  n3->attrs["f"] = Attribute::Float(0.125f);
  n3->attrs["s"] = Attribute::String(std::string("bytes\0and more", 14));
  n3->attrs["t"] = Attribute::TensorValue(Tensor::FromInt64({1, 2, 3}, {3}));
  n3->attrs["fs"] = Attribute::Floats({1.5f, -2.25f});
  n3->attrs["is"] = Attribute::Ints({1, -2, 3});
  Attribute strs;
  strs.kind = Attribute::Kind::kStrings;
  strs.strings = {"a", "", "ccc"};
  n3->attrs["ss"] = strs;
  Attribute ts;
  ts.kind = Attribute::Kind::kTensors;
  ts.tensors = {Tensor::Scalar(2.5f), Tensor(DataType::kBool, {2, 0})};
  n3->attrs["ts"] = ts;
  g->outputs.push_back(y);
  g->outputs.push_back(g->FindValue("z"));
  return g;
}

TEST(ModelIo, CodeBuiltGraphRoundTrips) {
  auto g = BuildSample();
  auto r = RoundTrip(*g);
  ExpectSameGraph(*g, *r, "sample");
  // Specific facts, in case the comparison helper has a blind spot.
  ASSERT_EQ(r->inputs.size(), 2u);
  EXPECT_TRUE(r->inputs[1]->is_initializer());
  EXPECT_EQ(r->inputs[0]->shape.ToString(), g->inputs[0]->shape.ToString());
  EXPECT_EQ(r->inputs[0]->shape[0].symbol, "batch");
  EXPECT_FALSE(r->inputs[0]->shape[2].is_static());
  const Node* drop = r->nodes()[1].get();
  EXPECT_EQ(drop->name, "drop");
  ASSERT_EQ(drop->inputs.size(), 3u);
  EXPECT_EQ(drop->inputs[1], nullptr);
  EXPECT_EQ(drop->outputs[1]->name, "mask");
  const Node* custom = r->nodes()[2].get();
  EXPECT_EQ(custom->domain, "com.example");
  EXPECT_EQ(custom->opset, 2);
  EXPECT_EQ(custom->attr_string("s", "").size(), 14u);
  EXPECT_EQ(custom->outputs[1], nullptr);
  EXPECT_EQ(r->FindValue("h")->dtype, DataType::kFloat32);  // from value_info
  EXPECT_EQ(test::ShapeKey(r->FindValue("h")->shape), "['batch',2,]");
  EXPECT_EQ(r->FindValue("b")->initializer->GetInt64(1), -8);
  EXPECT_EQ(r->nodes()[0]->opset, 17);
  // Export is deterministic: exporting the re-imported graph gives identical bytes.
  EXPECT_EQ(SerializeModel(*g), SerializeModel(*r));
}

TEST(ModelIo, SaveAndLoadFile) {
  TempDir dir;
  auto g = BuildSample();
  SaveModel(*g, dir / "m.onnx");
  auto r = LoadModel(dir / "m.onnx");
  ExpectSameGraph(*g, *r, "file");
  ExpectError([&] { LoadModel(dir / "missing.onnx"); }, {"missing.onnx", "cannot open"});
  ExpectError([&] { LoadModel(dir.path()); }, {dir.path(), "not a regular file"});
}

TEST(ModelIo, UnnamedValuesGetNamesOnExport) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({2});
  g.inputs.push_back(x);
  Value* t = g.AddValue("");  // a pass may leave values unnamed
  Value* y = g.AddValue("y");
  g.AddNode("Relu", {x}, {t}, "r");
  g.AddNode("Neg", {t}, {y}, "n");
  g.outputs.push_back(y);
  auto r = RoundTrip(g);
  ASSERT_EQ(r->nodes().size(), 2u);
  ASSERT_NE(r->nodes()[1]->inputs[0], nullptr);
  EXPECT_FALSE(r->nodes()[1]->inputs[0]->name.empty());
  EXPECT_EQ(r->nodes()[1]->inputs[0], r->nodes()[0]->outputs[0]);
}

// --- ModelProto built directly (for what the IR cannot express) --------------------------------------------

onnx::ModelProto BaseModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  auto* sh = in->mutable_type()->mutable_tensor_type()->mutable_shape();
  sh->add_dim()->set_dim_value(3);
  sh->add_dim()->set_dim_value(4);
  g->add_output()->set_name("y");
  return m;
}

onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op, std::vector<std::string> ins,
                         std::vector<std::string> outs, const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  if (!name.empty()) n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

onnx::TensorProto* AddInit(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims, int dtype) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(dtype);
  for (auto d : dims) t->add_dims(d);
  return t;
}

std::unique_ptr<Graph> Parse(const onnx::ModelProto& m, const std::string& base_dir = "") {
  return ParseModel(m.SerializeAsString(), base_dir, "bad.onnx");
}

TEST(ModelIo, AiOnnxDomainAndUnsortedNodesAndGeneratedNames) {
  onnx::ModelProto m = BaseModel();
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  AddNode(m, "Neg", {"t"}, {"y"});  // uses t before its producer is listed
  AddNode(m, "Relu", {"x"}, {"t"})->set_domain("ai.onnx");
  auto g = Parse(m);
  EXPECT_EQ(g->OpsetOf(""), 13);
  ASSERT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->nodes()[0]->name, "Neg_0");
  EXPECT_EQ(g->nodes()[1]->name, "Relu_1");
  EXPECT_EQ(g->nodes()[1]->domain, "");
  EXPECT_EQ(g->nodes()[1]->opset, 13);
  auto r = RoundTrip(*g);  // export writes topological order
  ExpectSameGraph(*g, *r, "unsorted");
  EXPECT_EQ(r->nodes()[0]->op_type, "Relu");
}

TEST(ModelIo, TypedTensorFields) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Identity", {"x"}, {"y"});
  auto* f16 = AddInit(m, "h", {2}, 10);
  f16->add_int32_data(0x3c00);  // 1.0
  f16->add_int32_data(0xc000);  // -2.0
  auto* i8 = AddInit(m, "i8", {3}, 3);
  for (int v : {-128, 0, 127}) i8->add_int32_data(v);
  auto* bl = AddInit(m, "b", {2}, 9);
  bl->add_int32_data(1);
  bl->add_int32_data(0);
  auto* u64 = AddInit(m, "u64", {1}, 13);
  u64->add_uint64_data(0xffffffffffffffffull);
  auto* u32 = AddInit(m, "u32", {1}, 12);
  u32->add_uint64_data(4000000000ull);
  auto* d = AddInit(m, "d", {1}, 11);
  d->add_double_data(0.1);
  auto* i64 = AddInit(m, "i64", {2, 1}, 7);
  i64->add_int64_data(-5);
  i64->add_int64_data(1ll << 40);
  auto* bf = AddInit(m, "bf", {1}, 16);
  bf->add_int32_data(0x3f80);  // 1.0
  auto* f = AddInit(m, "f", {1, 1}, 1);
  f->add_float_data(3.5f);
  AddInit(m, "empty", {0, 3}, 1);  // zero elements, no data: fine
  auto g = Parse(m);
  auto init = [&](const char* n) { return *g->FindValue(n)->initializer; };
  EXPECT_EQ(init("h").GetDouble(0), 1.0);
  EXPECT_EQ(init("h").GetDouble(1), -2.0);
  EXPECT_EQ(init("i8").GetInt64(0), -128);
  EXPECT_EQ(init("i8").GetInt64(2), 127);
  EXPECT_EQ(init("b").GetInt64(0), 1);
  EXPECT_EQ(init("b").GetInt64(1), 0);
  EXPECT_EQ(init("u64").data<uint64_t>()[0], 0xffffffffffffffffull);
  EXPECT_EQ(init("u32").data<uint32_t>()[0], 4000000000u);
  EXPECT_EQ(init("d").GetDouble(0), 0.1);
  EXPECT_EQ(init("i64").GetInt64(1), 1ll << 40);
  EXPECT_EQ(init("i64").dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(init("bf").GetDouble(0), 1.0);
  EXPECT_EQ(init("f").GetDouble(0), 3.5);
  EXPECT_EQ(init("empty").numel(), 0);
  auto r = RoundTrip(*g);  // typed fields come back as raw_data with the same bytes
  ExpectSameGraph(*g, *r, "typed");
}

TEST(ModelIo, SubgraphAttributeIsKeptOpaque) {
  onnx::ModelProto m = BaseModel();
  auto* n = AddNode(m, "If", {"c"}, {"y"}, "if");
  auto* c = AddInit(m, "c", {}, 9);
  c->set_raw_data(std::string("\x01", 1));
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* sg = a->mutable_g();
    sg->set_name(branch);
    auto* sn = sg->add_node();
    sn->set_op_type("Identity");
    sn->add_input("x");  // outer-scope reference: allowed inside subgraphs
    sn->add_output("o");
    sg->add_output()->set_name("o");
  }
  auto g = Parse(m);
  const Attribute* a = g->nodes()[0]->attr("then_branch");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, Attribute::Kind::kGraph);
  onnx::ModelProto back;
  ASSERT_TRUE(back.ParseFromString(SerializeModel(*g)));
  ASSERT_EQ(back.graph().node_size(), 1);
  const auto& bn = back.graph().node(0);
  ASSERT_EQ(bn.attribute_size(), 2);
  EXPECT_EQ(bn.attribute(1).name(), "then_branch");
  EXPECT_EQ(bn.attribute(1).g().node(0).input(0), "x");
  EXPECT_EQ(bn.attribute(1).SerializeAsString(), n->attribute(0).SerializeAsString());
}

// --- malformed and hostile input ---------------------------------------------------------------------------

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

const char* kConvModel = "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx";

TEST(ModelIoErrors, TruncatedAndRandomBytes) {
  std::string bytes = ReadBytes(kConvModel);
  ASSERT_GT(bytes.size(), 50u) << "libonnx-testdata is missing";
  for (size_t cut : {bytes.size() - 1, bytes.size() / 2, size_t(7)})
    ExpectError([&] { ParseModel(bytes.substr(0, cut), "", "trunc.onnx"); },
                {"trunc.onnx: not a valid ONNX model (protobuf parse failed)"});
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk(1 + rng() % 300, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    ExpectError([&] { ParseModel(junk, "", "junk.onnx"); }, {"junk.onnx"});
  }
  // Random single-byte corruptions of a real model: an error or a model, never a crash.
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    try {
      auto g = ParseModel(b, "", "mut.onnx");
      SerializeModel(*g);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mut.onnx"), std::string::npos) << e.what();
    }
  }
}

TEST(ModelIoErrors, MissingGraph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  ExpectError([&] { Parse(m); }, {"bad.onnx", "no graph"});
}

TEST(ModelIoErrors, RawDataSizeMismatch) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Add", {"x", "W"}, {"y"});
  AddInit(m, "W", {3, 4}, 1)->set_raw_data(std::string(40, '\0'));
  ExpectError([&] { Parse(m); }, {"bad.onnx: tensor 'W': declared [3,4] float32 = 48 bytes but raw_data has 40"});
}

TEST(ModelIoErrors, TypedFieldCountMismatchAndNoData) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Add", {"x", "W"}, {"y"});
  auto* w = AddInit(m, "W", {3, 4}, 1);
  w->add_float_data(1);
  ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'W'", "float_data has 1"});
  w->clear_float_data();
  ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'W'", "no data"});
}

TEST(ModelIoErrors, NegativeAndAbsurdDims) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Add", {"x", "W"}, {"y"});
  auto* w = AddInit(m, "W", {3, -4}, 1);
  w->set_raw_data(std::string(48, '\0'));
  ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'W'", "negative dimension"});
  // 2^62 elements claimed with 4 bytes present: refused without allocating.
  w->clear_dims();
  w->add_dims(int64_t(1) << 31);
  w->add_dims(int64_t(1) << 31);
  w->set_raw_data("abcd");
  ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'W'"});
  w->clear_dims();
  w->add_dims(int64_t(1) << 40);
  ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'W'", "but raw_data has 4"});
  // A graph input with a negative dimension.
  onnx::ModelProto m2 = BaseModel();
  AddNode(m2, "Neg", {"x"}, {"y"});
  m2.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-3);
  ExpectError([&] { Parse(m2); }, {"bad.onnx", "graph input 'x'", "negative dimension"});
}

TEST(ModelIoErrors, UndefinedNodeInput) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Add", {"x", "foo"}, {"y"}, "x_add");
  ExpectError([&] { Parse(m); },
              {"bad.onnx: node 'x_add' (Add): input 'foo' is not defined by any node, input or initializer"});
  // Hostile names cannot break the one-line message (ExpectError checks there is no newline).
  onnx::ModelProto m2 = BaseModel();
  AddNode(m2, "Add", {"x", "foo\nERROR: fake"}, {"y"}, "a\rb");
  ExpectError([&] { Parse(m2); }, {"bad.onnx: node 'a\\rb' (Add): input 'foo\\nERROR: fake' is not defined"});
}

TEST(ModelIoErrors, DuplicatedNames) {
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Neg", {"x"}, {"y"}, "a");
    AddNode(m, "Relu", {"x"}, {"y"}, "b");
    ExpectError([&] { Parse(m); }, {"bad.onnx", "node 'b' (Relu)", "output 'y' is already defined by node 'a' (Neg)"});
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Neg", {"x"}, {"x"}, "a");  // overwrites a graph input
    ExpectError([&] { Parse(m); }, {"bad.onnx", "output 'x' is already defined by a graph input"});
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Neg", {"x"}, {"y"}, "a");
    AddInit(m, "w", {1}, 1)->add_float_data(1);
    AddInit(m, "w", {1}, 1)->add_float_data(2);
    ExpectError([&] { Parse(m); }, {"bad.onnx", "initializer 'w' is defined twice"});
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Neg", {"x"}, {"y"}, "a");
    *m.mutable_graph()->add_input() = m.graph().input(0);
    ExpectError([&] { Parse(m); }, {"bad.onnx", "graph input 'x' is listed twice"});
  }
}

TEST(ModelIoErrors, UndefinedGraphOutputAndCycle) {
  {
    onnx::ModelProto m = BaseModel();  // output y, but no node makes it
    ExpectError([&] { Parse(m); }, {"bad.onnx", "graph output 'y' is not defined"});
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Add", {"x", "z"}, {"y"}, "a");
    AddNode(m, "Neg", {"y"}, {"z"}, "b");
    ExpectError([&] { Parse(m); }, {"bad.onnx", "cycle"});
  }
}

TEST(ModelIoErrors, UnsupportedTypes) {
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Identity", {"x"}, {"y"});
    auto* s = AddInit(m, "s", {1}, 8);
    s->add_string_data("hello");
    ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 's'", "string"}, /*unsupported=*/true);
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Identity", {"x"}, {"y"});
    auto* t = m.mutable_graph()->mutable_input(0)->mutable_type();
    t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
    ExpectError([&] { Parse(m); }, {"bad.onnx", "graph input 'x'", "sequence"}, /*unsupported=*/true);
  }
  {
    onnx::ModelProto m = BaseModel();
    AddNode(m, "Identity", {"x"}, {"y"});
    AddInit(m, "bad", {1}, 99)->set_raw_data("abcd");
    ExpectError([&] { Parse(m); }, {"bad.onnx", "tensor 'bad'", "invalid data type 99"});
  }
}

// --- external data -----------------------------------------------------------------------------------------

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), bytes.size());
}

onnx::ModelProto ExternalModel(const std::string& location, int64_t offset, int64_t length) {
  onnx::ModelProto m = BaseModel();
  AddNode(m, "Add", {"x", "W"}, {"y"}, "add");
  auto* w = AddInit(m, "W", {3, 4}, 1);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  if (offset >= 0) {
    kv = w->add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
  }
  if (length >= 0) {
    kv = w->add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
  return m;
}

TEST(ModelIoExternal, LoadsInsideTheModelFolder) {
  TempDir dir;
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[i] = 0.5f * i - 1;
  std::string data(16, 'p');  // 16 bytes of padding, then the tensor
  data.append(reinterpret_cast<const char*>(w.data()), 48);
  std::filesystem::create_directory(dir / "weights");
  WriteBytes(dir / "weights/w.bin", data);
  WriteBytes(dir / "m.onnx", ExternalModel("weights/w.bin", 16, 48).SerializeAsString());
  auto g = LoadModel(dir / "m.onnx");
  const Tensor& t = *g->FindValue("W")->initializer;
  ASSERT_EQ(t.dims(), (std::vector<int64_t>{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(t.data<float>()[i], w[i]);
  // Without a length the data runs to the end of the file.
  WriteBytes(dir / "m2.onnx", ExternalModel("weights/w.bin", 16, -1).SerializeAsString());
  EXPECT_EQ(LoadModel(dir / "m2.onnx")->FindValue("W")->initializer->data<float>()[11], w[11]);
  // Export writes the data inline; the exported model loads from anywhere.
  auto r = ParseModel(SerializeModel(*g), "", "inline.onnx");
  EXPECT_TRUE(SameTensor(t, *r->FindValue("W")->initializer));
}

TEST(ModelIoExternal, RefusesPathsOutsideTheFolder) {
  TempDir outer;
  std::filesystem::create_directory(outer / "model");
  std::string model_dir = outer / "model";
  WriteBytes(outer / "x", std::string(48, '\0'));
  auto load = [&](const std::string& loc) {
    WriteBytes(model_dir + "/m.onnx", ExternalModel(loc, 0, 48).SerializeAsString());
    return LoadModel(model_dir + "/m.onnx");
  };
  ExpectError([&] { load("../x"); }, {"m.onnx", "tensor 'W'", "location '../x'"});
  ExpectError([&] { load("sub/../../x"); }, {"m.onnx", "location 'sub/../../x'"});
  ExpectError([&] { load(outer / "x"); }, {"m.onnx", "location '" + (outer / "x") + "'", "absolute"});
  // A symlink inside the folder that points out of it.
  std::filesystem::create_symlink(outer / "x", model_dir + "/link.bin");
  ExpectError([&] { load("link.bin"); }, {"m.onnx", "location 'link.bin'", "outside the model folder"});
  // Missing file, and a model parsed from memory (no folder) may not use external data at all.
  ExpectError([&] { load("nope.bin"); }, {"m.onnx", "location 'nope.bin'", "cannot open"});
  ExpectError([&] { ParseModel(ExternalModel("w.bin", 0, 48).SerializeAsString(), "", "mem.onnx"); },
              {"mem.onnx", "location 'w.bin'", "not allowed"});
}

TEST(ModelIoExternal, RefusesRangesBeyondTheFile) {
  TempDir dir;
  WriteBytes(dir / "w.bin", std::string(50, '\0'));
  auto load = [&](int64_t off, int64_t len) {
    WriteBytes(dir / "m.onnx", ExternalModel("w.bin", off, len).SerializeAsString());
    return LoadModel(dir / "m.onnx");
  };
  EXPECT_NO_THROW(load(2, 48));
  ExpectError([&] { load(100, 48); }, {"m.onnx", "tensor 'W'", "offset 100 is beyond the file size 50"});
  ExpectError([&] { load(8, 48); }, {"m.onnx", "offset 8 + length 48 is beyond the file size 50"});
  ExpectError([&] { load(0, 40); }, {"m.onnx", "declared [3,4] float32 = 48 bytes but external data 'w.bin' has 40"});
  ExpectError([&] { load(0, -1); }, {"m.onnx", "48 bytes but external data 'w.bin' has 50"});
  // Non-numeric offset.
  onnx::ModelProto m = ExternalModel("w.bin", 0, 48);
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(1)->set_value("-1");
  WriteBytes(dir / "m.onnx", m.SerializeAsString());
  ExpectError([&] { LoadModel(dir / "m.onnx"); }, {"m.onnx", "offset '-1' is not a valid number"});
}

// --- every backend-test model --------------------------------------------------------------------------------

TEST(ModelIoBackend, EveryModelRoundTrips) {
  const std::string root = "/usr/share/libonnx-testdata/data";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "libonnx-testdata not installed";
  std::vector<std::string> models;
  for (const char* suite : {"node", "simple", "pytorch-operator", "pytorch-converted"})
    for (const auto& e : std::filesystem::directory_iterator(root + "/" + suite))
      if (std::filesystem::exists(e.path() / "model.onnx")) models.push_back((e.path() / "model.onnx").string());
  std::sort(models.begin(), models.end());
  ASSERT_GT(models.size(), 1000u);
  int ok = 0;
  std::vector<std::string> unsupported;
  for (const auto& path : models) {
    std::unique_ptr<Graph> g;
    try {
      g = LoadModel(path);
    } catch (const UnsupportedError& e) {
      unsupported.push_back(e.what());
      continue;
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    std::string bytes = SerializeModel(*g);
    std::unique_ptr<Graph> r = ParseModel(bytes, "", path + " (exported)");
    ExpectSameGraph(*g, *r, path);
    EXPECT_EQ(SerializeModel(*r), bytes) << path << ": second export differs";
    ++ok;
  }
  // The 1.12 suite has sequence/optional/string models; everything else must import.
  for (const auto& u : unsupported)
    EXPECT_TRUE(u.find("sequence") != std::string::npos || u.find("optional") != std::string::npos ||
                u.find("string") != std::string::npos || u.find("map") != std::string::npos)
        << u;
  EXPECT_GT(ok, 1000);
  std::printf("round-tripped %d models, %zu unsupported\n", ok, unsupported.size());
}

}  // namespace
}  // namespace ot
