// Tensor shapes: a rank (possibly unknown) and dims that are static sizes or named symbols ("batch").
// A symbolic dim is carried through inference by name: two dims with the same symbol are equal.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ot {

struct Dim {
  int64_t value = -1;  // >= 0 when static
  std::string symbol;  // set when not static; empty symbol = unknown, unnamed
  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: a static dim converts from an integer
  static Dim Symbol(std::string s) {
    Dim d;
    d.symbol = std::move(s);
    return d;
  }
  bool is_static() const { return value >= 0; }
  bool operator==(const Dim& o) const {
    return is_static() ? o.value == value : (!o.is_static() && !symbol.empty() && o.symbol == symbol);
  }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  std::string ToString() const;
};

class Shape {
 public:
  Shape() = default;  // unknown rank
  explicit Shape(std::vector<Dim> dims) : known_(true), dims_(std::move(dims)) {}
  static Shape Static(const std::vector<int64_t>& dims);
  static Shape Scalar() { return Shape(std::vector<Dim>{}); }

  bool known_rank() const { return known_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }
  const Dim& operator[](int i) const { return dims_[i]; }
  Dim& operator[](int i) { return dims_[i]; }
  bool is_static() const;  // known rank and every dim static
  // Static dims; throws Error when not static.
  std::vector<int64_t> StaticDims() const;
  // Element count when static, nullopt otherwise.
  std::optional<int64_t> NumElements() const;
  std::string ToString() const;  // "[2,batch,3]" or "?"
  bool operator==(const Shape& o) const { return known_ == o.known_ && dims_ == o.dims_; }

 private:
  bool known_ = false;
  std::vector<Dim> dims_;
};

int64_t NumElements(const std::vector<int64_t>& dims);
std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace ot
