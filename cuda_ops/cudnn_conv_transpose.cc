// See cudnn_conv_transpose.h. Everything cuDNN-specific (descriptors, algorithm choice and its cache, math types)
// is cudnn_conv.cc's: this file only maps the transposed geometry onto the adjoint convolution's backward-data and
// crops / adds the bias around it.
#include "cuda_ops/cudnn_conv_transpose.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "cuda_ops/cudnn_conv_kernels.h"
#include "cuda_ops/cudnn_util.h"
#include "cuda_ops/strided_copy.h"

namespace ot::cuda {

using cudnn_detail::Align256;
using cudnn_detail::Vec;

namespace {

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

int64_t Extent(int64_t k, int64_t d) { return (k - 1) * d + 1; }

// Bytes of the full (uncropped) tensor in the workspace, 256-aligned so cuDNN's workspace after it is too.
size_t FullBytes(const ConvTransposeDesc& d, const ConvTransposeLowering& l) {
  if (!l.cropped) return 0;
  return Align256(static_cast<size_t>(d.n * d.c_out * Prod(l.full_spatial)) * FloatTypeSize(d.type));
}

void Prepare(const ConvTransposeDesc& d, const char* what) {
  ValidateConvTranspose(d);
  const std::string why = ConvTransposeUnsupportedReason(d);
  if (!why.empty()) throw std::invalid_argument(std::string("ot::cuda::") + what + ": " + why + " in " + ToString(d));
}

}  // namespace

std::string ToString(const ConvTransposeDesc& d) {
  std::ostringstream s;
  s << "ConvTransposeDesc{" << cudnn_detail::TypeName(d.type) << (d.type == FloatType::kF32 && d.tf32 ? " tf32" : "")
    << " n=" << d.n << " c_in=" << d.c_in << " c_out=" << d.c_out << " group=" << d.group << " in=" << Vec(d.in_spatial)
    << " out=" << Vec(d.out_spatial) << " kernel=" << Vec(d.kernel) << " strides=" << Vec(d.strides)
    << " dilations=" << Vec(d.dilations) << " pads=" << Vec(d.pad_begin) << Vec(d.pad_end)
    << (d.deterministic ? " deterministic" : "") << "}";
  return s.str();
}

void ValidateConvTranspose(const ConvTransposeDesc& d) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("ot::cuda::ConvTranspose: " + why + " in " + ToString(d));
  };
  cudnn_detail::ValidateConvChannels(d, bad);
  const size_t r = d.in_spatial.size();
  for (size_t i = 0; i < r; ++i) {
    if (d.in_spatial[i] <= 0 || d.out_spatial[i] <= 0 || d.kernel[i] <= 0 || d.strides[i] <= 0 || d.dilations[i] <= 0)
      bad("sizes, kernel, strides and dilations must be positive");
    if (d.pad_begin[i] < 0) bad("negative begin padding");
    const int64_t out =
        (d.in_spatial[i] - 1) * d.strides[i] + Extent(d.kernel[i], d.dilations[i]) - d.pad_begin[i] - d.pad_end[i];
    if (out != d.out_spatial[i])
      bad("out_spatial[" + std::to_string(i) + "] is " + std::to_string(d.out_spatial[i]) + ", the geometry gives " +
          std::to_string(out));
  }
}

ConvTransposeLowering LowerConvTranspose(const ConvTransposeDesc& d) {
  ConvTransposeLowering l;
  ConvDesc& c = l.conv;
  c.type = d.type;
  c.tf32 = d.tf32;
  c.deterministic = d.deterministic;
  c.n = d.n;
  c.c_in = d.c_out;  // the adjoint convolution reads a Y-shaped tensor ...
  c.c_out = d.c_in;  // ... and writes an X-shaped one; W [C_in, C_out/group, k...] is its filter as it is
  c.group = d.group;
  c.out_spatial = d.in_spatial;
  c.kernel = d.kernel;
  c.strides = d.strides;
  c.dilations = d.dilations;
  const size_t r = d.in_spatial.size();
  for (size_t i = 0; i < r; ++i) {
    const int64_t skew = d.pad_begin[i] - d.pad_end[i];
    if (skew < 0 || skew >= d.strides[i]) l.cropped = true;
  }
  if (!l.cropped) {
    // Symmetric pad_begin, as cuDNN runs it (see the header for why that is exact here).
    c.in_spatial = d.out_spatial;
    c.pad_begin = d.pad_begin;
    c.pad_end = d.pad_begin;
  } else {
    for (size_t i = 0; i < r; ++i)
      l.full_spatial.push_back((d.in_spatial[i] - 1) * d.strides[i] + Extent(d.kernel[i], d.dilations[i]));
    c.in_spatial = l.full_spatial;
    c.pad_begin = c.pad_end = std::vector<int64_t>(r, 0);
  }
  return l;
}

std::string ConvTransposeUnsupportedReason(const ConvTransposeDesc& d) {
  const size_t r = d.in_spatial.size();
  if (r > 3) return std::to_string(r) + "-D transposed convolution (cuDNN's legacy API runs 1-D to 3-D)";
  const ConvTransposeLowering l = LowerConvTranspose(d);
  try {
    ValidateConv(l.conv);  // a failure is a bug of the lowering, not of the node: say so
  } catch (const std::invalid_argument& e) {
    return std::string("the lowered convolution is invalid (") + e.what() + ")";
  }
  return ConvUnsupportedReason(l.conv);
}

size_t ConvTransposeWorkspaceBytes(const ConvTransposeDesc& d) {
  Prepare(d, "ConvTransposeWorkspaceBytes");
  const ConvTransposeLowering l = LowerConvTranspose(d);
  return FullBytes(d, l) + ConvWorkspaceBytes(l.conv, ConvPass::kBackwardData);
}

void ConvTransposeForward(const ConvTransposeDesc& d, const void* x, const void* w, const void* bias, void* y,
                          void* workspace, size_t workspace_bytes, void* stream) {
  Prepare(d, "ConvTransposeForward");
  if (!x || !w || !y)
    throw std::invalid_argument("ot::cuda::ConvTransposeForward: a null tensor pointer for " + ToString(d));
  const ConvTransposeLowering l = LowerConvTranspose(d);
  if (!l.cropped) {
    // cuDNN's backward-data writes every element of Y (beta = 0): rows no window reaches become 0.
    ConvBackwardData(l.conv, x, w, y, workspace, workspace_bytes, stream);
  } else {
    const size_t full = FullBytes(d, l);
    if (!workspace || workspace_bytes < full)
      throw std::invalid_argument("ot::cuda::ConvTransposeForward: needs " + std::to_string(full) +
                                  " bytes of workspace for the uncropped output, got " +
                                  std::to_string(workspace ? workspace_bytes : 0) + " for " + ToString(d));
    uint8_t* ws = static_cast<uint8_t*>(workspace);
    const size_t rest = workspace_bytes - full;
    ConvBackwardData(l.conv, x, w, ws, rest ? ws + full : nullptr, rest, stream);
    // Y [N C_out, out...] = full [N C_out, full...] from pad_begin on; rows past the full tensor's end (a negative
    // pad_end) are zero.
    const size_t r = d.in_spatial.size();
    std::vector<int64_t> dims{d.n * d.c_out}, strides(r + 1), limits{d.n * d.c_out};
    int64_t s = 1, base = 0;
    for (size_t i = r; i-- > 0;) {
      strides[i + 1] = s;
      base += d.pad_begin[i] * s;
      s *= l.full_spatial[i];
    }
    strides[0] = s;
    for (size_t i = 0; i < r; ++i) {
      dims.push_back(d.out_spatial[i]);
      limits.push_back(std::clamp<int64_t>(l.full_spatial[i] - d.pad_begin[i], 0, d.out_spatial[i]));
    }
    StridedCopy(ws, base, dims, strides, limits, y, FloatTypeSize(d.type), stream);
  }
  if (bias) conv_detail::AddChannelBias(d.type, d.n, d.c_out, Prod(d.out_spatial), bias, y, stream);
}

}  // namespace ot::cuda
