// Internal: .npy parsing over a byte range (used by ParseNpy and the .npz reader).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/tensor.h"

namespace ot::npy_detail {

Tensor ParseNpyBytes(const uint8_t* p, size_t n, const std::string& what);

}  // namespace ot::npy_detail
