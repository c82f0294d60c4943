// `onnx-train info MODEL`: inputs, outputs, opsets, op counts, parameters and unsupported ops.
#include <cstdio>
#include <map>
#include <set>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "tools/commands.h"

namespace ot::tools {

namespace {
std::string TypeString(const Value* v) { return DataTypeName(v->dtype) + v->shape.ToString(); }
std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}
}  // namespace

int Info(const std::string& path) {
  std::unique_ptr<Graph> g = LoadModel(path);
  try {
    InferShapes(*g);
  } catch (const Error& e) {
    std::printf("note: shape inference stopped: %s\n", e.what());
  }
  std::printf("model: %s\n", path.c_str());
  if (!g->producer_name.empty())
    std::printf("producer: %s %s\n", g->producer_name.c_str(), g->producer_version.c_str());
  std::printf("opsets:");
  for (const auto& [d, v] : g->opset_imports) std::printf(" %s=%d", d.empty() ? "ai.onnx" : d.c_str(), v);
  std::printf("\ninputs:\n");
  for (const Value* v : g->RealInputs()) std::printf("  %s: %s\n", v->name.c_str(), TypeString(v).c_str());
  std::printf("outputs:\n");
  for (const Value* v : g->outputs) std::printf("  %s: %s\n", v->name.c_str(), TypeString(v).c_str());

  int64_t params = 0, bytes = 0, tensors = 0;
  for (const auto& v : g->values())
    if (v->initializer && IsFloat(v->initializer->dtype())) {
      ++tensors;
      params += v->initializer->numel();
      bytes += static_cast<int64_t>(v->initializer->nbytes());
    }
  std::printf("parameters: %lld in %lld float tensors (%s)\n", static_cast<long long>(params),
              static_cast<long long>(tensors), HumanBytes(static_cast<double>(bytes)).c_str());

  std::map<std::string, int> counts;
  std::map<std::string, std::string> unsupported;
  const OpRegistry& reg = OpRegistry::Global();
  for (const auto& n : g->nodes()) {
    std::string op = (n->domain.empty() || n->domain == "ai.onnx" ? "" : n->domain + ".") + n->op_type;
    ++counts[op];
    std::string why = UnsupportedReason(reg, *n);
    if (!why.empty()) unsupported[op] = why;
  }
  std::printf("ops (%zu nodes):\n", g->nodes().size());
  for (const auto& [op, c] : counts) std::printf("  %-28s %d\n", op.c_str(), c);
  if (unsupported.empty()) {
    std::printf("unsupported ops: none\n");
  } else {
    std::printf("unsupported ops:\n");
    for (const auto& [op, why] : unsupported) std::printf("  %s: %s\n", op.c_str(), why.c_str());
  }
  return 0;
}

}  // namespace ot::tools
