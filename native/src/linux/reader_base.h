// Shared plumbing of the Linux backends: a reader thread that polls the notification fd and a
// wake-up eventfd (stop and flush requests), folds events with a Coalescer and emits batches at
// most every batchMillis (or at once for a flush).
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "../common/backend.h"

namespace tidemark {

class LinuxReaderBase : public Backend {
 public:
  // Derived classes call Stop() in their destructors (CloseKernel is virtual).
  ~LinuxReaderBase() override = default;
  void Stop() override;
  void Flush(uint64_t token) override;

 protected:
  // Starts the thread once notifyFd_ is set up.
  bool StartReader(const BackendOptions &opts, BatchSink sink, std::string &error);
  // Runs first on the reader thread (e.g. the initial recursive watch); false with broken_ set on failure.
  virtual bool Prepare() { return true; }
  // Reads whatever is queued on notifyFd_ (non-blocking) and folds it into coalescer_.
  // Returns false when the backend is broken (broken_ set).
  virtual bool Drain() = 0;
  virtual void CloseKernel() = 0;

  int notifyFd_ = -1;
  std::unique_ptr<Coalescer> coalescer_;
  std::string broken_;

 private:
  void Run();
  void Emit(uint64_t token, bool ready = false);
  int wakeFd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex flushMu_;
  std::vector<uint64_t> flushTokens_;
  BatchSink sink_;
  int batchMillis_ = 50;
  bool running_ = false;
};

}  // namespace tidemark
