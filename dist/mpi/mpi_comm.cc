// The MPI world (dist/comm.h), built as the plugin libonnxtrain_mpi.so: the only code that links Open MPI. The main
// binary loads it (dist/world.cc) only when mpirun or srun started the process.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/comm.h"

namespace ot::dist {
namespace {

const char* LevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

std::string ErrorText(int code) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, s, &n);
  return std::string(s, static_cast<size_t>(n));
}

void Check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string(what) + ": " + ErrorText(code));
}

// MPI counts are int: longer buffers go in pieces.
constexpr int64_t kMaxCount = 1 << 30;

class MpiComm final : public Comm {
 public:
  explicit MpiComm(int level) : level_(level) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes (and become exceptions naming the call), not as MPI's own abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(v, &n);
    std::string lib(v, static_cast<size_t>(n));
    lib = lib.substr(0, lib.find(','));  // "Open MPI v4.1.4"
    while (!lib.empty() && (lib.back() == '\n' || lib.back() == ' ')) lib.pop_back();
    desc_ = "MPI (" + lib + "), thread level " + LevelName(level);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return desc_; }
  void AllReduceSum(float* data, int64_t n) override { Sum(data, n, MPI_FLOAT); }
  void AllReduceSum(double* data, int64_t n) override { Sum(data, n, MPI_DOUBLE); }
  std::vector<std::string> AllGather(const std::string& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int len = static_cast<int>(s.size());
    std::vector<int> lens(static_cast<size_t>(size_)), offs(static_cast<size_t>(size_));
    Check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    int total = 0;
    for (int r = 0; r < size_; ++r) offs[static_cast<size_t>(r)] = total, total += lens[static_cast<size_t>(r)];
    std::string all(static_cast<size_t>(total), '\0');
    Check(MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<size_t>(offs[static_cast<size_t>(r)]),
                               static_cast<size_t>(lens[static_cast<size_t>(r)])));
    return out;
  }
  [[noreturn]] void Abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void Finalize() override {
    std::lock_guard<std::mutex> lock(mu_);
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }

 private:
  void Sum(void* data, int64_t n, MPI_Datatype t) {
    std::lock_guard<std::mutex> lock(mu_);
    int bytes = 0;
    MPI_Type_size(t, &bytes);
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, n - off));
      Check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * bytes, count, t, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
    }
  }
  int rank_ = 0, size_ = 1, level_;
  std::string desc_;
  std::mutex mu_;  // MPI_THREAD_SERIALIZED: one call at a time
};

}  // namespace
}  // namespace ot::dist

// Initializes MPI (MPI_THREAD_SERIALIZED requested) and returns the world; null with `err` filled on failure.
extern "C" ot::dist::Comm* onnxtrain_mpi_create(int* argc, char*** argv, char* err, int err_len) {
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    std::snprintf(err, static_cast<size_t>(err_len), "MPI_Init_thread failed (code %d)", rc);
    return nullptr;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    std::snprintf(err, static_cast<size_t>(err_len), "MPI gives thread level %d, below MPI_THREAD_SERIALIZED",
                  provided);
    return nullptr;
  }
  return new ot::dist::MpiComm(provided);
}
