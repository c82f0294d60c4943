#include "cuda_ops/nvrtc_compile.h"

#include <cuda_runtime.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "cuda_ops/device_info.h"

namespace ot::cuda {

// The kernel_common headers as text (generated from the headers by cuda_ops/embed_headers.cmake at build time).
namespace embedded {
struct Header {
  const char* name;  // as included: "kernel_common/half.h"
  const char* text;
};
extern const Header kHeaders[];
extern const int kNumHeaders;
}  // namespace embedded

namespace {

const std::vector<std::string>& Options() {
  static const std::vector<std::string> o = {"-std=c++17", "--fmad=false", "--ftz=false", "--prec-div=true",
                                             "--prec-sqrt=true"};
  return o;
}

void Check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw std::runtime_error(std::string("NVRTC ") + what + ": " + nvrtcGetErrorString(r));
}

// Two 64-bit FNV-1a hashes with different offsets (128 bits of key: a collision would need 2^64 sources).
struct Hasher {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  void Add(const std::string& s) {
    for (unsigned char c : s) {
      h1 = (h1 ^ c) * 0x100000001b3ull;
      h2 = (h2 ^ c) * 0x100000001b3ull;
    }
    // A separator that no text contains, so ("ab","c") and ("a","bc") differ.
    h1 = (h1 ^ 0x1ffu) * 0x100000001b3ull;
    h2 = (h2 ^ 0x2ffu) * 0x100000001b3ull;
  }
  std::string Hex() const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h1),
                  static_cast<unsigned long long>(h2));
    return buf;
  }
};

std::string Key(const std::string& source, const std::string& arch) {
  Hasher h;
  h.Add(source);
  h.Add(arch);
  h.Add(NvrtcVersion());
  for (const std::string& o : Options()) h.Add(o);
  for (int i = 0; i < embedded::kNumHeaders; ++i) {
    h.Add(embedded::kHeaders[i].name);
    h.Add(embedded::kHeaders[i].text);
  }
  return h.Hex();
}

std::mutex& CacheMutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, std::string>& MemoryCache() {
  static std::unordered_map<std::string, std::string> c;
  return c;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f.good() && !f.eof()) return false;
  *out = ss.str();
  return !out->empty();
}

// Best effort: a directory we cannot make or a file we cannot write leaves the cache without this entry.
void WriteFileAtomic(const std::string& path, const std::string& data) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return;
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

std::vector<int> NvrtcSupportedArchs() {
  int n = 0;
  Check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> a(static_cast<size_t>(n));
  if (n > 0) Check(nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
  return a;
}

namespace {

std::string Compile(const std::string& source, const std::string& arch, const std::string& name) {
  std::vector<const char*> hnames, htexts;
  for (int i = 0; i < embedded::kNumHeaders; ++i) {
    hnames.push_back(embedded::kHeaders[i].name);
    htexts.push_back(embedded::kHeaders[i].text);
  }
  nvrtcProgram prog = nullptr;
  Check(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), embedded::kNumHeaders, htexts.data(), hnames.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<std::string> opts = Options();
  opts.push_back("--gpu-architecture=" + arch);
  std::vector<const char*> copts;
  for (const std::string& o : opts) copts.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    nvrtcGetProgramLog(prog, log.data());
    log.resize(log_size - 1);  // the terminating NUL
  }
  if (r != NVRTC_SUCCESS)
    throw std::runtime_error("NVRTC could not compile " + name + " for " + arch + " (" + nvrtcGetErrorString(r) +
                             "):\n" + log);
  size_t ptx_size = 0;
  Check(nvrtcGetPTXSize(prog, &ptx_size), "nvrtcGetPTXSize");
  std::string ptx(ptx_size, '\0');
  Check(nvrtcGetPTX(prog, ptx.data()), "nvrtcGetPTX");
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  Check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string PtxCacheDir() {
  if (const char* d = std::getenv("ONNXTRAIN_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/onnx-train";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/onnx-train";
  return "";
}

void ClearPtxMemoryCache() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  MemoryCache().clear();
}

std::string DefaultArch() {
  int cc = 90;
  if (DeviceCount() > 0) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess) {
      cc = major * 10 + minor;
    } else {
      cudaGetLastError();
    }
  }
  // A GPU newer than this NVRTC: the newest arch it knows (PTX is JIT-compiled forward by the driver).
  const std::vector<int> archs = NvrtcSupportedArchs();
  int best = 0;
  for (int a : archs)
    if (a <= cc) best = std::max(best, a);
  if (best == 0 && !archs.empty()) best = archs.front();
  return "compute_" + std::to_string(best == 0 ? cc : best);
}

std::string CompileToPtx(const std::string& source, const std::string& arch, const std::string& name,
                         NvrtcCompileInfo* info) {
  NvrtcCompileInfo local;
  NvrtcCompileInfo& inf = info ? *info : local;
  inf = NvrtcCompileInfo();
  const std::string key = Key(source, arch);
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    auto it = MemoryCache().find(key);
    if (it != MemoryCache().end()) {
      inf.memory_hit = true;
      return it->second;
    }
  }
  const std::string dir = PtxCacheDir();
  if (!dir.empty()) inf.cache_file = dir + "/nvrtc/" + key + ".ptx";
  std::string ptx;
  if (!inf.cache_file.empty() && ReadFile(inf.cache_file, &ptx)) {
    inf.disk_hit = true;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    ptx = Compile(source, arch, name);
    inf.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!inf.cache_file.empty()) WriteFileAtomic(inf.cache_file, ptx);
  }
  std::lock_guard<std::mutex> lock(CacheMutex());
  MemoryCache().emplace(key, ptx);
  return ptx;
}

}  // namespace ot::cuda
