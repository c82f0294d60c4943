// Tensor files: ONNX TensorProto (.pb), NumPy .npy and .npz (zip, stored or deflated).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace ot {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// TensorProto: raw_data or typed fields; float16/bfloat16 in int32_data as ONNX stores them.
NamedTensor ReadTensorPb(const std::string& path);
NamedTensor ParseTensorProto(const std::string& bytes, const std::string& what);
void WriteTensorPb(const std::string& path, const Tensor& t, const std::string& name);

// .npy version 1.0-3.0, little-endian, C order (fortran_order True is refused with a clear error).
Tensor ReadNpy(const std::string& path);
Tensor ParseNpy(const std::string& bytes, const std::string& what);
void WriteNpy(const std::string& path, const Tensor& t);
std::string SerializeNpy(const Tensor& t);

// .npz: a zip of .npy members (".npy" stripped from names), stored or deflated, ZIP64 understood.
std::vector<NamedTensor> ReadNpz(const std::string& path);
// The same over bytes in memory; `what` names the source in error messages.
std::vector<NamedTensor> ParseNpz(const std::string& bytes, const std::string& what);
void WriteNpz(const std::string& path, const std::vector<NamedTensor>& tensors, bool compress = true);

}  // namespace ot
