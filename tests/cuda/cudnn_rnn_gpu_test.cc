// cuda_ops/cudnn_rnn.h. Without a GPU: the ONNX <-> cuDNN weight mapping (the gate permutations; a pack / unpack
// round trip through RnnWeightSegments over a stand-in weight-space layout with gaps, each cuDNN block holding the
// ONNX gate it should; malformed layouts refused) and the desc checks. With one (*Gpu*, label `gpu`): every cell
// cuDNN runs here (RNN tanh, GRU with linear_before_reset = 1, LSTM) x direction (forward, reverse, bidirectional) x
// layout (0, 1) x lengths (none; random with a length-0 and a full-length sequence), with and without B and the
// initial states, forward (Y, Y_h, Y_c) and backward (dX, dW, dR, dB, dInitial_h, dInitial_c from random dY, dY_h,
// dY_c -- dY random at the padded steps too, which must be ignored) against cpu::RnnForward / RnnBackward in
// float64 on the same rounded inputs; float32 within 1e-4 relative L2 per output (cuDNN's fp32 math, FMA, no TF32),
// float16 2e-2, bfloat16 6e-2. Outputs start as NaN, so an element never written fails. Then the executor's LSTM /
// GRU / RNN / RecurrentGrad nodes (executor/cuda/kernels_recurrent.cc) against the CPU executor run on the same
// values in float64 (its loop kernels), with sequence_lens known when the plan is made and fed at run time; one plan
// run five times with different fed lengths (through the run the plan tries to capture as a CUDA graph); and the
// options refused on the GPU, named.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/rnn.h"
#include "cuda_ops/cudnn_rnn.h"
#include "executor/device.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "tests/cuda/cudnn_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using cuda::CudnnRnnDesc;
using cuda::FloatType;
using cuda::RnnCellKind;
using cuda::RnnOperand;
using cuda::RnnWeightSegment;

// ---- host-only: the weight mapping -------------------------------------------------------------------------------

TEST(CudnnRnn, GatePermutations) {
  // cuDNN LSTM i, f, g, o -> ONNX i(0), o(1), f(2), c(3); the recurrent half (4..7) the same gates.
  const int lstm[8] = {0, 2, 3, 1, 0, 2, 3, 1};
  for (int l = 0; l < 8; ++l) EXPECT_EQ(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kLstm, l), lstm[l]) << l;
  // cuDNN GRU r, z, h -> ONNX z(0), r(1), h(2).
  const int gru[6] = {1, 0, 2, 1, 0, 2};
  for (int l = 0; l < 6; ++l) EXPECT_EQ(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kGru, l), gru[l]) << l;
  EXPECT_EQ(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kTanh, 0), 0);
  EXPECT_EQ(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kTanh, 1), 0);
  EXPECT_THROW(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kTanh, 2), std::invalid_argument);
  EXPECT_THROW(cuda::OnnxGateOfCudnnLinLayer(RnnCellKind::kLstm, -1), std::invalid_argument);
}

CudnnRnnDesc SmallDesc(RnnCellKind cell, int dirs) {
  CudnnRnnDesc d;
  d.cell = cell;
  d.seq = 4;
  d.batch = 3;
  d.input = 5;
  d.hidden = 3;
  d.directions = dirs;
  return d;
}

// A stand-in for cuDNN's layout: per direction all 2G matrices in linear-layer order, then the 2G biases, with a
// gap of 7 elements after every block (so a copy that runs long or lands in the wrong place shows).
std::vector<cuda::CudnnLinLayerPlace> StandInPlaces(const CudnnRnnDesc& d, int64_t* space_elems) {
  const int G = d.gates();
  const int64_t H = d.hidden, I = d.input;
  std::vector<cuda::CudnnLinLayerPlace> p(static_cast<size_t>(d.directions * 2 * G));
  int64_t at = 0;
  for (int dir = 0; dir < d.directions; ++dir) {
    for (int lin = 0; lin < 2 * G; ++lin) {
      auto& q = p[static_cast<size_t>(dir * 2 * G + lin)];
      q.matrix_offset = at;
      q.matrix_count = H * (lin < G ? I : H);
      at += q.matrix_count + 7;
    }
    for (int lin = 0; lin < 2 * G; ++lin) {
      auto& q = p[static_cast<size_t>(dir * 2 * G + lin)];
      q.bias_offset = at;
      q.bias_count = H;
      at += H + 7;
    }
  }
  *space_elems = at;
  return p;
}

TEST(CudnnRnn, WeightMappingRoundTrip) {
  for (RnnCellKind cell : {RnnCellKind::kTanh, RnnCellKind::kGru, RnnCellKind::kLstm})
    for (int dirs : {1, 2}) {
      const CudnnRnnDesc d = SmallDesc(cell, dirs);
      SCOPED_TRACE(cuda::ToString(d));
      const int G = d.gates();
      const int64_t H = d.hidden, I = d.input, GH = G * H;
      int64_t elems = 0;
      const auto places = StandInPlaces(d, &elems);
      const std::vector<RnnWeightSegment> segs = cuda::RnnWeightSegments(d, places, elems);
      EXPECT_EQ(segs.size(), static_cast<size_t>(dirs * 4 * G));
      // Distinct values: element k of W is k + 1, of R 1000 + k, of B 100000 + k.
      std::vector<float> w(static_cast<size_t>(dirs * GH * I)), r(static_cast<size_t>(dirs * GH * H)),
          b(static_cast<size_t>(dirs * 2 * GH));
      std::iota(w.begin(), w.end(), 1.0f);
      std::iota(r.begin(), r.end(), 1000.0f);
      std::iota(b.begin(), b.end(), 100000.0f);
      std::vector<float> space(static_cast<size_t>(elems), -1.0f);
      cuda::PackRnnWeightsHost(segs, sizeof(float), w.data(), r.data(), b.data(), space.data());
      // Each cuDNN block holds its ONNX gate: direction dir, linear layer lin, element (row j, col k).
      for (int dir = 0; dir < dirs; ++dir)
        for (int lin = 0; lin < 2 * G; ++lin) {
          const auto& p = places[static_cast<size_t>(dir * 2 * G + lin)];
          const int g = cuda::OnnxGateOfCudnnLinLayer(cell, lin);
          const bool in = lin < G;
          const int64_t cols = in ? I : H;
          for (int64_t j = 0; j < H; ++j) {
            for (int64_t k = 0; k < cols; ++k) {
              const float want = in ? w[static_cast<size_t>(((dir * GH) + g * H + j) * I + k)]
                                    : r[static_cast<size_t>(((dir * GH) + g * H + j) * H + k)];
              ASSERT_EQ(space[static_cast<size_t>(p.matrix_offset + j * cols + k)], want)
                  << "dir " << dir << " lin " << lin << " (" << j << ", " << k << ")";
            }
            const float bias = b[static_cast<size_t>(dir * 2 * GH + (in ? 0 : GH) + g * H + j)];
            ASSERT_EQ(space[static_cast<size_t>(p.bias_offset + j)], bias) << "dir " << dir << " lin " << lin;
          }
        }
      // The gaps are untouched.
      int64_t untouched = 0;
      for (float v : space) untouched += v == -1.0f;
      EXPECT_EQ(untouched, static_cast<int64_t>(places.size()) * 2 * 7);
      // Back: the ONNX operands again.
      std::vector<float> w2(w.size(), 0), r2(r.size(), 0), b2(b.size(), 0);
      cuda::UnpackRnnWeightsHost(segs, sizeof(float), space.data(), w2.data(), r2.data(), b2.data());
      EXPECT_EQ(w2, w);
      EXPECT_EQ(r2, r);
      EXPECT_EQ(b2, b);
      // Without B the biases are zero; unpacking only dR leaves the rest alone.
      cuda::PackRnnWeightsHost(segs, sizeof(float), w.data(), r.data(), nullptr, space.data());
      for (const auto& p : places)
        for (int64_t j = 0; j < H; ++j) EXPECT_EQ(space[static_cast<size_t>(p.bias_offset + j)], 0.0f);
      std::vector<float> r3(r.size(), 0);
      cuda::UnpackRnnWeightsHost(segs, sizeof(float), space.data(), nullptr, r3.data(), nullptr);
      EXPECT_EQ(r3, r);
      // 2-byte elements move the same way.
      std::vector<uint16_t> w16(w.size()), r16(r.size()), b16(b.size()), s16(static_cast<size_t>(elems)),
          w16b(w.size()), r16b(r.size()), b16b(b.size());
      for (size_t i = 0; i < w16.size(); ++i) w16[i] = static_cast<uint16_t>(i * 7 + 1);
      for (size_t i = 0; i < r16.size(); ++i) r16[i] = static_cast<uint16_t>(i * 5 + 2);
      for (size_t i = 0; i < b16.size(); ++i) b16[i] = static_cast<uint16_t>(i * 3 + 3);
      cuda::PackRnnWeightsHost(segs, 2, w16.data(), r16.data(), b16.data(), s16.data());
      cuda::UnpackRnnWeightsHost(segs, 2, s16.data(), w16b.data(), r16b.data(), b16b.data());
      EXPECT_EQ(w16b, w16);
      EXPECT_EQ(r16b, r16);
      EXPECT_EQ(b16b, b16);
    }
}

TEST(CudnnRnn, WeightMappingRefusesBadLayouts) {
  const CudnnRnnDesc d = SmallDesc(RnnCellKind::kLstm, 2);
  int64_t elems = 0;
  const auto good = StandInPlaces(d, &elems);
  EXPECT_NO_THROW(cuda::RnnWeightSegments(d, good, elems));
  auto bad = good;
  bad.pop_back();
  EXPECT_THROW(cuda::RnnWeightSegments(d, bad, elems), std::invalid_argument);  // too few places
  bad = good;
  bad[3].matrix_count += 1;
  EXPECT_THROW(cuda::RnnWeightSegments(d, bad, elems), std::invalid_argument);  // not the ONNX block's size
  bad = good;
  bad[2].bias_count = 1;
  EXPECT_THROW(cuda::RnnWeightSegments(d, bad, elems), std::invalid_argument);
  bad = good;
  bad[5].matrix_offset = bad[4].matrix_offset + 1;
  EXPECT_THROW(cuda::RnnWeightSegments(d, bad, elems), std::invalid_argument);       // overlap
  EXPECT_THROW(cuda::RnnWeightSegments(d, good, elems - 8), std::invalid_argument);  // past the space
}

TEST(CudnnRnn, ValidateRejectsMalformedDescs) {
  CudnnRnnDesc d = SmallDesc(RnnCellKind::kGru, 1);
  EXPECT_NO_THROW(cuda::ValidateCudnnRnn(d));
  CudnnRnnDesc bad = d;
  bad.hidden = 0;
  EXPECT_THROW(cuda::ValidateCudnnRnn(bad), std::invalid_argument);
  bad = d;
  bad.directions = 3;
  EXPECT_THROW(cuda::ValidateCudnnRnn(bad), std::invalid_argument);
  bad = d;
  bad.directions = 2;
  bad.reverse = true;
  EXPECT_THROW(cuda::ValidateCudnnRnn(bad), std::invalid_argument);
  bad = d;
  bad.seq = int64_t{1} << 31;
  EXPECT_THROW(cuda::ValidateCudnnRnn(bad), std::invalid_argument);
  bad = d;
  bad.seq = 1 << 16;
  bad.batch = 1 << 16;  // seq * batch * hidden past int
  EXPECT_THROW(cuda::ValidateCudnnRnn(bad), std::invalid_argument);
}

// ---- against the CPU in float64 (GPU) ----------------------------------------------------------------------------

struct Case {
  RnnCellKind cell;
  int dirs;
  bool reverse, batch_major, lens, bias, h0;
};

cpu::RnnSpec SpecOf(const CudnnRnnDesc& d) {
  cpu::RnnSpec s;
  s.cell = d.cell == RnnCellKind::kLstm  ? cpu::RnnCell::kLstm
           : d.cell == RnnCellKind::kGru ? cpu::RnnCell::kGru
                                         : cpu::RnnCell::kRnn;
  s.seq = d.seq;
  s.batch = d.batch;
  s.input = d.input;
  s.hidden = d.hidden;
  s.directions = d.directions;
  s.reverse = d.reverse;
  s.batch_major = d.batch_major;
  s.linear_before_reset = d.cell == RnnCellKind::kGru;  // cuDNN's GRU
  return s;
}

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-4 : t == FloatType::kF16 ? 2e-2 : 6e-2; }

// ||got - ref|| / ||ref|| <= tol, and no NaN (an unwritten element).
void ExpectRelL2(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0, den = 0;
  int64_t nans = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) ++nans;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  EXPECT_EQ(nans, 0) << what << ": " << nans << " NaN elements (never written?)";
  const double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  EXPECT_LE(rel, tol) << what << ": relative L2 error " << rel;
}

void RunCase(const Case& c, FloatType t) {
  CudnnRnnDesc d;
  d.cell = c.cell;
  d.type = t;
  d.seq = 6;
  d.batch = 5;
  d.input = 7;
  d.hidden = 9;
  d.directions = c.dirs;
  d.reverse = c.reverse;
  d.batch_major = c.batch_major;
  SCOPED_TRACE(cuda::ToString(d) + (c.lens ? " lens" : "") + (c.bias ? " B" : "") + (c.h0 ? " h0" : ""));
  const bool lstm = c.cell == RnnCellKind::kLstm;
  const int64_t S = d.seq, N = d.batch, I = d.input, H = d.hidden, D = d.directions, GH = d.gates() * H;
  const int64_t nx = S * N * I, nw = D * GH * I, nr = D * GH * H, nb = D * 2 * GH, ny = S * D * N * H, ns = D * N * H;
  const test::HostT x = test::RandomT(t, nx), w = test::RandomT(t, nw, -0.5, 0.5), r = test::RandomT(t, nr, -0.5, 0.5),
                    b = test::RandomT(t, nb, -0.5, 0.5), h0 = test::RandomT(t, ns), c0 = test::RandomT(t, ns),
                    dy = test::RandomT(t, ny), dyh = test::RandomT(t, ns), dyc = test::RandomT(t, ns);
  std::vector<int32_t> lens(static_cast<size_t>(N), static_cast<int32_t>(S));
  if (c.lens) {
    std::uniform_int_distribution<int32_t> u(1, static_cast<int32_t>(S));
    for (int64_t n = 2; n < N; ++n) lens[static_cast<size_t>(n)] = u(test::Rng());
    lens[1] = 0;  // lens[0] stays full
  }
  // The CPU in float64 on the stored values.
  const cpu::RnnSpec s = SpecOf(d);
  const std::vector<double> xd = x.Doubles(), wd = w.Doubles(), rd = r.Doubles(), bd = b.Doubles(), h0d = h0.Doubles(),
                            c0d = c0.Doubles(), dyd = dy.Doubles(), dyhd = dyh.Doubles(), dycd = dyc.Doubles();
  const int32_t* lp = c.lens ? lens.data() : nullptr;
  const double* bp = c.bias ? bd.data() : nullptr;
  const double* hp = c.h0 ? h0d.data() : nullptr;
  const double* cp = c.h0 && lstm ? c0d.data() : nullptr;
  std::vector<double> ry(static_cast<size_t>(ny)), ryh(static_cast<size_t>(ns)), ryc(static_cast<size_t>(ns));
  cpu::RnnForward<double>(s, xd.data(), wd.data(), rd.data(), bp, lp, hp, cp, nullptr, ry.data(), ryh.data(),
                          lstm ? ryc.data() : nullptr);
  std::vector<double> rdx(static_cast<size_t>(nx)), rdw(static_cast<size_t>(nw)), rdr(static_cast<size_t>(nr)),
      rdb(static_cast<size_t>(nb)), rdh0(static_cast<size_t>(ns)), rdc0(static_cast<size_t>(ns));
  cpu::RnnBackward<double>(s, xd.data(), wd.data(), rd.data(), bp, lp, hp, cp, nullptr, dyd.data(), dyhd.data(),
                           lstm ? dycd.data() : nullptr, rdx.data(), rdw.data(), rdr.data(), rdb.data(), rdh0.data(),
                           lstm ? rdc0.data() : nullptr, nullptr);

  std::unique_ptr<cuda::CudnnRnn> rnn;
  ASSERT_NO_THROW(rnn = std::make_unique<cuda::CudnnRnn>(d));
  const size_t es = cuda::FloatTypeSize(t);
  auto gx = test::ToDev(x), gw = test::ToDev(w), gr = test::ToDev(r), gb = test::ToDev(b), gh0 = test::ToDev(h0),
       gc0 = test::ToDev(c0), gdy = test::ToDev(dy), gdyh = test::ToDev(dyh), gdyc = test::ToDev(dyc);
  auto glens = test::ToDev(lens.data(), lens.size() * sizeof(int32_t));
  auto out = [&](int64_t n) { return test::NanDev(static_cast<size_t>(n) * es); };
  auto y = out(ny), yh = out(ns), yc = out(ns), dx = out(nx), dw = out(nw), dr = out(nr), db = out(nb), dh0 = out(ns),
       dc0 = out(ns);
  test::Dev fws(rnn->ForwardWorkspaceBytes()), bws(rnn->BackwardWorkspaceBytes());

  cuda::RnnForwardArgs fa;
  fa.x = gx->p;
  fa.w = gw->p;
  fa.r = gr->p;
  fa.b = c.bias ? gb->p : nullptr;
  fa.lens = c.lens ? glens->as<int32_t>() : nullptr;
  fa.h0 = c.h0 ? gh0->p : nullptr;
  fa.c0 = c.h0 && lstm ? gc0->p : nullptr;
  fa.y = y->p;
  fa.y_h = yh->p;
  fa.y_c = lstm ? yc->p : nullptr;
  ASSERT_NO_THROW(rnn->Forward(fa, lp, fws.p, fws.bytes, nullptr));
  ExpectRelL2(test::FromDev(*y, t, ny).Doubles(), ry, Tol(t), "Y");
  ExpectRelL2(test::FromDev(*yh, t, ns).Doubles(), ryh, Tol(t), "Y_h");
  if (lstm) ExpectRelL2(test::FromDev(*yc, t, ns).Doubles(), ryc, Tol(t), "Y_c");

  cuda::RnnBackwardArgs ba;
  ba.x = fa.x;
  ba.w = fa.w;
  ba.r = fa.r;
  ba.b = fa.b;
  ba.lens = fa.lens;
  ba.h0 = fa.h0;
  ba.c0 = fa.c0;
  ba.dy = gdy->p;
  ba.dy_h = gdyh->p;
  ba.dy_c = lstm ? gdyc->p : nullptr;
  ba.dx = dx->p;
  ba.dw = dw->p;
  ba.dr = dr->p;
  ba.db = db->p;
  ba.dh0 = dh0->p;
  ba.dc0 = lstm ? dc0->p : nullptr;
  ASSERT_NO_THROW(rnn->Backward(ba, lp, bws.p, bws.bytes, nullptr));
  ExpectRelL2(test::FromDev(*dx, t, nx).Doubles(), rdx, Tol(t), "dX");
  ExpectRelL2(test::FromDev(*dw, t, nw).Doubles(), rdw, Tol(t), "dW");
  ExpectRelL2(test::FromDev(*dr, t, nr).Doubles(), rdr, Tol(t), "dR");
  ExpectRelL2(test::FromDev(*db, t, nb).Doubles(), rdb, Tol(t), "dB");
  ExpectRelL2(test::FromDev(*dh0, t, ns).Doubles(), rdh0, Tol(t), "dInitial_h");
  if (lstm) ExpectRelL2(test::FromDev(*dc0, t, ns).Doubles(), rdc0, Tol(t), "dInitial_c");
}

std::vector<Case> AllCases() {
  std::vector<Case> v;
  int k = 0;
  for (RnnCellKind cell : {RnnCellKind::kTanh, RnnCellKind::kGru, RnnCellKind::kLstm})
    for (int dir = 0; dir < 3; ++dir)
      for (bool bm : {false, true})
        for (bool lens : {false, true}) {
          ++k;
          v.push_back({cell, dir == 2 ? 2 : 1, dir == 1, bm, lens, k % 2 == 0, k % 3 != 0});
        }
  return v;
}

TEST(CudnnRnnGpu, Float32MatchesTheCpuInFloat64) {
  REQUIRE_CUDA_DEVICE();
  for (const Case& c : AllCases()) RunCase(c, FloatType::kF32);
}

TEST(CudnnRnnGpu, HalvesMatchTheCpuInFloat64) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF16, FloatType::kBF16})
    for (RnnCellKind cell : {RnnCellKind::kGru, RnnCellKind::kLstm}) {
      RunCase({cell, 2, false, false, true, true, true}, t);
      RunCase({cell, 1, true, true, true, false, false}, t);
    }
}

// Absent outputs and gradients are not written; a length outside [0, seq] is an error naming the batch index.
TEST(CudnnRnnGpu, OptionalOperandsAndBadLengths) {
  REQUIRE_CUDA_DEVICE();
  CudnnRnnDesc d = SmallDesc(RnnCellKind::kLstm, 2);
  cuda::CudnnRnn rnn(d);
  const int64_t nx = d.seq * d.batch * d.input, nw = 2 * 4 * d.hidden * d.input, nr = 2 * 4 * d.hidden * d.hidden;
  auto gx = test::ToDev(test::RandomT(FloatType::kF32, nx)), gw = test::ToDev(test::RandomT(FloatType::kF32, nw)),
       gr = test::ToDev(test::RandomT(FloatType::kF32, nr));
  test::Dev fws(rnn.ForwardWorkspaceBytes()), bws(rnn.BackwardWorkspaceBytes());
  auto yh = test::NanDev(static_cast<size_t>(2 * d.batch * d.hidden) * 4);
  cuda::RnnForwardArgs fa;
  fa.x = gx->p;
  fa.w = gw->p;
  fa.r = gr->p;
  fa.y_h = yh->p;  // Y and Y_c absent
  ASSERT_NO_THROW(rnn.Forward(fa, nullptr, fws.p, fws.bytes, nullptr));
  const std::vector<double> got = test::FromDev(*yh, FloatType::kF32, 2 * d.batch * d.hidden).Doubles();
  for (double v : got) ASSERT_FALSE(std::isnan(v));
  cuda::RnnBackwardArgs ba;
  ba.x = gx->p;
  ba.w = gw->p;
  ba.r = gr->p;
  auto dw = test::NanDev(static_cast<size_t>(nw) * 4);
  ba.dw = dw->p;  // only dW; no output gradients: all zero
  ASSERT_NO_THROW(rnn.Backward(ba, nullptr, bws.p, bws.bytes, nullptr));
  for (double v : test::FromDev(*dw, FloatType::kF32, nw).Doubles()) ASSERT_EQ(v, 0.0);
  // Bad lengths.
  std::vector<int32_t> lens(static_cast<size_t>(d.batch), 2);
  lens[2] = static_cast<int32_t>(d.seq) + 1;
  auto gl = test::ToDev(lens.data(), lens.size() * 4);
  fa.lens = gl->as<int32_t>();
  try {
    rnn.Forward(fa, lens.data(), fws.p, fws.bytes, nullptr);
    FAIL() << "a length past seq ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_lens[2]"), std::string::npos) << e.what();
  }
  fa.lens = nullptr;  // lengths on the host without the device copy
  EXPECT_THROW(rnn.Forward(fa, lens.data(), fws.p, fws.bytes, nullptr), std::invalid_argument);
  EXPECT_THROW(rnn.Forward(fa, nullptr, fws.p, fws.bytes - 1, nullptr), std::invalid_argument);
}

// ---- the executor's nodes ------------------------------------------------------------------------------------------

using Attrs = std::map<std::string, Attribute>;

// The float operands as float64 (the CPU's loop kernels in double are the reference: the same stored values).
std::vector<Tensor> AsF64(const std::vector<Tensor>& in) {
  std::vector<Tensor> r;
  for (const Tensor& t : in) r.push_back(t.empty_tensor() || !IsFloat(t.dtype()) ? t : t.CastTo(DataType::kFloat64));
  return r;
}

void CompareNode(const std::string& op, const std::string& domain, int opset, const Attrs& attrs,
                 const std::vector<Tensor>& in, int outputs, const std::vector<int>& consts, int compare_outputs,
                 double tol) {
  SCOPED_TRACE(op + " " + DataTypeName(in[0].dtype()));
  const std::vector<Tensor> cpu = test::RunOp(op, AsF64(in), attrs, outputs, opset, consts, nullptr, domain);
  const std::vector<Tensor> gpu = test::RunOp(op, in, attrs, outputs, opset, consts, test::Gpu(), domain);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (int i = 0; i < compare_outputs; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    test::ExpectClose(gpu[static_cast<size_t>(i)], cpu[static_cast<size_t>(i)].CastTo(in[0].dtype()), tol, tol);
  }
}

Tensor Lens(const std::vector<int32_t>& v) {
  Tensor t(DataType::kInt32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

TEST(ExecutorRnnGpu, RecurrentLayersAndTheirGradientMatchTheCpu) {
  REQUIRE_GPU();
  const int64_t S = 5, N = 4, I = 6, H = 7;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    for (const char* op : {"RNN", "GRU", "LSTM"})
      for (const char* dir : {"forward", "reverse", "bidirectional"})
        for (int64_t layout : {0, 1})
          for (bool const_lens : {true, false}) {
            const int64_t D = std::string(dir) == "bidirectional" ? 2 : 1;
            const int64_t G = std::string(op) == "LSTM" ? 4 : std::string(op) == "GRU" ? 3 : 1;
            const bool lstm = G == 4;
            SCOPED_TRACE(std::string(op) + " " + dir + " layout " + std::to_string(layout) +
                         (const_lens ? " constant lens" : " fed lens"));
            Attrs attrs{{"hidden_size", Attribute::Int(H)},
                        {"direction", Attribute::String(dir)},
                        {"layout", Attribute::Int(layout)}};
            if (G == 3) attrs["linear_before_reset"] = Attribute::Int(1);
            const std::vector<int64_t> xd = layout ? std::vector<int64_t>{N, S, I} : std::vector<int64_t>{S, N, I};
            const std::vector<int64_t> sd = layout ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
            const std::vector<int64_t> yd =
                layout ? std::vector<int64_t>{N, S, D, H} : std::vector<int64_t>{S, D, N, H};
            std::vector<Tensor> in{test::RandomTensor(t, xd),
                                   test::RandomTensor(t, {D, G * H, I}, -0.5, 0.5),
                                   test::RandomTensor(t, {D, G * H, H}, -0.5, 0.5),
                                   test::RandomTensor(t, {D, 2 * G * H}, -0.5, 0.5),
                                   Lens({static_cast<int32_t>(S), 0, 3, 1}),
                                   test::RandomTensor(t, sd)};
            if (lstm) in.push_back(test::RandomTensor(t, sd));
            const double tol = t == DataType::kFloat32 ? 1e-4 : 2e-2;
            const std::vector<int> consts = const_lens ? std::vector<int>{4} : std::vector<int>{};
            CompareNode(op, "", 14, attrs, in, lstm ? 3 : 2, consts, lstm ? 3 : 2, tol);
            // RecurrentGrad: the forward's inputs (P absent), then dY, dY_h, dY_c.
            Attrs gattrs = attrs;
            gattrs["cell"] = Attribute::String(op);
            std::vector<Tensor> gin = in;
            if (!lstm) gin.push_back(Tensor());  // initial_c
            gin.push_back(Tensor());             // P
            gin.push_back(test::RandomTensor(t, yd));
            gin.push_back(test::RandomTensor(t, sd));
            gin.push_back(lstm ? test::RandomTensor(t, sd) : Tensor());
            // dP (LSTM output 6) is not compared: P is absent, the GPU writes zeros (see kernels_recurrent.cc).
            CompareNode("RecurrentGrad", kInternalDomain, 1, gattrs, gin, lstm ? 7 : 5, consts, lstm ? 6 : 5, tol);
          }
}

// One plan run several times with sequence_lens fed at run time, different each run: the plan captures its third
// run as a CUDA graph, which the kernel's wait for the lengths invalidates (the plan then runs directly); every run
// must see its own lengths. Then the same with the lengths an initializer (graph-captured and replayed).
TEST(ExecutorRnnGpu, RepeatedRunsSeeTheirOwnLengths) {
  REQUIRE_GPU();
  const int64_t S = 6, N = 3, I = 4, H = 5, D = 2, G = 4;
  for (bool constant : {false, true}) {
    SCOPED_TRACE(constant ? "constant lens" : "fed lens");
    const Tensor w = test::RandomTensor(DataType::kFloat32, {D, G * H, I}, -0.5, 0.5),
                 r = test::RandomTensor(DataType::kFloat32, {D, G * H, H}, -0.5, 0.5);
    const Tensor lens0 = Lens({6, 2, 0});
    Graph g;
    g.opset_imports[""] = 14;
    std::map<std::string, Tensor> feeds;
    auto input = [&](const std::string& name, const Tensor& t) {
      Value* v = g.AddValue(name);
      v->dtype = t.dtype();
      v->shape = Shape::Static(t.dims());
      g.inputs.push_back(v);
      return v;
    };
    Value* x = input("x", test::RandomTensor(DataType::kFloat32, {S, N, I}));
    Value* wv = g.AddInitializer("w", w);
    Value* rv = g.AddInitializer("r", r);
    Value* lv = constant ? g.AddInitializer("lens", lens0) : input("lens", lens0);
    std::vector<Value*> outs{g.AddValue("y"), g.AddValue("y_h")};
    Node* n = g.AddNode("LSTM", {x, wv, rv, nullptr, lv}, outs, "lstm");
    n->opset = 14;
    n->attrs = {{"hidden_size", Attribute::Int(H)}, {"direction", Attribute::String("bidirectional")}};
    g.outputs = outs;
    ExecutorOptions eo;
    eo.device = test::Gpu();
    Executor ex(g, eo);
    for (int run = 0; run < 5; ++run) {
      SCOPED_TRACE("run " + std::to_string(run));
      const Tensor xt = test::RandomTensor(DataType::kFloat32, {S, N, I});
      const Tensor lt = constant ? lens0 : Lens({static_cast<int32_t>(run + 2), static_cast<int32_t>(S - run), 0});
      std::map<std::string, Tensor> f{{"x", xt}};
      if (!constant) f["lens"] = lt;
      const std::vector<Tensor> got = ex.Run(f);
      const std::vector<Tensor> want =
          test::RunOp("LSTM", AsF64({xt, w, r, Tensor(), lt}), n->attrs, 2, 14, {}, nullptr);
      ASSERT_EQ(got.size(), 2u);
      for (size_t i = 0; i < 2; ++i) test::ExpectClose(got[i], want[i].CastTo(DataType::kFloat32), 1e-4, 1e-4);
    }
  }
}

TEST(ExecutorRnnGpu, UnsupportedOptionsAreNamed) {
  REQUIRE_GPU();
  const DataType f = DataType::kFloat32;
  auto refused = [](const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in, const std::string& why) {
    SCOPED_TRACE(op + ": " + why);
    try {
      test::RunOp(op, in, attrs, 2, 14, {}, test::Gpu());
      FAIL() << op << " ran on the GPU";
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  const Tensor x = test::RandomTensor(f, {3, 2, 4});
  const Attrs h{{"hidden_size", Attribute::Int(5)}};
  Attrs clip = h;
  clip["clip"] = Attribute::Float(2.0f);
  refused("LSTM", clip, {x, test::RandomTensor(f, {1, 20, 4}), test::RandomTensor(f, {1, 20, 5})}, "clip");
  Attrs forget = h;
  forget["input_forget"] = Attribute::Int(1);
  refused("LSTM", forget, {x, test::RandomTensor(f, {1, 20, 4}), test::RandomTensor(f, {1, 20, 5})}, "input_forget");
  refused("LSTM", h,
          {x, test::RandomTensor(f, {1, 20, 4}), test::RandomTensor(f, {1, 20, 5}), Tensor(), Tensor(), Tensor(),
           Tensor(), test::RandomTensor(f, {1, 15})},
          "peepholes");
  refused("GRU", h, {x, test::RandomTensor(f, {1, 15, 4}), test::RandomTensor(f, {1, 15, 5})}, "linear_before_reset");
  refused("RNN", h,
          {test::RandomTensor(DataType::kFloat64, {3, 2, 4}), test::RandomTensor(DataType::kFloat64, {1, 5, 4}),
           test::RandomTensor(DataType::kFloat64, {1, 5, 5})},
          "float64");
}

}  // namespace
}  // namespace ot
