// Geometry shared by the linalg family's inference (graph/ops/linalg.cc) and its CPU kernels
// (executor/kernels/linalg*.cc): convolution/pooling output sizes and pads per spatial axis, and the Einsum
// equation parser. Header-only so both sides compute exactly the same thing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ot::linalg {

struct AxisGeometry {
  int64_t out = -1;  // -1 when the input size is unknown
  int64_t pad_begin = 0, pad_end = 0;
};

inline int64_t KernelExtent(int64_t k, int64_t d) { return (k - 1) * d + 1; }

inline int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Conv / pooling. in < 0: unknown (pads still resolved when they do not depend on it). auto_pad is "NOTSET",
// "VALID", "SAME_UPPER" or "SAME_LOWER" (the caller rejects anything else). ceil_mode rounds the window count
// up, dropping a last window that would start inside the end padding (PyTorch and onnxruntime do the same).
inline AxisGeometry ConvAxis(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                             const std::string& auto_pad, bool ceil_mode) {
  AxisGeometry g;
  const int64_t ext = KernelExtent(k, d);
  if (auto_pad == "VALID") {
    g.pad_begin = g.pad_end = 0;
    if (in >= 0) g.out = std::max<int64_t>(0, FloorDiv(in - ext, s) + 1);
    if (in >= 0 && ceil_mode) g.out = std::max<int64_t>(0, CeilDiv(in - ext, s) + 1);
    return g;
  }
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (in < 0) return g;
    g.out = CeilDiv(in, s);
    const int64_t total = std::max<int64_t>(0, (g.out - 1) * s + ext - in);
    const int64_t small = total / 2, big = total - small;
    g.pad_begin = auto_pad == "SAME_UPPER" ? small : big;
    g.pad_end = auto_pad == "SAME_UPPER" ? big : small;
    return g;
  }
  g.pad_begin = pb;
  g.pad_end = pe;
  if (in < 0) return g;
  const int64_t span = in + pb + pe - ext;
  if (!ceil_mode) {
    g.out = FloorDiv(span, s) + 1;
  } else {
    g.out = CeilDiv(span, s) + 1;
    if ((g.out - 1) * s >= in + pb) --g.out;
  }
  g.out = std::max<int64_t>(0, g.out);
  return g;
}

// ConvTranspose. out_shape < 0 when not given. The returned pad_end is ONNX's pad_end minus output_padding, so
// out = (in - 1) * s + ext - pad_begin - pad_end always holds (pad_end may then be negative: those output rows
// receive no input contribution, only the bias).
inline AxisGeometry ConvTransposeAxis(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                                      int64_t output_padding, int64_t out_shape, const std::string& auto_pad) {
  AxisGeometry g;
  const int64_t ext = KernelExtent(k, d);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (out_shape < 0 && same && in >= 0) out_shape = in * s;
  if (out_shape >= 0) {
    if (in < 0) {
      g.out = out_shape;
      return g;
    }
    const int64_t total = std::max<int64_t>(0, (in - 1) * s + output_padding + ext - out_shape);
    const int64_t small = total / 2, big = total - small;
    g.pad_begin = auto_pad == "SAME_UPPER" ? small : big;
    g.out = out_shape;
  } else {
    if (auto_pad == "VALID") pb = pe = 0;
    g.pad_begin = pb;
    if (in < 0) return g;
    g.out = (in - 1) * s + output_padding + ext - pb - pe;
  }
  g.pad_end = (in - 1) * s + ext - g.pad_begin - g.out;
  return g;
}

// ---- Einsum ------------------------------------------------------------------------------------------------

// Label ids: 'a'..'z' -> 0..25, 'A'..'Z' -> 26..51, the dims an ellipsis covers -> 52 + j, where j counts the
// broadcast dims right-aligned across operands (an operand whose ellipsis covers r of E dims gets 52+E-r ...).
struct EinsumEquation {
  std::vector<std::vector<int>> inputs;  // per operand, one label per axis (a label repeats for a diagonal)
  std::vector<int> output;
  int ellipsis_rank = 0;
};

inline int EinsumLetter(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// Throws std::invalid_argument with a message on a malformed equation or an operand rank that does not fit.
inline EinsumEquation ParseEinsum(const std::string& equation, const std::vector<int>& ranks) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const bool explicit_out = arrow != std::string::npos;
  const std::string rhs = explicit_out ? eq.substr(arrow + 2) : "";
  std::vector<std::string> terms;
  {
    size_t start = 0;
    for (;;) {
      size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (terms.size() != ranks.size())
    throw std::invalid_argument("equation '" + equation + "' has " + std::to_string(terms.size()) +
                                " operand terms but the node has " + std::to_string(ranks.size()) + " inputs");
  // Parse a term into letters with an ellipsis marker (-1).
  auto parse_term = [&](const std::string& t, bool* has_ell) {
    std::vector<int> out;
    *has_ell = false;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '.') {
        if (*has_ell || t.compare(i, 3, "...") != 0)
          throw std::invalid_argument("equation '" + equation + "': malformed ellipsis");
        *has_ell = true;
        out.push_back(-1);
        i += 2;
        continue;
      }
      const int l = EinsumLetter(t[i]);
      if (l < 0) throw std::invalid_argument("equation '" + equation + "': invalid character '" + t[i] + "'");
      out.push_back(l);
    }
    return out;
  };
  EinsumEquation r;
  std::vector<std::vector<int>> raw(terms.size());
  std::vector<int> ell_rank(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    bool has_ell;
    raw[i] = parse_term(terms[i], &has_ell);
    const int letters = static_cast<int>(raw[i].size()) - (has_ell ? 1 : 0);
    if (has_ell ? ranks[i] < letters : ranks[i] != letters)
      throw std::invalid_argument("equation '" + equation + "': term '" + terms[i] + "' does not fit operand " +
                                  std::to_string(i) + " of rank " + std::to_string(ranks[i]));
    ell_rank[i] = has_ell ? ranks[i] - letters : 0;
    r.ellipsis_rank = std::max(r.ellipsis_rank, ell_rank[i]);
  }
  const int E = r.ellipsis_rank;
  r.inputs.resize(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    for (int l : raw[i]) {
      if (l >= 0) {
        r.inputs[i].push_back(l);
        continue;
      }
      for (int j = E - ell_rank[i]; j < E; ++j) r.inputs[i].push_back(52 + j);
    }
  }
  if (explicit_out) {
    bool has_ell;
    std::vector<int> o = parse_term(rhs, &has_ell);
    for (int l : o) {
      if (l < 0) {
        for (int j = 0; j < E; ++j) r.output.push_back(52 + j);
        continue;
      }
      if (std::count(r.output.begin(), r.output.end(), l))
        throw std::invalid_argument("equation '" + equation + "': output label repeated");
      bool found = false;
      for (const auto& in : r.inputs) found = found || std::count(in.begin(), in.end(), l) > 0;
      if (!found) throw std::invalid_argument("equation '" + equation + "': output label not in any input");
      r.output.push_back(l);
    }
    // Ellipsis dims that an explicit output leaves out are summed, like any label missing from the output.
  } else {
    for (int j = 0; j < E; ++j) r.output.push_back(52 + j);
    // Letters appearing exactly once, in ASCII order (uppercase before lowercase).
    std::vector<int> count(52, 0);
    for (const auto& in : r.inputs)
      for (int l : in)
        if (l < 52) ++count[l];
    for (int l = 26; l < 52; ++l)
      if (count[l] == 1) r.output.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[l] == 1) r.output.push_back(l);
  }
  return r;
}

}  // namespace ot::linalg
