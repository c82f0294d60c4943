#include "training/ctc_decode.h"

#include <algorithm>

#include "graph/error.h"

namespace ot {

int64_t EditDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<int64_t> GreedyDecode(const Tensor& logits, bool batch_major, int64_t b, int64_t frames, int64_t blank) {
  const auto& d = logits.dims();
  const int64_t T = batch_major ? d[1] : d[0], B = batch_major ? d[0] : d[1], C = d[2];
  std::vector<int64_t> out;
  int64_t last = -1;
  for (int64_t t = 0; t < std::min(frames, T); ++t) {
    const int64_t row = (batch_major ? b * T + t : t * B + b) * C;
    int64_t best = 0;
    double bv = logits.GetDouble(row);
    for (int64_t c = 1; c < C; ++c) {
      const double v = logits.GetDouble(row + c);
      if (v > bv) bv = v, best = c;
    }
    if (best != blank && best != last) out.push_back(best);
    last = best;
  }
  return out;
}

std::vector<int64_t> Words(const std::vector<int64_t>& ids, const std::vector<std::string>& vocab,
                           std::vector<std::string>& dict) {
  std::vector<int64_t> words;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    auto it = std::find(dict.begin(), dict.end(), word);
    words.push_back(it - dict.begin());
    if (it == dict.end()) dict.push_back(word);
    word.clear();
  };
  for (int64_t id : ids) {
    const bool known = id >= 0 && id < static_cast<int64_t>(vocab.size());
    const std::string sym = known ? vocab[static_cast<size_t>(id)] : "#" + std::to_string(id);
    if (sym == "<space>" || !known) flush();
    if (sym == "<space>") continue;
    word += sym;
    if (!known) flush();
  }
  flush();
  return words;
}

void CtcErrorCounts::Add(const Tensor& logits, bool batch_major, int64_t blank, const Tensor& labels,
                         const Tensor& logit_lengths, const Tensor& label_lengths,
                         const std::vector<std::string>& vocab) {
  if (logits.rank() != 3 || labels.rank() != 2) throw Error("CTC decoding: logits must have rank 3 and labels rank 2");
  const int64_t B = batch_major ? logits.dims()[0] : logits.dims()[1];
  const int64_t width = labels.dims()[1];
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = std::clamp<int64_t>(label_lengths.GetInt64(b), 0, width);
    std::vector<int64_t> truth(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) truth[static_cast<size_t>(i)] = labels.GetInt64(b * width + i);
    const std::vector<int64_t> got = GreedyDecode(logits, batch_major, b, logit_lengths.GetInt64(b), blank);
    token_edits += EditDistance(got, truth);
    tokens += n;
    if (!vocab.empty()) {
      const std::vector<int64_t> tw = Words(truth, vocab, dict_);
      word_edits += EditDistance(Words(got, vocab, dict_), tw);
      words += static_cast<int64_t>(tw.size());
    }
  }
}

}  // namespace ot
