#include "graph/infer_util.h"

#include "graph/error.h"

namespace ot {

Shape BroadcastShapes(const InferContext& ctx, const std::vector<Shape>& shapes) {
  int rank = 0;
  for (const Shape& s : shapes) {
    if (!s.known_rank()) return Shape();
    rank = std::max(rank, s.rank());
  }
  std::vector<Dim> out(rank, Dim(1));
  for (const Shape& s : shapes) {
    int off = rank - s.rank();
    for (int i = 0; i < s.rank(); ++i) {
      const Dim& d = s[i];
      Dim& o = out[off + i];
      if (d.is_static() && d.value == 1) continue;
      if (o.is_static() && o.value == 1) {
        o = d;
        continue;
      }
      if (d == o) continue;
      if (d.is_static() && o.is_static())
        ctx.Fail("shapes do not broadcast: dim " + std::to_string(off + i) + " is " + std::to_string(o.value) +
                 " and " + std::to_string(d.value));
      // Symbolic against something else: unknown unless one side is static (> 1) which then wins.
      if (d.is_static())
        o = d;
      else if (!o.is_static())
        o = Dim();
    }
  }
  return Shape(out);
}

std::vector<int64_t> BroadcastDims(const std::vector<std::vector<int64_t>>& dims, const std::string& what) {
  size_t rank = 0;
  for (const auto& d : dims) rank = std::max(rank, d.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& d : dims) {
    size_t off = rank - d.size();
    for (size_t i = 0; i < d.size(); ++i) {
      int64_t& o = out[off + i];
      if (d[i] == 1) continue;
      if (o == 1)
        o = d[i];
      else if (o != d[i])
        throw Error(what + ": shapes do not broadcast (" + std::to_string(o) + " vs " + std::to_string(d[i]) + ")");
    }
  }
  return out;
}

int NormalizeAxis(const InferContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    ctx.Fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

int NormalizeAxis(int64_t axis, int rank, const std::string& what) {
  if (axis < -rank || axis >= std::max(rank, 1))
    throw Error(what + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::optional<std::vector<int64_t>> InputInts(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const Tensor* t = ctx.input_value(i);
  if (!t) return std::nullopt;
  return t->ToInt64Vector();
}

void PropagateInput0(InferContext& ctx) { ctx.set_output(0, ctx.input_type(0), ctx.input_shape(0)); }

std::vector<Dim> SizesOf(const InferContext& ctx, const DimsValue& v, const std::string& what) {
  std::vector<Dim> out;
  for (const DimOrInt& e : v) {
    if (e.known && e.value < 0) ctx.Fail(what + " has negative dim " + std::to_string(e.value));
    out.push_back(e.AsDim());
  }
  return out;
}

Shape UnknownDims(int rank) { return Shape(std::vector<Dim>(rank, Dim())); }

}  // namespace ot
