// Loading a model for train, run, plan and passes: every unsupported node is named before anything else reads it.
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "tools/commands.h"

namespace ot::tools {

std::unique_ptr<Graph> LoadCheckedModel(const std::string& path) {
  std::unique_ptr<Graph> g = LoadModel(path);
  RequireSupportedOps(*g, path);
  for (const Graph::TrainingInfo& t : g->training_info)  // a stored step's algorithm and initialization
    for (const Graph* sub : {t.algorithm.get(), t.initialization.get()})
      if (sub) RequireSupportedOps(*sub, path);
  return g;
}

}  // namespace ot::tools
