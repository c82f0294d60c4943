// NCCL for data-parallel training on GPUs (issue: data-parallel training): one communicator over the job's ranks
// (dist/comm.h), on a communication stream of its own. NCCL is loaded at run time (dlopen of libnccl.so.2:
// $ONNXTRAIN_NCCL_LIB, else the loader's search path), so the binary and the GPU bundle need none at build or link
// time beyond nccl.h, and a machine runs with the NCCL it has. The communicator is bootstrapped through the
// process group: rank 0's ncclGetUniqueId reaches every rank by an all-gather over MPI (or stays in the process, for
// a world of one), then ncclCommInitRank on the device the backend selected.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace ot::nccl {

class World {
 public:
  // The job's communicator, made on the first call (a collective: every rank calls it, in the same order of
  // collectives; the current device is the rank's). Throws Error when NCCL cannot be loaded or initialized.
  static World& Get();
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The stream the started all-reduces run on.
  cudaStream_t stream() const { return stream_; }
  // "NCCL 2.28.9".
  std::string version() const { return version_; }
  // On `stream`: data[0, n) <- the mean (or sum) over the ranks, in place.
  void AllReduce(float* data, size_t n, bool mean, cudaStream_t stream) const;

 private:
  World();
  void* comm_ = nullptr;  // ncclComm_t
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::string version_;
};

}  // namespace ot::nccl
