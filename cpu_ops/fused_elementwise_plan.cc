// FusedKernel's plan (cpu_ops/fused_elementwise_impl.h): the program after its plain copies are skipped and its
// dead code dropped, each instruction's kind, each input's read, the row idioms, the tiles and the registers.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/fused_elementwise_impl.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu {

namespace fused {

InputPlan MakeInputPlan(const std::vector<int64_t>& target, const std::vector<int64_t>& in_dims, int k, bool row,
                        const std::vector<int64_t>& shown_target) {
  const int tr = static_cast<int>(target.size()), ir = static_cast<int>(in_dims.size());
  auto fail = [&] {
    throw std::invalid_argument("FusedElementwise input " + std::to_string(k) + ": dims " + DimsText(in_dims) +
                                " do not broadcast to the " + (row ? "row shape " : "domain ") +
                                DimsText(shown_target));
  };
  // A row input is matched against D with the reduced axes 1 (shown_target); its trailing dims there must be 1.
  const int shown_rank = static_cast<int>(shown_target.size());
  for (int d = 0; d < ir; ++d) {
    const int td = shown_rank - ir + d;  // target axis of input axis d
    if (in_dims[d] < 0) fail();
    if (td < 0) {
      if (in_dims[d] != 1) fail();
    } else if (in_dims[d] != 1 && in_dims[d] != shown_target[td]) {
      fail();
    }
  }
  // Strides over `target` (the first tr axes of shown_target), 0 where broadcast.
  std::vector<int64_t> st(tr, 0);
  int64_t s = 1;
  for (int d = ir - 1; d >= 0; --d) {
    const int td = shown_rank - ir + d;
    if (td >= 0 && td < tr && in_dims[d] != 1) st[td] = s;
    s *= in_dims[d];
  }
  // Coalesce: drop size-1 axes, merge neighbours whose strides chain.
  std::vector<int64_t> cd, cs;
  for (int d = 0; d < tr; ++d) {
    if (target[d] == 1) continue;
    if (!cd.empty() && cs.back() == st[d] * target[d]) {
      cd.back() *= target[d];
      cs.back() = st[d];
    } else {
      cd.push_back(target[d]);
      cs.push_back(st[d]);
    }
  }
  InputPlan p;
  p.input = k;
  int nonzero = 0, at = -1;
  for (size_t d = 0; d < cd.size(); ++d)
    if (cs[d] != 0) {
      ++nonzero;
      at = static_cast<int>(d);
    }
  if (nonzero == 0) {
    p.kind = InputPlan::kScalar;
  } else if (nonzero == 1 && cs[at] == 1) {
    p.mid = cd[at];
    for (size_t d = at + 1; d < cd.size(); ++d) p.inner *= cd[d];
    p.kind = p.mid == Numel(target) ? InputPlan::kContig : InputPlan::kBlock;
  } else {
    p.kind = InputPlan::kGeneral;
    p.dims = cd;
    p.strides = cs;
  }
  return p;
}

float RoundScalar(DType t, float v) {
  switch (t) {
    case DType::kF32:
      return v;
    case DType::kF16:
      return math::RoundToHalf(v);
    case DType::kBF16:
      return math::RoundToBf16(v);
    case DType::kBool:
      return v != 0.f ? 1.f : 0.f;
  }
  return v;
}

}  // namespace fused

using namespace fused;  // NOLINT: this file is the plan's

namespace {

void CheckKernelArgs(const Program& p, const std::vector<int64_t>& domain,
                     const std::vector<std::vector<int64_t>>& input_dims, const std::vector<DType>& input_types,
                     int max_threads) {
  const int rank = static_cast<int>(domain.size());
  if (static_cast<int>(input_dims.size()) != p.num_inputs || static_cast<int>(input_types.size()) != p.num_inputs)
    throw std::invalid_argument("FusedElementwise: the program has " + std::to_string(p.num_inputs) +
                                " inputs, given " + std::to_string(input_dims.size()) + " dims and " +
                                std::to_string(input_types.size()) + " types");
  if (max_threads < 1) throw std::invalid_argument("FusedElementwise: max_threads must be >= 1");
  if (p.reduce_axes > rank)
    throw std::invalid_argument("FusedElementwise: reduce_axes " + std::to_string(p.reduce_axes) +
                                " exceeds the rank of the domain " + DimsText(domain));
  for (int64_t d : domain)
    if (d < 0) throw std::invalid_argument("FusedElementwise: negative dim in the domain " + DimsText(domain));
  for (int k = 0; k < p.num_inputs; ++k)
    if (static_cast<int>(input_types[k]) > static_cast<int>(DType::kBool))
      throw std::invalid_argument("FusedElementwise input " + std::to_string(k) + ": bad dtype code");
}

// Copies: an Identity (or Cast) to its operand's own dtype and row-ness (ReduceToShape where it reduces nothing, a
// Cast between equal types) changes no bit; its readers and outputs read the operand instead, so it costs no pass.
// (An output keeps a copy of an input instruction: it is stored from a register, never from the input's memory.)
void SkipPlainCopies(Program& p) {
  auto plain_copy = [&p](int32_t i) { return cluster::IsPlainCopy(p, i); };
  for (Instr& in : p.code) {
    int32_t* ops[3] = {&in.a, &in.b, &in.c};
    for (int k = 0; k < cluster::Arity(in.op); ++k)
      while (plain_copy(*ops[k])) *ops[k] = p.code[*ops[k]].a;
  }
  for (int32_t& o : p.outputs)
    while (plain_copy(o) && p.code[p.code[o].a].op != Op::kInput) o = p.code[o].a;
}

// Dead code: only what the outputs need is computed.
std::vector<bool> NeededInstructions(const Program& p) {
  const size_t n = p.code.size();
  std::vector<bool> needed(n, false);
  for (int32_t o : p.outputs) needed[o] = true;
  for (size_t i = n; i-- > 0;) {
    if (!needed[i] || p.code[i].op == Op::kInput) continue;
    const int ar = cluster::Arity(p.code[i].op);
    const int32_t ops[3] = {p.code[i].a, p.code[i].b, p.code[i].c};
    for (int k = 0; k < ar; ++k) needed[ops[k]] = true;
  }
  return needed;
}

}  // namespace

// Kinds and input plans (every kInput is checked, needed or not: a shape error is an error either way).
static void AssignKinds(FusedKernel::Impl& m, const Program& p, const std::vector<bool>& needed,
                        const std::vector<int64_t>& domain, const std::vector<int64_t>& row_target,
                        const std::vector<int64_t>& row_shape, const std::vector<std::vector<int64_t>>& input_dims,
                        const std::vector<DType>& input_types) {
  const size_t n = p.code.size();
  m.kind.assign(n, VKind::kDead);
  m.plan.resize(n);
  m.scalar.assign(n, 0.f);
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = p.code[i];
    if (in.op == Op::kInput) {
      InputPlan pl = in.row ? MakeInputPlan(row_target, input_dims[in.a], in.a, true, row_shape)
                            : MakeInputPlan(domain, input_dims[in.a], in.a, false, domain);
      pl.type = input_types[in.a];
      m.plan[i] = pl;
    }
    if (!needed[i]) continue;
    if (in.op == Op::kInput) {
      const InputPlan& pl = m.plan[i];
      if (pl.kind == InputPlan::kScalar)
        m.kind[i] = VKind::kScalar;
      else if (pl.kind == InputPlan::kContig && pl.type == DType::kF32 && in.dtype == DType::kF32)
        m.kind[i] = VKind::kView;
      else
        m.kind[i] = VKind::kReg;
    } else if (in.op == Op::kConst) {
      m.kind[i] = VKind::kScalar;
      m.scalar[i] = RoundScalar(in.dtype, in.imm);
    } else if (cluster::IsReduction(in.op)) {
      m.kind[i] = VKind::kReg;
    } else {
      const int ar = cluster::Arity(in.op);
      const int32_t ops[3] = {in.a, in.b, in.c};
      bool all_scalar = true;
      for (int k = 0; k < ar; ++k) all_scalar &= m.kind[ops[k]] == VKind::kScalar;
      m.kind[i] = all_scalar ? VKind::kScalar : VKind::kReg;
    }
  }
}

// Row idioms (kernel_common/cluster_idioms.h): the last instruction runs the row routine on the idiom's operands (its
// a and b from here on), the others are computed by nobody. Then the instruction computed straight into an output,
// if the last live one qualifies.
static void MatchIdioms(FusedKernel::Impl& m, Program& p) {
  const size_t n = p.code.size();
  m.idiom.assign(n, RowIdiom::kNone);
  std::vector<int> uses(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (m.kind[i] == VKind::kDead) continue;
    const int32_t ops[3] = {p.code[i].a, p.code[i].b, p.code[i].c};
    for (int k = 0; k < cluster::Arity(p.code[i].op); ++k) ++uses[ops[k]];
  }
  for (int32_t o : p.outputs) ++uses[o];
  for (size_t i = n; i-- > 0;) {
    if (m.kind[i] != VKind::kReg) continue;
    const cluster::RowIdiomMatch mt = cluster::MatchRowIdiom(p, static_cast<int32_t>(i), uses);
    if (mt.kind == RowIdiom::kNone || m.kind[mt.a] == VKind::kScalar || m.kind[mt.b] == VKind::kScalar) continue;
    for (int32_t j : mt.internal) m.kind[j] = VKind::kDead;
    m.idiom[i] = mt.kind;
    p.code[i].a = mt.a;
    p.code[i].b = mt.b;
  }
  for (size_t i = n; i-- > 0;) {
    if (m.kind[i] == VKind::kDead) continue;
    const Instr& in = p.code[i];
    if (m.kind[i] == VKind::kReg && !in.row && in.dtype == DType::kF32 && in.op != Op::kInput)
      for (size_t j = 0; j < p.outputs.size(); ++j)
        if (p.outputs[j] == static_cast<int32_t>(i)) {
          m.direct_instr = static_cast<int>(i);
          m.direct_out = static_cast<int>(j);
          break;
        }
    break;  // only the last live instruction
  }
}

// Tiles: whole rows when the program has rows, shrunk to one period of a periodic input where that lets it be read
// in place.
static void SizeTiles(FusedKernel::Impl& m, const Program& p, const std::vector<bool>& needed) {
  const size_t n = p.code.size();
  constexpr int64_t kTile = FusedKernel::kTileElements;
  m.unit = m.has_rows ? m.row_len : 1;
  m.total_units = m.has_rows ? m.rows : m.numel;
  m.tile_units = m.has_rows ? std::max<int64_t>(1, kTile / std::max<int64_t>(1, m.row_len)) : kTile;
  // Periodic inputs -- f32 blocks of trailing dims repeated along the leading ones, as the attention's [T, T] mask
  // over [B, H, T, T] -- are read in place (views at start % mid) when no tile straddles a period: where a period
  // of at least kMinPeriod elements divides the tile, the tiles shrink to one period.
  constexpr int64_t kMinPeriod = 1024;
  auto periodic = [&](size_t i) {
    const Instr& in = p.code[i];
    const InputPlan& pl = m.plan[i];
    return needed[i] && in.op == Op::kInput && !in.row && m.kind[i] == VKind::kReg && pl.kind == InputPlan::kBlock &&
           pl.inner == 1 && pl.type == DType::kF32 && in.dtype == DType::kF32;
  };
  for (size_t i = 0; i < n; ++i) {
    const int64_t mid = m.plan[i].mid, tile = m.tile_units * m.unit;
    if (periodic(i) && mid >= kMinPeriod && mid < tile && tile % mid == 0 && mid % m.unit == 0) {
      m.tile_units = mid / m.unit;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (periodic(i) && m.plan[i].mid % (m.tile_units * m.unit) == 0) m.kind[i] = VKind::kView;
  m.num_tiles = (m.total_units + m.tile_units - 1) / m.tile_units;
  const int64_t tile_elems = std::min(m.tile_units, std::max<int64_t>(m.total_units, 1)) * m.unit;
  m.full_len = AlignUp(std::max<int64_t>(tile_elems, 1), kAlignFloats);
  m.rowreg_len = AlignUp(std::min(m.tile_units, std::max<int64_t>(m.total_units, 1)), kAlignFloats);
}

// Registers: linear scan over the instructions, a register freed after its value's last use (outputs live to the end
// of the tile, where they are stored). A result never shares a register with its operands. Then the slot's layout.
static void AllocateRegisters(FusedKernel::Impl& m, const Program& p) {
  const size_t n = p.code.size();
  std::vector<int64_t> last_use(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (m.kind[i] == VKind::kDead || p.code[i].op == Op::kInput) continue;
    const int ar = cluster::Arity(p.code[i].op);
    const int32_t ops[3] = {p.code[i].a, p.code[i].b, p.code[i].c};
    for (int k = 0; k < ar; ++k) last_use[ops[k]] = static_cast<int64_t>(i);
  }
  for (int32_t o : p.outputs) last_use[o] = static_cast<int64_t>(n);
  std::vector<int> free_full, free_row;
  std::vector<std::vector<size_t>> dies_at(n + 1);
  m.reg.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (m.kind[i] == VKind::kReg) {
      const bool row = p.code[i].row;
      std::vector<int>& pool = row ? free_row : free_full;
      int& count = row ? m.nrow : m.nfull;
      if (!pool.empty()) {
        m.reg[i] = pool.back();
        pool.pop_back();
      } else {
        m.reg[i] = count++;
      }
      if (last_use[i] >= 0) dies_at[last_use[i]].push_back(i);
    }
    // Registers of values last used by i come back once i has its own register (so it never shares one).
    for (size_t j : dies_at[i]) (p.code[j].row ? free_row : free_full).push_back(m.reg[j]);
  }
  m.row_base = m.nfull * m.full_len;
  m.tmp_base = m.row_base + m.nrow * m.rowreg_len;
  m.tmp_len = std::max(m.full_len, m.rowreg_len);
  m.u16_base = m.tmp_base + 3 * m.tmp_len;
  m.slot_floats = AlignUp(m.u16_base + (m.tmp_len + 1) / 2, kAlignFloats);
}

FusedKernel::FusedKernel(Program p, std::vector<int64_t> domain, std::vector<std::vector<int64_t>> input_dims,
                         std::vector<DType> input_types, int max_threads) {
  cluster::Validate(p);
  CheckKernelArgs(p, domain, input_dims, input_types, max_threads);
  auto m = std::make_shared<Impl>();
  const int rank = static_cast<int>(domain.size());
  const int lead = rank - p.reduce_axes;
  std::vector<int64_t> row_target(domain.begin(), domain.begin() + lead);
  std::vector<int64_t> row_shape = domain;  // D with the reduced axes 1
  for (int d = lead; d < rank; ++d) row_shape[d] = 1;
  m->numel = Numel(domain);
  m->rows = Numel(row_target);
  m->row_len = 1;
  for (int d = lead; d < rank; ++d) m->row_len *= domain[d];

  SkipPlainCopies(p);
  const std::vector<bool> needed = NeededInstructions(p);
  for (size_t i = 0; i < p.code.size(); ++i) m->has_rows |= needed[i] && p.code[i].row;
  AssignKinds(*m, p, needed, domain, row_target, row_shape, input_dims, input_types);
  MatchIdioms(*m, p);
  SizeTiles(*m, p, needed);
  AllocateRegisters(*m, p);
  m->prog = std::move(p);
  m->domain = std::move(domain);
  m->input_types = std::move(input_types);
  m->max_threads = max_threads;
  impl_ = std::move(m);
}

}  // namespace ot::cpu
