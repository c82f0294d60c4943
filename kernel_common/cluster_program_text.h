// Inline definitions of kernel_common/cluster_program.h's functions: op and dtype names, the text form (ToText /
// ParseProgram, an exact round trip) and Validate. Included at the end of cluster_program.h only; standard
// library only, so the CUDA code generator and the passes can use it too.
//
// Errors are std::invalid_argument: parse errors name the text's line ("cluster program line 4: ..."), Validate's
// name the instruction ("cluster program: %7 (add): ...").
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ot::cluster {

namespace text_detail {

// Names in Op order (the table is checked against the last Op below).
inline constexpr const char* kOpNames[] = {
    "input",      "const",      "neg",           "abs",        "sign",        "exp",        "log",
    "sqrt",       "reciprocal", "tanh",          "sigmoid",    "relu",        "erf",        "floor",
    "ceil",       "not",        "leaky_relu",    "gelu",       "identity",    "cast",       "add",
    "sub",        "mul",        "div",           "pow",        "max",         "min",        "less",
    "less_equal", "greater",    "greater_equal", "equal",      "and",         "or",         "xor",
    "relu_grad",  "gelu_grad",  "where",         "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
};
inline constexpr int kNumOps = static_cast<int>(sizeof(kOpNames) / sizeof(kOpNames[0]));
static_assert(kNumOps == static_cast<int>(Op::kReduceMin) + 1, "kOpNames must list every Op in order");
inline constexpr int kNumDTypes = static_cast<int>(DType::kBool) + 1;

// Whether the op reads `imm` (then the text always prints it; other ops print it only when its bits are not 0).
inline bool UsesImm(Op op) {
  return op == Op::kConst || op == Op::kLeakyRelu || op == Op::kGelu || op == Op::kGeluGrad;
}

// %.9g prints every float exactly (9 significant digits round-trip binary32); inf and nan print as inf/nan.
inline std::string FloatText(float f) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  return buf;
}

[[noreturn]] inline void LineError(int line, const std::string& what) {
  throw std::invalid_argument("cluster program line " + std::to_string(line) + ": " + what);
}

// Parses a whole token as a non-negative int32 ("12"); false when it is not one.
inline bool ParseIndex(const std::string& s, int32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  if (v > INT32_MAX) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

// "%12" -> 12.
inline bool ParseRef(const std::string& s, int32_t* out) {
  return s.size() >= 2 && s[0] == '%' && ParseIndex(s.substr(1), out);
}

inline bool ParseFloatToken(const std::string& s, float* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(s.c_str(), &end);
  // ERANGE on underflow still gives the correctly rounded subnormal/zero that %.9g printed; only reject junk.
  if (end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

// "%12": an instruction reference (appended, not "%" + std::string: GCC 12 warns falsely, -Wrestrict, on a
// short literal + std::string&&).
inline std::string Ref(int64_t i) {
  std::string s = "%";
  s += std::to_string(i);
  return s;
}

inline std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> t;
  std::istringstream is(line);
  std::string w;
  while (is >> w) t.push_back(w);
  return t;
}

inline std::string InstrName(const Program& p, size_t i) {
  const int op = static_cast<int>(p.code[i].op);
  std::string s = Ref(static_cast<int64_t>(i));
  s += " (";
  s += op >= 0 && op < kNumOps ? kOpNames[op] : "?";
  s += ")";
  return s;
}

[[noreturn]] inline void InstrError(const Program& p, size_t i, const std::string& what) {
  throw std::invalid_argument("cluster program: " + InstrName(p, i) + ": " + what);
}

}  // namespace text_detail

inline const char* OpName(Op op) {
  const int i = static_cast<int>(op);
  return i >= 0 && i < text_detail::kNumOps ? text_detail::kOpNames[i] : "?";
}

inline DType ParseDType(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "bool") return DType::kBool;
  throw std::invalid_argument("unknown cluster dtype '" + s + "' (f32, f16, bf16 or bool)");
}

inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

inline void Validate(const Program& p) {
  using text_detail::InstrError;
  if (p.num_inputs < 0) throw std::invalid_argument("cluster program: inputs " + std::to_string(p.num_inputs));
  if (p.reduce_axes < 0) throw std::invalid_argument("cluster program: reduce_axes " + std::to_string(p.reduce_axes));
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    const int opi = static_cast<int>(in.op);
    if (opi < 0 || opi >= text_detail::kNumOps) InstrError(p, i, "op code " + std::to_string(opi) + " out of range");
    if (static_cast<int>(in.dtype) >= text_detail::kNumDTypes)
      InstrError(p, i, "dtype code " + std::to_string(static_cast<int>(in.dtype)) + " out of range");
    if (in.row && p.reduce_axes == 0) InstrError(p, i, "a row value, but reduce_axes is 0 (no row)");
    const int arity = Arity(in.op);
    const int32_t ops[3] = {in.a, in.b, in.c};
    if (in.op == Op::kInput) {
      if (in.a < 0 || in.a >= p.num_inputs)
        InstrError(
            p, i,
            "input index " + std::to_string(in.a) + " out of range (inputs " + std::to_string(p.num_inputs) + ")");
      if (in.b != -1 || in.c != -1) InstrError(p, i, "an input has no operands b, c");
      continue;
    }
    bool any_full = false;
    for (int k = 0; k < 3; ++k) {
      const char name = static_cast<char>('a' + k);
      if (k < arity) {
        if (ops[k] < 0 || static_cast<size_t>(ops[k]) >= i)
          InstrError(
              p, i, std::string("operand ") + name + " = " + std::to_string(ops[k]) + " is not an earlier instruction");
        if (!p.code[ops[k]].row) any_full = true;
      } else if (ops[k] != -1) {
        InstrError(p, i,
                   std::string("operand ") + name + " set, but " + OpName(in.op) + " takes " + std::to_string(arity));
      }
    }
    if ((in.op == Op::kGelu || in.op == Op::kGeluGrad) && in.imm != 0.f && in.imm != 1.f)
      InstrError(p, i, "imm must be 0 (erf form) or 1 (tanh form), not " + text_detail::FloatText(in.imm));
    if (IsReduction(in.op)) {
      if (p.reduce_axes == 0) InstrError(p, i, "a row reduction, but reduce_axes is 0");
      if (p.code[in.a].row) InstrError(p, i, "reduces %" + std::to_string(in.a) + ", a row value (must be full)");
      if (!in.row) InstrError(p, i, "a reduction makes a row value (flag row missing)");
    } else if (arity > 0 && in.row == any_full) {
      InstrError(p, i, in.row ? "marked row but has a full operand" : "all operands are row values but not marked row");
    }
  }
  if (p.outputs.empty()) throw std::invalid_argument("cluster program: no outputs");
  for (size_t j = 0; j < p.outputs.size(); ++j)
    if (p.outputs[j] < 0 || static_cast<size_t>(p.outputs[j]) >= p.code.size())
      throw std::invalid_argument("cluster program: output " + std::to_string(j) + " refers to %" +
                                  std::to_string(p.outputs[j]) + ", not an instruction (there are " +
                                  std::to_string(p.code.size()) + ")");
}

inline std::string ToText(const Program& p) {
  std::string s = "inputs " + std::to_string(p.num_inputs) + "\n";
  if (p.reduce_axes > 0) s += "reduce_axes " + std::to_string(p.reduce_axes) + "\n";
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    s += text_detail::Ref(static_cast<int64_t>(i));
    s += " = ";
    s += OpName(in.op);
    const int arity = in.op == Op::kInput ? 0 : Arity(in.op);
    const int32_t ops[3] = {in.a, in.b, in.c};
    for (int k = 0; k < arity; ++k) {
      s += " ";
      s += text_detail::Ref(ops[k]);
    }
    uint32_t bits;
    std::memcpy(&bits, &in.imm, 4);
    if (text_detail::UsesImm(in.op) || bits != 0) s += " imm=" + text_detail::FloatText(in.imm);
    if (in.op == Op::kInput) s += " input=" + std::to_string(in.a);
    s += std::string(" : ") + DTypeName(in.dtype);
    if (in.row) s += " row";
    s += "\n";
  }
  s += "outputs";
  for (int32_t o : p.outputs) {
    s += " ";
    s += text_detail::Ref(o);
  }
  s += "\n";
  return s;
}

inline Program ParseProgram(const std::string& text) {
  using text_detail::LineError;
  Program p;
  bool saw_inputs = false, saw_reduce = false, saw_outputs = false;
  std::vector<int> instr_line;  // the line of each instruction, for Validate errors we can place
  std::istringstream is(text);
  std::string line;
  int ln = 0;
  while (std::getline(is, line)) {
    ++ln;
    const std::vector<std::string> t = text_detail::Tokens(line);
    if (t.empty() || t[0][0] == '#') continue;
    if (saw_outputs) LineError(ln, "text after the outputs line");
    if (t[0] == "inputs" || t[0] == "reduce_axes") {
      const bool inputs = t[0] == "inputs";
      int32_t v = 0;
      if (t.size() != 2 || !text_detail::ParseIndex(t[1], &v))
        LineError(ln, "expected '" + t[0] + " N' with N a non-negative integer");
      if (inputs ? saw_inputs : saw_reduce) LineError(ln, "second '" + t[0] + "' line");
      if (!p.code.empty()) LineError(ln, "'" + t[0] + "' after the first instruction");
      (inputs ? p.num_inputs : p.reduce_axes) = v;
      (inputs ? saw_inputs : saw_reduce) = true;
      continue;
    }
    if (t[0] == "outputs") {
      for (size_t k = 1; k < t.size(); ++k) {
        int32_t r = 0;
        if (!text_detail::ParseRef(t[k], &r)) LineError(ln, "output '" + t[k] + "' is not %N");
        if (static_cast<size_t>(r) >= p.code.size())
          LineError(ln, "output %" + std::to_string(r) + " is not an instruction (there are " +
                            std::to_string(p.code.size()) + ")");
        p.outputs.push_back(r);
      }
      if (p.outputs.empty()) LineError(ln, "no outputs listed");
      saw_outputs = true;
      continue;
    }
    // %I = OPNAME [%A [%B [%C]]] [imm=FLOAT] [input=N] : DTYPE [row]
    if (!saw_inputs) LineError(ln, "an instruction before the 'inputs N' line");
    int32_t idx = 0;
    if (!text_detail::ParseRef(t[0], &idx))
      LineError(ln, "expected '%N = op ...', 'inputs', 'reduce_axes' or 'outputs'");
    if (static_cast<size_t>(idx) != p.code.size())
      LineError(ln, "instruction %" + std::to_string(idx) + " out of order (expected %" +
                        std::to_string(p.code.size()) + ")");
    if (t.size() < 5 || t[1] != "=") LineError(ln, "expected '%N = op [operands] : dtype'");
    Instr in;
    int opi = 0;
    while (opi < text_detail::kNumOps && t[2] != text_detail::kOpNames[opi]) ++opi;
    if (opi == text_detail::kNumOps) LineError(ln, "unknown op '" + t[2] + "'");
    in.op = static_cast<Op>(opi);
    size_t k = 3;
    int32_t refs[3] = {-1, -1, -1};
    int nrefs = 0;
    bool has_imm = false, has_input = false;
    for (; k < t.size() && t[k] != ":"; ++k) {
      const std::string& w = t[k];
      if (w[0] == '%') {
        if (has_imm || has_input) LineError(ln, "operand '" + w + "' after imm=/input=");
        int32_t r = 0;
        if (!text_detail::ParseRef(w, &r)) LineError(ln, "bad operand '" + w + "'");
        if (nrefs == 3) LineError(ln, "more than 3 operands");
        if (r >= idx) LineError(ln, "operand %" + std::to_string(r) + " is not an earlier instruction");
        refs[nrefs++] = r;
      } else if (w.rfind("imm=", 0) == 0) {
        if (has_imm) LineError(ln, "imm= given twice");
        if (!text_detail::ParseFloatToken(w.substr(4), &in.imm)) LineError(ln, "bad number in '" + w + "'");
        has_imm = true;
      } else if (w.rfind("input=", 0) == 0) {
        if (has_input) LineError(ln, "input= given twice");
        if (in.op != Op::kInput) LineError(ln, "input= on a " + t[2] + " (only input takes it)");
        if (!text_detail::ParseIndex(w.substr(6), &in.a)) LineError(ln, "bad input index in '" + w + "'");
        has_input = true;
      } else {
        LineError(ln, "unexpected '" + w + "' (operands %N, imm=, input=, then ': dtype')");
      }
    }
    if (k + 1 >= t.size()) LineError(ln, "missing ': dtype'");
    try {
      in.dtype = ParseDType(t[k + 1]);
    } catch (const std::invalid_argument& e) {
      LineError(ln, e.what());
    }
    if (k + 2 < t.size()) {
      if (t[k + 2] != "row" || k + 3 != t.size()) LineError(ln, "after the dtype only 'row' may follow");
      in.row = true;
    }
    const int arity = in.op == Op::kInput ? 0 : Arity(in.op);
    if (nrefs != arity)
      LineError(ln, std::string(OpName(in.op)) + " takes " + std::to_string(arity) + " operand(s), got " +
                        std::to_string(nrefs));
    if (in.op == Op::kInput) {
      if (!has_input) LineError(ln, "input without input=N");
      if (in.a >= p.num_inputs)
        LineError(
            ln, "input index " + std::to_string(in.a) + " out of range (inputs " + std::to_string(p.num_inputs) + ")");
    } else {
      in.a = refs[0];
      in.b = refs[1];
      in.c = refs[2];
    }
    if (in.op == Op::kConst && !has_imm) LineError(ln, "const without imm=");
    p.code.push_back(in);
    instr_line.push_back(ln);
  }
  if (!saw_inputs) throw std::invalid_argument("cluster program: no 'inputs N' line");
  if (!saw_outputs) throw std::invalid_argument("cluster program: no 'outputs' line");
  // The rest (row flags, imm ranges) is Validate's; its message names the instruction, we add the line.
  try {
    Validate(p);
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    const size_t pct = msg.find('%');
    int32_t i = -1;
    if (pct != std::string::npos) {
      size_t end = pct + 1;
      while (end < msg.size() && msg[end] >= '0' && msg[end] <= '9') ++end;
      text_detail::ParseIndex(msg.substr(pct + 1, end - pct - 1), &i);
    }
    const std::string prefix = "cluster program: ";
    if (i >= 0 && static_cast<size_t>(i) < instr_line.size())
      LineError(instr_line[i], msg.compare(0, prefix.size(), prefix) == 0 ? msg.substr(prefix.size()) : msg);
    throw;
  }
  return p;
}

}  // namespace ot::cluster
