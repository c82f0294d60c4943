// Node attributes: the ONNX attribute kinds this runtime reads (subgraphs are kept only as a marker).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace ot {

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kTensors, kGraph, kOther };
  Kind kind = Kind::kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  // For kGraph/kOther: the serialized AttributeProto, so export writes back what import read.
  std::string opaque;

  static Attribute Int(int64_t v) {
    Attribute a;
    a.kind = Kind::kInt;
    a.i = v;
    return a;
  }
  static Attribute Float(float v) {
    Attribute a;
    a.kind = Kind::kFloat;
    a.f = v;
    return a;
  }
  static Attribute String(std::string v) {
    Attribute a;
    a.kind = Kind::kString;
    a.s = std::move(v);
    return a;
  }
  static Attribute Ints(std::vector<int64_t> v) {
    Attribute a;
    a.kind = Kind::kInts;
    a.ints = std::move(v);
    return a;
  }
  static Attribute Strings(std::vector<std::string> v) {
    Attribute a;
    a.kind = Kind::kStrings;
    a.strings = std::move(v);
    return a;
  }
  static Attribute Floats(std::vector<float> v) {
    Attribute a;
    a.kind = Kind::kFloats;
    a.floats = std::move(v);
    return a;
  }
  static Attribute TensorValue(Tensor v) {
    Attribute a;
    a.kind = Kind::kTensor;
    a.t = std::move(v);
    return a;
  }
  std::string ToString() const;
};

}  // namespace ot
