// Greedy (best-path) decoding of CTC logits and the error rates `--eval-data` reports with `--loss ctc`: the arg-max
// class of each frame up to the sample's length, repeats merged, blanks dropped; the token error rate is the total
// Levenshtein distance between the decoded and the true label sequences over the total label length, the word error
// rate the same over words (a vocabulary maps ids to symbols; the symbol `<space>` separates words).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace ot {

// Edit distance (insertions, deletions, substitutions) between two sequences.
int64_t EditDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Sample b's best path: logits [frames, batch, classes] (batch_major: [batch, frames, classes]), `frames` of them.
std::vector<int64_t> GreedyDecode(const Tensor& logits, bool batch_major, int64_t b, int64_t frames, int64_t blank);

// The words of a label sequence: ids mapped through `vocab`, split at `<space>` (ids outside the vocabulary are
// words of their own, "#id"); each word interned in `dict` (so words compare as ids).
std::vector<int64_t> Words(const std::vector<int64_t>& ids, const std::vector<std::string>& vocab,
                           std::vector<std::string>& dict);

// Running totals of the error rates over batches.
struct CtcErrorCounts {
  int64_t token_edits = 0, tokens = 0, word_edits = 0, words = 0;
  // Adds a batch: logits as above, labels [batch, width] and the two lengths [batch] (int64).
  void Add(const Tensor& logits, bool batch_major, int64_t blank, const Tensor& labels, const Tensor& logit_lengths,
           const Tensor& label_lengths, const std::vector<std::string>& vocab);
  double token_error_rate() const { return tokens ? static_cast<double>(token_edits) / tokens : -1; }
  double word_error_rate() const { return words ? static_cast<double>(word_edits) / words : -1; }

 private:
  std::vector<std::string> dict_;
};

}  // namespace ot
