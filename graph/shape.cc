#include "graph/shape.h"

#include "graph/error.h"

namespace ot {

std::string Dim::ToString() const {
  if (is_static()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

Shape Shape::Static(const std::vector<int64_t>& dims) {
  std::vector<Dim> d(dims.begin(), dims.end());
  return Shape(std::move(d));
}

bool Shape::is_static() const {
  if (!known_) return false;
  for (const auto& d : dims_)
    if (!d.is_static()) return false;
  return true;
}

std::vector<int64_t> Shape::StaticDims() const {
  if (!is_static()) throw Error("shape " + ToString() + " is not static");
  std::vector<int64_t> r;
  r.reserve(dims_.size());
  for (const auto& d : dims_) r.push_back(d.value);
  return r;
}

std::optional<int64_t> Shape::NumElements() const {
  if (!is_static()) return std::nullopt;
  int64_t n = 1;
  for (const auto& d : dims_) n *= d.value;
  return n;
}

std::string Shape::ToString() const {
  if (!known_) return "?";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i].ToString();
  }
  return s + "]";
}

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::string DimsToString(const std::vector<int64_t>& dims) { return Shape::Static(dims).ToString(); }

}  // namespace ot
