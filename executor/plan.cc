#include "executor/plan.h"

#include <tbb/flow_graph.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "executor/host_memory.h"
#include "executor/threads.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "kernel_common/host_alloc.h"
#include "passes/pass_manager.h"

namespace ot {

namespace {

// Nodes whose inputs are all known fold at plan time when their outputs are at most this many elements, or
// whatever their size when a later node needs their value to know its shapes.
constexpr int64_t kFoldLimit = 1 << 16;
constexpr size_t kAlign = 64;
// KernelIO arrays have at least this many slots, so a kernel may read an optional operand that the node omits
// by leaving it off the end (a Conv without bias) and see null.
constexpr size_t kMinOperandSlots = 16;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The arena is long-lived: huge pages (kernel_common/host_alloc.h); a plan-time fold's workspace is malloc's.
std::shared_ptr<uint8_t> AllocBytes(size_t n, bool long_lived) {
  const size_t bytes = std::max(AlignUp(n), kAlign);
  std::shared_ptr<uint8_t> p =
      long_lived ? AllocHostShared(bytes)
                 : std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes)), std::free);
  if (!p)
    throw Error("out of memory: could not allocate " + FormatBytes(static_cast<int64_t>(n)) + " for the step's values");
  return p;
}

TensorDesc DescOf(const Tensor& t) { return TensorDesc{t.dtype(), t.dims(), true}; }

}  // namespace

std::vector<const Value*> ValuesNeededAtPlanTime(const Graph& g) {
  const OpRegistry& reg = OpRegistry::Global();
  std::vector<const Value*> stack, out;
  std::unordered_map<const Value*, bool> seen;
  for (const auto& n : g.nodes()) {
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    if (!s) continue;
    for (int i : s->value_inputs)
      if (n->has_input(i)) stack.push_back(n->inputs[i]);
  }
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (seen[v]) continue;
    seen[v] = true;
    out.push_back(v);
    if (!v->producer) continue;
    const OpSchema* s = reg.Find(v->producer->domain, v->producer->op_type);
    if (s && !s->reads_input_data) continue;
    for (const Value* in : v->producer->inputs)
      if (in) stack.push_back(in);
  }
  return out;
}

struct Plan::FlowGraph {
  tbb::flow::graph graph;
  tbb::flow::broadcast_node<tbb::flow::continue_msg> start{graph};
  std::vector<std::unique_ptr<tbb::flow::continue_node<tbb::flow::continue_msg>>> nodes;
};

Plan::~Plan() {
  if (device_) {
    try {
      device_->Synchronize();
    } catch (...) {
    }
    if (graph_) device_->ReleaseGraph(graph_);
    ReleaseDeviceEvents();
    for (void* q : dev_allocs_) device_->Free(q);
  }
}

// Compile's state: what is known of every value (its dims, its value when known at plan time, its buffer) and the
// plan being built; each step of the compilation a method.
class Plan::Compiler {
 public:
  Compiler(Plan& p, const Graph& g, const std::map<std::string, const Tensor*>& known, uint64_t seed)
      : p_(p), g_(g), known_(known), seed_(seed) {
    for (const Value* v : ValuesNeededAtPlanTime(g)) needed_[v] = true;
  }

  // Graph inputs (a fed value overrides an initializer of the same name).
  void AddInputs(const std::map<std::string, TensorDesc>& inputs) {
    for (const auto& [name, desc] : inputs) {
      const Value* v = g_.FindValue(name);
      if (!v) throw Error("input '" + name + "' is not an input of the model");
      Info& in = info_[v];
      in.desc = desc;
      auto k = known_.find(name);
      if (k != known_.end()) in.value = k->second;
      Buffer b;
      b.kind = BufKind::kInput;
      b.desc = desc;
      b.name = name;
      b.io_index = static_cast<int>(p_.input_names_.size());
      p_.input_names_.push_back(name);
      in.buf = static_cast<int>(p_.bufs_.size());
      p_.bufs_.push_back(b);
    }
  }

  // Initializers: constants known at plan time, except training state (parameters, optimizer moments...), which
  // changes between runs: its data is read from the initializer at run time and never folded into the plan.
  void AddInitializers() {
    std::unordered_map<const Value*, bool> is_state;
    for (const auto& b : g_.update_bindings) is_state[b.state] = true;
    for (const auto& v : g_.values()) {
      if (!v->initializer || info_.count(v.get())) continue;
      if (is_state.count(v.get())) {
        p_.state_bufs_.push_back(static_cast<int>(p_.bufs_.size()));
        Buffer b;
        b.kind = BufKind::kConst;
        b.desc = DescOf(*v->initializer);
        b.name = v->name;
        b.constant = v->initializer.get();
        info_[v.get()] = Info{b.desc, nullptr, static_cast<int>(p_.bufs_.size())};
        p_.bufs_.push_back(b);
        continue;
      }
      info_[v.get()] = Info{DescOf(*v->initializer), v->initializer.get(), -1};
    }
  }

  // One node: its outputs' dims inferred for the known inputs, then folded into constants (every input it reads
  // known, no randomness, a small result or one a shape needs) or planned as a step with its kernel.
  void AddNode(const Node& n) {
    const std::string why = UnsupportedReason(OpRegistry::Global(), n);
    if (!why.empty()) throw UnsupportedError(n.Describe() + ": " + why);
    const OpSchema* schema = OpRegistry::Global().Find(n.domain, n.op_type);
    Operands ops = InputsOf(n, *schema);
    InferOutputs(n, *schema, ops);
    KernelContext kctx{n,
                       ops.in_descs,
                       ops.vals,
                       ops.out_descs,
                       seed_ ^ (std::hash<std::string>{}(n.name) * 0x9e3779b97f4a7c15ull),
                       &g_,
                       p_.device_.get()};
    const KernelFactory* factory = KernelRegistry::Cpu().Find(n.domain, n.op_type);
    // Folding runs the CPU kernel, on a device too (its results are uploaded with the other constants).
    KernelInfo kinfo;
    if (factory)
      kinfo = CpuKernel(n, *factory, kctx);
    else if (!p_.device_)
      throw UnsupportedError(n.Describe() + ": no CPU kernel for op " + n.op_type);
    if (factory && ops.all_known && !kinfo.random && (ops.out_elems <= kFoldLimit || ops.out_needed)) {
      Fold(n, ops, kinfo);
      return;
    }
    if (p_.device_) {
      std::optional<KernelInfo> dk = p_.device_->MakeKernel(kctx);
      if (!dk)
        throw UnsupportedError(n.Describe() + ": no kernel for op " + n.op_type + " on " + p_.device_->name() +
                               " yet (run it with --device cpu)");
      kinfo = std::move(*dk);
    }
    if (kinfo.random) p_.random_ = true;
    AddStep(n, ops, std::move(kinfo));
  }

  // Graph outputs: runtime values are written straight into the caller's output tensors.
  void AddOutputs() {
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      const Value* v = g_.outputs[i];
      auto it = info_.find(v);
      if (it == info_.end()) throw Error("graph output '" + v->name + "' is not computed by the model");
      int b = it->second.buf;
      if (b < 0) b = ConstBuf(v);
      Buffer& buf = p_.bufs_[b];
      if (buf.kind == BufKind::kArena && buf.io_index < 0) {
        buf.kind = BufKind::kOutput;
        buf.io_index = static_cast<int>(i);
      }
      p_.output_bufs_.push_back(b);
    }
  }

 private:
  struct Info {
    TensorDesc desc;
    const Tensor* value = nullptr;  // known at plan time
    int buf = -1;                   // runtime buffer
  };
  // A node's operands as the kernel factory sees them.
  struct Operands {
    std::vector<TypeShape> ts;
    std::vector<const Tensor*> vals;
    std::vector<TensorDesc> in_descs, out_descs;
    bool all_known = true;  // every input whose data the op reads is known at plan time
    int64_t out_elems = 0;
    bool out_needed = false;  // an output decides a shape at plan time
  };

  Operands InputsOf(const Node& n, const OpSchema& schema) {
    Operands ops;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (!v) {
        ops.ts.push_back({});
        ops.vals.push_back(nullptr);
        ops.in_descs.push_back({});
        continue;
      }
      auto it = info_.find(v);
      if (it == info_.end())
        throw Error(n.Describe() + ": input '" + v->name + "' has no value (not fed, not an initializer, and " +
                    "not produced by any node)");
      ops.ts.push_back({it->second.desc.dtype, Shape::Static(it->second.desc.dims), true});
      ops.vals.push_back(it->second.value);
      ops.in_descs.push_back(it->second.desc);
      if (!it->second.value && schema.reads_input_data) ops.all_known = false;
    }
    for (int i : schema.value_inputs)
      if (n.has_input(i) && !ops.vals[i])
        throw Error(n.Describe() + ": input " + std::to_string(i) + " ('" + n.inputs[i]->name +
                    "') decides the output shape, but its value is computed from data at run time; " +
                    "data-dependent shapes are not supported");
    return ops;
  }

  void InferOutputs(const Node& n, const OpSchema& schema, Operands& ops) {
    InferContext ctx(n, ops.ts, ops.vals, static_cast<int>(n.outputs.size()));
    schema.infer(ctx);
    ops.out_descs.resize(n.outputs.size());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      const TypeShape& o = ctx.outputs()[i];
      if (!o.present || !o.shape.is_static())
        throw Error(n.Describe() + ": the shape of output '" + n.outputs[i]->name + "' cannot be determined (" +
                    (o.present ? o.shape.ToString() : std::string("not inferred")) + ")");
      ops.out_descs[i] = TensorDesc{o.dtype, o.shape.StaticDims(), true};
      ops.out_elems += ops.out_descs[i].numel();
      if (needed_.count(n.outputs[i])) ops.out_needed = true;
    }
  }

  static KernelInfo CpuKernel(const Node& n, const KernelFactory& factory, const KernelContext& kctx) {
    try {
      return factory(kctx);
    } catch (const UnsupportedError&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {  // a kernel refusing its sizes: the node it was made for first
      const std::string msg = e.what();
      throw Error(msg.find(n.name) == std::string::npos ? n.Describe() + ": " + msg : msg);
    }
  }

  // Runs the kernel now on the known inputs; its outputs become constants of the plan.
  void Fold(const Node& n, const Operands& ops, KernelInfo& kinfo) {
    std::vector<const void*> in_ptrs;
    for (const Tensor* t : ops.vals) in_ptrs.push_back(t ? t->raw() : nullptr);
    if (in_ptrs.size() < kMinOperandSlots) in_ptrs.resize(kMinOperandSlots, nullptr);
    // Shape/Size read no data: hand them a dummy non-null pointer for unknown inputs.
    std::vector<std::shared_ptr<Tensor>> outs(n.outputs.size());
    std::vector<void*> out_ptrs(std::max(n.outputs.size(), kMinOperandSlots), nullptr);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!ops.out_descs[i].present) continue;
      outs[i] = std::make_shared<Tensor>(ops.out_descs[i].dtype, ops.out_descs[i].dims);
      out_ptrs[i] = outs[i]->raw();
    }
    KernelIO io{in_ptrs.data(), out_ptrs.data()};
    std::shared_ptr<uint8_t> ws;
    if (kinfo.workspace_bytes) {
      ws = AllocBytes(kinfo.workspace_bytes, false);
      io.workspace = ws.get();
    }
    kinfo.fn(io);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!outs[i]) continue;
      p_.owned_.push_back(outs[i]);
      info_[n.outputs[i]] = Info{ops.out_descs[i], outs[i].get(), -1};
    }
    ++p_.folded_;
  }

  // A step: its input buffers (constants get one when a step first reads them) and an arena buffer per output.
  void AddStep(const Node& n, const Operands& ops, KernelInfo kinfo) {
    Step st;
    st.node = &n;
    st.kernel = std::move(kinfo);
    const int step_index = static_cast<int>(p_.steps_.size());
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (!v) {
        st.in_bufs.push_back(-1);
        continue;
      }
      Info& in = info_[v];
      const int b = in.buf >= 0 ? in.buf : ConstBuf(v);
      st.in_bufs.push_back(b);
      p_.bufs_[b].last_step = step_index;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!ops.out_descs[i].present) {
        st.out_bufs.push_back(-1);
        continue;
      }
      Buffer b;
      b.kind = BufKind::kArena;
      b.desc = ops.out_descs[i];
      b.name = n.outputs[i]->name;
      b.def_step = b.last_step = step_index;
      const int id = static_cast<int>(p_.bufs_.size());
      p_.bufs_.push_back(b);
      info_[n.outputs[i]] = Info{ops.out_descs[i], nullptr, id};
      st.out_bufs.push_back(id);
    }
    p_.steps_.push_back(std::move(st));
  }

  // The buffer of a value known at plan time, made when a step or an output first needs it.
  int ConstBuf(const Value* v) {
    Info& in = info_[v];
    if (in.buf >= 0) return in.buf;
    Buffer b;
    b.kind = BufKind::kConst;
    b.desc = in.desc;
    b.name = v->name;
    b.constant = in.value;
    in.buf = static_cast<int>(p_.bufs_.size());
    p_.bufs_.push_back(b);
    return in.buf;
  }

  Plan& p_;
  const Graph& g_;
  const std::map<std::string, const Tensor*>& known_;
  const uint64_t seed_;
  std::unordered_map<const Value*, Info> info_;
  std::unordered_map<const Value*, bool> needed_;
};

std::unique_ptr<Plan> Plan::Compile(const Graph& g, const std::map<std::string, TensorDesc>& inputs,
                                    const std::map<std::string, const Tensor*>& known, uint64_t seed,
                                    bool state_in_place, std::shared_ptr<DeviceBackend> device) {
  std::unique_ptr<Plan> p(new Plan());
  p->device_ = std::move(device);
  p->state_in_place_ = state_in_place;
  Compiler c(*p, g, known, seed);
  c.AddInputs(inputs);
  c.AddInitializers();
  for (const Node* n : g.TopologicalOrder()) c.AddNode(*n);
  c.AddOutputs();

  if (state_in_place) p->WriteStateInPlace(g);
  p->PlanArena();
  for (const Step& st : p->steps_)
    if (st.kernel.after_run) p->after_run_.push_back(&st.kernel.after_run);
  // Where passes are verified (debug builds, the test suites): the arena's ordering too, on plans of up to 20,000
  // kernels (the check keeps every kernel's ancestors: quadratic; the scaling tests' 100,000-node chains skip it).
  if (VerifyPassesByDefault() && p->steps_.size() <= 20000)
    if (const std::string why = p->CheckMemoryOrder(); !why.empty())
      throw Error("internal error: the plan's memory order: " + why);
  if (p->device_)
    p->SetUpDevice(g);
  else
    p->BuildFlowGraph();
  p->step_ns_.reset(new std::atomic<int64_t>[p->steps_.size()]());
  return p;
}

// Next-state outputs written into their state's storage (see Compile). For a binding state X -> next value V:
// V is computed by step w (a kOutput buffer, its first listing among the graph outputs), w's kernel allows V in
// place of X, w is X's last reader (a later reader would see the new value) and X is no graph output of its own
// (Run would copy the new value). Every other reader of X must finish before w starts.
void Plan::WriteStateInPlace(const Graph& g) {
  std::unordered_map<std::string, int> state_buf;
  for (size_t b = 0; b < bufs_.size(); ++b)
    if (bufs_[b].kind == BufKind::kConst && bufs_[b].constant) state_buf[bufs_[b].name] = static_cast<int>(b);
  std::unordered_map<int, int> times_output, times_bound;
  for (int b : output_bufs_) ++times_output[b];
  for (const auto& bind : g.update_bindings) {
    auto it = state_buf.find(bind.state->name);
    if (it != state_buf.end()) ++times_bound[it->second];
  }
  for (const auto& bind : g.update_bindings) {
    auto sit = state_buf.find(bind.state->name);
    if (sit == state_buf.end() || sit->second < 0) continue;
    const int x = sit->second;
    if (bufs_[x].constant != bind.state->initializer.get() || times_bound[x] != 1 || times_output.count(x)) continue;
    int out_index = -1;
    for (size_t i = 0; i < g.outputs.size(); ++i)
      if (g.outputs[i] == bind.next) {
        out_index = static_cast<int>(i);
        break;
      }
    if (out_index < 0) continue;
    const int v = output_bufs_[static_cast<size_t>(out_index)];
    Buffer& V = bufs_[static_cast<size_t>(v)];
    if (V.kind != BufKind::kOutput || V.io_index != out_index || V.def_step < 0 || V.state_buf >= 0) continue;
    const Buffer& X = bufs_[static_cast<size_t>(x)];
    if (X.desc.dtype != V.desc.dtype || X.desc.nbytes() != V.desc.nbytes() || X.last_step != V.def_step) continue;
    Step& w = steps_[static_cast<size_t>(V.def_step)];
    if (std::count(w.in_bufs.begin(), w.in_bufs.end(), x) != 1) continue;
    bool allowed = false;
    for (auto [o, k] : w.kernel.inplace)
      if (o >= 0 && k >= 0 && o < static_cast<int>(w.out_bufs.size()) && k < static_cast<int>(w.in_bufs.size()) &&
          w.out_bufs[o] == v && w.in_bufs[k] == x)
        allowed = true;
    if (!allowed) continue;
    V.state_buf = x;
    outputs_in_state_.push_back(out_index);
    for (size_t s = 0; s < steps_.size(); ++s)
      if (static_cast<int>(s) != V.def_step && std::count(steps_[s].in_bufs.begin(), steps_[s].in_bufs.end(), x))
        w.deps.push_back(static_cast<int>(s));  // s < w: X's last reader is w
  }
  std::sort(outputs_in_state_.begin(), outputs_in_state_.end());
}

namespace {
// Per buffer, the first buffer of its chain of MemoryPlan::shares (itself when it shares nothing), each chain walked
// once (a long chain of in-place elementwise ops is one group).
std::vector<int> GroupRoots(const std::vector<int>& shares) {
  std::vector<int> root(shares.size(), -1), path;
  for (size_t b = 0; b < shares.size(); ++b) {
    int c = static_cast<int>(b);
    while (root[c] < 0 && shares[c] >= 0) {
      path.push_back(c);
      c = shares[c];
    }
    const int r = root[c] >= 0 ? root[c] : c;
    root[c] = r;
    for (int p : path) root[p] = r;
    path.clear();
  }
  return root;
}
}  // namespace

// The arena from passes/memory_plan, then memory dependencies: a step that writes a region waits for every step
// that used an earlier occupant of the region (its writer and readers), so concurrent execution never overwrites
// a value still being read. An occupant is a group of buffers sharing memory (a value, its views, its in-place
// successors), alive from its first writer to its last reader of any member; an output written in place waits for
// every earlier reader of its group. A workspace occupies its region during its step. CheckMemoryOrder verifies it.
void Plan::PlanArena() {
  std::vector<PlanBuffer> pb(bufs_.size());
  output_bytes_ = 0;
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    const int64_t bytes = static_cast<int64_t>(B.desc.nbytes());
    switch (B.kind) {
      case BufKind::kArena:
        pb[b] = {bytes, false, false, B.def_step, B.last_step};
        break;
      case BufKind::kConst:
      case BufKind::kInput:
        pb[b] = {bytes, true, false, -1, -1};
        break;
      case BufKind::kOutput:
        pb[b] = {B.state_buf >= 0 ? 0 : bytes, true, false, -1, -1};
        output_bytes_ += pb[b].bytes;
        break;
    }
  }
  // Run allocates a tensor for every other graph output too (a constant, an input, or a value listed twice).
  for (size_t i = 0; i < output_bufs_.size(); ++i) {
    const Buffer& B = bufs_[static_cast<size_t>(output_bufs_[i])];
    if (B.kind == BufKind::kOutput && B.io_index == static_cast<int>(i)) continue;
    pb.push_back({static_cast<int64_t>(B.desc.nbytes()), true, false, -1, -1});
    output_bytes_ += pb.back().bytes;
  }
  int64_t exclusive_heap = 0, shared_heap = 0;
  for (const Step& st : steps_) {
    const int64_t h = static_cast<int64_t>(st.kernel.heap_bytes);
    if (st.kernel.exclusive)
      exclusive_heap = std::max(exclusive_heap, h);
    else
      shared_heap += h;
  }
  heap_bytes_ = exclusive_heap + shared_heap;
  for (size_t i = 0; i < output_bufs_.size(); ++i)
    heap_bytes_ += static_cast<int64_t>(sizeof(Tensor) + 64 + 96 +
                                        8 * bufs_[static_cast<size_t>(output_bufs_[i])].desc.dims.size());
  std::vector<PlanStep> ps(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    ps[s].inputs = st.in_bufs;
    ps[s].outputs = st.out_bufs;
    ps[s].workspace = static_cast<int64_t>(st.kernel.workspace_bytes);
    for (int pass = 0; pass < 2; ++pass)
      for (auto [o, i] : pass == 0 ? st.kernel.inplace : st.kernel.views) {
        if (o < 0 || i < 0 || o >= static_cast<int>(st.out_bufs.size()) || i >= static_cast<int>(st.in_bufs.size()))
          continue;
        const int ob = st.out_bufs[o], ib = st.in_bufs[i];
        if (ob < 0 || ib < 0 || bufs_[ob].desc.dtype != bufs_[ib].desc.dtype ||
            bufs_[ob].desc.nbytes() != bufs_[ib].desc.nbytes())
          continue;
        (pass == 0 ? ps[s].inplace : ps[s].views).push_back({ob, ib});
      }
  }
  mplan_ = PlanMemoryArena(pb, ps);
  for (size_t b = 0; b < bufs_.size(); ++b)
    if (bufs_[b].kind == BufKind::kArena) bufs_[b].offset = static_cast<size_t>(mplan_.offsets[b]);
  for (size_t s = 0; s < steps_.size(); ++s) steps_[s].workspace_offset = mplan_.workspace_offsets[s];
  arena_size_ = static_cast<size_t>(mplan_.arena_bytes);
  // The arena is allocated by the first Run (EnsureArena): a plan made to be measured (plan, fusion's sizing) holds
  // no memory.

  for (size_t s = 0; s < steps_.size(); ++s) {
    std::vector<int>& deps = steps_[s].deps;
    for (int b : steps_[s].in_bufs)
      if (b >= 0 && (bufs_[b].kind == BufKind::kArena || bufs_[b].kind == BufKind::kOutput) && bufs_[b].def_step >= 0 &&
          bufs_[b].def_step != static_cast<int>(s))
        deps.push_back(bufs_[b].def_step);
  }
  // Regions of the arena with their lifetimes and the steps that touch them: one per group of buffers sharing memory
  // (a value, its in-place successors and its views: MemoryPlan::shares), whose lifetime is the union of its
  // members' -- a view read after its base's last reader keeps the base's bytes, and every reader of any member must
  // finish before the next occupant writes them -- and one per workspace.
  struct Region {
    size_t lo, hi;
    int def, last;
    std::vector<int> users;
  };
  std::vector<Region> regions;
  std::vector<int> region_of(bufs_.size(), -1);
  const std::vector<int> roots = GroupRoots(mplan_.shares);
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    if (B.kind != BufKind::kArena || B.desc.nbytes() == 0) continue;
    const int r = roots[b];
    if (region_of[r] < 0) {
      region_of[r] = static_cast<int>(regions.size());
      regions.push_back({B.offset, B.offset, B.def_step, B.def_step, {}});
    }
    region_of[b] = region_of[r];
    Region& g = regions[region_of[r]];
    g.hi = std::max(g.hi, B.offset + AlignUp(B.desc.nbytes()));
    g.def = std::min(g.def, B.def_step);
    g.last = std::max({g.last, B.def_step, B.last_step});
  }
  // In plan order, each group's users since its memory was last written (its first writer, or an output written in
  // place -- not a view, which writes nothing): an output written in place waits for those (every earlier reader of
  // the memory it takes over; the readers before the previous write were waited for by that write, which this step
  // follows through its input). What is left at the end -- the last write and its readers -- is what the next
  // occupant of the bytes must wait for.
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    for (size_t o = 0; o < st.out_bufs.size(); ++o) {
      const int b = st.out_bufs[o];
      if (b < 0 || region_of[b] < 0 || mplan_.shares[static_cast<size_t>(b)] < 0) continue;
      bool view = false;
      for (auto [vo, vi] : st.kernel.views)
        if (vo == static_cast<int>(o) && vi >= 0 && vi < static_cast<int>(st.in_bufs.size()) &&
            st.in_bufs[vi] == mplan_.shares[static_cast<size_t>(b)])
          view = true;
      if (view) continue;
      std::vector<int>& users = regions[region_of[b]].users;
      for (int u : users)
        if (u != static_cast<int>(s)) steps_[s].deps.push_back(u);
      users.clear();
    }
    for (const std::vector<int>* list : {&st.in_bufs, &st.out_bufs})
      for (int b : *list)
        if (b >= 0 && region_of[b] >= 0) {
          std::vector<int>& users = regions[region_of[b]].users;
          if (users.empty() || users.back() != static_cast<int>(s)) users.push_back(static_cast<int>(s));
        }
  }
  for (size_t s = 0; s < steps_.size(); ++s)
    if (steps_[s].workspace_offset >= 0 && steps_[s].kernel.workspace_bytes) {
      const size_t lo = static_cast<size_t>(steps_[s].workspace_offset);
      regions.push_back({lo,
                         lo + AlignUp(steps_[s].kernel.workspace_bytes),
                         static_cast<int>(s),
                         static_cast<int>(s),
                         {static_cast<int>(s)}});
    }
  // In the order their occupancy begins, each region waits for the users of the latest earlier occupant of each of
  // its bytes: the occupants before that one are ordered before it in turn (it waited for them). An interval map of
  // the arena (segment start -> latest occupant, -1 for none) keeps this linear in the regions, not quadratic.
  std::vector<int> order(regions.size());
  for (size_t r = 0; r < regions.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return regions[a].def < regions[b].def; });
  std::map<size_t, int> latest = {{0, -1}};
  auto split = [&](size_t at) {  // a segment boundary at `at`
    auto it = std::prev(latest.upper_bound(at));
    if (it->first != at) latest.emplace_hint(std::next(it), at, it->second);
  };
  for (int r : order) {
    const Region& B = regions[r];
    split(B.lo);
    split(B.hi);
    auto first = latest.find(B.lo), last = latest.find(B.hi);
    for (auto it = first; it != last; ++it) {
      if (it->second < 0) continue;
      const Region& A = regions[it->second];
      // A's occupancy ends before B's begins (the memory plan gives overlapping bytes to disjoint lifetimes).
      if (!(A.def < B.def && A.last <= B.def)) continue;
      for (int u : A.users)
        if (u != B.def) steps_[B.def].deps.push_back(u);
    }
    latest.erase(first, last);
    latest.emplace(B.lo, r);
  }
  for (auto& st : steps_) {
    std::sort(st.deps.begin(), st.deps.end());
    st.deps.erase(std::unique(st.deps.begin(), st.deps.end()), st.deps.end());
  }
}

void Plan::BuildFlowGraph() {
  flow_ = std::make_unique<FlowGraph>();
  auto& fg = *flow_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    fg.nodes.push_back(std::make_unique<tbb::flow::continue_node<tbb::flow::continue_msg>>(
        fg.graph, [this, i](const tbb::flow::continue_msg&) {
          if (error_) return tbb::flow::continue_msg();
          try {
            std::vector<const void*> in;
            std::vector<void*> out;
            RunStep(i, in, out);
          } catch (...) {
            std::lock_guard<std::mutex> l(error_mu_);
            if (!error_) error_ = std::current_exception();
          }
          return tbb::flow::continue_msg();
        }));
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].deps.empty()) tbb::flow::make_edge(fg.start, *fg.nodes[i]);
    for (int d : steps_[i].deps) tbb::flow::make_edge(*fg.nodes[d], *fg.nodes[i]);
  }
}

namespace {
// Kernels that run their own OpenMP team take the lock exclusively; all others share it.
std::shared_mutex& KernelLock() {
  static std::shared_mutex m;
  return m;
}
}  // namespace

void Plan::CheckArenaFits(int64_t available, const std::string& where) const {
  if (available <= 0 || static_cast<int64_t>(arena_size_) <= available) return;
  // Name the largest buffers: what the user can shrink (the batch, a sequence length).
  std::vector<const Buffer*> big;
  for (const Buffer& b : bufs_)
    if (b.kind == BufKind::kArena) big.push_back(&b);
  std::sort(big.begin(), big.end(),
            [](const Buffer* a, const Buffer* b) { return a->desc.nbytes() > b->desc.nbytes(); });
  std::string names;
  for (size_t i = 0; i < big.size() && i < 3; ++i)
    names += (i ? ", " : "") + big[i]->name + " " + DataTypeName(big[i]->desc.dtype) + DimsToString(big[i]->desc.dims) +
             " (" + FormatBytes(static_cast<int64_t>(big[i]->desc.nbytes())) + ")";
  throw Error("out of memory: the step needs " + FormatBytes(static_cast<int64_t>(arena_size_)) + " for its values, " +
              where + " has " + FormatBytes(available) + " available; the largest: " + names);
}

void Plan::EnsureArena() {
  if (arena_ || device_) return;
  CheckArenaFits(AvailableHostMemory(), "the machine");
  arena_ = AllocBytes(arena_size_, true);
}

uint8_t* Plan::BufferPtr(int b) const {
  if (b < 0) return nullptr;
  const Buffer& buf = bufs_[b];
  if (device_) return buf.kind == BufKind::kArena ? dev_arena_ + buf.offset : dev_buf_[static_cast<size_t>(b)];
  switch (buf.kind) {
    case BufKind::kArena:
      return arena_.get() + buf.offset;
    case BufKind::kConst:
      return const_cast<uint8_t*>(static_cast<const uint8_t*>(buf.constant->raw()));
    case BufKind::kInput:
      return const_cast<uint8_t*>(static_cast<const uint8_t*>(input_ptrs_[buf.io_index]));
    case BufKind::kOutput:
      return static_cast<uint8_t*>(output_ptrs_[buf.io_index]);
  }
  return nullptr;
}

void Plan::RunStep(size_t i, std::vector<const void*>& in, std::vector<void*>& out) {
  const Step& st = steps_[i];
  auto ptr = [&](int b) -> uint8_t* { return BufferPtr(b); };
  in.clear();
  out.clear();
  for (int b : st.in_bufs) in.push_back(ptr(b));
  for (int b : st.out_bufs) out.push_back(ptr(b));
  // Optional operands past the node's own count read as absent (null), as KernelIO promises.
  if (in.size() < kMinOperandSlots) in.resize(kMinOperandSlots, nullptr);
  if (out.size() < kMinOperandSlots) out.resize(kMinOperandSlots, nullptr);
  KernelIO io{in.data(), out.data(), run_};
  if (st.workspace_offset >= 0) io.workspace = (device_ ? dev_arena_ : arena_.get()) + st.workspace_offset;
  if (device_) io.stream = device_->StreamHandle(issue_serial_ ? 0 : sched_.stream[i]);
  // Timed from the moment the kernel holds the lock: waiting for an exclusive kernel is not its time.
  const bool timed = profiling_ || tracing_;
  std::chrono::steady_clock::time_point t0;
  auto call = [&] {
    if (timed) t0 = std::chrono::steady_clock::now();
    st.kernel.fn(io);
    if (timed && device_) device_->Synchronize();
  };
  try {
    if (ThreadCount() == 1 || device_) {
      call();
    } else if (st.kernel.exclusive) {
      std::unique_lock<std::shared_mutex> l(KernelLock());
      call();
    } else {
      std::shared_lock<std::shared_mutex> l(KernelLock());
      // Isolation: while this kernel waits on its own parallel_for, the thread steals only that loop's tasks,
      // never another kernel (which could wait for this lock).
      tbb::this_task_arena::isolate(call);
    }
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find(st.node->name) == std::string::npos) msg = st.node->Describe() + ": " + msg;
    throw Error(msg);
  }
  if (check_numerics_) NoteNonFinite(i, in);
  if (timed) {
    const auto t1 = std::chrono::steady_clock::now();
    if (profiling_) step_ns_[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (tracing_) {
      const int slot = tbb::this_task_arena::current_thread_index();
      trace_[i] = {std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - run_start_).count(),
                   std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - run_start_).count(),
                   slot == tbb::task_arena::not_initialized ? 0 : slot};
    }
  }
}

std::vector<KernelEvent> Plan::trace() const {
  std::vector<KernelEvent> r;
  if (trace_.size() != steps_.size()) return r;
  for (size_t i = 0; i < steps_.size(); ++i) {
    KernelEvent e;
    e.node = steps_[i].node;
    e.start_ns = trace_[i].start;
    e.end_ns = trace_[i].end;
    e.thread = trace_[i].thread;
    for (int b : steps_[i].in_bufs)
      if (b >= 0) {
        e.inputs.push_back(bufs_[static_cast<size_t>(b)].desc);
        e.bytes_in += static_cast<int64_t>(bufs_[static_cast<size_t>(b)].desc.nbytes());
      }
    for (int b : steps_[i].out_bufs)
      if (b >= 0) {
        e.outputs.push_back(bufs_[static_cast<size_t>(b)].desc);
        e.bytes_out += static_cast<int64_t>(bufs_[static_cast<size_t>(b)].desc.nbytes());
      }
    r.push_back(std::move(e));
  }
  return r;
}

std::vector<Plan::KernelTime> Plan::kernel_times() const {
  std::vector<KernelTime> r;
  for (size_t i = 0; i < steps_.size(); ++i)
    r.push_back({steps_[i].node->name, steps_[i].node->op_type, step_ns_[i].load(), steps_[i].kernel.flops});
  return r;
}

std::vector<Plan::BufferView> Plan::buffer_views() const {
  std::vector<BufferView> r;
  r.reserve(bufs_.size());
  for (const Buffer& b : bufs_) {
    BufferView v;
    v.name = b.name;
    v.desc = b.desc;
    switch (b.kind) {
      case BufKind::kArena:
        v.kind = BufferKind::kArena;
        break;
      case BufKind::kConst:
        v.kind = BufferKind::kConst;
        break;
      case BufKind::kInput:
        v.kind = BufferKind::kInput;
        break;
      case BufKind::kOutput:
        v.kind = BufferKind::kOutput;
        break;
    }
    v.offset = static_cast<int64_t>(b.offset);
    v.def_step = b.def_step;
    v.last_step = b.last_step;
    v.shares = r.size() < mplan_.shares.size() ? mplan_.shares[r.size()] : -1;
    v.in_state = b.state_buf >= 0;
    r.push_back(std::move(v));
  }
  return r;
}

std::vector<Plan::StepView> Plan::step_views() const {
  std::vector<StepView> r;
  r.reserve(steps_.size());
  for (const Step& st : steps_)
    r.push_back({st.node, st.in_bufs, st.out_bufs, static_cast<int64_t>(st.kernel.workspace_bytes), st.kernel.inplace,
                 st.kernel.views});
  return r;
}

std::string Plan::CheckMemoryOrder() const {
  const size_t ns = steps_.size(), words = (ns + 63) / 64;
  // Ancestors of every step through its dependencies (plan order is topological: dependencies come first).
  std::vector<std::vector<uint64_t>> anc(ns, std::vector<uint64_t>(words, 0));
  for (size_t s = 0; s < ns; ++s)
    for (int d : steps_[s].deps) {
      if (d < 0 || static_cast<size_t>(d) >= s) return "step " + std::to_string(s) + " depends on a later step";
      for (size_t w = 0; w < words; ++w) anc[s][w] |= anc[d][w];
      anc[s][static_cast<size_t>(d) / 64] |= uint64_t{1} << (d % 64);
    }
  const auto before = [&](size_t u, size_t s) { return (anc[s][u / 64] >> (u % 64)) & 1; };
  // Which value's memory a buffer is: the first buffer of its group (in-place takers and views share it).
  const std::vector<int> roots = GroupRoots(mplan_.shares);
  const auto root = [&](int b) { return roots[static_cast<size_t>(b)]; };
  struct Touch {
    size_t lo, hi;
    int group;  // a buffer group's root, or -2 - step for a workspace
    size_t step;
    bool writes;
  };
  std::vector<Touch> touches;
  for (size_t s = 0; s < ns; ++s) {
    const Step& st = steps_[s];
    const auto add = [&](int b, bool out, int index) {
      if (b < 0 || bufs_[b].kind != BufKind::kArena || bufs_[b].desc.nbytes() == 0) return;
      bool writes = out;
      if (out && mplan_.shares[static_cast<size_t>(b)] >= 0)  // its input's memory: a view writes nothing
        for (auto [o, i] : st.kernel.views)
          if (o == index && i >= 0 && i < static_cast<int>(st.in_bufs.size()) &&
              st.in_bufs[i] == mplan_.shares[static_cast<size_t>(b)])
            writes = false;
      touches.push_back({bufs_[b].offset, bufs_[b].offset + AlignUp(bufs_[b].desc.nbytes()), root(b), s, writes});
    };
    for (size_t i = 0; i < st.in_bufs.size(); ++i) add(st.in_bufs[i], false, static_cast<int>(i));
    for (size_t o = 0; o < st.out_bufs.size(); ++o) add(st.out_bufs[o], true, static_cast<int>(o));
    if (st.workspace_offset >= 0 && st.kernel.workspace_bytes) {
      const size_t lo = static_cast<size_t>(st.workspace_offset);
      touches.push_back({lo, lo + AlignUp(st.kernel.workspace_bytes), -2 - static_cast<int>(s), s, true});
    }
  }
  std::sort(touches.begin(), touches.end(), [](const Touch& a, const Touch& b) { return a.lo < b.lo; });
  for (size_t a = 0; a < touches.size(); ++a)
    for (size_t b = a + 1; b < touches.size() && touches[b].lo < touches[a].hi; ++b) {
      const Touch *u = &touches[a], *w = &touches[b];
      if (u->step == w->step) continue;
      if (u->step > w->step) std::swap(u, w);
      // w writes bytes u used earlier: as another value, or (in place) as the value w takes over.
      if (!w->writes) continue;
      if (before(u->step, w->step)) continue;
      const auto name = [&](size_t s) { return steps_[s].node ? steps_[s].node->Describe() : std::to_string(s); };
      return "step " + std::to_string(w->step) + " (" + name(w->step) + ") writes bytes [" + std::to_string(w->lo) +
             ", " + std::to_string(w->hi) + ") that step " + std::to_string(u->step) + " (" + name(u->step) +
             ") used " + (u->group == w->group ? "(the same memory, in place)" : "for another value") +
             " without being ordered before it";
    }
  return "";
}

std::string Plan::first_nonfinite_detail() const {
  std::lock_guard<std::mutex> l(detail_mu_);
  return nonfinite_detail_.empty() ? "" : nonfinite_detail_.begin()->second;
}

const Node* Plan::first_nonfinite() const {
  const int64_t i = first_nonfinite_.load();
  return i < 0 ? nullptr : steps_[static_cast<size_t>(i)].node;
}

std::vector<Tensor> Plan::Run(const std::map<std::string, Tensor>& feeds, uint64_t run, bool check_numerics) {
  run_ = run;
  check_numerics_ = check_numerics;
  first_nonfinite_ = -1;
  {
    std::lock_guard<std::mutex> l(detail_mu_);
    nonfinite_detail_.clear();
  }
  input_ptrs_.assign(input_names_.size(), nullptr);
  for (size_t i = 0; i < input_names_.size(); ++i) {
    auto it = feeds.find(input_names_[i]);
    if (it == feeds.end()) throw Error("input '" + input_names_[i] + "' was not given");
    input_ptrs_[i] = it->second.raw();
  }
  std::vector<Tensor> results(output_bufs_.size());
  if (device_) {
    RunOnDevice(feeds, results);
    return results;
  }
  EnsureArena();
  output_ptrs_.assign(output_bufs_.size(), nullptr);
  for (size_t i = 0; i < output_bufs_.size(); ++i) {
    const Buffer& b = bufs_[output_bufs_[i]];
    if (b.kind == BufKind::kOutput && b.io_index == static_cast<int>(i) && b.state_buf >= 0) {
      // Written into the state's own storage: the result shares the state tensor's buffer.
      results[i] = *bufs_[static_cast<size_t>(b.state_buf)].constant;
      output_ptrs_[i] = const_cast<void*>(results[i].raw());
      continue;
    }
    results[i] = Tensor(b.desc.dtype, b.desc.dims);
    output_ptrs_[i] = results[i].raw();
  }
  error_ = nullptr;
  if (tracing_) {
    trace_.assign(steps_.size(), TraceSlot{});
    run_start_ = std::chrono::steady_clock::now();
  } else {
    trace_.clear();
  }
  if (ThreadCount() == 1 || steps_.size() <= 1) {
    std::vector<const void*> in;
    std::vector<void*> out;
    for (size_t i = 0; i < steps_.size(); ++i) RunStep(i, in, out);
  } else {
    RunInArena([&] {
      flow_->start.try_put(tbb::flow::continue_msg());
      flow_->graph.wait_for_all();
    });
    if (error_) std::rethrow_exception(error_);
  }
  // Outputs that are constants, inputs, or a runtime value listed twice among the outputs.
  for (size_t i = 0; i < output_bufs_.size(); ++i) {
    const Buffer& b = bufs_[output_bufs_[i]];
    if (b.kind == BufKind::kOutput && b.io_index == static_cast<int>(i)) continue;
    const void* src = nullptr;
    switch (b.kind) {
      case BufKind::kConst:
        src = b.constant->raw();
        break;
      case BufKind::kInput:
        src = input_ptrs_[b.io_index];
        break;
      case BufKind::kOutput:
        src = output_ptrs_[b.io_index];
        break;
      case BufKind::kArena:
        src = arena_.get() + b.offset;
        break;
    }
    if (b.desc.nbytes()) std::memcpy(results[i].raw(), src, b.desc.nbytes());
  }
  for (const auto* f : after_run_) (*f)();
  return results;
}

}  // namespace ot
