#include "cpu_ops/patch_conv_grad.h"

#include <tbb/parallel_for.h>

#include <cstring>

namespace ot::cpu {

bool PatchGradWeightApplies(const ConvSpec& s) {
  if (s.transpose || s.group != 1 || !s.channels_last || s.in_spatial.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i)
    if (s.kernel[i] != s.strides[i] || s.dilations[i] != 1 || s.pad_begin[i] != 0 || s.pad_end[i] != 0 ||
        s.out_spatial[i] * s.kernel[i] > s.in_spatial[i])
      return false;
  return true;
}

PatchConvGradWeight::PatchConvGradWeight(const ConvSpec& s) : spec_(s) {
  rows_ = s.n * s.out_spatial[0] * s.out_spatial[1];
  cols_ = s.c_in * s.kernel[0] * s.kernel[1];
  es_ = DnnTypeSize(s.type);
  direct_ = s.kernel[0] == 1 && s.kernel[1] == 1;  // 1x1, stride 1: P is X as stored
  p_bytes_ = direct_ ? 0 : (static_cast<size_t>(rows_ * cols_) * es_ + 63) / 64 * 64;
  MatMulSpec m;
  m.type = s.type;
  m.a_batch = m.b_batch = {1};
  m.m = s.c_out;
  m.k = rows_;
  m.n = cols_;
  m.trans_a = true;  // dY stored [rows, OC]
  gemm_ = std::make_shared<DnnlMatMul>(m);
}

size_t PatchConvGradWeight::workspace_bytes() const { return p_bytes_ + gemm_->workspace_bytes(); }

void PatchConvGradWeight::Run(const void* dy, const void* x, void* dw, void* workspace) const {
  if (direct_) {
    gemm_->Run(dy, x, dw, workspace);
    return;
  }
  const int64_t oh = spec_.out_spatial[0], ow = spec_.out_spatial[1], kh = spec_.kernel[0], kw = spec_.kernel[1];
  const int64_t h = spec_.in_spatial[0], w = spec_.in_spatial[1], c = spec_.c_in;
  const auto* xs = static_cast<const uint8_t*>(x);
  auto* p = static_cast<uint8_t*>(workspace);
  const size_t es = es_;
  const int64_t cols = cols_;
  // Row r = (n, i, j) of P: X[n, i*KH + a, j*KW + b, ch] at column (ch, a, b).
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows_, 16), [&](const tbb::blocked_range<int64_t>& rg) {
    for (int64_t r = rg.begin(); r < rg.end(); ++r) {
      const int64_t n = r / (oh * ow), i = r / ow % oh, j = r % ow;
      uint8_t* row = p + static_cast<size_t>(r * cols) * es;
      for (int64_t a = 0; a < kh; ++a)
        for (int64_t b = 0; b < kw; ++b) {
          const uint8_t* src = xs + static_cast<size_t>(((n * h + i * kh + a) * w + j * kw + b) * c) * es;
          for (int64_t ch = 0; ch < c; ++ch)
            std::memcpy(row + static_cast<size_t>((ch * kh + a) * kw + b) * es, src + static_cast<size_t>(ch) * es, es);
        }
    }
  });
  gemm_->Run(dy, p, dw, p + p_bytes_);
}

}  // namespace ot::cpu
