// Operand layout of ai.onnxtrain.OptimizerUpdate (graph/ops/internal_optim.cc), read from the node's attributes.
// One definition of where each operand sits, shared by the schema, the CPU kernel and the passes that append
// operands (optimizer, master_weights, loss_scaling), so none of them spells out index arithmetic of its own.
//
//   inputs:  lr, step, p[n], g[n], states[k*n] (state j of parameter i at 2 + (2+j)n + i; sharded
//            (--shard-optimizer, graph/ops/optimizer_shard.h): states[k], state j at 2 + 2n + j, each the rank's
//            shard, a 1-D float32 tensor),
//            [micro, acc[n]]            when accumulate > 1
//            [scale, good, bad]         when loss_scaling is "static" or "dynamic"
//            [master]                   when shard_master = 1: the rank's shard of every parameter's float32 master
//                                       weights (1-D, laid out as the sharded states); a parameter that only the
//                                       update reads (the forward reads its half copy) then has no input p[i] and
//                                       no output p'[i] -- its whole fp32 value exists nowhere, attribute
//                                       master_names naming every parameter for the checkpoint and the export
//   outputs: p'[n], states'[k*n] (sharded: states'[k]), step', grad_norm, skipped,
//            [micro', acc'[n]]          when accumulate > 1
//            [h'[m]]                    half copies, m = |half_params|
//            [scale', good', bad']      when loss_scaling is set
//            [param_norm, zero_grad_fraction]  when stats = 1
//            [master']                  when shard_master = 1
// Each optional group is appended after the previous ones, so a node written before a group existed keeps its
// layout (every group is off by default).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernel_common/optim_math.h"

namespace ot {

// States per parameter of an optimizer kind ("sgd" 0, "momentum"/"nesterov" 1, "adam"/"adamw"/"lamb" 2); -1 when
// the kind is unknown.
inline int OptimizerStatesPerParam(const std::string& kind) {
  if (kind == "sgd") return 0;
  if (kind == "momentum" || kind == "nesterov") return 1;
  if (kind == "adam" || kind == "adamw" || kind == "lamb") return 2;
  return -1;
}

// An optimizer kind's attribute name ("sgd", ..., "lamb"); false for any other.
inline bool OptimizerKindOf(const std::string& name, OptimizerKind* kind) {
  static const std::pair<const char*, OptimizerKind> kKinds[] = {
      {"sgd", OptimizerKind::kSgd},   {"momentum", OptimizerKind::kMomentum}, {"nesterov", OptimizerKind::kNesterov},
      {"adam", OptimizerKind::kAdam}, {"adamw", OptimizerKind::kAdamW},       {"lamb", OptimizerKind::kLamb}};
  for (const auto& [n, k] : kKinds)
    if (name == n) {
      *kind = k;
      return true;
    }
  return false;
}

// The hyperparameters of an OptimizerUpdate node, decoded once for both backends' update kernels.
struct OptimizerHyperparams {
  OptimizerKind kind = OptimizerKind::kSgd;
  double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0, max_grad_norm = 0;
  int lr_schedule = 0;  // 0 constant, 1 linear, 2 cosine (kernel_common/optim_math.h's LrScheduleFactor)
  int64_t warmup = 0, total_steps = 0;
  // Dynamic loss scaling.
  float growth_factor = 2.f, backoff_factor = .5f, min_scale = 1.f;
  int64_t growth_interval = 2000, overflows_to_backoff = 1;

  // Returns what is wrong with the attributes (an unknown kind, hyperparameters that are not 6 values), or "".
  static std::string Decode(const Node& node, OptimizerHyperparams* h) {
    const std::string kind = node.attr_string("kind", "");
    if (!OptimizerKindOf(kind, &h->kind)) return "unknown optimizer kind '" + kind + "'";
    const Attribute* hp = node.attr("hyperparameters");
    if (!hp || hp->kind != Attribute::Kind::kTensor || hp->t.numel() != 6)
      return "attribute hyperparameters must be a tensor of 6 values";
    h->beta1 = hp->t.GetDouble(0);
    h->beta2 = hp->t.GetDouble(1);
    h->eps = hp->t.GetDouble(2);
    h->weight_decay = hp->t.GetDouble(3);
    h->momentum = hp->t.GetDouble(4);
    h->max_grad_norm = hp->t.GetDouble(5);
    h->lr_schedule = static_cast<int>(node.attr_int("lr_schedule", 0));
    h->warmup = node.attr_int("warmup", 0);
    h->total_steps = node.attr_int("total_steps", 0);
    h->growth_factor = node.attr_float("growth_factor", 2.f);
    h->backoff_factor = node.attr_float("backoff_factor", .5f);
    h->min_scale = node.attr_float("min_scale", 1.f);
    h->growth_interval = node.attr_int("growth_interval", 2000);
    h->overflows_to_backoff = node.attr_int("overflows_to_backoff", 1);
    return "";
  }
};

struct OptimizerLayout {
  int n = 0;                          // parameters
  int k = 0;                          // states per parameter
  int64_t accumulate = 1;             // gradient accumulation K
  std::vector<int64_t> half_params;   // parameters with a half copy (ascending indices)
  int64_t half_dtype = 0;             // DataType code of the half copies (10 float16, 16 bfloat16); 0 when none
  std::string loss_scaling = "none";  // "none" | "static" | "dynamic"
  bool stats = false;                 // param_norm and zero_grad_fraction outputs
  int64_t shard_world = 1;            // > 1: --shard-optimizer over that many ranks
  std::vector<int64_t> shard_groups;  // graph/ops/optimizer_shard.h
  bool shard_master = false;          // the master weights sharded too (passes/shard_masters.h)

  // Reads the attributes; does not validate them (the schema's inference does). k is -1 for an unknown kind.
  static OptimizerLayout Of(const Node& node) {
    OptimizerLayout l;
    l.k = OptimizerStatesPerParam(node.attr_string("kind", ""));
    l.n = static_cast<int>(node.attr_int("num_params", 0));
    l.accumulate = node.attr_int("accumulate", 1);
    l.half_params = node.attr_ints("half_params");
    l.half_dtype = l.half_params.empty() ? 0 : node.attr_int("half_dtype", 0);
    l.loss_scaling = node.attr_string("loss_scaling", "none");
    l.stats = node.attr_int("stats", 0) != 0;
    l.shard_world = node.attr_int("shard_world", 1);
    l.shard_groups = node.attr_ints("shard_groups");
    l.shard_master = l.sharded() && node.attr_int("shard_master", 0) != 0;
    return l;
  }

  bool accumulating() const { return accumulate > 1; }
  bool sharded() const { return shard_world > 1; }
  int per_state() const { return sharded() ? 1 : n; }  // tensors per state: one per parameter, or the shard
  bool scaling() const { return loss_scaling == "static" || loss_scaling == "dynamic"; }
  int m() const { return static_cast<int>(half_params.size()); }
  int accum_count() const { return accumulating() ? 1 + n : 0; }  // micro + n sums

  // Inputs.
  int param_in(int i) const { return 2 + i; }
  int grad_in(int i) const { return 2 + n + i; }
  int state_in(int j, int i) const { return 2 + 2 * n + j * per_state() + (sharded() ? 0 : i); }
  int micro_in() const { return 2 + 2 * n + k * per_state(); }
  int acc_in(int i) const { return micro_in() + 1 + i; }
  int scale_in() const { return micro_in() + accum_count(); }  // then good_in = +1, bad_in = +2
  int master_in() const { return scale_in() + (scaling() ? 3 : 0); }
  int num_inputs() const { return master_in() + (shard_master ? 1 : 0); }

  // Outputs.
  int param_out(int i) const { return i; }
  int state_out(int j, int i) const { return n + j * per_state() + (sharded() ? 0 : i); }
  int step_out() const { return n + k * per_state(); }
  int grad_norm_out() const { return step_out() + 1; }
  int skipped_out() const { return step_out() + 2; }
  int micro_out() const { return step_out() + 3; }
  int acc_out(int i) const { return micro_out() + 1 + i; }
  int half_out(int j) const { return micro_out() + accum_count() + j; }
  int scale_out() const { return half_out(m()); }  // then good' = +1, bad' = +2
  int param_norm_out() const { return scale_out() + (scaling() ? 3 : 0); }
  int zero_fraction_out() const { return param_norm_out() + 1; }
  int master_out() const { return param_norm_out() + (stats ? 2 : 0); }
  int num_outputs() const { return master_out() + (shard_master ? 1 : 0); }
};

}  // namespace ot
