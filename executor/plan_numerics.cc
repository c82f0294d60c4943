// Plan::NoteNonFinite (--check-numerics): after a kernel, scan its float outputs; the first kernel in plan order that
// wrote a NaN or infinity is described while its inputs still hold their values (later kernels reuse the memory).
// On a device the buffers are copied to the host first (the step waits for the kernel: a debugging mode).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "executor/plan.h"

namespace ot {

namespace {
// Min, max and non-finite counts of a float buffer ("" for other dtypes).
std::string RangeText(const void* p, const TensorDesc& d) {
  const int64_t n = d.numel();
  double lo = INFINITY, hi = -INFINITY;
  int64_t nan = 0, inf = 0;
  auto scan = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p);
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(static_cast<float>(x[i]));
      if (std::isnan(v))
        ++nan;
      else if (std::isinf(v))
        ++inf;
      else {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  };
  switch (d.dtype) {
    case DataType::kFloat32:
      scan(float{});
      break;
    case DataType::kFloat64: {
      const double* x = static_cast<const double*>(p);
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i]))
          ++nan;
        else if (std::isinf(x[i]))
          ++inf;
        else {
          lo = std::min(lo, x[i]);
          hi = std::max(hi, x[i]);
        }
      }
      break;
    }
    case DataType::kFloat16:
      scan(float16{});
      break;
    case DataType::kBFloat16:
      scan(bfloat16{});
      break;
    default:
      return "";
  }
  char b[160];
  if (lo > hi)
    std::snprintf(b, sizeof b, "no finite value");
  else
    std::snprintf(b, sizeof b, "range [%.6g, %.6g]", lo, hi);
  std::string r = b;
  if (nan || inf) r += ", " + std::to_string(nan) + " NaN, " + std::to_string(inf) + " inf of " + std::to_string(n);
  return r;
}

// True when every element of a float buffer is finite (non-float buffers: true).
bool AllFinite(const void* p, const TensorDesc& d) {
  const int64_t n = d.numel();
  auto scan = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p);
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(static_cast<float>(x[i]))) return false;
    return true;
  };
  switch (d.dtype) {
    case DataType::kFloat32:
      return scan(float{});
    case DataType::kFloat64: {
      const double* x = static_cast<const double*>(p);
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return false;
      return true;
    }
    case DataType::kFloat16:
      return scan(float16{});
    case DataType::kBFloat16:
      return scan(bfloat16{});
    default:
      return true;
  }
}

}  // namespace

void Plan::NoteNonFinite(size_t i, const std::vector<const void*>& in) {
  const Step& st = steps_[i];
  std::vector<std::vector<uint8_t>> copies;
  auto host = [&](const void* p, const TensorDesc& d) -> const void* {
    if (!device_) return p;
    copies.emplace_back(d.nbytes());
    device_->CopyToHost(copies.back().data(), p, d.nbytes());
    device_->Synchronize();
    return copies.back().data();
  };
  for (int b : st.out_bufs) {
    if (b < 0 || AllFinite(host(BufferPtr(b), bufs_[b].desc), bufs_[b].desc)) continue;
    int64_t cur = first_nonfinite_.load();
    while ((cur < 0 || static_cast<int64_t>(i) < cur) &&
           !first_nonfinite_.compare_exchange_weak(cur, static_cast<int64_t>(i))) {
    }
    // Describe it now: its input buffers may be reused by later kernels.
    DataType prec = DataType::kUndefined;
    std::string text;
    for (size_t k = 0; k < st.in_bufs.size(); ++k) {
      const int ib = st.in_bufs[k];
      if (ib < 0) continue;
      const std::string r = RangeText(host(in[k], bufs_[ib].desc), bufs_[ib].desc);
      if (r.empty()) continue;
      if (prec == DataType::kUndefined || SizeOf(bufs_[ib].desc.dtype) < SizeOf(prec)) prec = bufs_[ib].desc.dtype;
      text +=
          "; input " + std::to_string(k) + " '" + bufs_[ib].name + "' " + DataTypeName(bufs_[ib].desc.dtype) + " " + r;
    }
    for (int ob : st.out_bufs)
      if (ob >= 0) {
        const std::string r = RangeText(host(BufferPtr(ob), bufs_[ob].desc), bufs_[ob].desc);
        if (r.empty()) continue;
        if (prec == DataType::kUndefined || SizeOf(bufs_[ob].desc.dtype) < SizeOf(prec)) prec = bufs_[ob].desc.dtype;
        text += "; output '" + bufs_[ob].name + "' " + DataTypeName(bufs_[ob].desc.dtype) + " " + r;
      }
    text = "ran in " + (prec == DataType::kUndefined ? std::string("?") : DataTypeName(prec)) + text;
    std::lock_guard<std::mutex> l(detail_mu_);
    nonfinite_detail_[static_cast<int64_t>(i)] = std::move(text);
    break;
  }
}

}  // namespace ot
