// CUDA C -> PTX with NVRTC, for generated kernels (cuda_ops/cluster_codegen.h). Needs no GPU: CI compiles every
// generated kernel on machines without one.
//
// Headers: the kernels include kernel_common/{half,vec_math,scalar_math}.h; NVRTC gets them from memory (their
// text is embedded when ot_cuda_ops is built: cuda_ops/embed_headers.cmake, regenerated when a header changes), so
// a compile reads no file and works wherever the binary runs.
// Options: -std=c++17 --fmad=false (no contracted multiply-adds: the CPU kernels' arithmetic, see
// kernel_common/vec_math.h) --ftz=false --prec-div=true --prec-sqrt=true.
// Cache: PTX is kept in memory and on disk, keyed by a hash of the source, the arch, the options, the embedded
// headers and NVRTC's version, under $ONNXTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/onnx-train, else
// ~/.cache/onnx-train (files nvrtc/<key>.ptx, written to a temporary name and renamed, so a reader never sees half
// a file). A cache that cannot be read or written is not an error: the source is compiled. Thread-safe.
#pragma once
#include <string>
#include <vector>

namespace ot::cuda {

struct NvrtcCompileInfo {
  bool memory_hit = false;  // from the in-memory cache
  bool disk_hit = false;    // from the disk cache (then copied into memory)
  double compile_ms = 0;    // NVRTC's time (0 on a cache hit)
  std::string cache_file;   // the disk cache entry ("" without a cache directory)
};

// PTX of `source` for `arch` ("compute_90", "compute_70"...). `name` is the source's name in diagnostics.
// Throws std::runtime_error with NVRTC's log ("<name>(LINE): error: ...") when it does not compile, or when
// `arch` is not one NVRTC supports.
std::string CompileToPtx(const std::string& source, const std::string& arch, const std::string& name = "cluster.cu",
                         NvrtcCompileInfo* info = nullptr);

// compute_XY of device 0 when a GPU is present (capped at the newest arch this NVRTC supports), else compute_90.
std::string DefaultArch();

// The disk cache directory now ("" when no environment variable names one), from the variables above.
std::string PtxCacheDir();

// The compute capabilities this NVRTC can target, ascending (CUDA 13: 75 ... ; CUDA 12: 50 ...; Volta's 70 is gone
// from CUDA 13).
std::vector<int> NvrtcSupportedArchs();

// "MAJOR.MINOR" of the NVRTC library.
std::string NvrtcVersion();

// Forgets the in-memory cache (tests: a fresh process's view of the disk cache).
void ClearPtxMemoryCache();

}  // namespace ot::cuda
