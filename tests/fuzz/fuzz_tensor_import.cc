// libFuzzer target: arbitrary bytes as a TensorProto, a .npy and a .npz. Each parser must either succeed or
// throw ot::Error; whatever parses as .npy must serialize and parse back to the same bytes.
#include <cstdint>
#include <cstring>
#include <string>

#include "graph/error.h"
#include "onnx_import/tensor_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    ot::ParseTensorProto(bytes, "fuzz.pb");
  } catch (const ot::Error&) {
  }
  try {
    ot::Tensor t = ot::ParseNpy(bytes, "fuzz.npy");
    if (t.dtype() != ot::DataType::kBFloat16) {
      ot::Tensor r = ot::ParseNpy(ot::SerializeNpy(t), "fuzz-export.npy");
      if (r.dims() != t.dims() || r.dtype() != t.dtype() ||
          (t.nbytes() && std::memcmp(r.raw(), t.raw(), t.nbytes()) != 0))
        __builtin_trap();
    }
  } catch (const ot::Error&) {
  }
  try {
    ot::ParseNpz(bytes, "fuzz.npz");
  } catch (const ot::Error&) {
  }
  return 0;
}
