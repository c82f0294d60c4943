// RNN, GRU and LSTM through the executor (the kernel itself: tests/cpu_ops/rnn_test.cc): layout 1 gives layout 0's
// numbers transposed, optional inputs and outputs, and the errors -- activations other than the defaults refused as
// unsupported, operand dims named.
#include <string>
#include <vector>

#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::RandomTensor;
using test::RunOp;

Tensor Lens(std::vector<int32_t> v) {
  Tensor t(DataType::kInt32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

// [a, b, rest...] -> [b, a, rest...] for a tensor of dims d (the first two axes swapped).
Tensor SwapFirstTwo(const Tensor& x) {
  std::vector<int64_t> d = x.dims();
  std::swap(d[0], d[1]);
  Tensor y(x.dtype(), d);
  int64_t inner = 1;
  for (size_t i = 2; i < d.size(); ++i) inner *= d[i];
  for (int64_t a = 0; a < d[1]; ++a)
    for (int64_t b = 0; b < d[0]; ++b)
      for (int64_t k = 0; k < inner; ++k)
        y.SetDouble((b * d[1] + a) * inner + k, x.GetDouble((a * d[0] + b) * inner + k));
  return y;
}

// Y [S, D, N, H] (layout 0) -> [N, S, D, H] (layout 1).
Tensor BatchMajorY(const Tensor& y) {
  const std::vector<int64_t>& d = y.dims();
  const int64_t S = d[0], D = d[1], N = d[2], H = d[3];
  Tensor r(y.dtype(), {N, S, D, H});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t e = 0; e < D; ++e)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          r.SetDouble(((n * S + s) * D + e) * H + h, y.GetDouble(((s * D + e) * N + n) * H + h));
  return r;
}

TEST(RecurrentOps, BatchMajorLayoutIsTheTimeMajorOneTransposed) {
  const int64_t S = 4, N = 3, I = 5, H = 2;
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    const int64_t G = std::string(op) == "LSTM" ? 4 : std::string(op) == "GRU" ? 3 : 1;
    Tensor x = RandomTensor(DataType::kFloat32, {S, N, I});
    Tensor w = RandomTensor(DataType::kFloat32, {2, G * H, I}), r = RandomTensor(DataType::kFloat32, {2, G * H, H});
    Tensor b = RandomTensor(DataType::kFloat32, {2, 2 * G * H}), h0 = RandomTensor(DataType::kFloat32, {2, N, H});
    const Tensor lens = Lens({4, 2, 0});
    std::map<std::string, Attribute> a{{"direction", Attribute::String("bidirectional")},
                                       {"hidden_size", Attribute::Int(H)}};
    const int nout = G == 4 ? 3 : 2;
    std::vector<Tensor> ins0{x, w, r, b, lens, h0};
    auto t = RunOp(op, ins0, a, nout, 14);
    ASSERT_EQ(t[0].dims(), (std::vector<int64_t>{S, 2, N, H})) << op;
    a["layout"] = Attribute::Int(1);
    std::vector<Tensor> ins1{SwapFirstTwo(x), w, r, b, lens, SwapFirstTwo(h0)};
    auto m = RunOp(op, ins1, a, nout, 14);
    ASSERT_EQ(m[0].dims(), (std::vector<int64_t>{N, S, 2, H})) << op;
    test::ExpectClose(m[0], BatchMajorY(t[0]), 0, 0);
    test::ExpectClose(m[1], SwapFirstTwo(t[1]), 0, 0);
    if (nout == 3) test::ExpectClose(m[2], SwapFirstTwo(t[2]), 0, 0);
    // The sequence of length 0: Y all zero, Y_h its initial state.
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t j = 0; j < H; ++j) EXPECT_EQ(t[0].GetDouble(((s * 2 + d) * N + 2) * H + j), 0.0) << op;
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t j = 0; j < H; ++j)
        EXPECT_EQ(t[1].GetDouble((d * N + 2) * H + j), h0.GetDouble((d * N + 2) * H + j)) << op;
  }
}

TEST(RecurrentOps, OtherActivationsAreRefusedAsUnsupported) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 1, 3});
  Tensor w = RandomTensor(DataType::kFloat32, {1, 4, 3}), r = RandomTensor(DataType::kFloat32, {1, 4, 4});
  Attribute acts;
  acts.kind = Attribute::Kind::kStrings;
  acts.strings = {"Relu"};
  try {
    RunOp("RNN", {x, w, r}, {{"hidden_size", Attribute::Int(4)}, {"activations", acts}}, 1, 14);
    ADD_FAILURE() << "Relu accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("activations [Relu] are not supported (only the defaults [Tanh])"),
              std::string::npos)
        << e.what();
  }
  acts.strings = {"tanh"};  // the default, spelt another way
  EXPECT_NO_THROW(RunOp("RNN", {x, w, r}, {{"hidden_size", Attribute::Int(4)}, {"activations", acts}}, 1, 14));
}

TEST(RecurrentOps, WrongOperandDimsNameTheOperand) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 1, 3});
  Tensor w = RandomTensor(DataType::kFloat32, {1, 16, 3}), r = RandomTensor(DataType::kFloat32, {1, 16, 4});
  try {
    RunOp("GRU", {x, w, r}, {{"hidden_size", Attribute::Int(4)}}, 1, 14);  // GRU wants 3 x 4 rows, not LSTM's 16
    ADD_FAILURE() << "16 rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("W"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GRU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
