#include "passes/pass_manager.h"

#include "graph/error.h"
#include "graph/verifier.h"

namespace ot {

void PassManager::DumpAfter(const std::string& name,
                            std::function<void(const std::string& pass, const Graph&)> sink) {
  dump_after_ = name;
  sink_ = std::move(sink);
}

std::vector<std::string> PassManager::Run(Graph& g) {
  auto known = [&](const std::string& n) {
    if (n == "all") return true;
    for (const auto& p : passes_)
      if (p->name() == n) return true;
    return false;
  };
  for (const std::string& d : disabled_)
    if (!known(d)) throw Error("--disable-pass: no pass named '" + d + "'");
  if (!dump_after_.empty() && !known(dump_after_)) throw Error("--dump-after: no pass named '" + dump_after_ + "'");

  std::vector<std::string> changed;
  try {
    VerifyGraph(g);
  } catch (const Error& e) {
    throw Error(std::string("the input graph is invalid: ") + e.what());
  }
  for (const auto& p : passes_) {
    if (disabled_.count(p->name())) continue;
    if (p->Run(g)) changed.push_back(p->name());
    try {
      VerifyGraph(g);
    } catch (const Error& e) {
      throw Error("pass '" + p->name() + "' produced an invalid graph: " + e.what());
    }
    if (sink_ && (dump_after_ == "all" || dump_after_ == p->name())) sink_(p->name(), g);
  }
  return changed;
}

}  // namespace ot
