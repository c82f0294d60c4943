// Runs passes in order with the verifier before and after each, can dump the graph after a named pass (or all)
// and can disable passes by name.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ot {

class PassManager {
 public:
  void Add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  void Disable(const std::string& name) { disabled_.insert(name); }
  // "all" dumps after every pass.
  void DumpAfter(const std::string& name, std::function<void(const std::string& pass, const Graph&)> sink);
  // Returns the names of the passes that changed the graph. Throws Error naming the pass whose output fails
  // verification, or an unknown name given to Disable/DumpAfter.
  std::vector<std::string> Run(Graph& g);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  std::set<std::string> disabled_;
  std::string dump_after_;
  std::function<void(const std::string&, const Graph&)> sink_;
};

}  // namespace ot
