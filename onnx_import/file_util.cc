#include "onnx_import/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "graph/error.h"

namespace ot::io {

namespace {
std::string Errno() { return std::strerror(errno); }

// Opens a regular file read-only; returns the fd and its size.
int OpenRegular(const std::string& path, size_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open (" + Errno() + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string e = Errno();
    ::close(fd);
    throw Error(path + ": cannot stat (" + e + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}
}  // namespace

std::string ReadFile(const std::string& path) {
  size_t size = 0;
  int fd = OpenRegular(path, &size);
  std::string out;
  try {
    out.resize(size);
  } catch (const std::bad_alloc&) {
    ::close(fd);
    throw Error(path + ": file too large to read (" + std::to_string(size) + " bytes)");
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = ::read(fd, out.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::string e = r < 0 ? Errno() : "unexpected end of file";
      ::close(fd);
      throw Error(path + ": read failed (" + e + ")");
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  // A regular file (or a new one) is replaced only once the new bytes are all written: the bytes go to a temporary
  // file beside it, renamed over it at the end, so a failed write leaves what was there. Anything else (a device,
  // a pipe) is written in place.
  struct stat st;
  const bool in_place = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  if (!in_place && ::stat(path.c_str(), &st) == 0 && ::access(path.c_str(), W_OK) != 0)
    throw Error(path + ": cannot write (" + Errno() + ")");
  const std::string target = in_place ? path : path + ".tmp" + std::to_string(::getpid());
  int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot create (" + Errno() + ")");
  auto fail = [&](const std::string& what) {
    const std::string e = Errno();
    ::close(fd);
    if (!in_place) ::unlink(target.c_str());
    throw Error(path + ": " + what + " (" + e + ")");
  };
  size_t put = 0;
  while (put < bytes.size()) {
    ssize_t r = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("write failed");
    put += static_cast<size_t>(r);
  }
  if (::close(fd) != 0) {
    if (!in_place) ::unlink(target.c_str());
    throw Error(path + ": write failed (" + Errno() + ")");
  }
  if (!in_place && ::rename(target.c_str(), path.c_str()) != 0) {
    const std::string e = Errno();
    ::unlink(target.c_str());
    throw Error(path + ": cannot replace (" + e + ")");
  }
}

MappedFile::MappedFile(const std::string& path) {
  int fd = OpenRegular(path, &size_);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string e = Errno();
      ::close(fd);
      throw Error(path + ": cannot map (" + e + ")");
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::string OneLine(const std::string& msg) {
  std::string out;
  out.reserve(msg.size());
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char c : msg) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string DirName(const std::string& path) {
  size_t p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

}  // namespace ot::io
