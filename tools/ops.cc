// `onnx-train ops`: the supported-op table, read from the op and kernel registries (README's table is this
// command's --markdown output, checked by a test).
#include <cstdio>
#include <map>
#include <vector>

#include "executor/device.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "tools/commands.h"

namespace ot::tools {

int Ops(bool markdown) {
  const OpRegistry& reg = OpRegistry::Global();
  const KernelRegistry& kreg = KernelRegistry::Cpu();
  std::map<std::string, std::vector<std::string>> by_domain;
  for (const OpSchema* s : reg.All()) {
    if (!kreg.Find(s->domain, s->op_type)) continue;
    if (s->domain == kInternalDomain) continue;  // backward and optimizer helpers, not ops a model uses
    std::string e = s->op_type;
    if (s->min_opset > 1) e += " (" + std::to_string(s->min_opset) + "+)";
    by_domain[s->domain.empty() ? "ai.onnx" : s->domain].push_back(e);
  }
  for (const auto& [domain, ops] : by_domain) {
    if (markdown) {
      std::printf("| domain | ops (earliest opset where above 1) |\n| --- | --- |\n| %s | ", domain.c_str());
      for (size_t i = 0; i < ops.size(); ++i) std::printf(i ? ", %s" : "%s", ops[i].c_str());
      std::printf(" |\n");
    } else {
      std::printf("%s (%zu ops):\n", domain.c_str(), ops.size());
      for (const std::string& op : ops) std::printf("  %s\n", op.c_str());
    }
  }
  return 0;
}

int OpsWithoutGpuKernel() {
  if (!CudaBackendBuilt()) std::printf("this onnx-train was built without the CUDA backend\n");
  const KernelRegistry& kreg = KernelRegistry::Cpu();
  for (const OpSchema* s : OpRegistry::Global().All()) {
    if (!kreg.Find(s->domain, s->op_type) || CudaHasKernel(s->domain, s->op_type)) continue;
    // Shape, Size and Constant always fold when a plan is made (their values are known), on a device too.
    if (!s->reads_input_data || (s->domain.empty() && s->op_type == "Constant")) continue;
    std::printf("%s%s: no GPU kernel yet\n", s->domain.empty() ? "" : (s->domain + ".").c_str(), s->op_type.c_str());
  }
  return 0;
}

}  // namespace ot::tools
