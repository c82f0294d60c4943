// training/ctc_decode: the best path of hand-written logits (repeats merged, blanks dropped, frames past the length
// ignored, both layouts), the edit distance against known pairs, words split at <space>, and the error totals.
#include "training/ctc_decode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ot {
namespace {

// Logits whose arg-max at frame t of sample b is path[b][t]; layout tbc or btc.
Tensor PathLogits(const std::vector<std::vector<int64_t>>& path, int64_t classes, bool batch_major) {
  const int64_t B = static_cast<int64_t>(path.size()), T = static_cast<int64_t>(path[0].size());
  std::vector<float> v(static_cast<size_t>(T * B * classes));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i % 7);  // below the 5 of the arg-max
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      v[static_cast<size_t>((batch_major ? b * T + t : t * B + b) * classes + path[b][t])] = 5.f;
  return Tensor::FromFloat(v, batch_major ? std::vector<int64_t>{B, T, classes} : std::vector<int64_t>{T, B, classes});
}

TEST(CtcDecode, EditDistance) {
  EXPECT_EQ(EditDistance({}, {}), 0);
  EXPECT_EQ(EditDistance({1, 2, 3}, {}), 3);
  EXPECT_EQ(EditDistance({}, {4, 5}), 2);
  EXPECT_EQ(EditDistance({1, 2, 3}, {1, 3}), 1);           // a deletion
  EXPECT_EQ(EditDistance({1, 2, 3}, {1, 4, 3}), 1);        // a substitution
  EXPECT_EQ(EditDistance({1, 2, 3, 4}, {2, 1, 4, 3}), 3);  // k-i-t-t-e-n style: no transpositions
  EXPECT_EQ(EditDistance({5, 6, 7, 8, 9}, {5, 7, 9, 10}), 3);
}

TEST(CtcDecode, GreedyMergesRepeatsDropsBlanksAndStopsAtTheLength) {
  for (bool bm : {false, true}) {
    // Sample 0: 1 1 0 1 2 2 -> 1 1 2; sample 1: 0 3 3 3 0 0 -> 3, but with 2 frames -> 3.
    const Tensor lg = PathLogits({{1, 1, 0, 1, 2, 2}, {0, 3, 3, 3, 0, 2}}, 4, bm);
    EXPECT_EQ(GreedyDecode(lg, bm, 0, 6, 0), (std::vector<int64_t>{1, 1, 2}));
    EXPECT_EQ(GreedyDecode(lg, bm, 1, 6, 0), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(GreedyDecode(lg, bm, 1, 2, 0), (std::vector<int64_t>{3}));
    EXPECT_EQ(GreedyDecode(lg, bm, 0, 0, 0), (std::vector<int64_t>{}));
    EXPECT_EQ(GreedyDecode(lg, bm, 0, 6, 3), (std::vector<int64_t>{1, 0, 1, 2}));  // another blank id
  }
}

TEST(CtcDecode, WordsSplitAtSpace) {
  const std::vector<std::string> vocab{"<blank>", "<space>", "o", "n", "e", "t", "w"};
  std::vector<std::string> dict;
  const std::vector<int64_t> one_two = Words({2, 3, 4, 1, 5, 6, 2}, vocab, dict);  // "one two"
  ASSERT_EQ(one_two.size(), 2u);
  EXPECT_EQ(dict[static_cast<size_t>(one_two[0])], "one");
  EXPECT_EQ(dict[static_cast<size_t>(one_two[1])], "two");
  EXPECT_EQ(Words({1, 1, 2, 3, 4, 1}, vocab, dict), (std::vector<int64_t>{one_two[0]}));  // extra spaces
  EXPECT_EQ(Words({2, 3, 4, 9}, vocab, dict).size(), 2u);  // an id outside the vocabulary: its own word
}

TEST(CtcDecode, ErrorTotalsOverBatches) {
  const std::vector<std::string> vocab{"<blank>", "<space>", "a", "b"};
  // Sample 0 decodes to "a b" (2 1 3) against truth "a b": 0 errors; sample 1 decodes "a" (2) against "b b" (3 1 3).
  const Tensor lg = PathLogits({{2, 0, 1, 3, 3}, {2, 2, 0, 0, 0}}, 4, false);
  const Tensor labels = Tensor::FromInt64({2, 1, 3, 3, 1, 3}, {2, 3});
  CtcErrorCounts c;
  c.Add(lg, false, 0, labels, Tensor::FromInt64({5, 5}, {2}), Tensor::FromInt64({3, 3}, {2}), vocab);
  EXPECT_EQ(c.token_edits, 3);  // "a" vs "b <space> b": a substitution and two insertions
  EXPECT_EQ(c.tokens, 6);
  EXPECT_EQ(c.word_edits, 2);  // ["a"] vs ["b", "b"]
  EXPECT_EQ(c.words, 4);
  EXPECT_DOUBLE_EQ(c.token_error_rate(), 0.5);
  EXPECT_DOUBLE_EQ(c.word_error_rate(), 0.5);
  CtcErrorCounts none;
  EXPECT_LT(none.token_error_rate(), 0);
}

}  // namespace
}  // namespace ot
