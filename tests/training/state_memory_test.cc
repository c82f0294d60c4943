// training/state_memory.h: the step's state moved into one block keeps every value and every sharer.
#include "training/state_memory.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace ot {
namespace {

// A state of the given element counts (float32), each bound to a next value, filled from a fresh seed.
std::vector<Value*> AddState(Graph& g, const std::vector<int64_t>& sizes, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<Value*> states;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Value* s = g.AddValue("state" + std::to_string(i));
    s->initializer = std::make_shared<Tensor>(DataType::kFloat32, std::vector<int64_t>{sizes[i]});
    for (int64_t j = 0; j < sizes[i]; ++j) s->initializer->data<float>()[j] = nd(rng);
    g.update_bindings.push_back({s, g.AddValue("next" + std::to_string(i))});
    states.push_back(s);
  }
  return states;
}

TEST(StateMemory, PacksTheStateIntoOneBlockKeepingValuesAndSharers) {
  Graph g;
  std::mt19937 rng(std::random_device{}());
  // 2.4 MiB in all, in sizes that are not multiples of 64 bytes, one of them twice bound (a shared Tensor).
  const std::vector<Value*> states = AddState(g, {3, 300001, 17, 250000, 1}, rng);
  g.update_bindings.push_back({states[2], g.AddValue("next_again")});
  std::vector<Tensor> before;
  for (Value* s : states) before.push_back(s->initializer->Clone());
  const std::shared_ptr<Tensor> sharer = states[1]->initializer;  // another graph's handle on the same Tensor
  const Tensor old_copy = *states[3]->initializer;                // a copy made before keeps the old buffer

  const int64_t bytes = PackStateMemory(g);
  int64_t want = 0;
  for (Value* s : states) want += (static_cast<int64_t>(s->initializer->nbytes()) + 63) / 64 * 64;
  EXPECT_EQ(bytes, want);
  const auto* base = static_cast<const uint8_t*>(states[0]->initializer->raw());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % (2 << 20), 0u);  // a huge-page block of its own
  int64_t offset = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    const Tensor& t = *states[i]->initializer;
    EXPECT_EQ(static_cast<const uint8_t*>(t.raw()), base + offset) << i;  // in binding order, 64-byte slots
    offset += (static_cast<int64_t>(t.nbytes()) + 63) / 64 * 64;
    ASSERT_EQ(t.dims(), before[i].dims());
    for (int64_t j = 0; j < t.numel(); ++j) ASSERT_EQ(t.data<float>()[j], before[i].data<float>()[j]) << i << " " << j;
  }
  EXPECT_EQ(sharer->raw(), states[1]->initializer->raw());
  EXPECT_NE(old_copy.raw(), states[3]->initializer->raw());
  for (int64_t j = 0; j < old_copy.numel(); j += 1009) EXPECT_EQ(old_copy.data<float>()[j], before[3].data<float>()[j]);
}

TEST(StateMemory, ASmallStateStaysWhereItIs) {
  Graph g;
  std::mt19937 rng(std::random_device{}());
  const std::vector<Value*> states = AddState(g, {1000, 20000}, rng);
  const void* p0 = states[0]->initializer->raw();
  const void* p1 = states[1]->initializer->raw();
  EXPECT_EQ(PackStateMemory(g), 0);
  EXPECT_EQ(states[0]->initializer->raw(), p0);
  EXPECT_EQ(states[1]->initializer->raw(), p1);
}

}  // namespace
}  // namespace ot
