// The CTC (connectionist temporal classification) loss with PyTorch's F.ctc_loss semantics, on unnormalized logits:
// a log-softmax over the classes is applied inside (in double), so logits and log-probabilities both work.
//
// logits [frames, batch, classes] (batch_major: [batch, frames, classes]); labels [batch, max_labels] int64, row b
// using its first label_lens[b] entries (the rest may hold anything); logit_lens[b] frames of sample b count (frames
// from there on are ignored and get a zero gradient). Per sample, with the labels l extended to l' = blank, l1,
// blank, l2, ..., blank (2L+1 states), the forward variables in log space
//   alpha[0][0] = lp[0][blank], alpha[0][1] = lp[0][l1],
//   alpha[t][s] = lp[t][l's] + lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2] if l's != blank and l's != l's-2)
// give nll = -lse(alpha[T-1][2L], alpha[T-1][2L-1]); the backward variables beta likewise from the end, and
//   d nll / d logits[t][c] = softmax[t][c] - sum over s with l's = c of exp(alpha[t][s] + beta[t][s] - lp[t][c] + nll)
// (the derivative of -log p through the log-softmax). A sample with no frames has nll 0 without labels, else
// infinity. An infinite nll (labels that cannot fit the frames: T < L + the number of repeated neighbours) is 0 with
// zero_infinity, its gradient too.
#pragma once
#include <cstdint>

namespace ot::cpu {

struct CtcSpec {
  int64_t frames = 0, batch = 0, classes = 0, max_labels = 0;
  bool batch_major = false;
  int64_t blank = 0;
  bool zero_infinity = false;
};

// The frames a sample needs to emit `n` labels: n plus one blank between each pair of equal neighbours.
int64_t CtcMinFrames(const int64_t* labels, int64_t n);

// Per-sample negative log-likelihood nll [batch]. Samples run in parallel. Throws std::invalid_argument naming the
// sample for a length outside [0, frames] / [0, max_labels], or a label outside [0, classes) or equal to blank.
template <typename T>
void CtcLoss(const CtcSpec& s, const T* logits, const int64_t* labels, const int64_t* logit_lens,
             const int64_t* label_lens, double* nll);

// dlogits = weight[b] * d nll[b] / d logits for every element (zero past each sample's frames and for an infinite
// nll under zero_infinity). The same checks as CtcLoss.
template <typename T>
void CtcLossGrad(const CtcSpec& s, const T* logits, const int64_t* labels, const int64_t* logit_lens,
                 const int64_t* label_lens, const double* weight, T* dlogits);

}  // namespace ot::cpu
