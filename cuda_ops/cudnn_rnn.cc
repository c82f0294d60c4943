// See cudnn_rnn.h. One CudnnRnn holds cuDNN's RNN and dropout descriptors (dropout 0: a single layer has none), the
// weight-space layout and the temp-space sizes; the RNN data and state descriptors are made per call (they carry
// the call's lengths). The workspace is carved into the regions of Regions() below, the same for the size query
// and the launch.
#include "cuda_ops/cudnn_rnn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "cuda_ops/cudnn_util.h"
#include "cuda_ops/data_kernels.h"

namespace ot::cuda {

using cudnn_detail::Align256;
using cudnn_detail::Check;
using cudnn_detail::Lease;
using cudnn_detail::TensorDesc;

namespace {

const char* CellName(RnnCellKind c) {
  return c == RnnCellKind::kLstm ? "LSTM" : c == RnnCellKind::kGru ? "GRU" : "RNN";
}

[[noreturn]] void Bad(const CudnnRnnDesc& d, const std::string& why) {
  throw std::invalid_argument("ot::cuda::CudnnRnn: " + why + " in " + ToString(d));
}

void CudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("ot::cuda::CudnnRnn: ") + what + ": " + cudaGetErrorString(e));
}

// An RNN data descriptor made per call (it holds the call's lengths).
struct RnnDataDesc {
  cudnnRNNDataDescriptor_t d = nullptr;
  RnnDataDesc() { Check(cudnnCreateRNNDataDescriptor(&d), "cudnnCreateRNNDataDescriptor"); }
  ~RnnDataDesc() {
    if (d) cudnnDestroyRNNDataDescriptor(d);
  }
  RnnDataDesc(const RnnDataDesc&) = delete;
  RnnDataDesc& operator=(const RnnDataDesc&) = delete;
  void Set(cudnnDataType_t t, bool batch_major, int64_t seq, int64_t batch, int64_t vec, const int* lens,
           const std::string& desc) {
    // Zero bytes: 0 in every data type (the fill of Y's padded steps).
    static double zero = 0.0;
    Check(cudnnSetRNNDataDescriptor(
              d, t, batch_major ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
              static_cast<int>(seq), static_cast<int>(batch), static_cast<int>(vec), lens, &zero),
          "cudnnSetRNNDataDescriptor", desc);
  }
};

// Workspace regions of a forward (grad = false) or backward call; each 256-byte aligned.
enum Region {
  kSpace,    // the packed weights
  kDSpace,   // their gradient (backward)
  kLens,     // cuDNN's device lengths
  kXRev,     // X reversed per sequence (reverse)
  kY,        // cuDNN's Y
  kDY,       // cuDNN's dY (backward)
  kDX,       // cuDNN's dX (backward)
  kHx,       // initial states in cuDNN's layout (layout 1, two directions)
  kCx,       //
  kHy,       // final states in cuDNN's layout (forward) / dY_h, dY_c in cuDNN's layout (backward)
  kCy,       //
  kDhyZ,     // dY_h, dY_c with the length-0 sequences' entries zeroed (backward)
  kDcyZ,     //
  kDhx,      // dInitial_h, dInitial_c in cuDNN's layout (backward)
  kDcx,      //
  kCudnnWs,  // cuDNN's workspace
  kReserve,  // cuDNN's reserve space (backward)
  kRegions
};

struct Regions {
  size_t at[kRegions] = {}, size[kRegions] = {}, total = 0;
};

}  // namespace

// ---- desc and weight mapping ------------------------------------------------------------------------------------

std::string ToString(const CudnnRnnDesc& d) {
  std::ostringstream s;
  s << "CudnnRnnDesc{" << CellName(d.cell) << " " << cudnn_detail::TypeName(d.type) << (d.tf32 ? " tf32" : "")
    << " seq=" << d.seq << " batch=" << d.batch << " input=" << d.input << " hidden=" << d.hidden
    << " dirs=" << d.directions << (d.reverse ? " reverse" : "") << " layout=" << (d.batch_major ? 1 : 0) << "}";
  return s.str();
}

void ValidateCudnnRnn(const CudnnRnnDesc& d) {
  if (d.seq <= 0 || d.batch <= 0 || d.input <= 0 || d.hidden <= 0) Bad(d, "sizes must be positive");
  if (d.directions != 1 && d.directions != 2) Bad(d, "directions must be 1 or 2");
  if (d.reverse && d.directions != 1) Bad(d, "reverse is a single direction");
  const int64_t gh = static_cast<int64_t>(d.gates()) * d.hidden;
  for (int64_t v : {d.seq, d.batch, d.input, d.hidden, gh, 2 * d.directions * d.hidden, d.seq * d.batch,
                    d.seq * d.batch * d.directions * d.hidden, d.seq * d.batch * d.input})
    if (!cudnn_detail::FitsInt(v)) Bad(d, "a size does not fit cuDNN's int arguments");
}

int OnnxGateOfCudnnLinLayer(RnnCellKind cell, int lin) {
  const int g = cell == RnnCellKind::kLstm ? 4 : cell == RnnCellKind::kGru ? 3 : 1;
  if (lin < 0 || lin >= 2 * g) throw std::invalid_argument("ot::cuda::rnn: linear layer id out of range");
  const int k = lin % g;
  // cuDNN LSTM i, f, g, o -> ONNX i, o, f, c (i 0, o 1, f 2, c 3); cuDNN GRU r, z, h -> ONNX z, r, h.
  static const int kLstm[4] = {0, 2, 3, 1};
  static const int kGru[3] = {1, 0, 2};
  return cell == RnnCellKind::kLstm ? kLstm[k] : cell == RnnCellKind::kGru ? kGru[k] : 0;
}

std::vector<RnnWeightSegment> RnnWeightSegments(const CudnnRnnDesc& d, const std::vector<CudnnLinLayerPlace>& places,
                                                int64_t space_elems) {
  ValidateCudnnRnn(d);
  const int G = d.gates();
  const int64_t H = d.hidden, I = d.input, GH = G * H;
  if (places.size() != static_cast<size_t>(d.directions * 2 * G)) Bad(d, "wrong number of weight places");
  std::vector<RnnWeightSegment> segs;
  std::vector<std::pair<int64_t, int64_t>> regions;  // [begin, end) in the space
  for (int dir = 0; dir < d.directions; ++dir)
    for (int lin = 0; lin < 2 * G; ++lin) {
      const CudnnLinLayerPlace& p = places[static_cast<size_t>(dir * 2 * G + lin)];
      const int g = OnnxGateOfCudnnLinLayer(d.cell, lin);
      const bool input = lin < G;
      const int64_t cols = input ? I : H;
      if (p.matrix_count != H * cols || p.bias_count != H)
        Bad(d, "cuDNN's linear layer " + std::to_string(lin) + " of direction " + std::to_string(dir) + " has " +
                   std::to_string(p.matrix_count) + " weights and " + std::to_string(p.bias_count) +
                   " biases, expected " + std::to_string(H * cols) + " and " + std::to_string(H));
      RnnWeightSegment m;
      m.operand = input ? RnnOperand::kW : RnnOperand::kR;
      m.onnx_offset = (dir * GH + g * H) * cols;
      m.space_offset = p.matrix_offset;
      m.count = H * cols;
      RnnWeightSegment b;
      b.operand = RnnOperand::kB;
      b.onnx_offset = dir * 2 * GH + (input ? 0 : GH) + g * H;
      b.space_offset = p.bias_offset;
      b.count = H;
      for (const RnnWeightSegment* s : {&m, &b}) {
        if (s->space_offset < 0 || s->space_offset + s->count > space_elems)
          Bad(d, "a weight region lies outside cuDNN's weight space");
        regions.emplace_back(s->space_offset, s->space_offset + s->count);
        segs.push_back(*s);
      }
    }
  std::sort(regions.begin(), regions.end());
  for (size_t i = 1; i < regions.size(); ++i)
    if (regions[i].first < regions[i - 1].second) Bad(d, "two weight regions overlap in cuDNN's weight space");
  return segs;
}

void PackRnnWeightsHost(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* w, const void* r,
                        const void* b, void* space) {
  for (const RnnWeightSegment& s : segs) {
    const void* src = s.operand == RnnOperand::kW ? w : s.operand == RnnOperand::kR ? r : b;
    uint8_t* dst = static_cast<uint8_t*>(space) + static_cast<size_t>(s.space_offset) * esz;
    if (src)
      std::memcpy(dst, static_cast<const uint8_t*>(src) + static_cast<size_t>(s.onnx_offset) * esz,
                  static_cast<size_t>(s.count) * esz);
    else
      std::memset(dst, 0, static_cast<size_t>(s.count) * esz);
  }
}

void UnpackRnnWeightsHost(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* space, void* dw, void* dr,
                          void* db) {
  for (const RnnWeightSegment& s : segs) {
    void* dst = s.operand == RnnOperand::kW ? dw : s.operand == RnnOperand::kR ? dr : db;
    if (!dst) continue;
    std::memcpy(static_cast<uint8_t*>(dst) + static_cast<size_t>(s.onnx_offset) * esz,
                static_cast<const uint8_t*>(space) + static_cast<size_t>(s.space_offset) * esz,
                static_cast<size_t>(s.count) * esz);
  }
}

// ---- the plan -----------------------------------------------------------------------------------------------------

struct CudnnRnn::Impl {
  CudnnRnnDesc d;
  std::string name;
  size_t esz = 4;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t drop = nullptr;
  size_t space_bytes = 0;
  std::vector<RnnWeightSegment> segs;
  size_t infer_ws = 0, train_ws = 0, train_reserve = 0;  // cuDNN's temp sizes, every sequence at full length
  Regions fwd, bwd;

  ~Impl() {
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (drop) cudnnDestroyDropoutDescriptor(drop);
  }

  int64_t StateElems() const { return d.directions * d.batch * d.hidden; }

  Regions Layout(bool grad) const {
    Regions r;
    const size_t S = static_cast<size_t>(d.seq), N = static_cast<size_t>(d.batch), I = static_cast<size_t>(d.input),
                 DH = static_cast<size_t>(d.directions * d.hidden), st = static_cast<size_t>(StateElems()) * esz;
    const bool lstm = d.cell == RnnCellKind::kLstm;
    r.size[kSpace] = space_bytes;
    r.size[kDSpace] = grad ? space_bytes : 0;
    r.size[kLens] = N * sizeof(int32_t);
    r.size[kXRev] = d.reverse ? S * N * I * esz : 0;
    r.size[kY] = S * N * DH * esz;
    r.size[kDY] = grad ? S * N * DH * esz : 0;
    r.size[kDX] = grad ? S * N * I * esz : 0;
    r.size[kHx] = st;
    r.size[kCx] = lstm ? st : 0;
    r.size[kHy] = st;
    r.size[kCy] = lstm ? st : 0;
    r.size[kDhyZ] = grad ? st : 0;
    r.size[kDcyZ] = grad && lstm ? st : 0;
    r.size[kDhx] = grad ? st : 0;
    r.size[kDcx] = grad && lstm ? st : 0;
    r.size[kCudnnWs] = grad ? train_ws : infer_ws;
    r.size[kReserve] = grad ? train_reserve : 0;
    size_t at = 0;
    for (int i = 0; i < kRegions; ++i) {
      r.at[i] = at;
      at += Align256(r.size[i]);
    }
    r.total = at;
    return r;
  }

  // The lengths cuDNN is given: max(len, 1) (a length-0 sequence runs one step, then is fixed up), or seq.
  std::vector<int> HostLengths(const int32_t* host_lens, bool* any_zero) const {
    std::vector<int> v(static_cast<size_t>(d.batch), static_cast<int>(d.seq));
    *any_zero = false;
    if (!host_lens) return v;
    for (int64_t n = 0; n < d.batch; ++n) {
      const int32_t l = host_lens[n];
      if (l < 0 || l > d.seq)
        throw std::invalid_argument("sequence_lens[" + std::to_string(n) + "] = " + std::to_string(l) +
                                    " is outside [0, " + std::to_string(d.seq) + "]");
      if (l == 0) *any_zero = true;
      v[static_cast<size_t>(n)] = std::max(l, 1);
    }
    return v;
  }

  void SetData(RnnDataDesc& x, RnnDataDesc& y, const std::vector<int>& lens) const {
    x.Set(dtype, d.batch_major, d.seq, d.batch, d.input, lens.data(), name);
    y.Set(dtype, d.batch_major, d.seq, d.batch, d.directions * d.hidden, lens.data(), name);
  }
  void SetState(TensorDesc& h) const { h.Set(dtype, {d.directions, d.batch, d.hidden}, name); }

  // The temp sizes of a call's lengths, checked against the planned ones (full lengths).
  void CheckTemp(Lease& lease, cudnnForwardMode_t mode, RnnDataDesc& x, size_t* ws, size_t* reserve) const {
    Check(cudnnGetRNNTempSpaceSizes(lease.handle(), rnn, mode, x.d, ws, reserve), "cudnnGetRNNTempSpaceSizes", name);
    const bool train = mode == CUDNN_FWD_MODE_TRAINING;
    if (*ws > (train ? train_ws : infer_ws) || (train && *reserve > train_reserve))
      throw std::runtime_error(
          "ot::cuda::CudnnRnn: cuDNN asks more temp space for shorter sequences than for full "
          "ones in " +
          name);
  }

  // Operand `p` (ONNX states layout) in cuDNN's state layout: itself, or transposed into `buf` (layout 1, two
  // directions).
  const void* StatesIn(const void* p, void* buf, cudaStream_t st) const {
    if (!p || !(d.batch_major && d.directions == 2)) return p;
    Transpose(p, buf, esz, {d.batch, d.directions, d.hidden}, {1, 0, 2}, st);
    return buf;
  }
  // Copies cuDNN-layout states `src` to the ONNX operand `dst` (a transpose or nothing when dst == src).
  void StatesOut(const void* src, void* dst, cudaStream_t st) const {
    if (!dst || src == dst) return;
    if (d.batch_major && d.directions == 2) {
      Transpose(src, dst, esz, {d.directions, d.batch, d.hidden}, {1, 0, 2}, st);
      return;
    }
    CudaOk(cudaMemcpyAsync(dst, src, static_cast<size_t>(StateElems()) * esz, cudaMemcpyDeviceToDevice, st), "copy");
  }
  bool StatesDirect() const { return !(d.batch_major && d.directions == 2); }
};

namespace {

uint8_t* At(void* ws, const Regions& r, Region i) { return r.size[i] ? static_cast<uint8_t*>(ws) + r.at[i] : nullptr; }

}  // namespace

CudnnRnn::CudnnRnn(const CudnnRnnDesc& desc) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  ValidateCudnnRnn(desc);
  m.d = desc;
  m.name = ToString(desc);
  m.esz = FloatTypeSize(desc.type);
  m.dtype = cudnn_detail::DataType(desc.type);
  const int G = desc.gates();
  Lease lease(nullptr);
  Check(cudnnCreateRNNDescriptor(&m.rnn), "cudnnCreateRNNDescriptor", m.name);
  Check(cudnnCreateDropoutDescriptor(&m.drop), "cudnnCreateDropoutDescriptor", m.name);
  // Dropout 0: no states are needed (a single layer has no dropout anyway).
  Check(cudnnSetDropoutDescriptor(m.drop, lease.handle(), 0.0f, nullptr, 0, 0), "cudnnSetDropoutDescriptor", m.name);
  const cudnnRNNMode_t mode = desc.cell == RnnCellKind::kLstm  ? CUDNN_LSTM
                              : desc.cell == RnnCellKind::kGru ? CUDNN_GRU
                                                               : CUDNN_RNN_TANH;
  const cudnnMathType_t math = desc.type != FloatType::kF32 ? CUDNN_TENSOR_OP_MATH
                               : desc.tf32                  ? CUDNN_DEFAULT_MATH
                                                            : CUDNN_FMA_MATH;
  Check(cudnnSetRNNDescriptor_v8(m.rnn, CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS,
                                 desc.directions == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                 m.dtype, CUDNN_DATA_FLOAT, math, static_cast<int32_t>(desc.input),
                                 static_cast<int32_t>(desc.hidden), static_cast<int32_t>(desc.hidden), 1, m.drop,
                                 CUDNN_RNN_PADDED_IO_ENABLED),
        "cudnnSetRNNDescriptor_v8", m.name);
  Check(cudnnGetRNNWeightSpaceSize(lease.handle(), m.rnn, &m.space_bytes), "cudnnGetRNNWeightSpaceSize", m.name);
  if (m.space_bytes % m.esz) throw std::runtime_error("ot::cuda::CudnnRnn: odd weight space size in " + m.name);

  // Where each matrix and bias lives: cuDNN reports addresses inside a weight space, so give it a real one.
  void* base = nullptr;
  CudaOk(cudaMalloc(&base, m.space_bytes ? m.space_bytes : 1), "weight-space probe");
  std::vector<CudnnLinLayerPlace> places;
  try {
    TensorDesc md, bd;
    for (int dir = 0; dir < desc.directions; ++dir)
      for (int lin = 0; lin < 2 * G; ++lin) {
        void* maddr = nullptr;
        void* baddr = nullptr;
        Check(cudnnGetRNNWeightParams(lease.handle(), m.rnn, dir, m.space_bytes, base, lin, md.d, &maddr, bd.d, &baddr),
              "cudnnGetRNNWeightParams", m.name);
        auto count = [&](cudnnTensorDescriptor_t t) {
          cudnnDataType_t dt;
          int nb = 0, dims[8] = {}, strides[8] = {};
          Check(cudnnGetTensorNdDescriptor(t, 8, &dt, &nb, dims, strides), "cudnnGetTensorNdDescriptor", m.name);
          int64_t c = 1;
          for (int i = 0; i < nb; ++i) c *= dims[i];
          return c;
        };
        auto offset = [&](void* p) {
          const ptrdiff_t o = static_cast<uint8_t*>(p) - static_cast<uint8_t*>(base);
          if (!p || o < 0 || o % static_cast<ptrdiff_t>(m.esz))
            throw std::runtime_error("ot::cuda::CudnnRnn: cuDNN reports no or a misaligned weight address in " +
                                     m.name);
          return static_cast<int64_t>(o / static_cast<ptrdiff_t>(m.esz));
        };
        CudnnLinLayerPlace p;
        p.matrix_offset = offset(maddr);
        p.matrix_count = count(md.d);
        p.bias_offset = offset(baddr);
        p.bias_count = count(bd.d);
        places.push_back(p);
      }
  } catch (...) {
    cudaFree(base);
    throw;
  }
  cudaFree(base);
  m.segs = RnnWeightSegments(desc, places, static_cast<int64_t>(m.space_bytes / m.esz));

  // Temp sizes for every sequence at full length (the most a call needs; each call checks its own).
  const std::vector<int> full(static_cast<size_t>(desc.batch), static_cast<int>(desc.seq));
  RnnDataDesc x, y;
  m.SetData(x, y, full);
  size_t reserve = 0;
  Check(cudnnGetRNNTempSpaceSizes(lease.handle(), m.rnn, CUDNN_FWD_MODE_INFERENCE, x.d, &m.infer_ws, &reserve),
        "cudnnGetRNNTempSpaceSizes", m.name);
  Check(cudnnGetRNNTempSpaceSizes(lease.handle(), m.rnn, CUDNN_FWD_MODE_TRAINING, x.d, &m.train_ws, &m.train_reserve),
        "cudnnGetRNNTempSpaceSizes", m.name);
  m.fwd = m.Layout(false);
  m.bwd = m.Layout(true);
}

CudnnRnn::~CudnnRnn() = default;

const CudnnRnnDesc& CudnnRnn::desc() const { return impl_->d; }
const std::vector<RnnWeightSegment>& CudnnRnn::segments() const { return impl_->segs; }
size_t CudnnRnn::weight_space_bytes() const { return impl_->space_bytes; }
size_t CudnnRnn::ForwardWorkspaceBytes() const { return impl_->fwd.total; }
size_t CudnnRnn::BackwardWorkspaceBytes() const { return impl_->bwd.total; }

void CudnnRnn::Forward(const RnnForwardArgs& a, const int32_t* host_lens, void* workspace, size_t workspace_bytes,
                       void* stream) const {
  const Impl& m = *impl_;
  const CudnnRnnDesc& d = m.d;
  const bool lstm = d.cell == RnnCellKind::kLstm;
  if (!a.x || !a.w || !a.r) throw std::invalid_argument("ot::cuda::CudnnRnn::Forward: null X, W or R");
  if (!a.lens != !host_lens)
    throw std::invalid_argument("ot::cuda::CudnnRnn::Forward: lengths on the device and the host must come together");
  if (!workspace || workspace_bytes < m.fwd.total)
    throw std::invalid_argument("ot::cuda::CudnnRnn::Forward: needs " + std::to_string(m.fwd.total) +
                                " bytes of workspace, got " + std::to_string(workspace ? workspace_bytes : 0));
  bool any_zero = false;
  const std::vector<int> lens = m.HostLengths(host_lens, &any_zero);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const Regions& R = m.fwd;
  uint8_t* space = At(workspace, R, kSpace);
  int32_t* dlens = reinterpret_cast<int32_t*>(At(workspace, R, kLens));
  const size_t esz = m.esz;
  const int64_t S = d.seq, N = d.batch, H = d.hidden, D = d.directions;

  rnn_detail::PackWeights(m.segs, esz, a.w, a.r, a.b, space, m.space_bytes, st);
  rnn_detail::PrepareLengths(a.lens, S, N, dlens, st);
  const void* x = a.x;
  if (d.reverse) {
    rnn_detail::SeqReverse(a.x, At(workspace, R, kXRev), esz, d.batch_major, S, N, d.input, a.lens, st);
    x = At(workspace, R, kXRev);
  }
  const void* hx = m.StatesIn(a.h0, At(workspace, R, kHx), st);
  const void* cx = lstm ? m.StatesIn(a.c0, At(workspace, R, kCx), st) : nullptr;
  // Y straight into the operand when cuDNN's layout is ONNX's.
  const bool y_direct = a.y && !d.reverse && (d.batch_major || D == 1);
  void* y = y_direct ? a.y : At(workspace, R, kY);
  void* hy = a.y_h ? (m.StatesDirect() ? a.y_h : At(workspace, R, kHy)) : nullptr;
  void* cy = lstm && a.y_c ? (m.StatesDirect() ? a.y_c : At(workspace, R, kCy)) : nullptr;
  {
    Lease lease(stream);
    RnnDataDesc xd, yd;
    m.SetData(xd, yd, lens);
    TensorDesc hd;
    m.SetState(hd);
    size_t ws = 0, reserve = 0;
    m.CheckTemp(lease, CUDNN_FWD_MODE_INFERENCE, xd, &ws, &reserve);
    Check(cudnnRNNForward(lease.handle(), m.rnn, CUDNN_FWD_MODE_INFERENCE, dlens, xd.d, x, yd.d, y, hd.d, hx, hy, hd.d,
                          cx, cy, m.space_bytes, space, ws, At(workspace, R, kCudnnWs), 0, nullptr),
          "cudnnRNNForward", m.name);
  }
  if (any_zero) {
    // Length-0 sequences ran one step: Y zero, the final state the initial one.
    rnn_detail::SeqMask(y, esz, d.batch_major, S, N, D * H, a.lens, st);
    if (hy) rnn_detail::StateFix(hy, hx, esz, D, N, H, a.lens, st);
    if (cy) rnn_detail::StateFix(cy, cx, esz, D, N, H, a.lens, st);
  }
  if (a.y && !y_direct) {
    if (d.reverse)
      rnn_detail::SeqReverse(y, a.y, esz, d.batch_major, S, N, H, a.lens, st);  // one direction: Y is [.., H]
    else
      Transpose(y, a.y, esz, {S, N, D, H}, {0, 2, 1, 3}, st);  // layout 0, two directions
  }
  if (a.y_h) m.StatesOut(hy, a.y_h, st);
  if (lstm && a.y_c) m.StatesOut(cy, a.y_c, st);
}

void CudnnRnn::Backward(const RnnBackwardArgs& a, const int32_t* host_lens, void* workspace, size_t workspace_bytes,
                        void* stream) const {
  const Impl& m = *impl_;
  const CudnnRnnDesc& d = m.d;
  const bool lstm = d.cell == RnnCellKind::kLstm;
  if (!a.x || !a.w || !a.r) throw std::invalid_argument("ot::cuda::CudnnRnn::Backward: null X, W or R");
  if (!a.lens != !host_lens)
    throw std::invalid_argument("ot::cuda::CudnnRnn::Backward: lengths on the device and the host must come together");
  if (!workspace || workspace_bytes < m.bwd.total)
    throw std::invalid_argument("ot::cuda::CudnnRnn::Backward: needs " + std::to_string(m.bwd.total) +
                                " bytes of workspace, got " + std::to_string(workspace ? workspace_bytes : 0));
  bool any_zero = false;
  const std::vector<int> lens = m.HostLengths(host_lens, &any_zero);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const Regions& R = m.bwd;
  uint8_t* space = At(workspace, R, kSpace);
  uint8_t* dspace = At(workspace, R, kDSpace);
  int32_t* dlens = reinterpret_cast<int32_t*>(At(workspace, R, kLens));
  const size_t esz = m.esz;
  const int64_t S = d.seq, N = d.batch, H = d.hidden, D = d.directions, I = d.input;
  const size_t state_bytes = static_cast<size_t>(m.StateElems()) * esz;

  rnn_detail::PackWeights(m.segs, esz, a.w, a.r, a.b, space, m.space_bytes, st);
  rnn_detail::PrepareLengths(a.lens, S, N, dlens, st);
  const void* x = a.x;
  if (d.reverse) {
    rnn_detail::SeqReverse(a.x, At(workspace, R, kXRev), esz, d.batch_major, S, N, I, a.lens, st);
    x = At(workspace, R, kXRev);
  }
  const void* hx = m.StatesIn(a.h0, At(workspace, R, kHx), st);
  const void* cx = lstm ? m.StatesIn(a.c0, At(workspace, R, kCx), st) : nullptr;
  void* y = At(workspace, R, kY);

  // dY in cuDNN's layout, zero past each length (the CPU never reads it there).
  void* dy = At(workspace, R, kDY);
  const size_t y_bytes = static_cast<size_t>(S * N * D * H) * esz;
  if (!a.dy) {
    CudaOk(cudaMemsetAsync(dy, 0, y_bytes, st), "zero dY");
  } else if (d.reverse) {
    rnn_detail::SeqReverse(a.dy, dy, esz, d.batch_major, S, N, H, a.lens, st);
  } else {
    if (!d.batch_major && D == 2)
      Transpose(a.dy, dy, esz, {S, D, N, H}, {0, 2, 1, 3}, st);
    else
      CudaOk(cudaMemcpyAsync(dy, a.dy, y_bytes, cudaMemcpyDeviceToDevice, st), "copy dY");
    rnn_detail::SeqMask(dy, esz, d.batch_major, S, N, D * H, a.lens, st);
  }
  // dY_h, dY_c in cuDNN's layout (dhy_in, dcy_in: for the length-0 fix-up) and as cuDNN reads them (their length-0
  // entries zeroed, so the stand-in step adds nothing).
  const void* dhy_in = m.StatesIn(a.dy_h, At(workspace, R, kHy), st);
  const void* dcy_in = lstm ? m.StatesIn(a.dy_c, At(workspace, R, kCy), st) : nullptr;
  const void* dhy = dhy_in;
  const void* dcy = dcy_in;
  if (any_zero) {
    if (dhy_in) {
      void* z = At(workspace, R, kDhyZ);
      CudaOk(cudaMemcpyAsync(z, dhy_in, state_bytes, cudaMemcpyDeviceToDevice, st), "copy dY_h");
      rnn_detail::StateFix(z, nullptr, esz, D, N, H, a.lens, st);
      dhy = z;
    }
    if (dcy_in) {
      void* z = At(workspace, R, kDcyZ);
      CudaOk(cudaMemcpyAsync(z, dcy_in, state_bytes, cudaMemcpyDeviceToDevice, st), "copy dY_c");
      rnn_detail::StateFix(z, nullptr, esz, D, N, H, a.lens, st);
      dcy = z;
    }
  }
  void* dx = a.dx && !d.reverse ? a.dx : At(workspace, R, kDX);
  void* dhx = a.dh0 ? At(workspace, R, kDhx) : nullptr;
  void* dcx = lstm && a.dc0 ? At(workspace, R, kDcx) : nullptr;
  {
    Lease lease(stream);
    RnnDataDesc xd, yd;
    m.SetData(xd, yd, lens);
    TensorDesc hd;
    m.SetState(hd);
    size_t ws = 0, reserve = 0;
    m.CheckTemp(lease, CUDNN_FWD_MODE_TRAINING, xd, &ws, &reserve);
    void* cws = At(workspace, R, kCudnnWs);
    void* res = At(workspace, R, kReserve);
    Check(cudnnRNNForward(lease.handle(), m.rnn, CUDNN_FWD_MODE_TRAINING, dlens, xd.d, x, yd.d, y, hd.d, hx, nullptr,
                          hd.d, cx, nullptr, m.space_bytes, space, ws, cws, reserve, res),
          "cudnnRNNForward (training)", m.name);
    Check(cudnnRNNBackwardData_v8(lease.handle(), m.rnn, dlens, yd.d, y, dy, xd.d, dx, hd.d, hx, dhy, dhx, hd.d, cx,
                                  dcy, dcx, m.space_bytes, space, ws, cws, reserve, res),
          "cudnnRNNBackwardData_v8", m.name);
    CudaOk(cudaMemsetAsync(dspace, 0, m.space_bytes, st), "zero the weight gradient");
    Check(cudnnRNNBackwardWeights_v8(lease.handle(), m.rnn, CUDNN_WGRAD_MODE_ADD, dlens, xd.d, x, hd.d, hx, yd.d, y,
                                     m.space_bytes, dspace, ws, cws, reserve, res),
          "cudnnRNNBackwardWeights_v8", m.name);
  }
  rnn_detail::UnpackWeights(m.segs, esz, dspace, a.dw, a.dr, a.db, st);
  if (a.dx) {
    if (d.reverse)
      rnn_detail::SeqReverse(dx, a.dx, esz, d.batch_major, S, N, I, a.lens, st);
    else
      rnn_detail::SeqMask(a.dx, esz, d.batch_major, S, N, I, a.lens, st);
  }
  if (dhx) {
    if (any_zero) rnn_detail::StateFix(dhx, dhy_in, esz, D, N, H, a.lens, st);
    m.StatesOut(dhx, a.dh0, st);
  }
  if (dcx) {
    if (any_zero) rnn_detail::StateFix(dcx, dcy_in, esz, D, N, H, a.lens, st);
    m.StatesOut(dcx, a.dc0, st);
  }
}

}  // namespace ot::cuda
