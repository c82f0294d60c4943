#include "tools/data_checks.h"

#include <algorithm>
#include <cstdio>

#include "graph/error.h"

namespace ot::tools {

namespace {

// --loss ctc: each sample's lengths within its arrays (and the logits' frames when static), its labels classes other
// than the blank, and enough frames for its labels (one per label and one more between equal neighbours); a
// sample that cannot fit stops the run here, or is counted in a note with --ctc-zero-infinity (it adds 0).
void CheckCtcData(const Graph& step, const Arrays& arrays, const std::string& file, const TrainOptions& o) {
  auto lab = arrays.find(o.labels), ll = arrays.find(o.label_lengths), gl = arrays.find(o.logit_lengths);
  if (lab == arrays.end() || ll == arrays.end() || gl == arrays.end()) return;  // named by ReadArrays
  const Tensor& labels = lab->second;
  const int64_t n = labels.dims()[0], width = labels.dims()[1];
  for (const auto* t : {&*ll, &*gl})
    if (t->second.dims()[0] != n)
      throw Error(file + ": array '" + t->first + "' has " + std::to_string(t->second.dims()[0]) + " samples, '" +
                  o.labels + "' " + std::to_string(n));
  const Value* logits = step.FindValue(o.logits);
  int64_t frames = -1, classes = -1;
  if (logits && logits->shape.known_rank() && logits->shape.rank() == 3) {
    const Dim& f = logits->shape[o.logits_layout == "btc" ? 1 : 0];
    if (f.is_static()) frames = f.value;
    if (logits->shape[2].is_static()) classes = logits->shape[2].value;
  }
  int64_t unfit = 0, first_unfit = -1;
  for (int64_t i = 0; i < n; ++i) {
    const std::string sample = file + ": sample " + std::to_string(i) + ": ";
    const int64_t len = ll->second.GetInt64(i), have = gl->second.GetInt64(i);
    if (len < 0 || len > width)
      throw Error(sample + "'" + o.label_lengths + "' is " + std::to_string(len) + ", outside [0, " +
                  std::to_string(width) + "] (the width of '" + o.labels + "')");
    if (have < 0 || (frames >= 0 && have > frames))
      throw Error(
          sample + "'" + o.logit_lengths + "' is " + std::to_string(have) +
          (have < 0 ? ", negative" : ", beyond the " + std::to_string(frames) + " frames of '" + o.logits + "'"));
    int64_t need = len;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t c = labels.GetInt64(i * width + j);
      if (c == o.blank)
        throw Error(sample + "label " + std::to_string(j) + " is the blank (" + std::to_string(o.blank) + ")");
      if (c < 0 || (classes >= 0 && c >= classes))
        throw Error(sample + "label " + std::to_string(j) + " is " + std::to_string(c) + ", outside [0, " +
                    std::to_string(classes) + "), the classes of '" + o.logits + "'");
      if (j > 0 && c == labels.GetInt64(i * width + j - 1)) ++need;
    }
    if (have < need) {
      if (!o.ctc_zero_infinity)
        throw Error(sample + "its " + std::to_string(len) + " labels need " + std::to_string(need) +
                    " frames, it has " + std::to_string(have) + " ('" + o.logit_lengths +
                    "'); --ctc-zero-infinity trains without it");
      if (first_unfit < 0) first_unfit = i;
      ++unfit;
    }
  }
  if (unfit)
    std::fprintf(stderr,
                 "note: %s: %lld samples (the first: %lld) have fewer frames than their labels need: they add 0 "
                 "(--ctc-zero-infinity)\n",
                 file.c_str(), static_cast<long long>(unfit), static_cast<long long>(first_unfit));
}

}  // namespace

void CheckDataFitsStep(const Graph& step, const Arrays& arrays, const std::string& file, const TrainOptions& o) {
  for (const Value* in : step.RealInputs()) {
    auto it = arrays.find(in->name);
    if (it == arrays.end()) continue;  // ReadArrays names a missing one
    const Tensor& t = it->second;
    const std::string what = file + ": array '" + in->name + "' is " + DataTypeName(t.dtype()) + DimsToString(t.dims());
    const bool labels = !o.loss.empty() && in->name == o.labels;
    const std::string role =
        labels ? (o.loss == "mse"   ? " (--loss mse compares the labels with --logits '" + o.logits + "')"
                  : o.loss == "ctc" ? " (--loss ctc takes class indices [samples, width], padded)"
                                    : " (--loss cross_entropy takes class indices)")
               : "";
    if (in->dtype != DataType::kUndefined && t.dtype() != in->dtype)
      throw Error(what + ", the step's input '" + in->name + "' is " + DataTypeName(in->dtype) + role);
    if (!in->shape.known_rank()) continue;
    if (t.rank() != in->shape.rank())
      throw Error(what + ", the step's input '" + in->name + "' has rank " + std::to_string(in->shape.rank()) + " " +
                  in->shape.ToString() + role);
    for (int d = 1; d < t.rank(); ++d) {  // axis 0 holds the samples
      const Dim& want = in->shape[d];
      if (want.is_static() && want.value != t.dims()[static_cast<size_t>(d)])
        throw Error(what + ", the step's input '" + in->name + "' is " + in->shape.ToString() + " (axis " +
                    std::to_string(d) + ": " + std::to_string(t.dims()[static_cast<size_t>(d)]) + " vs " +
                    std::to_string(want.value) + ")" + role);
    }
  }
  if (o.loss == "ctc") return CheckCtcData(step, arrays, file, o);
  // Class labels within the classes of --logits (axis 1), named by their sample.
  if (o.loss != "cross_entropy") return;
  auto lab = arrays.find(o.labels);
  const Value* logits = step.FindValue(o.logits);
  if (lab == arrays.end() || !logits || !logits->shape.known_rank() || logits->shape.rank() < 2 ||
      !logits->shape[1].is_static())
    return;
  const int64_t classes = logits->shape[1].value;
  const Tensor& t = lab->second;
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) return;
  const int64_t per = t.rank() > 0 && t.dims()[0] > 0 ? t.numel() / t.dims()[0] : 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = t.GetInt64(i);
    if (v < 0 || v >= classes)
      throw Error(file + ": array '" + o.labels + "' sample " + std::to_string(i / std::max<int64_t>(per, 1)) +
                  ": label " + std::to_string(v) + " is outside [0, " + std::to_string(classes) +
                  "), the classes of '" + o.logits + "'");
  }
}

}  // namespace ot::tools
