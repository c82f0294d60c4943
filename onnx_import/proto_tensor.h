// TensorProto <-> Tensor, shared by model import/export and the .pb tensor files. Internal to onnx_import.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>

#include "graph/dtype.h"
#include "graph/tensor.h"

namespace ot::onnx_detail {

// ONNX TensorProto.DataType enum -> DataType. Strings, complex and newer types throw UnsupportedError, values
// outside the enum throw Error; `context` starts the message ("model.onnx: tensor 'W'").
DataType DataTypeFromOnnx(int64_t onnx_enum, const std::string& context);

// Decodes a TensorProto (raw_data, typed fields, or external data inside `base_dir`; "" refuses external
// data). Validates dims and that the bytes present match the declared shape before allocating.
// `what` names the file, `label` the tensor ("tensor 'W'", "attribute 'value' of node 'c'").
Tensor TensorFromProto(const onnx::TensorProto& tp, const std::string& base_dir, const std::string& what,
                       const std::string& label);

// Writes dims, data_type, raw_data (little-endian) and the name.
void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* tp);

// Parses `bytes` as message `m` with a 2 GiB limit; false on malformed input.
bool ParseProto(const std::string& bytes, google::protobuf::MessageLite* m);
bool ParseProto(const uint8_t* data, size_t size, google::protobuf::MessageLite* m);

}  // namespace ot::onnx_detail
