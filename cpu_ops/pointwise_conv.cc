#include "cpu_ops/pointwise_conv.h"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "cpu_ops/dims.h"
#include "kernel_common/host_alloc.h"

namespace ot::cpu {

bool PointwiseGemmApplies(const ConvSpec& s) {
  if (!s.channels_last || s.transpose || s.group != 1) return false;
  if (s.type != DnnType::kF32 && s.type != DnnType::kBF16) return false;
  for (size_t i = 0; i < s.kernel.size(); ++i)
    if (s.kernel[i] != 1 || s.strides[i] != 1 || s.dilations[i] != 1 || s.pad_begin[i] != 0 || s.pad_end[i] != 0)
      return false;
  const int64_t pixels = s.n * Prod(s.in_spatial);
  const int64_t w = s.c_in * s.c_out, xy = pixels * (s.c_in + s.c_out);
  return pixels > 0 && w > 0 && 16 * w >= xy;
}

struct PointwiseConvGemm::Impl {
  Kind kind;
  bool bias = false;
  dnnl::memory::desc a_md, b_md, bias_md, c_md, scratch_md;
  dnnl::primitive prim;
  std::shared_ptr<HostVector<uint8_t>> scratch;
  std::string impl;
};

PointwiseConvGemm::PointwiseConvGemm(const ConvSpec& spec, Kind kind) : impl_(std::make_shared<Impl>()) {
  using tag = dnnl::memory::format_tag;
  Impl& im = *impl_;
  im.kind = kind;
  const auto t = spec.type == DnnType::kBF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  const int64_t p = spec.n * Prod(spec.in_spatial), ci = spec.c_in, co = spec.c_out;
  const auto md = [&](int64_t rows, int64_t cols, tag f) { return dnnl::memory::desc({rows, cols}, t, f); };
  switch (kind) {
    case Kind::kForward:  // [P, Ci] x [Ci, Co] (W [Co, Ci] read transposed) -> [P, Co]
      im.a_md = md(p, ci, tag::ab);
      im.b_md = md(ci, co, tag::ba);
      im.c_md = md(p, co, tag::ab);
      im.bias = spec.has_bias;
      if (im.bias) im.bias_md = md(1, co, tag::ab);
      break;
    case Kind::kData:  // [P, Co] x [Co, Ci] -> [P, Ci]
      im.a_md = md(p, co, tag::ab);
      im.b_md = md(co, ci, tag::ab);
      im.c_md = md(p, ci, tag::ab);
      break;
    case Kind::kWeights:  // [Co, P] (dY [P, Co] read transposed) x [P, Ci] -> [Co, Ci]
      im.a_md = md(co, p, tag::ba);
      im.b_md = md(p, ci, tag::ab);
      im.c_md = md(co, ci, tag::ab);
      break;
  }
  PrepareDnnlCall();  // oneDNN sizes the primitive for the calling team (dnnl_util.h)
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto d = im.bias ? dnnl::matmul::desc(im.a_md, im.b_md, im.bias_md, im.c_md)
                         : dnnl::matmul::desc(im.a_md, im.b_md, im.c_md);
  dnnl::matmul::primitive_desc pd(d, attr, DnnlEngine());
  if (t != dnnl::memory::data_type::f32 && IsReferenceImpl(pd.impl_info_str())) throw NotNativeHalf{};
  im.impl = std::string(pd.impl_info_str()) + " (pointwise GEMM)";
  im.scratch_md = pd.scratchpad_desc();
  im.scratch = std::make_shared<HostVector<uint8_t>>(std::max<size_t>(im.scratch_md.get_size(), 64));
  im.prim = dnnl::matmul(pd);
}

PointwiseConvGemm::~PointwiseConvGemm() = default;

void PointwiseConvGemm::Run(const void* a, const void* b, const void* bias, void* out) const {
  const Impl& im = *impl_;
  dnnl::engine& eng = DnnlEngine();
  dnnl::stream& s = DnnlStream();
  PrepareDnnlCall();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(im.a_md, eng, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(im.b_md, eng, const_cast<void*>(b))},
      {DNNL_ARG_DST, dnnl::memory(im.c_md, eng, out)},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, im.scratch->data())}};
  if (im.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(im.bias_md, eng, const_cast<void*>(bias)));
  im.prim.execute(s, args);
  s.wait();
}

size_t PointwiseConvGemm::workspace_bytes() const { return impl_->scratch->size(); }

std::string PointwiseConvGemm::impl_name() const { return impl_->impl; }

}  // namespace ot::cpu
