// Errors a user can cause. Every message names the file, node, op or value concerned.
#pragma once
#include <stdexcept>
#include <string>

namespace ot {

// Bad input: malformed file, shape mismatch, missing value. Exits non-zero with the message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Valid ONNX that onnx-train does not implement (op, opset, dtype, attribute value).
// The conformance runner reports these as skips, never as failures.
class UnsupportedError : public Error {
 public:
  explicit UnsupportedError(const std::string& msg) : Error(msg) {}
};

}  // namespace ot
