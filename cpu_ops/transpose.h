// Transpose of a row-major tensor by a permutation (output dim k is input dim perm[k]), elements moved as
// opaque bytes. Dims of size 1 are dropped and runs of axes that stay adjacent are merged first; when the
// innermost axis stays innermost the copy is a set of row memcpys, otherwise a 2-D tiled transpose.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

void Transpose(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
               const std::vector<int64_t>& perm);

}  // namespace ot::cpu
