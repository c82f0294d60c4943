// Gather, GatherElements and GatherND over opaque elements of esz bytes, with int32 or int64 indices.
// Indices may be negative (counted from the end of their dim); callers validate them first with
// FindBadIndex / FindBadIndexND, so the copies themselves never read out of bounds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// Position of the first index outside [-dim, dim), or -1 when all are valid.
template <typename I>
int64_t FindBadIndex(const I* idx, int64_t n, int64_t dim);

// GatherND index tuples: idx holds n tuples of k components, component j indexing dims[j].
// Returns the flat position of the first bad component, or -1.
template <typename I>
int64_t FindBadIndexND(const I* idx, int64_t n, const std::vector<int64_t>& dims);

// data viewed as [outer, axis_dim, inner] elements, out as [outer, n, inner]; inner_bytes = inner * esz.
template <typename I>
void Gather(const void* data, const I* idx, int64_t n, void* out, int64_t outer, int64_t axis_dim, int64_t inner_bytes);

// out has idx_dims; out[i] = data[i with its `axis` coordinate replaced by idx[i]].
template <typename I>
void GatherElements(const void* data, const std::vector<int64_t>& data_dims, const I* idx,
                    const std::vector<int64_t>& idx_dims, int axis, void* out, size_t esz);

// ONNX GatherND with batch_dims b: out = idx_dims[:-1] + data_dims[b + k:], k = idx_dims.back().
template <typename I>
void GatherND(const void* data, const std::vector<int64_t>& data_dims, const I* idx,
              const std::vector<int64_t>& idx_dims, int batch_dims, void* out, size_t esz);

}  // namespace ot::cpu
