#include "graph/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "graph/error.h"
#include "graph/shape.h"

namespace ot {

namespace {
std::shared_ptr<uint8_t> Allocate(size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  void* p = std::aligned_alloc(64, n);
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, n);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

template <typename T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>)
    return v != 0.0;
  else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    return static_cast<T>(static_cast<int64_t>(v));
  } else
    return static_cast<T>(v);
}
}  // namespace

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  if (SizeOf(dtype) == 0) throw UnsupportedError("tensor dtype " + DataTypeName(dtype) + " is not supported");
  numel_ = 1;
  for (auto d : dims_) {
    if (d < 0) throw Error("negative dimension in tensor shape " + DimsToString(dims_));
    if (d > 0 && numel_ > std::numeric_limits<int64_t>::max() / d)
      throw Error("tensor shape " + DimsToString(dims_) + " overflows");
    numel_ *= d;
  }
  if (nbytes() > (size_t(1) << 40)) throw Error("tensor shape " + DimsToString(dims_) + " is too large");
  buf_ = Allocate(nbytes());
}

Tensor Tensor::Scalar(float v) {
  Tensor t(DataType::kFloat32, {});
  *t.data<float>() = v;
  return t;
}

Tensor Tensor::FromInt64(const std::vector<int64_t>& values, std::vector<int64_t> dims) {
  Tensor t(DataType::kInt64, std::move(dims));
  if (static_cast<int64_t>(values.size()) != t.numel()) throw Error("FromInt64: value count does not match dims");
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 8);
  return t;
}

Tensor Tensor::FromFloat(const std::vector<float>& values, std::vector<int64_t> dims) {
  Tensor t(DataType::kFloat32, std::move(dims));
  if (static_cast<int64_t>(values.size()) != t.numel()) throw Error("FromFloat: value count does not match dims");
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::Clone() const {
  if (empty_tensor()) return Tensor();
  Tensor t(dtype_, dims_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

void Tensor::MoveInto(std::shared_ptr<uint8_t> storage) {
  if (!storage) throw Error("Tensor::MoveInto: no storage");
  if (nbytes()) std::memcpy(storage.get(), raw(), nbytes());
  buf_ = std::move(storage);
}

Tensor Tensor::Reshaped(std::vector<int64_t> dims) const {
  if (NumElements(dims) != numel_) throw Error("cannot reshape " + DimsToString(dims_) + " to " + DimsToString(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

double Tensor::GetDouble(int64_t i) const {
  return DispatchDType(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    return ToDouble<T>(data<T>()[i]);
  });
}

int64_t Tensor::GetInt64(int64_t i) const {
  return DispatchDType(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>)
      return static_cast<int64_t>(data<T>()[i]);
    else
      return static_cast<int64_t>(ToDouble<T>(data<T>()[i]));
  });
}

void Tensor::SetDouble(int64_t i, double v) {
  DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[i] = FromDouble<T>(v);
  });
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> r(numel_);
  for (int64_t i = 0; i < numel_; ++i) r[i] = GetInt64(i);
  return r;
}

Tensor Tensor::CastTo(DataType to) const {
  Tensor r(to, dims_);
  DispatchDType(dtype_, [&](auto stag) {
    using S = decltype(stag);
    DispatchDType(to, [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = data<S>();
      D* d = r.data<D>();
      for (int64_t i = 0; i < numel_; ++i) {
        if constexpr (std::is_integral_v<S> && std::is_integral_v<D>)
          d[i] = static_cast<D>(s[i]);
        else
          d[i] = FromDouble<D>(ToDouble<S>(s[i]));
      }
    });
  });
  return r;
}

}  // namespace ot
