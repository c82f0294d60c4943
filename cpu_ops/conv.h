// Convolution and transposed convolution (1-D, 2-D, 3-D, grouped, dilated, strided, padded) through oneDNN's
// convolution_forward / deconvolution_forward, with ONNX's tensor layouts:
//   X [N, C_in, spatial...], Y [N, C_out, spatial...], bias [C_out];
//   forward W [C_out, C_in/group, k...]; transposed W [C_in, C_out/group, k...].
// The primitive is created once (per plan) and executed over the caller's buffers. ConvSpec::channels_last: X and Y
// [N, spatial..., C] instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu_ops/dnnl_util.h"

namespace ot::cpu {

struct ConvSpec {
  DnnType type = DnnType::kF32;
  bool transpose = false;
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  // All of length rank (1..3). dilations are ONNX-style (1 = dense). pad_end may be negative for a transposed
  // convolution whose output_padding exceeds its end padding.
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
  bool has_bias = false;
  // X and Y (and dX, dY of the backward) stored channels-last, [N, spatial..., C] (NHWC), as the channels_last pass
  // lays out a CNN's activations: oneDNN's convolutions read and write that layout natively (brgconv/jit kernels
  // as fast as its blocked ones, bench/RESULTS.md), so no reorders around the call. Forward convolutions only (not
  // transposed), and oneDNN's types only (the reference loops read NCHW).
  bool channels_last = false;
};

// Whether a channels-last f32 convolution runs on oneDNN's blocked layouts, its X and Y reordered in and out (as the
// NCHW path does), instead of on NHWC directly.
bool BlockedForChannelsLast(const ConvSpec& s);

class DnnlConv {
 public:
  // A forward f32 convolution runs in oneDNN's preferred (blocked) layouts where they differ from the plain ones:
  // X and Y are reordered around each call, and W once here when `constant_weights` gives its data for the
  // primitive's lifetime (an initializer), else per call (training: W changes every step). bf16 does the same where
  // oneDNN has a native kernel for it; transposed and other native half-type convolutions use the plain ONNX
  // layouts (a half type without a native kernel runs the f32 path).
  // A batch whose reordered copies would pass 8 MiB runs as blocks of images of about 1 MiB of Y per oneDNN thread,
  // so the reorders work in cache (impl_name() then ends "(blocks of N images)").
  explicit DnnlConv(const ConvSpec& spec, const void* constant_weights = nullptr);
  ~DnnlConv();
  // bias may be null when !has_bias.
  void Run(const void* x, const void* w, const void* bias, void* y) const;
  // Bytes of the oneDNN scratchpad and layout buffers this primitive owns (0 when it runs no primitive).
  size_t workspace_bytes() const;
  // oneDNN's implementation name, with " (f32 on converted operands)" for a half type run in f32.
  std::string impl_name() const;

 private:
  void RunExtended(const void* x, const void* w, const void* bias, void* y) const;
  struct Impl;
  ConvSpec spec_;
  std::shared_ptr<Impl> impl_;
};

// Images per block for a convolution call (forward, or backward data) over n images that runs in oneDNN's own
// layouts: 0 (the batch in one call) unless the call's reordered copies pass 8 MiB (x_elems + y_elems floats), else
// about 1 MiB of the blocked output (out_image_elems floats per image) per oneDNN thread, the blocks as equal as
// their count allows.
int64_t ConvImagesPerBlock(int64_t n, int64_t x_elems, int64_t y_elems, int64_t out_image_elems);

// The same contract with plain loops (float64; also a reference). Parallel over (n, c_out).
template <typename T>
void NaiveConv(const ConvSpec& spec, const T* x, const T* w, const T* bias, T* y);

}  // namespace ot::cpu
