// A host tensor: dtype, static dims and a contiguous row-major buffer (64-byte aligned, shared on copy).
// Used for initializers, constants known at plan time, and data read from or written to files.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "kernel_common/half.h"

namespace ot {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DataType dtype, std::vector<int64_t> dims);  // zero-filled
  static Tensor Scalar(float v);
  static Tensor FromInt64(const std::vector<int64_t>& values, std::vector<int64_t> dims);
  static Tensor FromFloat(const std::vector<float>& values, std::vector<int64_t> dims);

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * SizeOf(dtype_); }
  bool empty_tensor() const { return dtype_ == DataType::kUndefined; }

  void* raw() { return buf_ ? buf_.get() : nullptr; }
  const void* raw() const { return buf_ ? buf_.get() : nullptr; }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }

  // Deep copy (the buffer is shared between copies of a Tensor object otherwise).
  Tensor Clone() const;
  // Moves the elements into `storage` (at least nbytes(), suitably aligned), which this tensor then holds; copies of
  // this Tensor made before keep the old buffer.
  void MoveInto(std::shared_ptr<uint8_t> storage);
  // Same buffer, other dims of equal element count.
  Tensor Reshaped(std::vector<int64_t> dims) const;
  // Element i converted to double / int64 (any numeric dtype).
  double GetDouble(int64_t i) const;
  int64_t GetInt64(int64_t i) const;
  void SetDouble(int64_t i, double v);
  // All elements as int64 (for shape-like tensors).
  std::vector<int64_t> ToInt64Vector() const;
  // Element-wise conversion to another dtype (float->int truncates toward zero, as ONNX Cast).
  Tensor CastTo(DataType to) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t> buf_;
};

// Calls f(T{}) with T the C++ type of dtype (float, double, float16, bfloat16, integers, bool).
template <typename F>
decltype(auto) DispatchDType(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat64:
      return f(double{});
    case DataType::kFloat16:
      return f(float16{});
    case DataType::kBFloat16:
      return f(bfloat16{});
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kInt16:
      return f(int16_t{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kInt64:
      return f(int64_t{});
    case DataType::kUint8:
      return f(uint8_t{});
    case DataType::kUint16:
      return f(uint16_t{});
    case DataType::kUint32:
      return f(uint32_t{});
    case DataType::kUint64:
      return f(uint64_t{});
    case DataType::kBool:
      return f(bool{});
    default:
      break;
  }
  return f(float{});  // unreachable for valid tensors; callers check the dtype first
}

// Calls f(T{}) for the float dtypes (float, double, float16, bfloat16); returns false for any other dtype.
template <typename F>
bool DispatchFloat(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32:
      f(float{});
      return true;
    case DataType::kFloat64:
      f(double{});
      return true;
    case DataType::kFloat16:
      f(float16{});
      return true;
    case DataType::kBFloat16:
      f(bfloat16{});
      return true;
    default:
      return false;
  }
}

}  // namespace ot
