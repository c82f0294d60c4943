// The MPI world (dist/comm.h), built as the plugin libonnxtrain_mpi.so: the only code that links Open MPI. The main
// binary loads it (dist/world.cc) only when mpirun or srun started the process.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A started all-reduce: done once the communication thread saw it complete.
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(std::atomic<double>* waited) : waited_(waited) {}
  void Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_) {
      const auto t0 = Clock::now();
      cv_.wait(lock, [&] { return done_; });
      double w = waited_->load();
      while (!waited_->compare_exchange_weak(w, w + Ms(Clock::now() - t0))) {
      }
    }
    if (!error_.empty()) throw std::runtime_error(error_);
  }
  void Finish(const std::string& error) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = error;
    cv_.notify_all();
  }

 private:
  std::atomic<double>* waited_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

// MPI's world. Every MPI call after MPI_Init_thread is made on `thread_`, from a queue served in order: a blocking
// collective runs there while its caller waits; a started all-reduce is issued (MPI_Iallreduce) and tested until it
// completes -- one at a time, so every rank issues its collectives in the order they were asked for.
class MpiComm final : public Comm {
 public:
  explicit MpiComm(int level) {
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
    desc_ = "MPI (" + lib + "), thread level " + LevelName(level) + ", a communication thread";
    thread_ = std::thread([this] { Serve(); });
  }
  ~MpiComm() override { Stop(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return desc_; }
  void AllReduceSum(float* data, int64_t n) override {
    Blocking([this, data, n] { Sum(data, n, MPI_FLOAT); });
  }
  void AllReduceSum(double* data, int64_t n) override {
    Blocking([this, data, n] { Sum(data, n, MPI_DOUBLE); });
  }
  std::shared_ptr<Request> StartAllReduceSum(float* data, int64_t n) override { return Start(data, n, false); }
  std::shared_ptr<Request> StartReduceScatterSum(float* data, int64_t n) override { return Start(data, n, true); }
  void AllGatherBlocks(float* data, int64_t block) override {
    if (block > INT32_MAX) throw std::runtime_error("MPI_Allgather: a block of more than 2^31 values");
    Blocking([=] {
      Check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(block), MPI_FLOAT, MPI_COMM_WORLD),
            "MPI_Allgather");
    });
  }
  std::shared_ptr<Request> Start(float* data, int64_t n, bool scatter) {
    if (scatter && n / size_ > INT32_MAX)
      throw std::runtime_error("MPI_Ireduce_scatter_block: a block of more than 2^31 values");
    auto r = std::make_shared<MpiRequest>(&waited_ms_);
    Task t;
    t.data = data;
    t.count = n;
    t.scatter = scatter;
    t.request = r;
    t.created = Clock::now();
    Enqueue(std::move(t));
    return r;
  }
  CommStats stats() const override {
    CommStats s;
    s.collectives = collectives_.load();
    s.busy_ms = busy_ms_.load();
    s.waited_ms = waited_ms_.load();
    return s;
  }
  void RecordTimings(bool on) override { record_ = on; }
  std::vector<CollectiveTiming> TakeTimings() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<CollectiveTiming> r;
    r.swap(timings_);
    return r;
  }
  void ResetStats() override {
    collectives_ = 0;
    busy_ms_ = 0;
    waited_ms_ = 0;
  }
  std::vector<std::string> AllGather(const std::string& s) override {
    std::vector<std::string> out;
    Blocking([&] {
      const int len = static_cast<int>(s.size());
      std::vector<int> lens(static_cast<size_t>(size_)), offs(static_cast<size_t>(size_));
      Check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
      int total = 0;
      for (int r = 0; r < size_; ++r) offs[static_cast<size_t>(r)] = total, total += lens[static_cast<size_t>(r)];
      std::string all(static_cast<size_t>(total), '\0');
      Check(MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgatherv");
      for (int r = 0; r < size_; ++r)
        out.push_back(all.substr(static_cast<size_t>(offs[static_cast<size_t>(r)]),
                                 static_cast<size_t>(lens[static_cast<size_t>(r)])));
    });
    return out;
  }
  [[noreturn]] void Abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);  // ends every process; the communication thread with it
    std::_Exit(code);
  }
  void Finalize() override {
    Stop();
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }

 private:
  struct Task {
    std::function<void()> run;  // a blocking collective, or (run empty) a started all-reduce of data[0, count)
    float* data = nullptr;
    int64_t count = 0;
    bool scatter = false;  // MPI_Ireduce_scatter_block (this rank's block to data[0, count / size))
    std::shared_ptr<MpiRequest> request;
    Clock::time_point created;
    std::promise<void> done;  // blocking: set when run returned (or threw)
  };
  void Enqueue(Task t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw std::runtime_error("MPI: a collective after the communication thread stopped");
    queue_.push_back(std::move(t));
    cv_.notify_one();
  }
  void Blocking(std::function<void()> f) {
    Task t;
    t.run = std::move(f);
    std::future<void> done = t.done.get_future();
    Enqueue(std::move(t));
    done.get();  // rethrows the collective's error
  }
  void Serve() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      if (t.run) {
        try {
          t.run();
          t.done.set_value();
        } catch (...) {
          t.done.set_exception(std::current_exception());
        }
        continue;
      }
      const auto issued = Clock::now();
      const std::string error = RunStarted(t.data, t.count, t.scatter);
      if (record_.load()) {
        std::lock_guard<std::mutex> lock(mu_);
        timings_.push_back({std::chrono::duration_cast<std::chrono::nanoseconds>(issued - t.created).count(),
                            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t.created).count()});
      }
      t.request->Finish(error);
    }
  }
  // Issues one started all-reduce (or reduce-scatter, in one piece) and tests it until it completes; returns "" or
  // the error.
  std::string RunStarted(float* data, int64_t n, bool scatter) {
    const auto t0 = Clock::now();
    std::string error;
    for (int64_t off = 0; off < n && error.empty(); off += scatter ? n : kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, n - off));
      MPI_Request req;
      int rc = scatter ? MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(n / size_), MPI_FLOAT, MPI_SUM,
                                                   MPI_COMM_WORLD, &req)
                       : MPI_Iallreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      // Tested in a loop that yields the core between tests: a sleep between tests (20 us asked, ~80 us given) made
      // each of a collective's protocol rounds wait that long (the tiny transformer's 12 buckets: 4 ms a step
      // against 1); MPI_Wait spins without yielding where Open MPI sees a core per rank.
      for (int flag = 0; rc == MPI_SUCCESS && !flag;) {
        rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !flag) std::this_thread::yield();
      }
      if (rc != MPI_SUCCESS)
        error = std::string(scatter ? "MPI_Ireduce_scatter_block: " : "MPI_Iallreduce: ") + ErrorText(rc);
    }
    ++collectives_;
    double b = busy_ms_.load();
    while (!busy_ms_.compare_exchange_weak(b, b + Ms(Clock::now() - t0))) {
    }
    return error;
  }
  void Sum(void* data, int64_t n, MPI_Datatype t) {
    int bytes = 0;
    MPI_Type_size(t, &bytes);
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, n - off));
      Check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * bytes, count, t, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
    }
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

  int rank_ = 0, size_ = 1;
  std::string desc_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<int64_t> collectives_{0};
  std::atomic<bool> record_{false};
  std::vector<CollectiveTiming> timings_;  // under mu_
  std::atomic<double> busy_ms_{0}, waited_ms_{0};
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
