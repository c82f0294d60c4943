// Element types. Numbering follows onnx.TensorProto.DataType so conversion is a cast.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ot {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined and kString (not storable in a Tensor).
size_t SizeOf(DataType t);
// "float32", "float16", ... ; "dtype(N)" for values outside the enum.
std::string DataTypeName(DataType t);
// Parses DataTypeName's output back; kUndefined when unknown.
DataType DataTypeFromName(const std::string& name);
// True for an ONNX TensorProto enum value this runtime can hold in a Tensor.
bool IsSupportedDataType(int32_t onnx_enum);
bool IsFloat(DataType t);    // float16, bfloat16, float32, float64
bool IsInteger(DataType t);  // signed and unsigned integers (not bool)
bool IsSigned(DataType t);   // signed integers and floats

}  // namespace ot
