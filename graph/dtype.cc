#include "graph/dtype.h"

namespace ot {

size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kUint8:
      return 1;
    case DataType::kInt8:
      return 1;
    case DataType::kUint16:
      return 2;
    case DataType::kInt16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kBool:
      return 1;
    case DataType::kFloat16:
      return 2;
    case DataType::kFloat64:
      return 8;
    case DataType::kUint32:
      return 4;
    case DataType::kUint64:
      return 8;
    case DataType::kBFloat16:
      return 2;
    default:
      return 0;
  }
}

std::string DataTypeName(DataType t) {
  switch (t) {
    case DataType::kUndefined:
      return "undefined";
    case DataType::kFloat32:
      return "float32";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUint16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat64:
      return "float64";
    case DataType::kUint32:
      return "uint32";
    case DataType::kUint64:
      return "uint64";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

DataType DataTypeFromName(const std::string& name) {
  for (int i = 0; i <= 16; ++i) {
    auto t = static_cast<DataType>(i);
    if (SizeOf(t) != 0 && DataTypeName(t) == name) return t;
  }
  return DataType::kUndefined;
}

bool IsSupportedDataType(int32_t e) { return e >= 1 && e <= 16 && SizeOf(static_cast<DataType>(e)) != 0; }

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

bool IsInteger(DataType t) {
  switch (t) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUint32:
    case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

bool IsSigned(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return true;
    default:
      return IsFloat(t);
  }
}

}  // namespace ot
