#include "reader_base.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

namespace tidemark {

namespace {
int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}
}  // namespace

bool LinuxReaderBase::StartReader(const BackendOptions &opts, BatchSink sink, std::string &error) {
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) {
    error = std::string("eventfd: ") + strerror(errno);
    return false;
  }
  sink_ = std::move(sink);
  batchMillis_ = opts.batchMillis > 0 ? opts.batchMillis : 50;
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  return true;
}

void LinuxReaderBase::Stop() {
  if (running_) {
    stopping_ = true;
    uint64_t one = 1;
    if (write(wakeFd_, &one, sizeof one) < 0) {
    }
    if (thread_.joinable()) thread_.join();
    running_ = false;
  }
  if (wakeFd_ >= 0) close(wakeFd_);
  wakeFd_ = -1;
  CloseKernel();
}

void LinuxReaderBase::Flush(uint64_t token) {
  {
    std::lock_guard<std::mutex> lock(flushMu_);
    flushTokens_.push_back(token);
  }
  uint64_t one = 1;
  if (wakeFd_ >= 0 && write(wakeFd_, &one, sizeof one) < 0) {
  }
}

void LinuxReaderBase::Emit(uint64_t token, bool ready) {
  Batch b = coalescer_->Take();
  b.flushToken = token;
  b.ready = ready;
  if (!broken_.empty()) b.broken = broken_;
  sink_(std::move(b));
}

void LinuxReaderBase::Run() {
  int64_t firstPending = -1;
  bool reportedBroken = false;
  try {
    if (Prepare() && broken_.empty()) {
      Emit(0, true);
    } else {
      if (broken_.empty()) broken_ = "the tracker could not start";
      reportedBroken = true;
      Emit(0);
    }
    while (!stopping_) {
      int timeout = -1;
      if (firstPending >= 0) {
        int64_t left = firstPending + batchMillis_ - NowMs();
        timeout = left > 0 ? static_cast<int>(left) : 0;
      }
      pollfd fds[2] = {{wakeFd_, POLLIN, 0}, {notifyFd_, POLLIN, 0}};
      int nfds = broken_.empty() ? 2 : 1;
      int r = poll(fds, nfds, timeout);
      if (r < 0 && errno != EINTR) {
        broken_ = std::string("poll: ") + strerror(errno);
      }
      if (stopping_) break;
      std::vector<uint64_t> tokens;
      if (r > 0 && (fds[0].revents & POLLIN)) {
        uint64_t v;
        if (read(wakeFd_, &v, sizeof v) < 0) {
        }
        std::lock_guard<std::mutex> lock(flushMu_);
        tokens.swap(flushTokens_);
      }
      if (broken_.empty() && (!tokens.empty() || (r > 0 && nfds > 1 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))))) {
        Drain();
      }
      if (!broken_.empty() && !reportedBroken) {
        reportedBroken = true;
        Emit(0);
        firstPending = -1;
      }
      if (!coalescer_->Empty() && firstPending < 0) firstPending = NowMs();
      if (!tokens.empty()) {
        // One batch per flush request; the first carries the pending events.
        for (uint64_t t : tokens) Emit(t);
        firstPending = -1;
      } else if (firstPending >= 0 && NowMs() - firstPending >= batchMillis_) {
        Emit(0);
        firstPending = -1;
      }
    }
  } catch (const std::exception &e) {
    broken_ = std::string("tracker thread failed: ") + e.what();
    try {
      Emit(0);
    } catch (...) {
    }
  } catch (...) {
    broken_ = "tracker thread failed";
    try {
      Emit(0);
    } catch (...) {
    }
  }
}

}  // namespace tidemark
