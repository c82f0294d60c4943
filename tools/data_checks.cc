#include "tools/data_checks.h"

#include <algorithm>

#include "graph/error.h"

namespace ot::tools {

void CheckDataFitsStep(const Graph& step, const Arrays& arrays, const std::string& file, const TrainOptions& o) {
  for (const Value* in : step.RealInputs()) {
    auto it = arrays.find(in->name);
    if (it == arrays.end()) continue;  // ReadArrays names a missing one
    const Tensor& t = it->second;
    const std::string what = file + ": array '" + in->name + "' is " + DataTypeName(t.dtype()) + DimsToString(t.dims());
    const bool labels = !o.loss.empty() && in->name == o.labels;
    const std::string role =
        labels ? (o.loss == "mse" ? " (--loss mse compares the labels with --logits '" + o.logits + "')"
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
