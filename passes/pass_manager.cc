#include "passes/pass_manager.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "graph/error.h"
#include "graph/verifier.h"

namespace ot {

bool VerifyPassesByDefault() {
#ifndef NDEBUG
  return true;
#else
  const char* e = std::getenv("ONNXTRAIN_VERIFY_PASSES");
  return e && *e && std::strcmp(e, "0") != 0;
#endif
}

void PassManager::Add(std::string name, RunFn run, std::string required, bool applies) {
  passes_.push_back({std::move(name), std::move(run), std::move(required), applies});
}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> r;
  for (const Entry& e : passes_) r.push_back(e.name);
  return r;
}

std::vector<std::string> PassManager::optional_names() const {
  std::vector<std::string> r;
  for (const Entry& e : passes_)
    if (e.required.empty()) r.push_back(e.name);
  return r;
}

void PassManager::Disable(const std::vector<std::string>& names, const std::vector<std::string>& also_optional) {
  std::vector<std::string> optional = optional_names();
  optional.insert(optional.end(), also_optional.begin(), also_optional.end());
  std::string list;
  for (const std::string& p : optional) list += (list.empty() ? "" : ", ") + p;
  for (const std::string& n : names) {
    if (std::find(also_optional.begin(), also_optional.end(), n) != also_optional.end()) continue;
    auto it = std::find_if(passes_.begin(), passes_.end(), [&](const Entry& e) { return e.name == n; });
    if (it != passes_.end() && it->required.empty()) {
      disabled_.insert(n);
      continue;
    }
    throw Error("--disable-pass " + n + ": " +
                (it != passes_.end() ? "the step cannot be built without it (" + it->required + ")" : "no such pass") +
                "; passes that can be disabled: " + list);
  }
}

void PassManager::Apply(const PipelineControl& control, const std::vector<std::string>& also_optional) {
  Disable(control.disabled, also_optional);
  if (control.after_pass) AfterEach(control.after_pass);
  if (control.verify) verify_ = true;
}

std::vector<std::string> PassManager::Run(Graph& g) {
  std::vector<std::string> changed;
  if (verify_) {
    try {
      VerifyGraph(g);
    } catch (const Error& e) {
      throw Error(std::string("the input graph is invalid: ") + e.what());
    }
  }
  for (const Entry& p : passes_) {
    if (!p.applies || disabled_.count(p.name)) continue;
    if (p.run(g)) changed.push_back(p.name);
    if (verify_) {
      try {
        VerifyGraph(g);
      } catch (const Error& e) {
        throw Error("pass '" + p.name + "' produced an invalid graph: " + e.what());
      }
    }
    if (after_) after_(p.name, g);
  }
  return changed;
}

}  // namespace ot
