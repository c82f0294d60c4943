// A pipeline of named passes run in order. The list that builds it is the one place the passes' names are spelled:
// --disable-pass, --dump-after and the help text read them from here. Around every pass the verifier checks the
// graph when asked (VerifyPassesByDefault(): debug builds, ONNXTRAIN_VERIFY_PASSES=1 -- every test sets it -- or
// --verify-passes), so a pass that breaks the graph is named at once instead of by whatever reads the graph later.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ot {

// Whether pipelines verify between passes unless told: in debug builds, or when ONNXTRAIN_VERIFY_PASSES is set to
// anything but 0 or an empty string.
bool VerifyPassesByDefault();

// What a caller controls of a pipeline: --disable-pass, --dump-after, --verify-passes.
struct PipelineControl {
  std::vector<std::string> disabled;  // optional passes left out (names of any stage: each stage takes its own)
  std::function<void(const std::string& pass, const Graph& g)> after_pass;  // after each pass that ran
  bool verify = false;  // the verifier around every pass even where VerifyPassesByDefault() says no
};

class PassManager {
 public:
  using RunFn = std::function<bool(Graph&)>;

  // Adds a pass. `required`: why the pipeline cannot do without it (empty: the pass is optional and --disable-pass
  // may name it). `applies` false: the pass is not part of this run (amp without --amp); its name stays known.
  void Add(std::string name, RunFn run, std::string required = "", bool applies = true);
  // Leaves passes out. Throws Error naming the flag for a name no pass has, or a required pass (saying what it is
  // needed for); either message lists the passes that can be left out (and `also_optional`, the names a later
  // stage owns).
  void Disable(const std::vector<std::string>& names, const std::vector<std::string>& also_optional = {});
  bool disabled(const std::string& name) const { return disabled_.count(name) > 0; }
  // Called after each pass that ran, with its name (--dump-after).
  void AfterEach(std::function<void(const std::string& pass, const Graph&)> f) { after_ = std::move(f); }
  void set_verify(bool v) { verify_ = v; }
  // Disable(control.disabled, also_optional), the hook, and verification when control.verify asks for it.
  void Apply(const PipelineControl& control, const std::vector<std::string>& also_optional = {});
  std::vector<std::string> names() const;
  std::vector<std::string> optional_names() const;
  // Runs the passes that apply and are not disabled, in order; returns the names of those that changed the graph.
  // With verification, throws Error naming the pass whose output fails it (or saying the input graph does).
  std::vector<std::string> Run(Graph& g);

 private:
  struct Entry {
    std::string name;
    RunFn run;
    std::string required;
    bool applies = true;
  };
  std::vector<Entry> passes_;
  std::set<std::string> disabled_;
  std::function<void(const std::string&, const Graph&)> after_;
  bool verify_ = VerifyPassesByDefault();
};

}  // namespace ot
