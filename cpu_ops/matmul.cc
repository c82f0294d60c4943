#include "cpu_ops/matmul.h"
#include "cpu_ops/dims.h"

#include <tbb/parallel_for.h>

#include <cstring>
#include <mutex>
#include <string>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu_ops/dnnl_half.h"

#include "kernel_common/half.h"

namespace ot::cpu {

namespace {

using dt = dnnl::memory::data_type;

// Row-major strides of dims.
// Logical dims [batch..., rows, cols] of a matrix stored as [batch..., cols, rows] when transposed.
dnnl::memory::desc MatrixDesc(const std::vector<int64_t>& batch, int64_t rows, int64_t cols, bool trans, dt t) {
  dnnl::memory::dims dims(batch.begin(), batch.end());
  dims.push_back(rows);
  dims.push_back(cols);
  dnnl::memory::dims phys = dims;
  if (trans) std::swap(phys[phys.size() - 1], phys[phys.size() - 2]);
  dnnl::memory::dims s = Contiguous(phys);
  if (trans) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return dnnl::memory::desc(dims, t, s);
}

}  // namespace

struct DnnlMatMul::Impl {
  // User-managed scratchpad owned by this primitive (see DnnlConv::Impl).
  // Allocated on the first Run without a caller's workspace.
  dnnl::memory::desc scratch_md;
  mutable std::once_flag scratch_once;
  mutable std::shared_ptr<std::vector<uint8_t>> scratch;
  size_t scratch_bytes = 0, a_off = 0, b_off = 0, c_off = 0, ws_bytes = 0;  // workspace layout
  dnnl::matmul prim;
  dnnl::memory::desc a_md, b_md, c_md;
  bool convert = false;  // primitive runs in f32 on converted copies
  std::string impl;      // oneDNN's implementation name (for reports)
  int64_t a_elems = 0, b_elems = 0, c_elems = 0;
  bool empty = false;    // some output dim is 0: nothing to do
  bool k_zero = false;   // K == 0: C = 0 (or unchanged when accumulating)
};

DnnlMatMul::DnnlMatMul(const MatMulSpec& spec) : spec_(spec), impl_(std::make_shared<Impl>()) {
  Impl& im = *impl_;
  std::vector<int64_t> c_batch(spec.a_batch.size());
  for (size_t i = 0; i < c_batch.size(); ++i) c_batch[i] = std::max(spec.a_batch[i], spec.b_batch[i]);
  for (size_t i = 0; i < c_batch.size(); ++i)
    if (spec.a_batch[i] == 0 || spec.b_batch[i] == 0) c_batch[i] = 0;
  im.a_elems = Prod(spec.a_batch) * spec.m * spec.k;
  im.b_elems = Prod(spec.b_batch) * spec.k * spec.n;
  im.c_elems = Prod(c_batch) * spec.m * spec.n;
  if (im.c_elems == 0) {
    im.empty = true;
    return;
  }
  if (spec.k == 0) {
    im.k_zero = true;
    return;
  }
  PrepareDnnlCall();  // before creating the primitive too: oneDNN sizes it for this team (dnnl_util.h)
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (spec.alpha != 1.0f) attr.set_output_scales(0, {spec.alpha});
  if (spec.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  auto make = [&](dt t) {
    im.a_md = MatrixDesc(spec.a_batch, spec.m, spec.k, spec.trans_a, t);
    im.b_md = MatrixDesc(spec.b_batch, spec.k, spec.n, spec.trans_b, t);
    im.c_md = MatrixDesc(c_batch, spec.m, spec.n, false, t);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(im.a_md, im.b_md, im.c_md), attr, DnnlEngine());
    if (t != dt::f32 && GetHalfGemmMode() == HalfGemmMode::kAuto && IsReferenceImpl(pd.impl_info_str()))
      throw NotNativeHalf{};
    im.impl = pd.impl_info_str();
    im.scratch_md = pd.scratchpad_desc();
    im.prim = dnnl::matmul(pd);
  };
  if (spec.type == DnnType::kF32) {
    make(dt::f32);
  } else {
    // A native half primitive when oneDNN has a real (jit) one; otherwise f32 on converted copies.
    im.convert = MakeNativeHalfOrConvert(spec.type, make);
    if (im.convert) make(dt::f32);
  }
  // Workspace: the scratchpad, then (converting) the f32 copies of A, B and C, each 64-byte aligned.
  auto align = [](size_t n) { return (n + 63) / 64 * 64; };
  im.scratch_bytes = im.scratch_md.get_size();
  im.a_off = align(im.scratch_bytes);
  im.b_off = im.a_off + (im.convert ? align(static_cast<size_t>(im.a_elems) * sizeof(float)) : 0);
  im.c_off = im.b_off + (im.convert ? align(static_cast<size_t>(im.b_elems) * sizeof(float)) : 0);
  im.ws_bytes = im.c_off + (im.convert ? align(static_cast<size_t>(im.c_elems) * sizeof(float)) : 0);
}

std::string DnnlMatMul::impl_name() const {
  const Impl& im = *impl_;
  return im.impl.empty() ? std::string("none") : im.impl + (im.convert ? " (f32 on converted operands)" : "");
}

size_t DnnlMatMul::workspace_bytes() const { return impl_->ws_bytes; }

DnnlMatMul::~DnnlMatMul() = default;

void DnnlMatMul::Run(const void* a, const void* b, void* c, void* workspace) const {
  const Impl& im = *impl_;
  if (im.empty) return;
  const size_t esz = DnnTypeSize(spec_.type);
  if (im.k_zero) {
    if (!spec_.accumulate) std::memset(c, 0, static_cast<size_t>(im.c_elems) * esz);
    return;
  }
  dnnl::engine& eng = DnnlEngine();
  dnnl::stream& s = DnnlStream();
  PrepareDnnlCall();
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  void* scratch = ws;
  if (!ws) {
    std::call_once(im.scratch_once, [&] {
      im.scratch = std::make_shared<std::vector<uint8_t>>(std::max<size_t>(im.scratch_bytes, 64));
    });
    scratch = im.scratch->data();
  }
  if (!im.convert) {
    dnnl::memory am(im.a_md, eng, const_cast<void*>(a));
    dnnl::memory bm(im.b_md, eng, const_cast<void*>(b));
    dnnl::memory cm(im.c_md, eng, c);
    im.prim.execute(s, {{DNNL_ARG_SRC, am},
                          {DNNL_ARG_WEIGHTS, bm},
                          {DNNL_ARG_DST, cm},
                          {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, scratch)}});
    s.wait();
    return;
  }
  std::unique_ptr<float[]> own_a, own_b, own_c;
  float *af, *bf, *cf;
  if (ws) {
    af = reinterpret_cast<float*>(ws + im.a_off);
    bf = reinterpret_cast<float*>(ws + im.b_off);
    cf = reinterpret_cast<float*>(ws + im.c_off);
  } else {
    own_a = NewFloats(im.a_elems);
    own_b = NewFloats(im.b_elems);
    own_c = NewFloats(im.c_elems);
    af = own_a.get();
    bf = own_b.get();
    cf = own_c.get();
  }
  ToFloat(spec_.type, a, af, im.a_elems);
  ToFloat(spec_.type, b, bf, im.b_elems);
  if (spec_.accumulate) ToFloat(spec_.type, c, cf, im.c_elems);
  dnnl::memory am(im.a_md, eng, af);
  dnnl::memory bm(im.b_md, eng, bf);
  dnnl::memory cm(im.c_md, eng, cf);
  im.prim.execute(s, {{DNNL_ARG_SRC, am},
                          {DNNL_ARG_WEIGHTS, bm},
                          {DNNL_ARG_DST, cm},
                          {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, scratch)}});
  s.wait();
  FromFloat(spec_.type, cf, c, im.c_elems);
}

template <typename T, typename Acc>
void NaiveMatMul(const MatMulSpec& spec, const T* a, const T* b, T* c) {
  const MatMulBatch batch(spec);
  const int64_t batches = batch.count();
  const int64_t M = spec.m, N = spec.n, K = spec.k;
  if (batches * M * N == 0) return;
  const int64_t a_rs = spec.trans_a ? 1 : K, a_ks = spec.trans_a ? M : 1;
  const int64_t b_ks = spec.trans_b ? 1 : N, b_cs = spec.trans_b ? K : 1;
  const Acc alpha = static_cast<Acc>(spec.alpha);
  tbb::parallel_for(int64_t{0}, batches * M, [&](int64_t row) {
    const int64_t bi = row / M, i = row % M;
    int64_t ao = 0, bo = 0;
    batch.Offsets(bi, &ao, &bo);
    const T* ar = a + ao + i * a_rs;
    T* cr = c + row * N;
    for (int64_t j = 0; j < N; ++j) {
      const T* bc = b + bo + j * b_cs;
      Acc acc = 0;
      for (int64_t kk = 0; kk < K; ++kk)
        acc += static_cast<Acc>(ar[kk * a_ks]) * static_cast<Acc>(bc[kk * b_ks]);
      if (spec.alpha != 1.0f) acc = acc * alpha;
      if (spec.accumulate) acc += static_cast<Acc>(cr[j]);
      cr[j] = static_cast<T>(acc);
    }
  });
}

template <typename T>
void FillScaledBroadcast2D(const T* c, int64_t cs_m, int64_t cs_n, float beta, int64_t m, int64_t n, T* y) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_same_v<T, double>)
        y[i * n + j] = static_cast<double>(beta) * c[i * cs_m + j * cs_n];
      else if constexpr (std::is_integral_v<T>)
        y[i * n + j] = static_cast<T>(static_cast<double>(beta) * static_cast<double>(c[i * cs_m + j * cs_n]));
      else
        y[i * n + j] = static_cast<T>(beta * static_cast<float>(c[i * cs_m + j * cs_n]));
    }
}

template void NaiveMatMul<double, double>(const MatMulSpec&, const double*, const double*, double*);
template void NaiveMatMul<float, double>(const MatMulSpec&, const float*, const float*, float*);
template void NaiveMatMul<float16, double>(const MatMulSpec&, const float16*, const float16*, float16*);
template void NaiveMatMul<bfloat16, double>(const MatMulSpec&, const bfloat16*, const bfloat16*, bfloat16*);
template void NaiveMatMul<int32_t, int64_t>(const MatMulSpec&, const int32_t*, const int32_t*, int32_t*);
template void NaiveMatMul<int64_t, int64_t>(const MatMulSpec&, const int64_t*, const int64_t*, int64_t*);
template void NaiveMatMul<uint32_t, uint64_t>(const MatMulSpec&, const uint32_t*, const uint32_t*, uint32_t*);
template void NaiveMatMul<uint64_t, uint64_t>(const MatMulSpec&, const uint64_t*, const uint64_t*, uint64_t*);
template void FillScaledBroadcast2D<float>(const float*, int64_t, int64_t, float, int64_t, int64_t, float*);
template void FillScaledBroadcast2D<double>(const double*, int64_t, int64_t, float, int64_t, int64_t, double*);
template void FillScaledBroadcast2D<float16>(const float16*, int64_t, int64_t, float, int64_t, int64_t, float16*);
template void FillScaledBroadcast2D<bfloat16>(const bfloat16*, int64_t, int64_t, float, int64_t, int64_t,
                                              bfloat16*);
template void FillScaledBroadcast2D<int32_t>(const int32_t*, int64_t, int64_t, float, int64_t, int64_t, int32_t*);
template void FillScaledBroadcast2D<int64_t>(const int64_t*, int64_t, int64_t, float, int64_t, int64_t, int64_t*);
template void FillScaledBroadcast2D<uint32_t>(const uint32_t*, int64_t, int64_t, float, int64_t, int64_t,
                                              uint32_t*);
template void FillScaledBroadcast2D<uint64_t>(const uint64_t*, int64_t, int64_t, float, int64_t, int64_t,
                                              uint64_t*);

}  // namespace ot::cpu
