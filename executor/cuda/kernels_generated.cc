// Generated kernels on the GPU: ai.onnxtrain.FusedElementwise (a cluster the fusion pass made) and any single node
// the fusion table lowers (Add, Gelu, Cast, Softmax...), both through cuda_ops/cluster_codegen and NVRTC. The PTX
// is cached by cuda_ops/nvrtc_compile (memory and disk) and loaded once per process with the CUDA runtime's library
// API; the launch arguments are made when the plan is made, so a run only launches.
#include <cuda_runtime.h>

#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "cuda_ops/cluster_codegen.h"
#include "cuda_ops/nvrtc_compile.h"
#include "executor/cuda/cuda_kernels.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "kernel_common/cluster_program.h"
#include "passes/cluster_program_builder.h"

namespace ot {
namespace {

// The loaded entry point of a generated source (one library per distinct source, kept for the process).
cudaKernel_t LoadGenerated(const cuda::ClusterKernel& k) {
  static std::mutex mu;
  static std::map<std::string, cudaKernel_t> loaded;
  std::lock_guard<std::mutex> l(mu);
  auto it = loaded.find(k.source);
  if (it != loaded.end()) return it->second;
  const std::string ptx = cuda::CompileToPtx(k.source, cuda::DefaultArch(), k.name + ".cu");
  cudaLibrary_t lib = nullptr;
  CudaCheck(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "loading a generated kernel");
  cudaKernel_t fn = nullptr;
  CudaCheck(cudaLibraryGetKernel(&fn, lib, k.name.c_str()), "finding a generated kernel");
  loaded.emplace(k.source, fn);
  return fn;
}

struct Launchable {
  cudaKernel_t fn = nullptr;
  cuda::ClusterArgs args;
  cuda::ClusterLaunch launch;
  std::vector<int> in_map;  // program input -> KernelIO input slot
  int outputs = 0;
};

Kernel LaunchKernel(std::shared_ptr<Launchable> L) {
  return [L](const KernelIO& io) {
    if (L->launch.grid <= 0) return;
    std::vector<const void*> ptrs;
    for (int slot : L->in_map) ptrs.push_back(io.in[slot]);
    for (int o = 0; o < L->outputs; ++o) ptrs.push_back(io.out[o]);
    std::vector<void*> params{L->args.words.data()};
    for (const void*& p : ptrs) params.push_back(&p);
    CudaCheck(cudaLaunchKernel(reinterpret_cast<const void*>(L->fn), dim3(static_cast<unsigned>(L->launch.grid)),
                               dim3(static_cast<unsigned>(L->launch.block)), params.data(),
                               static_cast<size_t>(L->launch.shared_bytes), static_cast<cudaStream_t>(io.stream)),
              "launching a generated kernel");
  };
}

std::string KernelName(const std::string& base) {
  std::string r = "ot_";
  for (char c : base) r += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return r.substr(0, 60);
}

// A kernel for program `p` over `domain`, with the KernelIO input slot of each program input.
KernelInfo MakeGenerated(const KernelContext& ctx, const cluster::Program& p, const std::vector<int64_t>& domain,
                         const std::vector<int>& in_map) {
  auto L = std::make_shared<Launchable>();
  cuda::ClusterKernelSpec spec;
  std::vector<std::vector<int64_t>> dims;
  for (int slot : in_map) {
    cluster::DType t;
    if (!ToClusterType(ctx.in(slot).dtype, &t))
      ctx.Unsupported("input " + std::to_string(slot) + " is " + DataTypeName(ctx.in(slot).dtype));
    spec.input_types.push_back(t);
    dims.push_back(ctx.in(slot).dims);
  }
  cuda::ClusterKernel k;
  try {
    k = cuda::GenerateClusterKernel(p, KernelName(ctx.node.op_type), spec);
    L->args = cuda::MakeClusterArgs(p, domain, dims);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(std::string("CUDA code generation: ") + e.what());
  }
  try {
    L->fn = LoadGenerated(k);
  } catch (const std::runtime_error& e) {
    ctx.Fail(e.what());
  }
  L->launch = k.Launch(L->args.numel, L->args.rows, L->args.row_len);
  L->in_map = in_map;
  L->outputs = static_cast<int>(p.outputs.size());
  KernelInfo info{LaunchKernel(L)};
  // An output may take a full input's memory (the kernels read element i before they store element i).
  const int64_t n = NumElements(domain);
  std::vector<bool> is_full(p.num_inputs, false);
  for (const cluster::Instr& ins : p.code)
    if (ins.op == cluster::Op::kInput && !ins.row) is_full[ins.a] = true;
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    if (p.code[p.outputs[o]].row || ctx.out(static_cast<int>(o)).numel() != n) continue;
    for (int i = 0; i < p.num_inputs; ++i) {
      const int slot = in_map[static_cast<size_t>(i)];
      if (is_full[i] && ctx.in(slot).numel() == n &&
          SizeOf(ctx.in(slot).dtype) == SizeOf(ctx.out(static_cast<int>(o)).dtype))
        info.inplace.push_back({static_cast<int>(o), slot});
    }
  }
  return info;
}

KernelInfo FusedElementwiseKernel(const KernelContext& ctx) {
  cluster::Program p;
  try {
    p = cluster::ParseProgram(ctx.node.attr_string("program", ""));
  } catch (const std::invalid_argument& e) {
    ctx.Fail(std::string("bad program: ") + e.what());
  }
  std::vector<bool> is_full(p.num_inputs, false);
  for (const cluster::Instr& ins : p.code)
    if (ins.op == cluster::Op::kInput && !ins.row) is_full[ins.a] = true;
  std::vector<std::vector<int64_t>> full;
  std::vector<int> in_map;
  for (int i = 0; i < p.num_inputs; ++i) {
    in_map.push_back(i);
    if (is_full[i]) full.push_back(ctx.in(i).dims);
  }
  return MakeGenerated(ctx, p, BroadcastDims(full, ctx.node.Describe()), in_map);
}

}  // namespace

std::optional<KernelInfo> GeneratedKernel(const KernelContext& ctx) {
  if (!ctx.graph) return std::nullopt;
  const Node& n = ctx.node;
  std::map<const Value*, ValueDims> dims;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.inputs[i] && ctx.has_input(static_cast<int>(i)))
      dims[n.inputs[i]] = ValueDims{ctx.in(static_cast<int>(i)).dtype, ctx.in(static_cast<int>(i)).dims};
  std::vector<const Value*> escapes;
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i] && ctx.has_output(static_cast<int>(i))) {
      dims[n.outputs[i]] = ValueDims{ctx.out(static_cast<int>(i)).dtype, ctx.out(static_cast<int>(i)).dims};
      escapes.push_back(n.outputs[i]);
    }
  // Every present output must be stored, in output order (the KernelIO output slots).
  for (size_t i = 0; i < escapes.size(); ++i)
    if (escapes[i] != n.outputs[i]) return std::nullopt;
  const BuiltCluster b = BuildClusterProgram(*ctx.graph, {&n}, escapes, [&](const Value* v) -> const ValueDims* {
    auto it = dims.find(v);
    return it == dims.end() ? nullptr : &it->second;
  });
  if (!b.error.empty()) return std::nullopt;
  std::vector<int> in_map;
  for (const Value* v : b.inputs) {
    int slot = -1;
    for (size_t i = 0; i < n.inputs.size() && slot < 0; ++i)
      if (n.inputs[i] == v) slot = static_cast<int>(i);
    if (slot < 0) return std::nullopt;
    in_map.push_back(slot);
  }
  return MakeGenerated(ctx, b.program, b.domain, in_map);
}

void RegisterCudaFusedKernels(KernelRegistry& r) {
  r.Register("FusedElementwise", FusedElementwiseKernel, kInternalDomain);
}

}  // namespace ot
