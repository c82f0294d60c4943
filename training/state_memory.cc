#include "training/state_memory.h"

#include <malloc.h>

#include <set>

#include "graph/graph.h"
#include "graph/tensor.h"
#include "kernel_common/host_alloc.h"

namespace ot {

int64_t PackStateMemory(Graph& g) {
  std::set<Tensor*> seen;
  std::vector<Tensor*> states;
  size_t total = 0;
  for (const auto& b : g.update_bindings) {
    Tensor* t = b.state && b.state->initializer ? b.state->initializer.get() : nullptr;
    if (!t || t->nbytes() == 0 || !seen.insert(t).second) continue;
    states.push_back(t);
    total += (t->nbytes() + 63) / 64 * 64;
  }
  if (total < (size_t{2} << 20)) return 0;
  std::shared_ptr<uint8_t> block = AllocHostShared(total);
  if (!block) return 0;  // no room for a second copy: the state stays where it is
  // The old copies' pages go back to the system as the move goes (free keeps pages inside malloc's heap
  // resident), so the peak is the state plus 64 MiB, not twice the state.
  size_t offset = 0, since_trim = 0;
  for (Tensor* t : states) {
    t->MoveInto(std::shared_ptr<uint8_t>(block, block.get() + offset));  // each holds the block
    offset += (t->nbytes() + 63) / 64 * 64;
    since_trim += t->nbytes();
    if (since_trim >= (size_t{64} << 20)) {
      malloc_trim(0);
      since_trim = 0;
    }
  }
  malloc_trim(0);
  return static_cast<int64_t>(total);
}

}  // namespace ot
