// Comparisons and logic (bool outputs) and Where.
#include <stdexcept>
#include <type_traits>

#include "cpu_ops/elementwise_binary.h"
#include "cpu_ops/elementwise_loops.h"

namespace ot::cpu {
namespace {

template <typename T, typename G>
void Compare(const T* a, const T* b, bool* out, const BroadcastPlan& p, G g) {
  using A = ComputeType<T>;
  BinaryLoop(a, b, out, p, [&](T x, T y) { return static_cast<bool>(g(static_cast<A>(x), static_cast<A>(y))); });
}

}  // namespace

template <typename T>
void CompareBinary(BinaryOp op, const T* a, const T* b, bool* out, const BroadcastPlan& p) {
  using A = ComputeType<T>;
  switch (op) {
    case BinaryOp::kEqual:
      return Compare(a, b, out, p, [](A x, A y) { return x == y; });
    case BinaryOp::kLess:
      return Compare(a, b, out, p, [](A x, A y) { return x < y; });
    case BinaryOp::kGreater:
      return Compare(a, b, out, p, [](A x, A y) { return x > y; });
    case BinaryOp::kLessOrEqual:
      return Compare(a, b, out, p, [](A x, A y) { return x <= y; });
    case BinaryOp::kGreaterOrEqual:
      return Compare(a, b, out, p, [](A x, A y) { return x >= y; });
    default:
      break;
  }
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::kAnd:
        return Compare(a, b, out, p, [](bool x, bool y) { return x && y; });
      case BinaryOp::kOr:
        return Compare(a, b, out, p, [](bool x, bool y) { return x || y; });
      case BinaryOp::kXor:
        return Compare(a, b, out, p, [](bool x, bool y) { return x != y; });
      default:
        break;
    }
  }
  throw std::invalid_argument("comparison/logic op not defined for this type");
}

template <typename T>
void Where(const bool* cond, const T* x, const T* y, T* out, const BroadcastPlan& p) {
  if (p.all_contiguous) {
    ParallelChunks(p.numel, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = cond[i] ? x[i] : y[i];
    });
    return;
  }
  ForEachRun(p, [&](int64_t o, int64_t len, const int64_t* off, const int64_t* st) {
    const bool* pc = cond + off[0];
    const T* px = x + off[1];
    const T* py = y + off[2];
    T* po = out + o;
    for (int64_t i = 0; i < len; ++i) po[i] = pc[i * st[0]] ? px[i * st[1]] : py[i * st[2]];
  });
}

#define OT_COMPARE_INST(T)                                                                   \
  template void CompareBinary<T>(BinaryOp, const T*, const T*, bool*, const BroadcastPlan&); \
  template void Where<T>(const bool*, const T*, const T*, T*, const BroadcastPlan&);
OT_COMPARE_INST(float)
OT_COMPARE_INST(double)
OT_COMPARE_INST(float16)
OT_COMPARE_INST(bfloat16)
OT_COMPARE_INST(int8_t)
OT_COMPARE_INST(int16_t)
OT_COMPARE_INST(int32_t)
OT_COMPARE_INST(int64_t)
OT_COMPARE_INST(uint8_t)
OT_COMPARE_INST(uint16_t)
OT_COMPARE_INST(uint32_t)
OT_COMPARE_INST(uint64_t)
OT_COMPARE_INST(bool)

}  // namespace ot::cpu
