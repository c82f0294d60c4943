// The internals of FusedKernel (cpu_ops/fused_elementwise.h) that its two halves share: fused_elementwise_plan.cc
// makes the plan of a program for a domain (which instructions run, how each input is read, the tiles, the
// registers), fused_elementwise.cc runs it tile by tile. Included by those two files only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_ops/fused_elementwise.h"
#include "kernel_common/cluster_idioms.h"
#include "kernel_common/cluster_program.h"

namespace ot::cpu {
namespace fused {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;
using cluster::RowIdiom;

inline constexpr int64_t kAlignFloats = 16;  // 64 bytes: every register starts on a cache line

inline int64_t AlignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

inline int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

inline std::string DimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// How a kInput instruction reads its tensor into a tile. The target is D (a full input) or D's leading
// rank - reduce_axes dims (a row input, one element per row); target element i of the flat target reads:
//   kContig   element i (the input has the target's numel)
//   kScalar   element 0
//   kBlock    element (i / inner) % mid: the input's non-1 dims are one run of the target's dims (a trailing-dims
//             bias: inner = 1; a per-row value: mid = the leading dims, inner = the rest)
//   kGeneral  the strided walk over the coalesced target dims
struct InputPlan {
  enum Kind { kContig, kScalar, kBlock, kGeneral } kind = kContig;
  int input = 0;
  DType type = DType::kF32;  // storage type
  int64_t inner = 1, mid = 1;
  std::vector<int64_t> dims, strides;  // kGeneral (rank >= 1, innermost last)
};

// The plan of input k read into a target of dims `target` (a row input: D's leading dims); `shown_target` is what
// an error names. Throws std::invalid_argument when the input does not broadcast to the target.
InputPlan MakeInputPlan(const std::vector<int64_t>& target, const std::vector<int64_t>& in_dims, int k, bool row,
                        const std::vector<int64_t>& shown_target);

// A value rounded to a storage type (a constant of the program).
float RoundScalar(DType t, float v);

// A value inside a tile: an array (a register, or a view of an f32 input) or one scalar for the whole tile.
struct Val {
  const float* p = nullptr;
  float s = 0.f;
  bool scalar = false;
  // > 0: a row value read by a full binary op over rows of rl elements -- p[r] is the value of elements
  // r*rl .. r*rl+rl-1 (Map2 broadcasts it; the other operand is then a full array).
  int64_t rl = 0;
};

// How an instruction's value is held while a tile runs.
enum class VKind : uint8_t { kDead, kScalar, kView, kReg };

}  // namespace fused

struct FusedKernel::Impl {
  using DType = cluster::DType;
  using Program = cluster::Program;
  using RowIdiom = cluster::RowIdiom;
  using InputPlan = fused::InputPlan;
  using VKind = fused::VKind;
  using Val = fused::Val;
  Program prog;
  std::vector<int64_t> domain;
  std::vector<DType> input_types;
  int max_threads = 1;
  int64_t numel = 0, rows = 0, row_len = 1;  // numel(D), rows(D), elements per row
  bool has_rows = false;                     // tiles are whole rows
  int64_t unit = 1;                          // full elements per tile unit (row_len with rows, else 1)
  int64_t total_units = 0, tile_units = 0, num_tiles = 0;
  int64_t full_len = 0, rowreg_len = 0;  // floats per full / row register (aligned)
  std::vector<VKind> kind;               // per instruction
  std::vector<RowIdiom> idiom;           // per instruction: the row routine it runs (on its a and b), if any
  std::vector<int> reg;                  // register index in its pool (kReg)
  std::vector<InputPlan> plan;           // per kInput instruction
  std::vector<float> scalar;             // kConst values, rounded to their dtype
  // The instruction computed straight into an output (direct_instr, into output direct_out; -1: none, every output
  // is stored from a register at the end of the tile). Only the program's last live instruction, full and f32: every
  // other instruction -- every read of an input that the output may share memory with -- has run by then, and it
  // reads each operand element at the index it writes. Used when Run finds the output apart from its input views.
  int direct_instr = -1, direct_out = -1;
  int nfull = 0, nrow = 0;
  // Workspace of one slot, in floats: full registers, row registers, three temps (each a full or row value: the
  // operands of a Where spread over short rows), u16 scratch.
  int64_t row_base = 0, tmp_base = 0, tmp_len = 0, u16_base = 0, slot_floats = 0;

  void RunTile(int64_t t, const void* const* in, void* const* out, float* ws, Val* vals, bool direct) const;
};

}  // namespace ot::cpu
