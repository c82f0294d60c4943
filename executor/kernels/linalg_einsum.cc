// CPU kernel factory of Einsum. The equation is planned once: operands are contracted left to right, each
// pair as gather → batched GEMM → (next pair or final gather). A gather (cpu_ops/einsum.h) permutes an
// operand into [batch, free, contracted] order and in the same pass takes diagonals (a label repeated in one
// operand), broadcasts size-1 dims and sums labels no later step needs. The GEMM is oneDNN's for float types
// (cpu_ops/matmul.h), loops for float64 and integers. One operand is a single gather.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include "cpu_ops/einsum.h"
#include "cpu_ops/matmul.h"
#include "executor/kernel_registry.h"
#include "graph/ops/linalg_util.h"
#include "graph/tensor.h"

namespace ot {

namespace {

// A buffer seen as one axis per (unique) label with element strides.
struct View {
  int buf = 0;  // buffer id: inputs 0..n-1, then the output, then temporaries
  std::vector<int> labels;
  std::vector<int64_t> strides;
};

struct GatherStep {
  int src, dst;
  std::vector<int64_t> out_dims, out_strides, red_dims, red_strides;
};

struct GemmStep {
  int a, b, c;
  cpu::MatMulSpec spec;
  std::shared_ptr<cpu::DnnlMatMul> dnnl;  // null for the loop GEMM
};

struct Step {
  bool gemm = false;
  GatherStep gather;
  GemmStep mm;
};

struct EinsumPlan {
  int num_inputs = 0;
  std::vector<int64_t> temp_elems;  // per temporary buffer
  std::vector<Step> steps;
  // Workspace layout (KernelIO::workspace), set by Layout(): each temporary at its offset (64-byte aligned),
  // then one region every oneDNN GEMM uses in turn (the steps run one after another).
  std::vector<size_t> temp_offsets;
  size_t gemm_offset = 0, workspace_bytes = 0;
  void Layout(size_t elem_size) {
    auto align = [](size_t n) { return (n + 63) / 64 * 64; };
    size_t off = 0;
    temp_offsets.clear();
    for (int64_t n : temp_elems) {
      temp_offsets.push_back(off);
      off += align(static_cast<size_t>(n) * elem_size);
    }
    gemm_offset = off;
    size_t gemm = 0;
    for (const Step& st : steps)
      if (st.gemm && st.mm.dnnl) gemm = std::max(gemm, st.mm.dnnl->workspace_bytes());
    workspace_bytes = off + align(gemm);
  }
};

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

class Planner {
 public:
  Planner(const KernelContext& ctx, DataType t) : ctx_(ctx), t_(t) {}

  EinsumPlan Build() {
    const Node& node = ctx_.node;
    const int n = static_cast<int>(ctx_.inputs.size());
    plan_.num_inputs = n;
    std::vector<int> ranks;
    for (int i = 0; i < n; ++i) ranks.push_back(static_cast<int>(ctx_.in(i).dims.size()));
    linalg::EinsumEquation eq;
    try {
      eq = linalg::ParseEinsum(node.attr_string("equation", ""), ranks);
    } catch (const std::invalid_argument& e) {
      ctx_.Fail(e.what());
    }
    size_.assign(52 + eq.ellipsis_rank, 1);
    for (int i = 0; i < n; ++i)
      for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
        const int64_t d = ctx_.in(i).dims[a];
        int64_t& s = size_[eq.inputs[i][a]];
        if (d == 1) continue;
        if (s != 1 && s != d) ctx_.Fail("label sizes disagree");
        s = d;
      }
    std::vector<View> views;
    for (int i = 0; i < n; ++i) views.push_back(InputView(i, eq.inputs[i], ctx_.in(i).dims));
    View cur = views[0];
    for (int i = 1; i < n; ++i) {
      std::vector<int> later = eq.output;
      for (int j = i + 1; j < n; ++j) later.insert(later.end(), eq.inputs[j].begin(), eq.inputs[j].end());
      cur = Contract(cur, views[i], later);
    }
    // Final gather into the output's label order.
    GatherStep g = MakeGather(cur, eq.output, n);
    Step s;
    s.gather = g;
    plan_.steps.push_back(s);
    return plan_;
  }

 private:
  View InputView(int i, const std::vector<int>& labels, const std::vector<int64_t>& dims) {
    View v;
    v.buf = i;
    const auto strides = ContiguousStrides(dims);
    for (size_t a = 0; a < labels.size(); ++a) {
      const int64_t st = (dims[a] == 1 && size_[labels[a]] != 1) ? 0 : strides[a];
      auto it = std::find(v.labels.begin(), v.labels.end(), labels[a]);
      if (it == v.labels.end()) {
        v.labels.push_back(labels[a]);
        v.strides.push_back(st);
      } else {
        v.strides[it - v.labels.begin()] += st;  // diagonal: walk both axes at once
      }
    }
    return v;
  }

  // Gathers `v` into a contiguous buffer `dst` ordered as `order`, summing v's other labels.
  GatherStep MakeGather(const View& v, const std::vector<int>& order, int dst) {
    GatherStep g;
    g.src = v.buf;
    g.dst = dst;
    for (int l : order) {
      g.out_dims.push_back(size_[l]);
      auto it = std::find(v.labels.begin(), v.labels.end(), l);
      g.out_strides.push_back(it == v.labels.end() ? 0 : v.strides[it - v.labels.begin()]);
    }
    for (size_t a = 0; a < v.labels.size(); ++a)
      if (!Contains(order, v.labels[a])) {
        g.red_dims.push_back(size_[v.labels[a]]);
        g.red_strides.push_back(v.strides[a]);
      }
    return g;
  }

  // A gather that is the identity can be skipped: the source already is that buffer.
  static bool IsIdentity(const GatherStep& g) {
    for (int64_t d : g.red_dims)
      if (d != 1) return false;
    const auto s = ContiguousStrides(g.out_dims);
    for (size_t i = 0; i < s.size(); ++i)
      if (g.out_dims[i] != 1 && g.out_strides[i] != s[i]) return false;
    return true;
  }

  int NewTemp(int64_t elems) {
    plan_.temp_elems.push_back(elems);
    return plan_.num_inputs + 1 + static_cast<int>(plan_.temp_elems.size()) - 1;
  }

  int64_t Prod(const std::vector<int>& labels) const {
    int64_t p = 1;
    for (int l : labels) p *= size_[l];
    return p;
  }

  // Buffer holding `v` gathered into `order` (a new temporary unless the gather is the identity).
  int Materialize(const View& v, const std::vector<int>& order) {
    GatherStep g = MakeGather(v, order, -1);
    if (IsIdentity(g)) return v.buf;
    g.dst = NewTemp(Prod(order));
    Step s;
    s.gather = g;
    plan_.steps.push_back(s);
    return g.dst;
  }

  View Contract(const View& x, const View& y, const std::vector<int>& later) {
    std::vector<int> batch, contr, m, n;
    for (int l : x.labels) {
      const bool in_y = Contains(y.labels, l), keep = Contains(later, l);
      if (in_y && keep)
        batch.push_back(l);
      else if (in_y)
        contr.push_back(l);
      else if (keep)
        m.push_back(l);
    }
    for (int l : y.labels)
      if (!Contains(x.labels, l) && Contains(later, l)) n.push_back(l);
    std::vector<int> a_order = batch, b_order = batch, c_labels = batch;
    a_order.insert(a_order.end(), m.begin(), m.end());
    a_order.insert(a_order.end(), contr.begin(), contr.end());
    b_order.insert(b_order.end(), contr.begin(), contr.end());
    b_order.insert(b_order.end(), n.begin(), n.end());
    c_labels.insert(c_labels.end(), m.begin(), m.end());
    c_labels.insert(c_labels.end(), n.begin(), n.end());
    Step s;
    s.gemm = true;
    s.mm.a = Materialize(x, a_order);
    s.mm.b = Materialize(y, b_order);
    s.mm.c = NewTemp(Prod(c_labels));
    cpu::MatMulSpec& spec = s.mm.spec;
    spec.a_batch = spec.b_batch = {Prod(batch)};
    spec.m = Prod(m);
    spec.k = Prod(contr);
    spec.n = Prod(n);
    if (t_ == DataType::kFloat32 || t_ == DataType::kFloat16 || t_ == DataType::kBFloat16) {
      spec.type = t_ == DataType::kFloat16    ? cpu::DnnType::kF16
                  : t_ == DataType::kBFloat16 ? cpu::DnnType::kBF16
                                              : cpu::DnnType::kF32;
      s.mm.dnnl = std::make_shared<cpu::DnnlMatMul>(spec);
    }
    plan_.steps.push_back(s);
    View out;
    out.buf = s.mm.c;
    out.labels = c_labels;
    std::vector<int64_t> dims;
    for (int l : c_labels) dims.push_back(size_[l]);
    out.strides = ContiguousStrides(dims);
    return out;
  }

  const KernelContext& ctx_;
  DataType t_;
  std::vector<int64_t> size_;
  EinsumPlan plan_;
};

template <typename T, typename Acc>
void RunEinsum(const EinsumPlan& plan, const KernelIO& io) {
  // Temporaries from the plan's workspace; called outside a plan (no workspace), from the heap.
  uint8_t* ws = static_cast<uint8_t*>(io.workspace);
  std::vector<std::vector<T>> temps(ws ? 0 : plan.temp_elems.size());
  for (size_t i = 0; i < temps.size(); ++i) temps[i].resize(plan.temp_elems[i]);
  auto buf = [&](int id) -> T* {
    if (id < plan.num_inputs) return const_cast<T*>(io.In<T>(id));
    if (id == plan.num_inputs) return io.Out<T>(0);
    const size_t k = static_cast<size_t>(id - plan.num_inputs - 1);
    return ws ? reinterpret_cast<T*>(ws + plan.temp_offsets[k]) : temps[k].data();
  };
  void* gemm_ws = ws ? ws + plan.gemm_offset : nullptr;
  for (const Step& s : plan.steps) {
    if (!s.gemm) {
      const GatherStep& g = s.gather;
      cpu::StridedReduceCopy<T>(buf(g.src), g.out_dims, g.out_strides, g.red_dims, g.red_strides, buf(g.dst));
    } else if (s.mm.dnnl) {
      s.mm.dnnl->Run(buf(s.mm.a), buf(s.mm.b), buf(s.mm.c), gemm_ws);
    } else {
      cpu::NaiveMatMul<T, Acc>(s.mm.spec, buf(s.mm.a), buf(s.mm.b), buf(s.mm.c));
    }
  }
}

KernelInfo EinsumKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  for (size_t i = 1; i < ctx.inputs.size(); ++i)
    if (ctx.in(static_cast<int>(i)).dtype != t) ctx.Fail("inputs have different dtypes");
  auto plan = std::make_shared<EinsumPlan>(Planner(ctx, t).Build());
  plan->Layout(SizeOf(t));
  KernelInfo info;
  info.workspace_bytes = plan->workspace_bytes;
  bool uses_dnnl = false;
  for (const Step& s : plan->steps) uses_dnnl = uses_dnnl || (s.gemm && s.mm.dnnl);
  info.exclusive = uses_dnnl;
  if (uses_dnnl) info.heap_bytes = cpu::DnnlCallHeapBytes(4);
  switch (t) {
    case DataType::kFloat32:
      info.fn = [plan](const KernelIO& io) { RunEinsum<float, double>(*plan, io); };
      break;
    case DataType::kFloat16:
      info.fn = [plan](const KernelIO& io) { RunEinsum<float16, double>(*plan, io); };
      break;
    case DataType::kBFloat16:
      info.fn = [plan](const KernelIO& io) { RunEinsum<bfloat16, double>(*plan, io); };
      break;
    case DataType::kFloat64:
      info.fn = [plan](const KernelIO& io) { RunEinsum<double, double>(*plan, io); };
      break;
    case DataType::kInt32:
      info.fn = [plan](const KernelIO& io) { RunEinsum<int32_t, int64_t>(*plan, io); };
      break;
    case DataType::kInt64:
      info.fn = [plan](const KernelIO& io) { RunEinsum<int64_t, int64_t>(*plan, io); };
      break;
    case DataType::kUint32:
      info.fn = [plan](const KernelIO& io) { RunEinsum<uint32_t, uint64_t>(*plan, io); };
      break;
    case DataType::kUint64:
      info.fn = [plan](const KernelIO& io) { RunEinsum<uint64_t, uint64_t>(*plan, io); };
      break;
    default:
      ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
  }
  return info;
}

}  // namespace

void RegisterLinalgEinsumKernels(KernelRegistry& r) { r.Register("Einsum", EinsumKernel); }

}  // namespace ot
