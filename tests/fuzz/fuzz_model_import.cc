// libFuzzer target: arbitrary bytes as a ModelProto. Import must either succeed or throw ot::Error; a model
// that imports must export, and the export must import again (anything else is a finding).
#include <cstdint>
#include <cstdio>
#include <string>

#include "graph/error.h"
#include "onnx_import/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<ot::Graph> g;
  try {
    g = ot::ParseModel(bytes, "", "fuzz.onnx");
  } catch (const ot::Error&) {
    return 0;
  }
  try {
    std::string out = ot::SerializeModel(*g);
    ot::ParseModel(out, "", "fuzz-export.onnx");
  } catch (const ot::Error& e) {
    std::fprintf(stderr, "imported model failed to round-trip: %s\n", e.what());
    __builtin_trap();
  }
  return 0;
}
