#include "cpu_ops/conv.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "cpu_ops/dims.h"
#include "cpu_ops/dnnl_half.h"
#include "cpu_ops/pointwise_conv.h"
#include "kernel_common/host_alloc.h"

namespace ot::cpu {

bool BlockedForChannelsLast(const ConvSpec& s) {
  // oneDNN 2.6's f32 kernels on NHWC lose to its blocked ones by more than the reorders cost where the channels are
  // many and the images small: ResNet-18's 3x3 256- and 512-channel layers (4% of its fp32 step, bench/RESULTS.md;
  // 128 channels, or the 1x1 layers of RegNet-Y, lose time blocked).
  constexpr int64_t kMinChannels = 256;
  bool pointwise = true;
  for (int64_t k : s.kernel) pointwise &= k == 1;
  return s.channels_last && !s.transpose && s.group == 1 && !pointwise && std::min(s.c_in, s.c_out) >= kMinChannels;
}

namespace {

using dt = dnnl::memory::data_type;
using dims_t = dnnl::memory::dims;

}  // namespace

struct DnnlConv::Impl {
  dnnl::primitive prim;
  // User-managed scratchpad owned by this primitive: oneDNN's library-managed one is tied to the creating
  // thread, and the executor runs the primitive on whichever TBB thread is free (that crashed in oneDNN).
  dnnl::memory::desc scratch_md;
  std::shared_ptr<HostVector<uint8_t>> scratch;
  // Blocked-layout path: the primitive's own layouts for X, W and Y, buffers for them; W reordered once when it is
  // constant, per call otherwise (training: W is state that changes every step).
  bool blocked = false, w_per_call = false;
  bool x_direct = false, y_direct = false;  // the blocked path's X / Y used in place (already the primitive's layout)
  dnnl::memory::desc xb_md, yb_md, wb_md;
  mutable HostVector<float> xb, yb, wb;  // per-call layout buffers (the executor never runs one kernel twice at once)
  dnnl::reorder x_to_blocked, y_to_plain, w_to_blocked;
  dnnl::memory::desc x_md, w_md, b_md, y_md;
  // Half types without a native (jit) oneDNN kernel: an f32 convolution of the same geometry (with the blocked
  // layouts when W is constant, its f32 copy made once here) runs on operands converted per call.
  bool convert = false;
  std::shared_ptr<DnnlConv> f32;
  HostVector<float> w_f32;  // constant W converted once (empty when W is fed per call)
  std::string impl;
  bool empty = false;
  int64_t x_elems = 0, w_elems = 0, y_elems = 0;
  // Blocked layouts over a large batch: the same convolution run over blocks of `block_n` images (and the rest), so
  // each block's reorders in and out touch cache-sized buffers instead of the whole batch twice through memory
  // (10% of the 64x64 CNN's larger convolutions at one thread, bench/RESULTS.md). Each image's convolution is the
  // same whatever its block; oneDNN's kernel for another batch may add its products in another order.
  int64_t block_n = 0;
  std::shared_ptr<DnnlConv> block, tail;
  // A transposed convolution whose output reaches past every input's contribution (negative pad_end: output_shape
  // or output_padding beyond the natural size; oneDNN refuses some of these): the convolution of the natural
  // extent (`inner`, absent when that is empty) into a buffer of `inner_y_elems`, copied into Y's leading corner,
  // the rest of Y the bias (or zero).
  bool extended = false;
  std::shared_ptr<DnnlConv> inner;
  std::vector<int64_t> inner_out;
  int64_t inner_y_elems = 0;
  mutable HostVector<uint8_t> inner_y;  // per-call buffer (the executor never runs one kernel twice at once)
  // A channels-last pointwise convolution as a GEMM on the stored layouts (cpu_ops/pointwise_conv.h).
  std::shared_ptr<PointwiseConvGemm> pointwise;
};

int64_t ConvImagesPerBlock(int64_t n, int64_t x_elems, int64_t y_elems, int64_t out_image_elems) {
  // About 1 MiB per oneDNN thread (an L2 each); 1 MiB blocks whatever the thread count were 10% slower than the
  // whole batch at two threads.
  constexpr int64_t kCallBytes = int64_t{8} << 20, kBlockBytes = int64_t{1} << 20;
  if (n <= 1 || (x_elems + y_elems) * static_cast<int64_t>(sizeof(float)) <= kCallBytes) return 0;
  const int64_t image_bytes = std::max<int64_t>(1, out_image_elems * static_cast<int64_t>(sizeof(float)));
  const int64_t per = std::max<int64_t>(1, kBlockBytes * OmpThreads() / image_bytes);
  if (per >= n) return 0;
  const int64_t blocks = (n + per - 1) / per;
  return (n + blocks - 1) / blocks;
}

DnnlConv::DnnlConv(const ConvSpec& spec, const void* constant_weights) : spec_(spec), impl_(std::make_shared<Impl>()) {
  Impl& im = *impl_;
  const int64_t ks = Prod(spec.kernel);
  im.x_elems = spec.n * spec.c_in * Prod(spec.in_spatial);
  im.y_elems = spec.n * spec.c_out * Prod(spec.out_spatial);
  im.w_elems = (spec.transpose ? spec.c_in * (spec.c_out / spec.group) : spec.c_out * (spec.c_in / spec.group)) * ks;
  if (im.y_elems == 0) {
    im.empty = true;
    return;
  }
  if (spec.transpose && std::any_of(spec.pad_end.begin(), spec.pad_end.end(), [](int64_t p) { return p < 0; })) {
    ConvSpec in = spec;
    bool none = false;
    for (size_t i = 0; i < in.pad_end.size(); ++i) {
      if (in.pad_end[i] >= 0) continue;
      in.out_spatial[i] += in.pad_end[i];
      in.pad_end[i] = 0;
      none = none || in.out_spatial[i] <= 0;
    }
    im.extended = true;
    im.inner_out = in.out_spatial;
    if (!none) {
      im.inner_y_elems = spec.n * spec.c_out * Prod(in.out_spatial);
      im.inner_y.resize(static_cast<size_t>(im.inner_y_elems) * DnnTypeSize(spec.type));
      im.inner = std::make_shared<DnnlConv>(in, constant_weights);
    }
    im.impl = (im.inner ? im.inner->impl_name() : std::string("none")) + " (output extended past the input's reach)";
    return;
  }
  if (PointwiseGemmApplies(spec) && (spec.type == DnnType::kF32 || GetHalfGemmMode() != HalfGemmMode::kF32)) {
    try {
      im.pointwise = std::make_shared<PointwiseConvGemm>(spec, PointwiseConvGemm::Kind::kForward);
      im.impl = im.pointwise->impl_name();
      return;
    } catch (const NotNativeHalf&) {  // a reference bf16 matmul only: the convolution paths below
    }
  }
  const int64_t g = spec.group, ocg = spec.c_out / g, icg = spec.c_in / g;
  dims_t xd{spec.n, spec.c_in}, yd{spec.n, spec.c_out};
  xd.insert(xd.end(), spec.in_spatial.begin(), spec.in_spatial.end());
  yd.insert(yd.end(), spec.out_spatial.begin(), spec.out_spatial.end());
  // Logical weight dims oneDNN wants: [G,] OC/G, IC/G, k...; strides follow ONNX's physical layout.
  dims_t wd, ws;
  if (g > 1) wd.push_back(g);
  wd.push_back(ocg);
  wd.push_back(icg);
  wd.insert(wd.end(), spec.kernel.begin(), spec.kernel.end());
  {
    dims_t phys;  // ONNX's layout, in the same order as wd with OC/IC swapped for a transposed conv
    if (g > 1) phys.push_back(g);
    phys.push_back(spec.transpose ? icg : ocg);
    phys.push_back(spec.transpose ? ocg : icg);
    phys.insert(phys.end(), spec.kernel.begin(), spec.kernel.end());
    ws = Contiguous(phys);
    const size_t o = g > 1 ? 1 : 0;
    if (spec.transpose) std::swap(ws[o], ws[o + 1]);
  }
  dims_t strides(spec.strides.begin(), spec.strides.end());
  dims_t dil(spec.dilations.size());
  for (size_t i = 0; i < dil.size(); ++i) dil[i] = spec.dilations[i] - 1;
  dims_t pl(spec.pad_begin.begin(), spec.pad_begin.end()), pr(spec.pad_end.begin(), spec.pad_end.end());

  PrepareDnnlCall();  // before creating the primitive too: oneDNN sizes it for this team (dnnl_util.h)
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (spec.channels_last && spec.transpose)
    throw std::invalid_argument("a channels-last transposed convolution is not supported");
  // X and Y as stored: ONNX's NCHW, or channels-last (oneDNN then runs its NHWC kernels on them directly).
  const auto plain = [&](const dims_t& d) { return spec.channels_last ? ChannelsLastStrides(d) : Contiguous(d); };
  auto make = [&](dt t) {
    im.x_md = dnnl::memory::desc(xd, t, plain(xd));
    im.y_md = dnnl::memory::desc(yd, t, plain(yd));
    im.w_md = dnnl::memory::desc(wd, t, ws);
    im.b_md = spec.has_bias ? dnnl::memory::desc({spec.c_out}, t, dims_t{1}) : dnnl::memory::desc();
    // Channels-last: a training step's forward (forward_inference picks slower kernels for it); the NCHW plain path
    // (transposed, or a half type without a blocked kernel) as it always was.
    const auto pk = spec.channels_last ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    if (!spec.transpose) {
      auto d = spec.has_bias ? dnnl::convolution_forward::desc(pk, dnnl::algorithm::convolution_direct, im.x_md,
                                                               im.w_md, im.b_md, im.y_md, strides, dil, pl, pr)
                             : dnnl::convolution_forward::desc(pk, dnnl::algorithm::convolution_direct, im.x_md,
                                                               im.w_md, im.y_md, strides, dil, pl, pr);
      dnnl::convolution_forward::primitive_desc pd(d, attr, DnnlEngine());
      if (t != dt::f32 && GetHalfGemmMode() == HalfGemmMode::kAuto && IsReferenceImpl(pd.impl_info_str()))
        throw NotNativeHalf{};
      im.impl = pd.impl_info_str();
      im.scratch_md = pd.scratchpad_desc();
      im.prim = dnnl::convolution_forward(pd);
    } else {
      auto d = spec.has_bias ? dnnl::deconvolution_forward::desc(pk, dnnl::algorithm::deconvolution_direct, im.x_md,
                                                                 im.w_md, im.b_md, im.y_md, strides, dil, pl, pr)
                             : dnnl::deconvolution_forward::desc(pk, dnnl::algorithm::deconvolution_direct, im.x_md,
                                                                 im.w_md, im.y_md, strides, dil, pl, pr);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, DnnlEngine());
      if (t != dt::f32 && GetHalfGemmMode() == HalfGemmMode::kAuto && IsReferenceImpl(pd.impl_info_str()))
        throw NotNativeHalf{};
      im.impl = pd.impl_info_str();
      im.scratch_md = pd.scratchpad_desc();
      im.prim = dnnl::deconvolution_forward(pd);
    }
  };
  // Let oneDNN choose the layouts (f32, and bf16 where it has a native kernel); worth it when they are blocked: with
  // plain NCHW oneDNN 2.x runs its im2col gemm implementation, 3-4x slower than the blocked jit direct kernels even
  // after the reorders in and out. Returns false where a half type has no native blocked kernel (the plain-layout
  // paths below then set up everything).
  auto try_blocked = [&](dt t) -> bool {
    const auto any = dnnl::memory::format_tag::any;
    // Channels-last X and Y are the primitive's own layouts (its NHWC kernels): only W is left to oneDNN.
    const bool as_stored = spec.channels_last && !(t == dt::f32 && BlockedForChannelsLast(spec));
    dnnl::memory::desc xa = as_stored ? dnnl::memory::desc(xd, t, plain(xd)) : dnnl::memory::desc(xd, t, any),
                       ya = as_stored ? dnnl::memory::desc(yd, t, plain(yd)) : dnnl::memory::desc(yd, t, any),
                       wa(wd, t, any);
    const auto pk = dnnl::prop_kind::forward_training;
    const dnnl::memory::desc bmd =
        spec.has_bias ? dnnl::memory::desc({spec.c_out}, t, dims_t{1}) : dnnl::memory::desc();
    auto d = spec.has_bias ? dnnl::convolution_forward::desc(pk, dnnl::algorithm::convolution_direct, xa, wa, bmd, ya,
                                                             strides, dil, pl, pr)
                           : dnnl::convolution_forward::desc(pk, dnnl::algorithm::convolution_direct, xa, wa, ya,
                                                             strides, dil, pl, pr);
    std::optional<dnnl::convolution_forward::primitive_desc> opd;
    try {
      opd.emplace(d, attr, DnnlEngine());
    } catch (const dnnl::error&) {
      if (t == dt::f32) throw;
      return false;
    }
    dnnl::convolution_forward::primitive_desc& pd = *opd;
    if (t != dt::f32 && IsReferenceImpl(pd.impl_info_str())) return false;
    im.x_md = dnnl::memory::desc(xd, t, plain(xd));
    im.y_md = dnnl::memory::desc(yd, t, plain(yd));
    im.w_md = dnnl::memory::desc(wd, t, ws);
    im.b_md = bmd;
    const bool relayout = pd.src_desc() != im.x_md || pd.weights_desc() != im.w_md || pd.dst_desc() != im.y_md;
    if (t != dt::f32 && !relayout) return false;  // the plain-layout path below
    // Blocks of images keep the activations' reorders in cache; channels-last has none.
    if (relayout && !spec.channels_last)
      im.block_n = ConvImagesPerBlock(spec.n, im.x_elems, im.y_elems, im.y_elems / spec.n);
    if (im.block_n) {
      ConvSpec b = spec;
      b.n = im.block_n;
      im.block = std::make_shared<DnnlConv>(b, constant_weights);
      if (spec.n % im.block_n) {
        b.n = spec.n % im.block_n;
        im.tail = std::make_shared<DnnlConv>(b, constant_weights);
      }
      im.impl = im.block->impl_name() + " (blocks of " + std::to_string(im.block_n) + " images)";
      return true;
    }
    if (relayout) {
      im.blocked = true;
      im.impl = pd.impl_info_str();
      im.xb_md = pd.src_desc();
      im.yb_md = pd.dst_desc();
      im.wb_md = pd.weights_desc();
      im.scratch_md = pd.scratchpad_desc();
      im.prim = dnnl::convolution_forward(pd);
      im.wb.resize(im.wb_md.get_size() / sizeof(float) + 16);
      dnnl::engine& eng = DnnlEngine();
      if (constant_weights) {
        dnnl::stream& str = DnnlStream();
        PrepareDnnlCall();
        dnnl::memory wsrc(im.w_md, eng, const_cast<void*>(constant_weights)), wdst(im.wb_md, eng, im.wb.data());
        dnnl::reorder(wsrc, wdst).execute(str, wsrc, wdst);
        str.wait();
      } else {
        im.w_per_call = true;
        im.w_to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(eng, im.w_md, eng, im.wb_md));
      }
      // X and Y reordered only where the primitive's layout is not theirs (never for channels-last ones).
      im.x_direct = im.xb_md == im.x_md;
      im.y_direct = im.yb_md == im.y_md;
      if (!im.x_direct) {
        im.xb.resize(im.xb_md.get_size() / sizeof(float) + 16);
        im.x_to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(eng, im.x_md, eng, im.xb_md));
      }
      if (!im.y_direct) {
        im.yb.resize(im.yb_md.get_size() / sizeof(float) + 16);
        im.y_to_plain = dnnl::reorder(dnnl::reorder::primitive_desc(eng, im.yb_md, eng, im.y_md));
      }
    }
    return true;
  };
  if (!spec.transpose) {
    if (spec.type == DnnType::kF32) {
      try_blocked(dt::f32);
    } else if (spec.type == DnnType::kBF16 && GetHalfGemmMode() != HalfGemmMode::kF32) {
      try_blocked(dt::bf16);
    }
    if (im.block) return;
  }
  if (im.blocked) {
    // primitive already made
  } else if (spec.type == DnnType::kF32) {
    make(dt::f32);
  } else {
    im.convert = MakeNativeHalfOrConvert(spec.type, make);
    if (im.convert) {
      ConvSpec fs = spec;
      fs.type = DnnType::kF32;
      if (constant_weights) {
        im.w_f32.resize(static_cast<size_t>(im.w_elems));
        ToFloat(spec.type, constant_weights, im.w_f32.data(), im.w_elems);
      }
      im.f32 = std::make_shared<DnnlConv>(fs, constant_weights ? im.w_f32.data() : nullptr);
      im.impl = im.f32->impl_name() + " (f32 on converted operands)";
      return;
    }
  }
  im.scratch = std::make_shared<HostVector<uint8_t>>(std::max<size_t>(im.scratch_md.get_size(), 64));
}

std::string DnnlConv::impl_name() const { return impl_->impl.empty() ? std::string("none") : impl_->impl; }

size_t DnnlConv::workspace_bytes() const {
  const Impl& im = *impl_;
  if (im.extended) return (im.inner ? im.inner->workspace_bytes() : 0) + im.inner_y_elems * DnnTypeSize(spec_.type);
  if (im.pointwise) return im.pointwise->workspace_bytes();
  if (im.block) return im.block->workspace_bytes() + (im.tail ? im.tail->workspace_bytes() : 0);
  if (im.f32) return im.f32->workspace_bytes() + im.w_f32.size() * sizeof(float);
  return (im.scratch ? im.scratch->size() : 0) + (im.xb.size() + im.yb.size() + im.wb.size()) * sizeof(float);
}

DnnlConv::~DnnlConv() = default;

void DnnlConv::Run(const void* x, const void* w, const void* bias, void* y) const {
  const Impl& im = *impl_;
  if (im.empty) return;
  if (im.extended) {
    RunExtended(x, w, bias, y);
    return;
  }
  if (im.pointwise) {
    im.pointwise->Run(x, w, bias, y);
    return;
  }
  if (im.block) {
    const size_t xs = static_cast<size_t>(im.x_elems / spec_.n) * DnnTypeSize(spec_.type);
    const size_t ys = static_cast<size_t>(im.y_elems / spec_.n) * DnnTypeSize(spec_.type);
    for (int64_t i = 0; i < spec_.n; i += im.block_n) {
      const DnnlConv& c = spec_.n - i >= im.block_n ? *im.block : *im.tail;
      c.Run(static_cast<const uint8_t*>(x) + i * xs, w, bias, static_cast<uint8_t*>(y) + i * ys);
    }
    return;
  }
  dnnl::engine& eng = DnnlEngine();
  dnnl::stream& s = DnnlStream();
  PrepareDnnlCall();
  auto exec = [&](const void* xp, const void* wp, const void* bp, void* yp) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(im.x_md, eng, const_cast<void*>(xp))},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(im.w_md, eng, const_cast<void*>(wp))},
                                               {DNNL_ARG_DST, dnnl::memory(im.y_md, eng, yp)}};
    if (spec_.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(im.b_md, eng, const_cast<void*>(bp)));
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, im.scratch->data()));
    im.prim.execute(s, args);
    s.wait();
  };
  if (im.blocked) {
    dnnl::memory xm(im.x_md, eng, const_cast<void*>(x)), ym(im.y_md, eng, y);
    dnnl::memory xbm = im.x_direct ? xm : dnnl::memory(im.xb_md, eng, im.xb.data());
    dnnl::memory ybm = im.y_direct ? ym : dnnl::memory(im.yb_md, eng, im.yb.data());
    if (!im.x_direct) im.x_to_blocked.execute(s, xm, xbm);
    if (im.w_per_call) {
      dnnl::memory wm(im.w_md, eng, const_cast<void*>(w)), wbm(im.wb_md, eng, im.wb.data());
      im.w_to_blocked.execute(s, wm, wbm);
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, xbm},
        {DNNL_ARG_WEIGHTS, dnnl::memory(im.wb_md, eng, const_cast<float*>(im.wb.data()))},
        {DNNL_ARG_DST, ybm},
        {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, im.scratch->data())}};
    if (spec_.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(im.b_md, eng, const_cast<void*>(bias)));
    im.prim.execute(s, args);
    if (!im.y_direct) im.y_to_plain.execute(s, ybm, ym);
    s.wait();
    return;
  }
  if (!im.convert) {
    exec(x, w, bias, y);
    return;
  }
  auto xf = NewFloats(im.x_elems), yf = NewFloats(im.y_elems), bf = NewFloats(spec_.has_bias ? spec_.c_out : 0);
  auto wf = NewFloats(im.w_f32.empty() ? im.w_elems : 0);
  ToFloat(spec_.type, x, xf.get(), im.x_elems);
  if (im.w_f32.empty()) ToFloat(spec_.type, w, wf.get(), im.w_elems);
  if (spec_.has_bias) ToFloat(spec_.type, bias, bf.get(), spec_.c_out);
  im.f32->Run(xf.get(), im.w_f32.empty() ? wf.get() : im.w_f32.data(), bf.get(), yf.get());
  FromFloat(spec_.type, yf.get(), y, im.y_elems);
}

void DnnlConv::RunExtended(const void* x, const void* w, const void* bias, void* y) const {
  const Impl& im = *impl_;
  const size_t es = DnnTypeSize(spec_.type);
  HostVector<uint8_t>& buf = im.inner_y;
  if (im.inner) im.inner->Run(x, w, bias, buf.data());
  // Both planes as [D, H, W] (leading 1s for 1-D and 2-D).
  auto pad3 = [](std::vector<int64_t> v) {
    v.insert(v.begin(), 3 - v.size(), 1);
    return v;
  };
  const std::vector<int64_t> o = pad3(spec_.out_spatial), in = pad3(im.inner_out);
  const int64_t plane = o[0] * o[1] * o[2], inner_plane = im.inner ? in[0] * in[1] * in[2] : 0;
  auto* yb = static_cast<uint8_t*>(y);
  tbb::parallel_for(int64_t{0}, spec_.n * spec_.c_out, [&](int64_t nc) {
    uint8_t* yp = yb + static_cast<size_t>(nc * plane) * es;
    const int64_t c = nc % spec_.c_out;
    if (spec_.has_bias) {
      const uint8_t* b = static_cast<const uint8_t*>(bias) + static_cast<size_t>(c) * es;
      for (int64_t i = 0; i < plane; ++i) std::memcpy(yp + static_cast<size_t>(i) * es, b, es);
    } else {
      std::memset(yp, 0, static_cast<size_t>(plane) * es);
    }
    if (!im.inner) return;
    const uint8_t* ip = buf.data() + static_cast<size_t>(nc * inner_plane) * es;
    for (int64_t d = 0; d < in[0]; ++d)
      for (int64_t h = 0; h < in[1]; ++h)
        std::memcpy(yp + static_cast<size_t>((d * o[1] + h) * o[2]) * es,
                    ip + static_cast<size_t>((d * in[1] + h) * in[2]) * es, static_cast<size_t>(in[2]) * es);
  });
}

template <typename T>
void NaiveConv(const ConvSpec& spec, const T* x, const T* w, const T* bias, T* y) {
  // Pad every geometry vector to 3 dims (leading 1s) so one loop nest serves 1-D, 2-D and 3-D.
  auto pad3 = [](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> r(3 - v.size(), fill);
    r.insert(r.end(), v.begin(), v.end());
    return r;
  };
  const auto in = pad3(spec.in_spatial, 1), out = pad3(spec.out_spatial, 1), k = pad3(spec.kernel, 1);
  const auto st = pad3(spec.strides, 1), dl = pad3(spec.dilations, 1), pb = pad3(spec.pad_begin, 0);
  const int64_t g = spec.group, icg = spec.c_in / g, ocg = spec.c_out / g;
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2], k_sz = k[0] * k[1] * k[2];
  tbb::parallel_for(int64_t{0}, spec.n * spec.c_out, [&](int64_t nc) {
    const int64_t n = nc / spec.c_out, oc = nc % spec.c_out, gi = oc / ocg, ocl = oc % ocg;
    T* yp = y + nc * out_sz;
    for (int64_t o = 0; o < out_sz; ++o) yp[o] = T(0);
    std::vector<double> acc(out_sz, spec.has_bias ? static_cast<double>(bias[oc]) : 0.0);
    for (int64_t icl = 0; icl < icg; ++icl) {
      const int64_t ic = gi * icg + icl;
      const T* xp = x + (n * spec.c_in + ic) * in_sz;
      const T* wp = spec.transpose ? w + (ic * ocg + ocl) * k_sz : w + (oc * icg + icl) * k_sz;
      for (int64_t kd = 0; kd < k[0]; ++kd)
        for (int64_t kh = 0; kh < k[1]; ++kh)
          for (int64_t kw = 0; kw < k[2]; ++kw) {
            const double wv = static_cast<double>(wp[(kd * k[1] + kh) * k[2] + kw]);
            if (!spec.transpose) {
              ForEachConvTap(in, out, st, dl, pb, kd, kh, kw,
                             [&](int64_t o, int64_t i) { acc[o] += wv * static_cast<double>(xp[i]); });
            } else {
              // Each input position scatters into output position i*stride - pad + k*dilation.
              for (int64_t id = 0; id < in[0]; ++id) {
                const int64_t od = id * st[0] - pb[0] + kd * dl[0];
                if (od < 0 || od >= out[0]) continue;
                for (int64_t ih = 0; ih < in[1]; ++ih) {
                  const int64_t oh = ih * st[1] - pb[1] + kh * dl[1];
                  if (oh < 0 || oh >= out[1]) continue;
                  for (int64_t iw = 0; iw < in[2]; ++iw) {
                    const int64_t ow = iw * st[2] - pb[2] + kw * dl[2];
                    if (ow < 0 || ow >= out[2]) continue;
                    acc[(od * out[1] + oh) * out[2] + ow] +=
                        wv * static_cast<double>(xp[(id * in[1] + ih) * in[2] + iw]);
                  }
                }
              }
            }
          }
    }
    for (int64_t o = 0; o < out_sz; ++o) yp[o] = static_cast<T>(acc[o]);
  });
}

template void NaiveConv<double>(const ConvSpec&, const double*, const double*, const double*, double*);
template void NaiveConv<float>(const ConvSpec&, const float*, const float*, const float*, float*);

}  // namespace ot::cpu
