#include "cpu_ops/conv_grad.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_ops/dims.h"
#include "cpu_ops/pointwise_conv.h"
#include "kernel_common/host_alloc.h"

namespace ot::cpu {

namespace {

using dt = dnnl::memory::data_type;
using dims_t = dnnl::memory::dims;

// The backward primitive descriptor of `d` for type t, or nullopt where a bf16 one cannot be made (f32 rethrows:
// oneDNN always has one).
template <typename PD, typename D>
std::optional<PD> Backward(const D& d, const dnnl::primitive_attr& attr,
                           const dnnl::convolution_forward::primitive_desc& hint, dt t) {
  try {
    return PD(d, attr, DnnlEngine(), hint);
  } catch (const dnnl::error&) {
    if (t == dt::f32) throw;
    return std::nullopt;
  }
}

}  // namespace

struct DnnlConvBackward::Impl {
  dnnl::primitive prim;
  dnnl::memory::desc x_md, w_md, y_md, scratch_md;
  // The layouts the primitive chose (format any) where they differ from ONNX's plain ones, with the reorders into
  // them (weights: x, dy in and dw out; data: dy, w in and dx out) and buffers for the reordered copies.
  dnnl::memory::desc px_md, py_md, pw_md;
  std::optional<dnnl::reorder> x_in, y_in, w_out, w_in, x_out;
  std::shared_ptr<HostVector<uint8_t>> px, py, pw;
  // User-managed scratchpad owned by this object (oneDNN's library-managed one is tied to the creating thread).
  std::shared_ptr<HostVector<uint8_t>> scratch;
  bool empty = false;
  bool native = false;  // a primitive of spec.type was made (always for f32)
  std::string impl;     // oneDNN's implementation name
  int64_t out_elems = 0;
  // A large batch with relayouts runs in blocks of `block_n` images (and the rest), as the forward
  // (cpu_ops/conv.cc), so the reorders work in cache. Data: each image's dX depends on its own dY only. Weights: each
  // block's dW goes to `partial` and is added to the first block's, block by block in order (deterministic).
  int64_t block_n = 0, x_image = 0, y_image = 0;
  std::shared_ptr<DnnlConvBackward> block, tail;
  mutable HostVector<float> partial;  // the executor never runs one kernel twice at once
  // A channels-last pointwise convolution as a GEMM on the stored layouts (cpu_ops/pointwise_conv.h).
  std::shared_ptr<PointwiseConvGemm> pointwise;
};

DnnlConvBackward::DnnlConvBackward(const ConvSpec& spec, Kind kind)
    : spec_(spec), kind_(kind), impl_(std::make_shared<Impl>()) {
  Impl& im = *impl_;
  const int64_t x_elems = spec.n * spec.c_in * Prod(spec.in_spatial);
  const int64_t y_elems = spec.n * spec.c_out * Prod(spec.out_spatial);
  const int64_t w_elems = spec.c_out * (spec.c_in / spec.group) * Prod(spec.kernel);
  im.out_elems = kind == Kind::kData ? x_elems : w_elems;
  if (x_elems == 0 || y_elems == 0 || w_elems == 0) {
    im.empty = true;
    return;
  }
  const int64_t g = spec.group, ocg = spec.c_out / g, icg = spec.c_in / g;
  dims_t xd{spec.n, spec.c_in}, yd{spec.n, spec.c_out};
  xd.insert(xd.end(), spec.in_spatial.begin(), spec.in_spatial.end());
  yd.insert(yd.end(), spec.out_spatial.begin(), spec.out_spatial.end());
  dims_t wd;  // [G,] OC/G, IC/G, k...: ONNX's [C_out, C_in/G, k...] is exactly this, contiguous
  if (g > 1) wd.push_back(g);
  wd.push_back(ocg);
  wd.push_back(icg);
  wd.insert(wd.end(), spec.kernel.begin(), spec.kernel.end());
  dims_t strides(spec.strides.begin(), spec.strides.end());
  dims_t dil(spec.dilations.size());
  for (size_t i = 0; i < dil.size(); ++i) dil[i] = spec.dilations[i] - 1;
  dims_t pl(spec.pad_begin.begin(), spec.pad_begin.end()), pr(spec.pad_end.begin(), spec.pad_end.end());
  // bf16 runs natively (oneDNN's bf16 kernels: f32 accumulation, dW kept in f32 by the primitive and rounded once
  // when reordered into the plain bf16 output) where oneDNN has a jit kernel for it; else (and for f16) the caller
  // runs an f32 object on widened operands (native() false).
  const dt t = spec.type == DnnType::kBF16 ? dt::bf16 : dt::f32;
  if (spec.type == DnnType::kF16 || (t == dt::bf16 && GetHalfGemmMode() == HalfGemmMode::kF32)) return;
  if (PointwiseGemmApplies(spec)) {
    try {
      im.pointwise = std::make_shared<PointwiseConvGemm>(
          spec, kind == Kind::kData ? PointwiseConvGemm::Kind::kData : PointwiseConvGemm::Kind::kWeights);
      im.native = true;
      im.impl = im.pointwise->impl_name();
      return;
    } catch (const NotNativeHalf&) {  // a reference bf16 matmul only: the convolution below
    }
  }
  // X and Y (dX, dY) as stored: NCHW, or channels-last (ConvSpec::channels_last), which the primitive then takes as
  // its own layout (no reorders of the activations; only W's).
  const auto plain = [&](const dims_t& d) { return spec.channels_last ? ChannelsLastStrides(d) : Contiguous(d); };
  im.x_md = dnnl::memory::desc(xd, t, plain(xd));
  im.y_md = dnnl::memory::desc(yd, t, plain(yd));
  im.w_md = dnnl::memory::desc(wd, t, Contiguous(wd));
  const auto alg = dnnl::algorithm::convolution_direct;
  PrepareDnnlCall();  // before creating the primitive too: oneDNN sizes it for this team (dnnl_util.h)
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // Layouts left to oneDNN (format any), reordered from/to ONNX's plain ones: with plain layouts oneDNN 2.x falls
  // back to its gemm implementation, which for few input channels (a first layer on grey images, C_in 1, 28x28,
  // batch 64) takes ~250 ms where the blocked jit one takes ~1 ms, and for backward data is ~3x slower than the
  // blocked kernels with the reorders in and out.
  const auto any = dnnl::memory::format_tag::any;
  const bool as_stored = spec.channels_last && !(t == dt::f32 && BlockedForChannelsLast(spec));
  const dnnl::memory::desc xa = as_stored ? im.x_md : dnnl::memory::desc(xd, t, any),
                           ya = as_stored ? im.y_md : dnnl::memory::desc(yd, t, any), wa(wd, t, any),
                           dwa(wd, dt::f32, any);
  dnnl::convolution_forward::desc fda(dnnl::prop_kind::forward_training, alg, xa, wa, ya, strides, dil, pl, pr);
  std::optional<dnnl::convolution_forward::primitive_desc> ohint;
  try {
    ohint.emplace(fda, DnnlEngine());
  } catch (const dnnl::error&) {
    if (t == dt::f32) throw;
    return;  // no bf16 kernel: native() false
  }
  const dnnl::convolution_forward::primitive_desc& hinta = *ohint;
  dnnl::primitive_attr rattr;
  rattr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // simple reorders need none; checked below
  auto make = [&](const dnnl::memory::desc& from, const dnnl::memory::desc& to, std::optional<dnnl::reorder>& r,
                  std::shared_ptr<HostVector<uint8_t>>& buf, size_t bytes) {
    if (from == to) return;
    dnnl::reorder::primitive_desc rpd(DnnlEngine(), from, DnnlEngine(), to, rattr);
    if (rpd.scratchpad_desc().get_size() != 0) throw std::runtime_error("conv backward: reorder needs scratch");
    r = dnnl::reorder(rpd);
    buf = std::make_shared<HostVector<uint8_t>>(std::max<size_t>(bytes, 64));
  };
  // With the primitive's layouts known: a large batch with relayouts runs as block primitives instead (sized by
  // `out_image` elements of the blocked output per image); true when it does.
  auto in_blocks = [&](int64_t out_image) {
    const bool relayout = im.px_md != im.x_md || im.py_md != im.y_md;
    if (t != dt::f32) return false;  // the blocks' pointer steps and dW sums are written for f32
    if (relayout) im.block_n = ConvImagesPerBlock(spec.n, x_elems, y_elems, out_image);
    if (!im.block_n) return false;
    im.x_image = x_elems / spec.n;
    im.y_image = y_elems / spec.n;
    ConvSpec b = spec;
    b.n = im.block_n;
    im.block = std::make_shared<DnnlConvBackward>(b, kind);
    if (spec.n % im.block_n) {
      b.n = spec.n % im.block_n;
      im.tail = std::make_shared<DnnlConvBackward>(b, kind);
    }
    return true;
  };
  // A bf16 primitive that is a reference one is no better than the f32 path on widened operands.
  auto native = [&](const char* impl) { return t == dt::f32 || !IsReferenceImpl(impl); };
  if (kind == Kind::kData) {
    dnnl::convolution_backward_data::desc d(alg, xa, wa, ya, strides, dil, pl, pr);
    const auto opd = Backward<dnnl::convolution_backward_data::primitive_desc>(d, attr, hinta, t);
    if (!opd || !native(opd->impl_info_str())) return;
    const auto& pd = *opd;
    im.native = true;
    im.impl = pd.impl_info_str();
    im.scratch_md = pd.scratchpad_desc();
    im.prim = dnnl::convolution_backward_data(pd);
    im.px_md = pd.diff_src_desc();
    im.py_md = pd.diff_dst_desc();
    im.pw_md = pd.weights_desc();
    if (in_blocks(x_elems / spec.n)) return;
    make(im.y_md, im.py_md, im.y_in, im.py, im.py_md.get_size());
    make(im.w_md, im.pw_md, im.w_in, im.pw, im.pw_md.get_size());
    make(im.px_md, im.x_md, im.x_out, im.px, im.px_md.get_size());
  } else {
    dnnl::convolution_backward_weights::desc d(alg, xa, dwa, ya, strides, dil, pl, pr);
    const auto opd = Backward<dnnl::convolution_backward_weights::primitive_desc>(d, attr, hinta, t);
    if (!opd || !native(opd->impl_info_str())) return;
    const auto& pd = *opd;
    im.native = true;
    im.impl = pd.impl_info_str();
    im.scratch_md = pd.scratchpad_desc();
    im.prim = dnnl::convolution_backward_weights(pd);
    im.px_md = pd.src_desc();
    im.py_md = pd.diff_dst_desc();
    im.pw_md = pd.diff_weights_desc();
    if (in_blocks(y_elems / spec.n)) {
      im.partial.resize(static_cast<size_t>(w_elems));
      return;
    }
    make(im.x_md, im.px_md, im.x_in, im.px, im.px_md.get_size());
    make(im.y_md, im.py_md, im.y_in, im.py, im.py_md.get_size());
    make(im.pw_md, im.w_md, im.w_out, im.pw, im.pw_md.get_size());
  }
  im.scratch = std::make_shared<HostVector<uint8_t>>(std::max<size_t>(im.scratch_md.get_size(), 64));
}

bool DnnlConvBackward::native() const { return impl_->native || impl_->empty; }

DnnlConvBackward::~DnnlConvBackward() = default;

int64_t DnnlConvBackward::block_images() const { return impl_->block_n; }

std::string DnnlConvBackward::impl_name() const { return impl_->impl; }

void DnnlConvBackward::Run(const void* dy, const void* a, void* out) const {
  const Impl& im = *impl_;
  if (im.empty) {
    std::memset(out, 0, static_cast<size_t>(im.out_elems) * DnnTypeSize(spec_.type));
    return;
  }
  if (im.pointwise) {
    im.pointwise->Run(dy, a, nullptr, out);
    return;
  }
  if (im.block) {
    auto* o = static_cast<float*>(out);
    for (int64_t i = 0; i < spec_.n; i += im.block_n) {
      const DnnlConvBackward& c = spec_.n - i >= im.block_n ? *im.block : *im.tail;
      const float* block_dy = static_cast<const float*>(dy) + i * im.y_image;
      if (kind_ == Kind::kData) {
        c.Run(block_dy, a, o + i * im.x_image);
      } else if (i == 0) {
        c.Run(block_dy, static_cast<const float*>(a), o);
      } else {
        c.Run(block_dy, static_cast<const float*>(a) + i * im.x_image, im.partial.data());
        for (int64_t k = 0; k < im.out_elems; ++k) o[k] += im.partial[static_cast<size_t>(k)];
      }
    }
    return;
  }
  dnnl::engine& eng = DnnlEngine();
  dnnl::stream& s = DnnlStream();
  PrepareDnnlCall();
  // An operand in the primitive's layout: reordered into its buffer when `in` exists, else the plain memory.
  auto staged_in = [&](const std::optional<dnnl::reorder>& in, dnnl::memory plain, const dnnl::memory::desc& md,
                       const std::shared_ptr<HostVector<uint8_t>>& buf) {
    if (!in) return plain;
    dnnl::memory m(md, eng, buf->data());
    in->execute(s, plain, m);
    return m;
  };
  // The output in the primitive's layout: its buffer when `out` reorders it back afterwards.
  auto staged_out = [&](const std::optional<dnnl::reorder>& out_r, const dnnl::memory& plain,
                        const dnnl::memory::desc& md, const std::shared_ptr<HostVector<uint8_t>>& buf) {
    return out_r ? dnnl::memory(md, eng, buf->data()) : plain;
  };
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, im.scratch->data())}};
  const dnnl::memory y = staged_in(im.y_in, dnnl::memory(im.y_md, eng, const_cast<void*>(dy)), im.py_md, im.py);
  args.emplace(DNNL_ARG_DIFF_DST, y);
  if (kind_ == Kind::kData) {
    dnnl::memory x(im.x_md, eng, out);
    dnnl::memory px = staged_out(im.x_out, x, im.px_md, im.px);
    args.emplace(DNNL_ARG_WEIGHTS,
                 staged_in(im.w_in, dnnl::memory(im.w_md, eng, const_cast<void*>(a)), im.pw_md, im.pw));
    args.emplace(DNNL_ARG_DIFF_SRC, px);
    im.prim.execute(s, args);
    if (im.x_out) im.x_out->execute(s, px, x);
  } else {
    dnnl::memory w(im.w_md, eng, out);
    dnnl::memory pw = staged_out(im.w_out, w, im.pw_md, im.pw);
    args.emplace(DNNL_ARG_SRC, staged_in(im.x_in, dnnl::memory(im.x_md, eng, const_cast<void*>(a)), im.px_md, im.px));
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, pw);
    im.prim.execute(s, args);
    if (im.w_out) im.w_out->execute(s, pw, w);
  }
  s.wait();
}

// dX[n, ic, i] = sum over (oc in ic's group, k, o with o*s - pb + k*d = i) of dY[n, oc, o] * W[oc, icl, k].
template <typename T>
void NaiveConvGradData(const ConvSpec& spec, const T* dy, const T* w, T* dx) {
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1), dl = Pad3(spec.dilations, 1), pb = Pad3(spec.pad_begin, 0);
  const int64_t g = spec.group, icg = spec.c_in / g, ocg = spec.c_out / g;
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2], k_sz = k[0] * k[1] * k[2];
  tbb::parallel_for(int64_t{0}, spec.n * spec.c_in, [&](int64_t nc) {
    const int64_t n = nc / spec.c_in, ic = nc % spec.c_in, gi = ic / icg, icl = ic % icg;
    std::vector<double> acc(static_cast<size_t>(in_sz), 0.0);
    for (int64_t ocl = 0; ocl < ocg; ++ocl) {
      const int64_t oc = gi * ocg + ocl;
      const T* yp = dy + (n * spec.c_out + oc) * out_sz;
      const T* wp = w + (oc * icg + icl) * k_sz;
      for (int64_t kd = 0; kd < k[0]; ++kd)
        for (int64_t kh = 0; kh < k[1]; ++kh)
          for (int64_t kw = 0; kw < k[2]; ++kw) {
            const double wv = static_cast<double>(wp[(kd * k[1] + kh) * k[2] + kw]);
            ForEachConvTap(in, out, st, dl, pb, kd, kh, kw,
                           [&](int64_t o, int64_t i) { acc[i] += wv * static_cast<double>(yp[o]); });
          }
    }
    T* xp = dx + nc * in_sz;
    for (int64_t i = 0; i < in_sz; ++i) xp[i] = static_cast<T>(acc[i]);
  });
}

// dW[oc, icl, k] = sum over (n, o) of dY[n, oc, o] * X[n, ic, o*s - pb + k*d].
template <typename T>
void NaiveConvGradWeight(const ConvSpec& spec, const T* dy, const T* x, T* dw) {
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1), dl = Pad3(spec.dilations, 1), pb = Pad3(spec.pad_begin, 0);
  const int64_t g = spec.group, icg = spec.c_in / g, ocg = spec.c_out / g;
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2], k_sz = k[0] * k[1] * k[2];
  tbb::parallel_for(int64_t{0}, spec.c_out * icg, [&](int64_t oi) {
    const int64_t oc = oi / icg, icl = oi % icg, ic = (oc / ocg) * icg + icl;
    std::vector<double> acc(static_cast<size_t>(k_sz), 0.0);
    for (int64_t n = 0; n < spec.n; ++n) {
      const T* yp = dy + (n * spec.c_out + oc) * out_sz;
      const T* xp = x + (n * spec.c_in + ic) * in_sz;
      for (int64_t kd = 0; kd < k[0]; ++kd)
        for (int64_t kh = 0; kh < k[1]; ++kh)
          for (int64_t kw = 0; kw < k[2]; ++kw) {
            double s = 0;
            ForEachConvTap(in, out, st, dl, pb, kd, kh, kw,
                           [&](int64_t o, int64_t i) { s += static_cast<double>(yp[o]) * static_cast<double>(xp[i]); });
            acc[(kd * k[1] + kh) * k[2] + kw] += s;
          }
    }
    T* wp = dw + oi * k_sz;
    for (int64_t i = 0; i < k_sz; ++i) wp[i] = static_cast<T>(acc[i]);
  });
}

template void NaiveConvGradData<double>(const ConvSpec&, const double*, const double*, double*);
template void NaiveConvGradData<float>(const ConvSpec&, const float*, const float*, float*);
template void NaiveConvGradWeight<double>(const ConvSpec&, const double*, const double*, double*);
template void NaiveConvGradWeight<float>(const ConvSpec&, const float*, const float*, float*);

}  // namespace ot::cpu
