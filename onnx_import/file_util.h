// Small file helpers for onnx_import: whole-file reads, read-only memory maps, checked writes. Errors are
// ot::Error naming the path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ot::io {

// Reads a regular file completely. Throws Error("<path>: cannot open (...)") and friends.
std::string ReadFile(const std::string& path);
// Writes `bytes` to `path`: a regular file is replaced only when every byte is written (a temporary file renamed
// over it), so a failed write leaves the old one. Throws Error naming the path on failure.
void WriteFile(const std::string& path, const std::string& bytes);

// A read-only view of a whole regular file (mmap'ed; an empty file has size 0 and data nullptr).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// `msg` with control characters (a newline in a hostile name) escaped, so every message stays one line.
std::string OneLine(const std::string& msg);

// The folder part of a path ("." when there is none).
std::string DirName(const std::string& path);

}  // namespace ot::io
