// ONNX's recurrent layers -- RNN (tanh), GRU and LSTM -- forward, for every option ONNX defines with the default
// activations: one or both directions, per-sequence lengths, initial states, LSTM peepholes and input_forget, GRU
// linear_before_reset 0 and 1, clip, layout 0 (time-major) and 1 (batch-major).
//
// Gate order in W [dirs, G*hidden, input], R [dirs, G*hidden, hidden] and in each half of B [dirs, 2*G*hidden]
// (W's biases, then R's): LSTM i, o, f, c; GRU z, r, h; RNN one gate. P [dirs, 3*hidden]: i, o, f.
//   RNN   h' = tanh(x W^T + h R^T + Wb + Rb)
//   GRU   z = sigmoid(x Wz^T + h Rz^T + Wbz + Rbz), r likewise;
//         linear_before_reset 0: c = tanh(x Wh^T + (r * h) Rh^T + Rbh + Wbh), 1: tanh(x Wh^T + r * (h Rh^T + Rbh) +
//         Wbh); h' = (1 - z) * c + z * h
//   LSTM  i = sigmoid(x Wi^T + h Ri^T + Pi * c_prev + Wbi + Rbi), f likewise with Pf (input_forget: f = 1 - i),
//         g = tanh(x Wc^T + h Rc^T + Wbc + Rbc), c' = f * c_prev + i * g,
//         o = sigmoid(x Wo^T + h Ro^T + Po * c' + Wbo + Rbo), h' = o * tanh(c')
// clip > 0 clamps every gate's input to [-clip, clip] before its activation. A sequence of length L (lens) runs its
// steps 0..L-1 (the reverse direction from L-1 down to 0); Y is zero at its steps from L on, and Y_h, Y_c hold its
// state after its last step (the initial state when L is 0).
//
// Every sequence of every direction is independent: they run in parallel, each accumulating in float (double for
// double) and keeping its state there; outputs are rounded to T once.
#pragma once
#include <cstdint>

namespace ot::cpu {

enum class RnnCell { kRnn, kGru, kLstm };

struct RnnSpec {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int directions = 1;                // 1, or 2 (bidirectional: forward, then reverse)
  bool reverse = false;              // one direction, run from each sequence's end
  bool batch_major = false;          // layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden], states
                                     // [batch, dirs, hidden]; layout 0: X [seq, batch, input], Y [seq, dirs, batch,
                                     // hidden], states [dirs, batch, hidden]
  float clip = 0;                    // > 0: gate inputs clamped to [-clip, clip]
  bool input_forget = false;         // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  int gates() const { return cell == RnnCell::kLstm ? 4 : cell == RnnCell::kGru ? 3 : 1; }
};

// Throws std::invalid_argument naming the first length outside [0, seq] (lens may be null: none).
void CheckRnnLengths(const RnnSpec& s, const int32_t* lens);

// b, lens, h0, c0 and p may be null (zeros; every sequence of length seq). Each output may be null (not computed).
// Throws std::invalid_argument for a length outside [0, seq], naming the batch index.
template <typename T>
void RnnForward(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const int32_t* lens, const T* h0,
                const T* c0, const T* p, T* y, T* y_h, T* y_c);

// The gradients of a scalar loss through RnnForward (back-propagation through time; the forward is recomputed, so
// nothing is saved between the two), given those of its outputs: dy, dy_h, dy_c (each may be null: zero). Writes
// dx, dw, dr, db [dirs, 2*G*hidden], dh0, dc0, dp (each may be null: not computed) in the operands' layouts. Where
// clip clamps a gate's input the gradient through it is zero. The parameters' gradients are summed over the
// sequences in a fixed order (the same result on every run and thread count).
template <typename T>
void RnnBackward(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const int32_t* lens, const T* h0,
                 const T* c0, const T* p, const T* dy, const T* dy_h, const T* dy_c, T* dx, T* dw, T* dr, T* db, T* dh0,
                 T* dc0, T* dp);

}  // namespace ot::cpu
