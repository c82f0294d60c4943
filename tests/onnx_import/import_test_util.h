// Helpers for the onnx_import tests: temp folders, structural graph comparison, ModelProto building.
#pragma once
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "graph/error.h"
#include "graph/graph.h"

namespace ot::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ot_import_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  return a.nbytes() == b.nbytes() && (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

inline void ExpectSameAttribute(const Attribute& a, const Attribute& b, const std::string& ctx) {
  ASSERT_EQ(static_cast<int>(a.kind), static_cast<int>(b.kind)) << ctx;
  switch (a.kind) {
    case Attribute::Kind::kFloat: {
      uint32_t x, y;
      std::memcpy(&x, &a.f, 4);
      std::memcpy(&y, &b.f, 4);
      EXPECT_EQ(x, y) << ctx;
      break;
    }
    case Attribute::Kind::kInt:
      EXPECT_EQ(a.i, b.i) << ctx;
      break;
    case Attribute::Kind::kString:
      EXPECT_EQ(a.s, b.s) << ctx;
      break;
    case Attribute::Kind::kTensor:
      EXPECT_TRUE(SameTensor(a.t, b.t)) << ctx;
      break;
    case Attribute::Kind::kFloats:
      EXPECT_EQ(a.floats, b.floats) << ctx;
      break;
    case Attribute::Kind::kInts:
      EXPECT_EQ(a.ints, b.ints) << ctx;
      break;
    case Attribute::Kind::kStrings:
      EXPECT_EQ(a.strings, b.strings) << ctx;
      break;
    case Attribute::Kind::kTensors:
      ASSERT_EQ(a.tensors.size(), b.tensors.size()) << ctx;
      for (size_t i = 0; i < a.tensors.size(); ++i) EXPECT_TRUE(SameTensor(a.tensors[i], b.tensors[i])) << ctx;
      break;
    case Attribute::Kind::kGraph:
    case Attribute::Kind::kOther:
      EXPECT_EQ(a.opaque, b.opaque) << ctx;
      break;
  }
}

// Exact shape identity (Shape::operator== treats two unknown dims as different).
inline std::string ShapeKey(const Shape& s) {
  if (!s.known_rank()) return "<unknown rank>";
  std::string k = "[";
  for (const Dim& d : s.dims())
    k += d.is_static() ? std::to_string(d.value) + "," : d.symbol.empty() ? "?," : "'" + d.symbol + "',";
  return k + "]";
}

inline std::string NameOf(const Value* v) { return v ? v->name : std::string("<omitted>"); }

// `b` is `a` exported and re-imported: same metadata, inputs, outputs, initializers (bytes), nodes in
// a's topological order with the same names, ops, opsets, attributes and wiring, and the same value types.
inline void ExpectSameGraph(const Graph& a, const Graph& b, const std::string& ctx) {
  EXPECT_EQ(a.ir_version, b.ir_version) << ctx;
  EXPECT_EQ(a.producer_name, b.producer_name) << ctx;
  EXPECT_EQ(a.producer_version, b.producer_version) << ctx;
  EXPECT_EQ(a.doc_string, b.doc_string) << ctx;
  EXPECT_EQ(a.name, b.name) << ctx;
  EXPECT_EQ(a.opset_imports, b.opset_imports) << ctx;
  ASSERT_EQ(a.inputs.size(), b.inputs.size()) << ctx;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i]->name, b.inputs[i]->name) << ctx;
    EXPECT_EQ(a.inputs[i]->dtype, b.inputs[i]->dtype) << ctx << " input " << a.inputs[i]->name;
    EXPECT_EQ(ShapeKey(a.inputs[i]->shape), ShapeKey(b.inputs[i]->shape)) << ctx << " input " << a.inputs[i]->name;
    EXPECT_EQ(a.inputs[i]->is_initializer(), b.inputs[i]->is_initializer()) << ctx;
  }
  ASSERT_EQ(a.outputs.size(), b.outputs.size()) << ctx;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i]->name, b.outputs[i]->name) << ctx;
    EXPECT_EQ(a.outputs[i]->dtype, b.outputs[i]->dtype) << ctx;
    EXPECT_EQ(ShapeKey(a.outputs[i]->shape), ShapeKey(b.outputs[i]->shape)) << ctx << " output " << a.outputs[i]->name;
  }
  size_t na = 0, nb = 0;
  for (const auto& v : a.values()) {
    if (!v->is_initializer()) continue;
    ++na;
    const Value* w = b.FindValue(v->name);
    ASSERT_TRUE(w && w->is_initializer()) << ctx << ": initializer " << v->name << " lost";
    EXPECT_TRUE(SameTensor(*v->initializer, *w->initializer)) << ctx << ": initializer " << v->name;
  }
  for (const auto& v : b.values()) nb += v->is_initializer();
  EXPECT_EQ(na, nb) << ctx;
  std::vector<Node*> order = a.TopologicalOrder();
  ASSERT_EQ(order.size(), b.nodes().size()) << ctx;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& x = *order[i];
    const Node& y = *b.nodes()[i];
    std::string nctx = ctx + ": node " + x.name;
    EXPECT_EQ(x.name, y.name) << nctx;
    EXPECT_EQ(x.op_type, y.op_type) << nctx;
    EXPECT_EQ(x.domain, y.domain) << nctx;
    EXPECT_EQ(x.opset, y.opset) << nctx;
    EXPECT_EQ(x.doc_string, y.doc_string) << nctx;
    ASSERT_EQ(x.inputs.size(), y.inputs.size()) << nctx;
    for (size_t k = 0; k < x.inputs.size(); ++k) EXPECT_EQ(NameOf(x.inputs[k]), NameOf(y.inputs[k])) << nctx;
    ASSERT_EQ(x.outputs.size(), y.outputs.size()) << nctx;
    for (size_t k = 0; k < x.outputs.size(); ++k) {
      EXPECT_EQ(NameOf(x.outputs[k]), NameOf(y.outputs[k])) << nctx;
      if (x.outputs[k] && x.outputs[k]->dtype != DataType::kUndefined) {
        EXPECT_EQ(x.outputs[k]->dtype, y.outputs[k]->dtype) << nctx << " output " << k;
        EXPECT_EQ(ShapeKey(x.outputs[k]->shape), ShapeKey(y.outputs[k]->shape)) << nctx << " output " << k;
      }
    }
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << nctx;
    for (const auto& [k, attr] : x.attrs) {
      ASSERT_TRUE(y.has_attr(k)) << nctx << " attribute " << k;
      ExpectSameAttribute(attr, *y.attr(k), nctx + " attribute " + k);
    }
  }
}

}  // namespace ot::test
