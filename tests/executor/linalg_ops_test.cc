// Linalg ops through the executor (schema inference + kernel factory + cpu_ops kernel) against brute-force
// double references on random inputs: MatMul promotions and batch broadcasting, Gemm attributes and C
// broadcasting (opset 6 and 13), Conv/ConvTranspose attributes, pools with indices, Einsum equations, and the
// errors a user can cause.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;
using test::RunOp;

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

// Brute-force einsum over letters-only equations with an explicit output; size-1 dims broadcast.
Tensor RefEinsum(const std::string& eq, const std::vector<Tensor>& ins, DataType t) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  for (size_t s = 0;;) {
    size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c == std::string::npos ? c : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t a = 0; a < terms[i].size(); ++a) size[terms[i][a]] = std::max(size[terms[i][a]], ins[i].dims()[a]);
  std::string letters;
  for (auto& [c, n] : size) letters += c;
  std::vector<int64_t> od;
  for (char c : out) od.push_back(size[c]);
  Tensor r(t, od);
  std::vector<double> acc(r.numel(), 0.0);
  std::map<char, int64_t> idx;
  std::function<void(size_t)> rec = [&](size_t li) {
    if (li == letters.size()) {
      double p = 1;
      for (size_t i = 0; i < terms.size(); ++i) {
        int64_t off = 0;
        for (size_t a = 0; a < terms[i].size(); ++a) {
          const int64_t d = ins[i].dims()[a];
          off = off * d + (d == 1 ? 0 : idx[terms[i][a]]);
        }
        p *= ins[i].GetDouble(off);
      }
      int64_t o = 0;
      for (char c : out) o = o * size[c] + idx[c];
      acc[o] += p;
      return;
    }
    for (int64_t v = 0; v < size[letters[li]]; ++v) {
      idx[letters[li]] = v;
      rec(li + 1);
    }
  };
  rec(0);
  for (int64_t i = 0; i < r.numel(); ++i) r.SetDouble(i, acc[i]);
  return r;
}

// numpy matmul as an einsum equation over the operands' ranks.
std::string MatMulEquation(int ra, int rb) {
  const std::string batch = "abcdef";
  const int nb = std::max(std::max(ra, rb) - 2, 0);
  std::string ta, tb, to;
  for (int i = 0; i < nb; ++i) {
    if (ra - 2 >= nb - i) ta += batch[i];
    if (rb - 2 >= nb - i) tb += batch[i];
    to += batch[i];
  }
  ta += ra == 1 ? "k" : "mk";
  tb += rb == 1 ? "k" : "kn";
  if (ra > 1) to += "m";
  if (rb > 1) to += "n";
  return ta + "," + tb + "->" + to;
}

TEST(LinalgOps, MatMulPromotionsAndBatchBroadcast) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3}, {3}}, {{3}, {2, 3, 4}}, {{5, 3}, {3}}, {{2, 1, 5, 3}, {4, 3, 2}}, {{6, 7}, {7, 2}}, {{3, 2, 4}, {4, 5}}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    for (const auto& [ad, bd] : cases) {
      Tensor a = RandomTensor(t, ad, -5, 5), b = RandomTensor(t, bd, -5, 5);
      Tensor ref = RefEinsum(MatMulEquation(static_cast<int>(ad.size()), static_cast<int>(bd.size())), {a, b}, t);
      SCOPED_TRACE(DataTypeName(t) + " " + DimsToString(ad) + " x " + DimsToString(bd));
      ExpectClose(RunOp("MatMul", {a, b})[0], ref, 1e-5, 1e-5);
    }
  }
}

TEST(LinalgOps, MatMulHalfTypes) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    Tensor a = RandomTensor(t, {2, 4, 8}), b = RandomTensor(t, {8, 3});
    ExpectClose(RunOp("MatMul", {a, b})[0], RefEinsum("bmk,kn->bmn", {a, b}, t), t == DataType::kFloat16 ? 5e-3 : 3e-2,
                1e-2);
  }
}

Tensor RefGemm(const Tensor& a, const Tensor& b, const Tensor& c, bool ta, bool tb, double alpha, double beta,
               DataType t) {
  Tensor ab = RefEinsum(std::string(ta ? "km" : "mk") + "," + (tb ? "nk" : "kn") + "->mn", {a, b}, DataType::kFloat64);
  const int64_t m = ab.dims()[0], n = ab.dims()[1];
  Tensor r(t, {m, n});
  std::vector<int64_t> cd = c.empty_tensor() ? std::vector<int64_t>{} : c.dims();
  while (cd.size() < 2) cd.insert(cd.begin(), 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double v = alpha * ab.GetDouble(i * n + j);
      if (!c.empty_tensor()) v += beta * c.GetDouble((cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j));
      r.SetDouble(i * n + j, v);
    }
  return r;
}

TEST(LinalgOps, GemmAttributesAndBiasBroadcast) {
  const int64_t m = 4, k = 6, n = 5;
  const std::vector<std::vector<int64_t>> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const auto& cs : c_shapes) {
          Tensor a = RandomTensor(t, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
          Tensor b = RandomTensor(t, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
          Tensor c = RandomTensor(t, cs);
          std::map<std::string, Attribute> attrs{{"transA", Attribute::Int(ta)},
                                                 {"transB", Attribute::Int(tb)},
                                                 {"alpha", Attribute::Float(0.75f)},
                                                 {"beta", Attribute::Float(-1.5f)}};
          SCOPED_TRACE(DataTypeName(t) + " C " + DimsToString(cs) + " tA " + std::to_string(ta) + " tB " +
                       std::to_string(tb));
          ExpectClose(RunOp("Gemm", {a, b, c}, attrs)[0], RefGemm(a, b, c, ta, tb, 0.75, -1.5, t), 1e-4, 1e-5);
        }
}

TEST(LinalgOps, GemmOpset6BroadcastAndOptionalC) {
  Tensor a = RandomTensor(DataType::kFloat32, {3, 4}), b = RandomTensor(DataType::kFloat32, {4, 2});
  Tensor c = RandomTensor(DataType::kFloat32, {2});
  ExpectClose(RunOp("Gemm", {a, b, c}, {{"broadcast", Attribute::Int(1)}}, 1, 6)[0],
              RefGemm(a, b, c, false, false, 1, 1, DataType::kFloat32), 1e-4, 1e-5);
  ExpectClose(RunOp("Gemm", {a, b}, {}, 1, 13)[0], RefGemm(a, b, Tensor(), false, false, 1, 1, DataType::kFloat32),
              1e-4, 1e-5);
  ExpectClose(RunOp("Gemm", {a, b}, {}, 1, 13)[0], RefGemm(a, b, Tensor(), false, false, 1, 1, DataType::kFloat32),
              1e-4, 1e-5);
  // Integer Gemm (opset 11+) runs the loop kernel.
  Tensor ai = RandomTensor(DataType::kInt64, {3, 4}, -9, 9), bi = RandomTensor(DataType::kInt64, {4, 2}, -9, 9);
  Tensor ci = RandomTensor(DataType::kInt64, {3, 1}, -9, 9);
  ExpectClose(RunOp("Gemm", {ai, bi, ci})[0], RefGemm(ai, bi, ci, false, false, 1, 1, DataType::kInt64), 0, 0);
}

// Direct conv / transposed conv reference with explicit pads (begin..., end...), any rank 1..3.
Tensor RefConv(const Tensor& x, const Tensor& w, const Tensor& b, bool transpose, int64_t group,
               const std::vector<int64_t>& strides, const std::vector<int64_t>& dil, const std::vector<int64_t>& pads,
               const std::vector<int64_t>& out_spatial) {
  const int r = x.rank() - 2;
  const int64_t n = x.dims()[0], cin = x.dims()[1];
  const int64_t cout = transpose ? w.dims()[1] * group : w.dims()[0];
  const int64_t icg = cin / group, ocg = cout / group;
  std::vector<int64_t> od{n, cout};
  od.insert(od.end(), out_spatial.begin(), out_spatial.end());
  Tensor y(x.dtype(), od);
  std::vector<int64_t> in_sp(x.dims().begin() + 2, x.dims().end()), k(w.dims().begin() + 2, w.dims().end());
  int64_t in_sz = 1, out_sz = 1, k_sz = 1;
  for (int d = 0; d < r; ++d) in_sz *= in_sp[d], out_sz *= out_spatial[d], k_sz *= k[d];
  std::vector<double> acc(y.numel(), 0.0);
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t oc = 0; oc < cout; ++oc)
      for (int64_t icl = 0; icl < icg; ++icl)
        for (int64_t kk = 0; kk < k_sz; ++kk) {
          const int64_t ic = (oc / ocg) * icg + icl;
          const double wv =
              transpose ? w.GetDouble((ic * ocg + oc % ocg) * k_sz + kk) : w.GetDouble((oc * icg + icl) * k_sz + kk);
          const int64_t iter = transpose ? in_sz : out_sz;
          for (int64_t p = 0; p < iter; ++p) {
            int64_t rp = p, rk = kk, q_off = 0, mul = 1;
            bool ok = true;
            for (int d = r - 1; d >= 0; --d) {
              const int64_t pd = transpose ? in_sp[d] : out_spatial[d], qd = transpose ? out_spatial[d] : in_sp[d];
              const int64_t q = (rp % pd) * strides[d] - pads[d] + (rk % k[d]) * dil[d];
              rp /= pd;
              rk /= k[d];
              ok = ok && q >= 0 && q < qd;
              q_off += q * mul;
              mul *= qd;
            }
            if (!ok) continue;
            const int64_t xo = (bn * cin + ic) * in_sz + (transpose ? p : q_off);
            const int64_t yo = (bn * cout + oc) * out_sz + (transpose ? q_off : p);
            acc[yo] += wv * x.GetDouble(xo);
          }
        }
  for (int64_t i = 0; i < y.numel(); ++i)
    y.SetDouble(i, acc[i] + (b.empty_tensor() ? 0.0 : b.GetDouble((i / out_sz) % cout)));
  return y;
}

TEST(LinalgOps, Conv2DGroupDilationStridePadsBias) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
    Tensor x = RandomTensor(t, {2, 4, 9, 8}), w = RandomTensor(t, {6, 2, 3, 2}), b = RandomTensor(t, {6});
    std::map<std::string, Attribute> attrs{{"group", Attribute::Int(2)},
                                           {"strides", Ints({2, 1})},
                                           {"dilations", Ints({1, 2})},
                                           {"pads", Ints({1, 0, 2, 1})}};
    // out = floor((in + pads - ext) / s) + 1: H (9+3-3)/2+1 = 5, W (8+1-3)/1+1 = 7.
    Tensor ref = RefConv(x, w, b, false, 2, {2, 1}, {1, 2}, {1, 0}, {5, 7});
    ExpectClose(RunOp("Conv", {x, w, b}, attrs)[0], ref, 1e-4, 1e-5);
  }
}

TEST(LinalgOps, ConvAutoPadSameLowerAnd1DAnd3D) {
  Tensor x = RandomTensor(DataType::kFloat32, {1, 2, 7, 6}), w = RandomTensor(DataType::kFloat32, {3, 2, 4, 3});
  // SAME_LOWER, stride 2: out = ceil(in/2) = 4, 3; total pads 3 (H: 3*2+4-7) and 1 (W: 2*2+3-6), extra at begin.
  Tensor y = RunOp("Conv", {x, w}, {{"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Ints({2, 2})}})[0];
  ExpectClose(y, RefConv(x, w, Tensor(), false, 1, {2, 2}, {1, 1}, {2, 1}, {4, 3}), 1e-4, 1e-5);
  Tensor x1 = RandomTensor(DataType::kFloat32, {2, 3, 10}), w1 = RandomTensor(DataType::kFloat32, {4, 3, 3});
  ExpectClose(RunOp("Conv", {x1, w1}, {{"pads", Ints({1, 1})}, {"dilations", Ints({2})}})[0],
              RefConv(x1, w1, Tensor(), false, 1, {1}, {2}, {1}, {8}), 1e-4, 1e-5);
  Tensor x3 = RandomTensor(DataType::kFloat32, {1, 2, 4, 5, 3}), w3 = RandomTensor(DataType::kFloat32, {2, 2, 2, 3, 2});
  Tensor b3 = RandomTensor(DataType::kFloat32, {2});
  ExpectClose(RunOp("Conv", {x3, w3, b3}, {{"auto_pad", Attribute::String("VALID")}})[0],
              RefConv(x3, w3, b3, false, 1, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {3, 3, 2}), 1e-4, 1e-5);
}

TEST(LinalgOps, ConvTransposeOutputPaddingGroupAndOutputShape) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 4, 3, 4}), w = RandomTensor(DataType::kFloat32, {4, 3, 3, 2});
  Tensor b = RandomTensor(DataType::kFloat32, {6});
  // out = (in-1)*s + op + ext - pads: H 2*2+1+3-1-0 = 7, W 3*3+0+2-0-1 = 10.
  Tensor y = RunOp("ConvTranspose", {x, w, b},
                   {{"group", Attribute::Int(2)},
                    {"strides", Ints({2, 3})},
                    {"output_padding", Ints({1, 0})},
                    {"pads", Ints({1, 0, 0, 1})}})[0];
  ExpectClose(y, RefConv(x, w, b, true, 2, {2, 3}, {1, 1}, {1, 0}, {7, 10}), 1e-4, 1e-5);
  // output_shape larger than the natural size: the extra rows get only the bias.
  Tensor x2 = RandomTensor(DataType::kFloat32, {1, 1, 3, 3}), w2 = RandomTensor(DataType::kFloat32, {1, 2, 3, 3});
  Tensor y2 = RunOp("ConvTranspose", {x2, w2}, {{"strides", Ints({3, 2})}, {"output_shape", Ints({10, 8})}})[0];
  ExpectClose(y2, RefConv(x2, w2, Tensor(), true, 1, {3, 2}, {1, 1}, {0, 0}, {10, 8}), 1e-4, 1e-5);
}

// 2-D pool reference with explicit pads; kind 0 max (with flattened indices), 1 avg.
std::pair<Tensor, Tensor> RefPool2D(const Tensor& x, int kind, std::vector<int64_t> k, std::vector<int64_t> s,
                                    std::vector<int64_t> pads, std::vector<int64_t> out, bool include_pad) {
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
  Tensor y(x.dtype(), {n, c, out[0], out[1]}), idx(DataType::kInt64, {n, c, out[0], out[1]});
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t oh = 0; oh < out[0]; ++oh)
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double best = -INFINITY, sum = 0;
        int64_t bi = -1, cnt = 0, cnt_pad = 0;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            const int64_t ih = oh * s[0] - pads[0] + i, iw = ow * s[1] - pads[1] + j;
            if (ih < h + pads[2] && iw < w + pads[3]) ++cnt_pad;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = x.GetDouble((p * h + ih) * w + iw);
            ++cnt;
            sum += v;
            if (v > best) best = v, bi = (p * h + ih) * w + iw;
          }
        const int64_t o = (p * out[0] + oh) * out[1] + ow;
        y.SetDouble(o, kind == 0 ? best : sum / (include_pad ? cnt_pad : cnt));
        idx.SetDouble(o, static_cast<double>(bi));
      }
  return {y, idx};
}

TEST(LinalgOps, MaxPoolIndicesCeilModeAndAveragePoolPads) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 7, 6});
  // ceil_mode: H ceil((7+1-3)/2)+1 = 4, W ceil((6+1-3)/2)+1 = 3.
  auto outs = RunOp("MaxPool", {x},
                    {{"kernel_shape", Ints({3, 3})},
                     {"strides", Ints({2, 2})},
                     {"pads", Ints({1, 1, 0, 0})},
                     {"ceil_mode", Attribute::Int(1)}},
                    2, 12);
  auto [ry, ri] = RefPool2D(x, 0, {3, 3}, {2, 2}, {1, 1, 0, 0}, {4, 3}, false);
  ExpectClose(outs[0], ry, 0, 0);
  ExpectClose(outs[1], ri, 0, 0);
  for (int include = 0; include < 2; ++include) {
    Tensor a = RunOp("AveragePool", {x},
                     {{"kernel_shape", Ints({3, 2})},
                      {"pads", Ints({1, 1, 1, 1})},
                      {"count_include_pad", Attribute::Int(include)}})[0];
    ExpectClose(a, RefPool2D(x, 1, {3, 2}, {1, 1}, {1, 1, 1, 1}, {7, 7}, include).first, 1e-5, 1e-6);
  }
}

TEST(LinalgOps, GlobalPoolsAndLpPool) {
  Tensor x = RandomTensor(DataType::kFloat64, {2, 3, 4, 2, 3});
  Tensor avg = RunOp("GlobalAveragePool", {x})[0], mx = RunOp("GlobalMaxPool", {x})[0];
  ASSERT_EQ(avg.dims(), (std::vector<int64_t>{2, 3, 1, 1, 1}));
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0, m = -INFINITY;
    for (int64_t i = 0; i < 24; ++i) s += x.GetDouble(p * 24 + i), m = std::max(m, x.GetDouble(p * 24 + i));
    EXPECT_NEAR(avg.GetDouble(p), s / 24, 1e-12);
    EXPECT_EQ(mx.GetDouble(p), m);
  }
  Tensor x2 = RandomTensor(DataType::kFloat32, {1, 2, 4, 4});
  Tensor lp = RunOp("LpPool", {x2}, {{"kernel_shape", Ints({2, 2})}, {"strides", Ints({2, 2})}})[0];
  ASSERT_EQ(lp.dims(), (std::vector<int64_t>{1, 2, 2, 2}));
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t oh = 0; oh < 2; ++oh)
      for (int64_t ow = 0; ow < 2; ++ow) {
        double s = 0;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) s += std::pow(x2.GetDouble((p * 4 + oh * 2 + i) * 4 + ow * 2 + j), 2);
        EXPECT_NEAR(lp.GetDouble((p * 2 + oh) * 2 + ow), std::sqrt(s), 1e-5);
      }
}

TEST(LinalgOps, EinsumEquations) {
  struct Case {
    std::string eq, ref_eq;
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<Case> cases = {
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"ij->ji", "ij->ji", {{3, 4}}},
      {"ij->i", "ij->i", {{3, 4}}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}},
      {"...ij,...jk->...ik", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"ii->i", "ii->i", {{4, 4}}},
      {"bii->b", "bii->b", {{3, 4, 4}}},
      {"ij,jk", "ij,jk->ik", {{3, 4}, {4, 2}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"bn,anm,bm->ba", "bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
      {"i,i", "i,i->", {{6}, {6}}},
      {"ijk->", "ijk->", {{2, 3, 4}}},
      {"ij,ij->ij", "ij,ij->ij", {{3, 4}, {3, 4}}},
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kInt64}) {
    for (const auto& c : cases) {
      std::vector<Tensor> ins;
      for (const auto& s : c.shapes) ins.push_back(RandomTensor(t, s, -4, 4));
      SCOPED_TRACE(DataTypeName(t) + " " + c.eq);
      ExpectClose(RunOp("Einsum", ins, {{"equation", Attribute::String(c.eq)}}, 1, 12)[0], RefEinsum(c.ref_eq, ins, t),
                  1e-5, 1e-5);
    }
  }
}

template <typename F>
void ExpectErrorNaming(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const UnsupportedError& e) {
    ADD_FAILURE() << "got UnsupportedError instead of Error: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node"), std::string::npos) << e.what();
  }
}

TEST(LinalgOps, UserErrorsNameTheNode) {
  Tensor a = RandomTensor(DataType::kFloat32, {3, 4}), b = RandomTensor(DataType::kFloat32, {5, 2});
  ExpectErrorNaming([&] { RunOp("MatMul", {a, b}); }, "MatMul");
  ExpectErrorNaming(
      [&] {
        RunOp("Gemm", {a, RandomTensor(DataType::kFloat32, {4, 2}), RandomTensor(DataType::kFloat32, {3, 3})});
      },
      "broadcast");
  Tensor x = RandomTensor(DataType::kFloat32, {1, 3, 5, 5}), w = RandomTensor(DataType::kFloat32, {2, 2, 3, 3});
  ExpectErrorNaming([&] { RunOp("Conv", {x, w}); }, "channels");
  ExpectErrorNaming([&] { RunOp("Einsum", {a, b}, {{"equation", Attribute::String("ij,jk->ik")}}, 1, 12); }, "label");
  ExpectErrorNaming([&] { RunOp("Einsum", {a}, {{"equation", Attribute::String("ijk->i")}}, 1, 12); }, "rank");
  ExpectErrorNaming([&] { RunOp("MaxPool", {x}, {{"kernel_shape", Ints({7, 7})}}); }, "too small");
}

// W as an initializer: the convolution runs in oneDNN's blocked layouts (W reordered once, X and Y around each
// call). Channel counts that block (multiples of 8 and 16) and ones that do not, grouped and plain, with and
// without bias, 1-D/2-D/3-D, against the double reference.
TEST(LinalgOps, ConvWithConstantWeightsInBlockedLayouts) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t group;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 16, 9, 11}, {32, 16, 3, 3}, 1, true}, {{1, 3, 12, 10}, {8, 3, 3, 3}, 1, false},
      {{2, 16, 7, 7}, {16, 8, 3, 3}, 2, true},   {{2, 8, 7, 7}, {8, 1, 3, 3}, 8, true},
      {{1, 16, 20}, {24, 16, 5}, 1, true},       {{1, 8, 5, 6, 4}, {16, 8, 3, 3, 3}, 1, false}};
  for (const Case& c : cases) {
    const size_t rank = c.x.size() - 2;
    Tensor x = RandomTensor(DataType::kFloat32, c.x), w = RandomTensor(DataType::kFloat32, c.w);
    Tensor b = c.bias ? RandomTensor(DataType::kFloat32, {c.w[0]}) : Tensor();
    std::vector<int64_t> ones(rank, 1), pads(rank, 1), out;
    for (size_t d = 0; d < rank; ++d) out.push_back(c.x[2 + d] + 2 - c.w[2 + d] + 1);
    Tensor ref = RefConv(x, w, b, false, c.group, ones, ones, pads, out);
    std::vector<Tensor> ins = {x, w};
    if (c.bias) ins.push_back(b);
    Tensor y =
        RunOp("Conv", ins, {{"group", Attribute::Int(c.group)}, {"pads", Ints(std::vector<int64_t>(2 * rank, 1))}}, 1,
              17, /*constant_inputs=*/{1, 2})[0];
    ExpectClose(y, ref, 1e-4, 1e-5);
  }
}

}  // namespace
}  // namespace ot
