// File system calls Node does not offer: set access/modification times in nanoseconds (utimensat),
// optionally without following a symlink (synchronous, one syscall); and read many scattered pieces of
// a file in one asynchronous call (readScattered), with threads of its own keeping up to `depth` reads
// in flight, or on Linux for a file opened with O_DIRECT with the kernel's AIO (all in flight at once). Node's fs reads go to the libuv pool one at a time: each submission wakes a pool thread,
// which on two cores preempts the JavaScript thread issuing them, so thousands of small random reads
// (the changed blocks of a large file) spent more time being scheduled than the disk took to serve them.
// readFiles does the same for many small files (open, read, fstat, close each), so a backup's batch of
// small files is read with several reads in flight instead of one synchronous read at a time. The threads
// are kept and used again from call to call (OnThreads).
#include <napi.h>
#ifndef _WIN32
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#endif
#ifdef __linux__
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <memory>
#endif

#ifndef _WIN32
// info[i] (a Buffer: a path's raw bytes) as a string; throws (and returns false) when it holds a NUL.
static bool PathArg(const Napi::CallbackInfo& info, size_t i, std::string* path) {
  auto buf = info[i].As<Napi::Buffer<char>>();
  path->assign(buf.Data(), buf.Length());
  if (path->find('\0') == std::string::npos) return true;
  Napi::TypeError::New(info.Env(), "path contains NUL").ThrowAsJavaScriptException();
  return false;
}

// Nanoseconds since the epoch (before it: negative) as a timespec (tv_nsec always in [0, 1e9)).
static struct timespec TimespecOf(int64_t ns) {
  struct timespec t;
  t.tv_sec = ns / 1000000000LL;
  t.tv_nsec = ns % 1000000000LL;
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1000000000LL;
    t.tv_sec -= 1;
  }
  return t;
}
#endif

static Napi::Value SetTimes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsBuffer() || !info[1].IsBigInt() || !info[2].IsBigInt() || !info[3].IsBoolean()) {
    Napi::TypeError::New(env, "setTimes(path: Buffer, atimeNs: bigint, mtimeNs: bigint, noFollow: boolean)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "setTimes is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  std::string path;
  if (!PathArg(info, 0, &path)) return env.Undefined();
  bool lossless = true;
  int64_t a = info[1].As<Napi::BigInt>().Int64Value(&lossless);
  int64_t m = info[2].As<Napi::BigInt>().Int64Value(&lossless);
  struct timespec ts[2] = {TimespecOf(a), TimespecOf(m)};
  int flags = info[3].As<Napi::Boolean>().Value() ? AT_SYMLINK_NOFOLLOW : 0;
  if (utimensat(AT_FDCWD, path.c_str(), ts, flags) != 0) {
    int e = errno;
    Napi::Error err = Napi::Error::New(env, std::string("utimensat: ") + strerror(e));
    err.Set("errno", Napi::Number::New(env, e));
    err.ThrowAsJavaScriptException();
  }
  return env.Undefined();
#endif
}

// setTimesFd(fd, atimeNs, mtimeNs): futimens on an open file (no path lookup: a restore sets the times
// of each file it wrote before closing it).
static Napi::Value SetTimesFd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsBigInt() || !info[2].IsBigInt()) {
    Napi::TypeError::New(env, "setTimesFd(fd: number, atimeNs: bigint, mtimeNs: bigint)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "setTimesFd is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  bool lossless = true;
  int64_t ns[2] = {info[1].As<Napi::BigInt>().Int64Value(&lossless), info[2].As<Napi::BigInt>().Int64Value(&lossless)};
  struct timespec ts[2] = {TimespecOf(ns[0]), TimespecOf(ns[1])};
  if (futimens(info[0].As<Napi::Number>().Int32Value(), ts) != 0) {
    int e = errno;
    Napi::Error err = Napi::Error::New(env, std::string("futimens: ") + strerror(e));
    err.Set("errno", Napi::Number::New(env, e));
    err.ThrowAsJavaScriptException();
  }
  return env.Undefined();
#endif
}

#ifndef _WIN32
// Where each piece starts in the target buffer: right after the ones before it.
static std::vector<size_t> StartsOf(const std::vector<uint32_t>& lengths) {
  std::vector<size_t> starts;
  size_t pos = 0;
  for (uint32_t len : lengths) {
    starts.push_back(pos);
    pos += len;
  }
  return starts;
}

// Threads kept for OnThreads, started as first needed and then waiting for more work: a backup's every
// batch of small files (one readFiles call, depth 8) used to start and join seven threads of its own,
// thousands of thread starts per backup (each maps and faults in a stack).
namespace {
struct PoolJob {
  void* (*run)(void*);
  void* arg;
  int* left;  // the caller's count of jobs not done, under *mu
  pthread_mutex_t* mu;
  pthread_cond_t* done;
};
pthread_mutex_t poolMu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t poolWork = PTHREAD_COND_INITIALIZER;
std::vector<PoolJob>* poolQueue = new std::vector<PoolJob>();  // never freed: its threads live to exit
int poolThreads = 0;  // started
int poolBusy = 0;     // running a job
const int kMaxPoolThreads = 64;

void* PoolThread(void*) {
  pthread_mutex_lock(&poolMu);
  for (;;) {
    while (poolQueue->empty()) pthread_cond_wait(&poolWork, &poolMu);
    PoolJob job = poolQueue->front();
    poolQueue->erase(poolQueue->begin());
    poolBusy++;
    pthread_mutex_unlock(&poolMu);
    job.run(job.arg);
    pthread_mutex_lock(job.mu);
    if (--*job.left == 0) pthread_cond_signal(job.done);
    pthread_mutex_unlock(job.mu);
    pthread_mutex_lock(&poolMu);
    poolBusy--;
  }
  return nullptr;
}
}  // namespace

// Runs `run(arg)` on up to `depth` threads (this one included) for `n` items; returns when all are done.
// `run` takes items until none are left, so a kept thread that gets to its job late finds nothing to do;
// jobs no kept thread has taken by the time this thread is done are withdrawn, not waited for.
static void OnThreads(int depth, size_t n, void* (*run)(void*), void* arg) {
  size_t want = std::min<size_t>(depth < 1 ? 1 : depth, n);
  int extra = want > 1 ? static_cast<int>(want - 1) : 0;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t done = PTHREAD_COND_INITIALIZER;
  int left = extra;
  if (extra) {
    pthread_mutex_lock(&poolMu);
    for (int k = 0; k < extra; k++) poolQueue->push_back({run, arg, &left, &mu, &done});
    // a thread for every job waiting (the ones not busy wait for work), up to the cap
    while (poolThreads - poolBusy < static_cast<int>(poolQueue->size()) && poolThreads < kMaxPoolThreads) {
      pthread_t t;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      int ok = pthread_create(&t, &attr, PoolThread, nullptr);
      pthread_attr_destroy(&attr);
      if (ok != 0) break;  // none could be started: this thread does the work alone
      poolThreads++;
    }
    pthread_cond_broadcast(&poolWork);
    pthread_mutex_unlock(&poolMu);
  }
  run(arg);  // this thread works too (and alone when no kept thread is free)
  if (!extra) return;
  pthread_mutex_lock(&poolMu);
  int withdrawn = 0;
  for (size_t i = poolQueue->size(); i-- > 0;)
    if ((*poolQueue)[i].left == &left) {
      poolQueue->erase(poolQueue->begin() + i);
      withdrawn++;
    }
  pthread_mutex_unlock(&poolMu);
  pthread_mutex_lock(&mu);
  left -= withdrawn;
  while (left > 0) pthread_cond_wait(&done, &mu);
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&done);
  pthread_mutex_destroy(&mu);
}
#endif

#ifndef _WIN32
// Reads piece i (offsets[i], lengths[i]) into target at the sum of the lengths before it; resolves with a
// Uint32Array of the bytes read per piece (short at end of file), or rejects with the first error.
class ScatterRead : public Napi::AsyncWorker {
 public:
  ScatterRead(Napi::Env env, int fd, std::vector<double> offsets, std::vector<uint32_t> lengths,
              Napi::Buffer<uint8_t> target, int depth, bool aio)
      : Napi::AsyncWorker(env),
        deferred_(Napi::Promise::Deferred::New(env)),
        fd_(fd),
        offsets_(std::move(offsets)),
        lengths_(std::move(lengths)),
        starts_(StartsOf(lengths_)),
        data_(target.Data()),
        depth_(depth),
        aio_(aio),
        got_(lengths_.size(), 0) {
    target_ = Napi::Persistent(target);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    usedAio_ = ReadAio();
    if (!usedAio_) OnThreads(depth_, lengths_.size(), &ScatterRead::Run, this);
    int e = error_.load();
    if (e) {
      errno_ = e;
      SetError(std::string("read: ") + strerror(e));
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto out = Napi::Uint32Array::New(env, got_.size());
    for (size_t i = 0; i < got_.size(); i++) out[i] = got_[i];
    auto result = Napi::Object::New(env);
    result.Set("got", out);
    result.Set("aio", Napi::Boolean::New(env, usedAio_));
    deferred_.Resolve(result);
  }
  void OnError(const Napi::Error& e) override {
    Napi::Error err = Napi::Error::New(Env(), e.Message());
    err.Set("errno", Napi::Number::New(Env(), errno_));
    deferred_.Reject(err.Value());
  }

 private:
#ifdef __linux__
  // A file opened with O_DIRECT is read with the kernel's asynchronous I/O instead: up to kAioDepth pieces
  // submitted in one io_submit call and reaped as they complete, all on this one thread. Threads blocking
  // in pread cost two context switches per piece and a thread start per `depth` pieces: with AIO,
  // bench:cbt's incremental (thousands of scattered blocks) spends about half the system time and runs
  // faster.
  // Without O_DIRECT the kernel would do the reads inside io_submit, one after the other, so such files
  // keep the threads. Returns false (nothing read) where the kernel offers no AIO context or refuses the
  // first submission; the threads then do it all. A piece AIO returns short is finished with pread, as
  // the threads do (at the end of the file that read returns 0).
  bool ReadAio() {
    if (!aio_) return false;
    int fl = fcntl(fd_, F_GETFL);
    size_t n = lengths_.size();
    if (fl < 0 || !(fl & O_DIRECT) || n == 0) return false;
    aio_context_t ctx = Context();
    if (!ctx) return false;
    const size_t window = n < kAioDepth ? n : kAioDepth;
    std::vector<struct iocb> cbs(window);
    std::vector<size_t> slotPiece(window);
    std::vector<struct iocb*> ready;
    std::vector<size_t> freeSlots;
    for (size_t k = window; k > 0; k--) freeSlots.push_back(k - 1);
    struct io_event events[kAioDepth];
    size_t next = 0, inflight = 0;
    bool anyDone = false;
    while (next < n || inflight > 0) {
      ready.clear();
      while (next < n && !freeSlots.empty() && !error_.load()) {
        size_t slot = freeSlots.back();
        freeSlots.pop_back();
        struct iocb& cb = cbs[slot];
        memset(&cb, 0, sizeof cb);
        cb.aio_lio_opcode = IOCB_CMD_PREAD;
        cb.aio_fildes = static_cast<uint32_t>(fd_);
        cb.aio_buf = reinterpret_cast<uint64_t>(data_ + starts_[next]);
        cb.aio_nbytes = lengths_[next];
        cb.aio_offset = static_cast<int64_t>(offsets_[next]);
        cb.aio_data = slot;
        slotPiece[slot] = next++;
        ready.push_back(&cb);
      }
      size_t sent = 0;
      while (sent < ready.size()) {
        long r = syscall(SYS_io_submit, ctx, static_cast<long>(ready.size() - sent), ready.data() + sent);
        if (r > 0) {
          sent += static_cast<size_t>(r);
          inflight += static_cast<size_t>(r);
          anyDone = true;
          continue;
        }
        int e = r < 0 ? errno : EAGAIN;
        if (e == EINTR) continue;
        if (e == EAGAIN && inflight > 0) break;  // the queue is full: reap, then submit the rest
        if (!anyDone && inflight == 0) return false;  // AIO refused outright: the threads read it all
        int expected = 0;
        error_.compare_exchange_strong(expected, e);
        break;
      }
      // pieces prepared but not submitted go back (their slots free, `next` back to the first of them)
      if (sent < ready.size()) {
        next = slotPiece[ready[sent]->aio_data];
        for (size_t k = sent; k < ready.size(); k++) freeSlots.push_back(ready[k]->aio_data);
        if (error_.load()) next = n;  // stop submitting; drain what is in flight
      }
      if (inflight == 0) break;
      long got = syscall(SYS_io_getevents, ctx, 1L, static_cast<long>(inflight), events, nullptr);
      if (got < 0) {
        if (errno == EINTR) continue;
        // cannot reap: nothing else is safe to do with buffers the kernel may still fill
        abort();
      }
      for (long k = 0; k < got; k++) {
        size_t slot = static_cast<size_t>(events[k].data);
        size_t i = slotPiece[slot];
        freeSlots.push_back(slot);
        inflight--;
        long long res = static_cast<long long>(events[k].res);
        if (res < 0) {
          int expected = 0;
          error_.compare_exchange_strong(expected, static_cast<int>(-res));
          continue;
        }
        got_[i] = static_cast<uint32_t>(res);
      }
    }
    // A short piece (end of file, or a rare partial read) is finished with plain reads, like the threads do.
    for (size_t i = 0; i < n && !error_.load(); i++) {
      size_t len = lengths_[i];
      size_t have = got_[i];
      if (have == 0 || have >= len) continue;
      while (have < len) {
        ssize_t r = pread(fd_, data_ + starts_[i] + have, len - have,
                          static_cast<off_t>(offsets_[i]) + static_cast<off_t>(have));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
          int expected = 0;
          error_.compare_exchange_strong(expected, errno);
          break;
        }
        if (r == 0) break;
        have += static_cast<size_t>(r);
      }
      got_[i] = static_cast<uint32_t>(have);
    }
    return true;
  }

  static constexpr size_t kAioDepth = 128;

  // One AIO context per thread of the libuv pool, set up on first use and kept (io_destroy waits for the
  // kernel's RCU grace period); 0 when the kernel has none to give (the threads read instead).
  static aio_context_t Context() {
    static thread_local aio_context_t ctx = 0;
    static thread_local bool tried = false;
    if (!tried) {
      tried = true;
      if (syscall(SYS_io_setup, static_cast<long>(kAioDepth), &ctx) != 0) ctx = 0;
    }
    return ctx;
  }
#else
  bool ReadAio() { return false; }
#endif

  static void* Run(void* arg) {
    auto* self = static_cast<ScatterRead*>(arg);
    size_t n = self->lengths_.size();
    for (;;) {
      size_t i = self->next_.fetch_add(1);
      if (i >= n || self->error_.load()) break;
      size_t len = self->lengths_[i];
      size_t got = 0;
      while (got < len) {
        ssize_t r = pread(self->fd_, self->data_ + self->starts_[i] + got, len - got,
                          static_cast<off_t>(self->offsets_[i]) + static_cast<off_t>(got));
        if (r < 0) {
          if (errno == EINTR) continue;
          int expected = 0;
          self->error_.compare_exchange_strong(expected, errno);
          break;
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
      }
      self->got_[i] = static_cast<uint32_t>(got);
    }
    return nullptr;
  }

  Napi::Promise::Deferred deferred_;
  int fd_;
  std::vector<double> offsets_;
  std::vector<uint32_t> lengths_;
  std::vector<size_t> starts_;
  uint8_t* data_;
  int depth_;
  bool aio_;
  bool usedAio_ = false;
  std::vector<uint32_t> got_;
  Napi::Reference<Napi::Buffer<uint8_t>> target_;
  std::atomic<size_t> next_{0};
  std::atomic<int> error_{0};
  int errno_ = 0;
};
#endif

#ifdef __linux__
// A minimal io_uring (the kernel's submission and completion rings, by its system calls: no liburing),
// one per thread that needs it, for readFiles and listDir. Setup fails where the kernel has no io_uring,
// turned it off (kernel.io_uring_disabled) or a sandbox forbids it (containers' seccomp profiles often do),
// or lacks an operation they need (openat and statx came with Linux 5.6): threads and plain system calls
// do the work instead. A ring whose io_uring_enter fails for good is not used again.
class Ring {
 public:
  static constexpr unsigned kEntries = 256;

  // This thread's ring, or nullptr when there is none to be had.
  static Ring* OfThread() {
    thread_local std::unique_ptr<Ring> ring;
    thread_local bool tried = false;
    if (!tried) {
      tried = true;
      std::unique_ptr<Ring> r(new Ring());
      if (r->Setup()) ring = std::move(r);
    }
    return ring && !ring->broken_ ? ring.get() : nullptr;
  }

  ~Ring() {
    if (sqes_ != MAP_FAILED) munmap(sqes_, sqesLen_);
    if (cq_ != MAP_FAILED && cq_ != sq_) munmap(cq_, cqLen_);
    if (sq_ != MAP_FAILED) munmap(sq_, sqLen_);
    if (fd_ >= 0) close(fd_);
  }

  // A zeroed submission entry, submitted by the next SubmitAndReap (the caller queues at most kEntries).
  struct io_uring_sqe* Next() {
    unsigned tail = *sqTail_ + queued_;
    unsigned idx = tail & *sqMask_;
    struct io_uring_sqe* e = &sqes_[idx];
    memset(e, 0, sizeof(*e));
    sqArray_[idx] = idx;
    queued_++;
    return e;
  }

  // Submits what was queued and calls `take(user_data, res)` for each of `expect` completions. Returns
  // false only when io_uring_enter fails for good before anything was submitted: nothing is in flight
  // then (the ring is not used again, so what was queued never runs), and the caller does the work
  // another way. Once something was submitted, its completions are waited for whatever happens, since
  // the kernel may still write into the caller's buffers until they come.
  template <typename F>
  bool SubmitAndReap(unsigned expect, F take) {
    __atomic_store_n(sqTail_, *sqTail_ + queued_, __ATOMIC_RELEASE);
    unsigned toSubmit = queued_;
    const unsigned queued = queued_;
    queued_ = 0;
    while (expect > 0) {
      unsigned head = *cqHead_;
      unsigned tail = __atomic_load_n(cqTail_, __ATOMIC_ACQUIRE);
      if (head == tail) {
        long r = syscall(__NR_io_uring_enter, fd_, toSubmit, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
        if (r < 0) {
          if (errno == EINTR || errno == EAGAIN || errno == EBUSY) continue;
          broken_ = true;
          if (toSubmit == queued) return false;
          // some of it is in flight: its completions must come before the buffers are let go, and the
          // rest of the batch is counted on too, so keep trying (an error here has never been seen)
          struct timespec pause = {0, 1000000};
          nanosleep(&pause, nullptr);
          continue;
        }
        toSubmit -= static_cast<unsigned>(r) < toSubmit ? static_cast<unsigned>(r) : toSubmit;
        continue;
      }
      for (; head != tail && expect > 0; head++, expect--) {
        const struct io_uring_cqe& c = cqes_[head & *cqMask_];
        take(c.user_data, c.res);
      }
      __atomic_store_n(cqHead_, head, __ATOMIC_RELEASE);
    }
    return true;
  }

 private:
  bool Setup() {
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    fd_ = static_cast<int>(syscall(__NR_io_uring_setup, kEntries, &p));
    if (fd_ < 0) return false;
    sqLen_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cqLen_ = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    bool single = p.features & IORING_FEAT_SINGLE_MMAP;
    if (single) sqLen_ = cqLen_ = std::max(sqLen_, cqLen_);
    sq_ = mmap(nullptr, sqLen_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
    if (sq_ == MAP_FAILED) return false;
    cq_ = single ? sq_
                 : mmap(nullptr, cqLen_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_CQ_RING);
    if (cq_ == MAP_FAILED) return false;
    sqesLen_ = p.sq_entries * sizeof(struct io_uring_sqe);
    sqes_ = static_cast<struct io_uring_sqe*>(
        mmap(nullptr, sqesLen_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES));
    if (sqes_ == MAP_FAILED) return false;
    auto at = [](void* base, unsigned off) { return reinterpret_cast<unsigned*>(static_cast<char*>(base) + off); };
    sqTail_ = at(sq_, p.sq_off.tail);
    sqMask_ = at(sq_, p.sq_off.ring_mask);
    sqArray_ = at(sq_, p.sq_off.array);
    cqHead_ = at(cq_, p.cq_off.head);
    cqTail_ = at(cq_, p.cq_off.tail);
    cqMask_ = at(cq_, p.cq_off.ring_mask);
    cqes_ = reinterpret_cast<struct io_uring_cqe*>(static_cast<char*>(cq_) + p.cq_off.cqes);
    return Supports({IORING_OP_OPENAT, IORING_OP_READ, IORING_OP_STATX});
  }

  bool Supports(std::initializer_list<int> ops) {
    const size_t n = 256;
    std::vector<char> mem(sizeof(struct io_uring_probe) + n * sizeof(struct io_uring_probe_op), 0);
    auto* probe = reinterpret_cast<struct io_uring_probe*>(mem.data());
    if (syscall(__NR_io_uring_register, fd_, IORING_REGISTER_PROBE, probe, n) < 0) return false;
    for (int op : ops)
      if (op > probe->last_op || !(probe->ops[op].flags & IO_URING_OP_SUPPORTED)) return false;
    return true;
  }

  int fd_ = -1;
  void* sq_ = MAP_FAILED;
  void* cq_ = MAP_FAILED;
  struct io_uring_sqe* sqes_ = static_cast<struct io_uring_sqe*>(MAP_FAILED);
  size_t sqLen_ = 0, cqLen_ = 0, sqesLen_ = 0;
  unsigned *sqTail_ = nullptr, *sqMask_ = nullptr, *sqArray_ = nullptr;
  unsigned *cqHead_ = nullptr, *cqTail_ = nullptr, *cqMask_ = nullptr;
  struct io_uring_cqe* cqes_ = nullptr;
  unsigned queued_ = 0;
  bool broken_ = false;
};
#endif

#ifndef _WIN32
// Reads whole files: file i (paths[i], NUL-terminated in one buffer) into target at the sum of
// (limits[j]) for j < i, at most limits[i] bytes. Resolves with a Float64Array of three numbers per file:
// bytes read (or -errno when it could not be opened or read), its size and mtime (ms, to the microsecond)
// by fstat after reading. One file's failure is its own result, never the batch's.
//
// With `ring` (Linux), one thread reads the batch through an io_uring instead (Ring): up to kRingFiles
// files' openat at once, then their reads each followed by its statx, in one submission each. Read
// cold through the ring, many small files take less time and about a third less CPU than on threads. A
// thread's own read is a request of its own, and in a VM each request is a notification of the host (an
// exit: `perf` showed the virtqueue kick as the largest cost of reading small files); a submission of many
// reads reaches the disk in one plug. The results are the same either way.
class ReadFiles : public Napi::AsyncWorker {
 public:
  ReadFiles(Napi::Env env, std::vector<std::string> paths, std::vector<uint32_t> limits,
            Napi::Buffer<uint8_t> target, int depth, bool ring)
      : Napi::AsyncWorker(env),
        deferred_(Napi::Promise::Deferred::New(env)),
        paths_(std::move(paths)),
        limits_(std::move(limits)),
        starts_(StartsOf(limits_)),
        data_(target.Data()),
        depth_(depth),
        ring_(ring),
        out_(paths_.size() * 3, 0) {
    target_ = Napi::Persistent(target);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
#ifdef __linux__
    if (ring_ && !paths_.empty()) {
      if (Ring* ring = Ring::OfThread()) {
        usedRing_ = RunRing(ring);
        if (usedRing_) return;
        next_ = 0;  // the ring failed (an error of io_uring_enter itself): read everything again
      }
    }
#endif
    OnThreads(depth_, paths_.size(), &ReadFiles::Run, this);
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto out = Napi::Float64Array::New(env, out_.size());
    for (size_t i = 0; i < out_.size(); i++) out[i] = out_[i];
    Napi::Object r = Napi::Object::New(env);
    r.Set("results", out);
    r.Set("ring", Napi::Boolean::New(env, usedRing_));
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  // bytes read, size and mtime (ms, to the microsecond, truncated: exactly the scan's mtimeMsOf in
  // src/main/engine/scan/index.ts) into the file's three results
  static void Result(double* r, size_t got, int64_t size, int64_t sec, int64_t nsec) {
    r[0] = static_cast<double>(got);
    r[1] = static_cast<double>(size);
    const int64_t ns = sec * 1000000000LL + nsec;
    r[2] = static_cast<double>(ns / 1000) / 1000.0;
  }

  // Reads file i from `got` on (into its place, up to its limit) until the end of the file, then fstat()s
  // and closes it: the whole of a thread's read, and the rest of a file the ring read short.
  void Finish(size_t i, int fd, size_t got) {
    double* r = &out_[i * 3];
    size_t len = limits_[i];
    int err = 0;
    while (got < len) {
      ssize_t k = pread(fd, data_ + starts_[i] + got, len - got, static_cast<off_t>(got));
      if (k < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (k == 0) break;
      got += static_cast<size_t>(k);
    }
    struct stat st;
    if (!err && fstat(fd, &st) != 0) err = errno;
    close(fd);
    if (err)
      r[0] = -err;
    else
      Result(r, got, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }

  static void* Run(void* arg) {
    auto* self = static_cast<ReadFiles*>(arg);
    size_t n = self->paths_.size();
    for (;;) {
      size_t i = self->next_.fetch_add(1);
      if (i >= n) break;
      int fd;
      do fd = open(self->paths_[i].c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      while (fd < 0 && errno == EINTR);
      if (fd < 0) {
        self->out_[i * 3] = -errno;
        continue;
      }
      self->Finish(i, fd, 0);
    }
    return nullptr;
  }

#ifdef __linux__
  static constexpr size_t kRingFiles = 64;

  // The batch kRingFiles files at a time: their openat in one submission, then each file's read (from
  // offset 0, up to its limit) hard-linked to a statx of it (so the size and time are taken after the
  // read, as fstat after reading does; a hard link runs even when the read comes up short). A file the
  // read did not take to its end (fewer bytes than statx saw and than its limit) is finished with pread.
  // Returns false only when io_uring_enter itself fails (nothing is then trusted: the threads read it).
  bool RunRing(Ring* ring) {
    size_t n = paths_.size();
    std::vector<int> fds(kRingFiles);
    std::vector<int> got(kRingFiles);
    std::vector<struct statx> stx(kRingFiles);
    std::vector<int> stxRes(kRingFiles);
    static const char kEmpty[] = "";
    for (size_t base = 0; base < n; base += kRingFiles) {
      size_t m = std::min(kRingFiles, n - base);
      std::fill(fds.begin(), fds.end(), -1);  // none open: a failed submission closes nothing
      for (size_t k = 0; k < m; k++) {
        struct io_uring_sqe* e = ring->Next();
        e->opcode = IORING_OP_OPENAT;
        e->fd = AT_FDCWD;
        e->addr = reinterpret_cast<uint64_t>(paths_[base + k].c_str());
        e->open_flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
        e->user_data = k;
      }
      bool ok = ring->SubmitAndReap(static_cast<unsigned>(m), [&](uint64_t k, int res) { fds[k] = res; });
      if (!ok) {
        for (size_t k = 0; k < m; k++)
          if (fds[k] >= 0) close(fds[k]);
        return false;
      }
      unsigned expect = 0;
      for (size_t k = 0; k < m; k++) {
        size_t i = base + k;
        if (fds[k] < 0) {
          out_[i * 3] = fds[k];  // -errno of the open
          continue;
        }
        struct io_uring_sqe* e = ring->Next();
        e->opcode = IORING_OP_READ;
        e->fd = fds[k];
        e->addr = reinterpret_cast<uint64_t>(data_ + starts_[i]);
        e->len = limits_[i];
        e->off = 0;
        e->flags = IOSQE_IO_HARDLINK;
        e->user_data = k;
        e = ring->Next();
        e->opcode = IORING_OP_STATX;
        e->fd = fds[k];
        e->addr = reinterpret_cast<uint64_t>(kEmpty);
        e->statx_flags = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW;
        e->len = STATX_SIZE | STATX_MTIME;
        e->off = reinterpret_cast<uint64_t>(&stx[k]);
        e->user_data = k | (1ULL << 32);
        expect += 2;
      }
      ok = ring->SubmitAndReap(expect, [&](uint64_t tag, int res) {
        size_t k = static_cast<size_t>(tag & 0xffffffffULL);
        if (tag >> 32)
          stxRes[k] = res;
        else
          got[k] = res;
      });
      if (!ok) {
        for (size_t k = 0; k < m; k++)
          if (fds[k] >= 0) close(fds[k]);
        return false;
      }
      for (size_t k = 0; k < m; k++) {
        size_t i = base + k;
        if (fds[k] < 0) continue;
        size_t len = limits_[i];
        if (got[k] < 0 && got[k] != -EAGAIN && got[k] != -EINTR) {
          out_[i * 3] = got[k];  // -errno of the read
          close(fds[k]);
          continue;
        }
        size_t n0 = got[k] > 0 ? static_cast<size_t>(got[k]) : 0;
        // read to its end as statx saw it (or to its limit): done; else the rest the way a thread reads
        if (got[k] >= 0 && stxRes[k] == 0 && (n0 == len || n0 == stx[k].stx_size)) {
          Result(&out_[i * 3], n0, static_cast<int64_t>(stx[k].stx_size), stx[k].stx_mtime.tv_sec,
                 stx[k].stx_mtime.tv_nsec);
          close(fds[k]);
        } else
          Finish(i, fds[k], n0);
      }
    }
    return true;
  }
  bool usedRing_ = false;
#else
  const bool usedRing_ = false;
#endif

  Napi::Promise::Deferred deferred_;
  std::vector<std::string> paths_;
  std::vector<uint32_t> limits_;
  std::vector<size_t> starts_;
  uint8_t* data_;
  int depth_;
  bool ring_;
  std::vector<double> out_;
  Napi::Reference<Napi::Buffer<uint8_t>> target_;
  std::atomic<size_t> next_{0};
};
#endif

// readFiles(paths: Buffer (NUL-terminated, concatenated), limits: Uint32Array, target: Buffer, depth,
//           ring: boolean) → Promise<{ results: Float64Array, ring: boolean }> (ring: whether it was used)
static Napi::Value ReadFilesFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsBuffer() || !info[1].IsTypedArray() || !info[2].IsBuffer() ||
      !info[3].IsNumber() || !info[4].IsBoolean()) {
    Napi::TypeError::New(env, "readFiles(paths: Buffer, limits: Uint32Array, target: Buffer, depth, ring: boolean)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "readFiles is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  auto buf = info[0].As<Napi::Buffer<char>>();
  std::vector<std::string> paths;
  size_t from = 0;
  for (size_t i = 0; i < buf.Length(); i++)
    if (buf.Data()[i] == '\0') {
      paths.emplace_back(buf.Data() + from, i - from);
      from = i + 1;
    }
  auto lens = info[1].As<Napi::TypedArray>();
  if (lens.TypedArrayType() != napi_uint32_array || lens.ElementLength() != paths.size() || from != buf.Length()) {
    Napi::TypeError::New(env, "paths must be NUL-terminated and limits a Uint32Array with one length per path")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto l = lens.As<Napi::Uint32Array>();
  std::vector<uint32_t> limits(l.Data(), l.Data() + l.ElementLength());
  auto target = info[2].As<Napi::Buffer<uint8_t>>();
  size_t total = 0;
  for (uint32_t x : limits) total += x;
  if (total > target.Length()) {
    Napi::RangeError::New(env, "target is smaller than the sum of the limits").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int depth = info[3].As<Napi::Number>().Int32Value();
  auto* w = new ReadFiles(env, std::move(paths), std::move(limits), target, depth > 64 ? 64 : depth,
                          info[4].As<Napi::Boolean>().Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
#endif
}

#ifndef _WIN32
// Lists a folder for the scan: its entries' names (but . and ..), sorted bytewise as Buffer.compare
// sorts, and each one's lstat, as kStatFields numbers: 0 or -errno, st_mode, size, mtime s and ns, ctime
// s and ns, uid, gid, ino, dev, nlink, rdev (exactly what Node's lstat gives: statx relative to the
// folder, not following links). With `ring` (Linux) the stats go through the thread's io_uring, a
// submission for up to kListBatch entries: a folder's inodes not in memory yet are then fetched from the
// disk all at once, where one lstat after another waited for each in turn (and walked the whole path).
class ListDir : public Napi::AsyncWorker {
 public:
  static constexpr size_t kStatFields = 13;
  ListDir(Napi::Env env, std::string path, bool ring)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), path_(std::move(path)), ring_(ring) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    int dfd;
    do dfd = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (dfd < 0 && errno == EINTR);
    if (dfd < 0) {
      errno_ = errno;
      return;
    }
    int lfd = dup(dfd);
    DIR* d = lfd >= 0 ? fdopendir(lfd) : nullptr;
    if (!d) {
      errno_ = errno;
      if (lfd >= 0) close(lfd);
      close(dfd);
      return;
    }
    for (;;) {
      errno = 0;
      struct dirent* e = readdir(d);
      if (!e) {
        if (errno) errno_ = errno;
        break;
      }
      if (e->d_name[0] == '.' && (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0))) continue;
      names_.emplace_back(e->d_name);
    }
    closedir(d);
    if (errno_) {
      close(dfd);
      return;
    }
    std::sort(names_.begin(), names_.end(), [](const std::string& a, const std::string& b) {
      int c = memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
      return c < 0 || (c == 0 && a.size() < b.size());
    });
    stats_.assign(names_.size() * kStatFields, 0);
#ifdef __linux__
    Ring* ring = ring_ ? Ring::OfThread() : nullptr;
    if (ring && StatRing(ring, dfd))
      usedRing_ = true;
    else
#endif
      for (size_t i = 0; i < names_.size(); i++) StatOne(dfd, i);
    close(dfd);
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object r = Napi::Object::New(env);
    if (errno_) {
      r.Set("errno", Napi::Number::New(env, errno_));
      deferred_.Resolve(r);
      return;
    }
    size_t total = 0;
    for (const auto& n : names_) total += n.size();
    auto names = Napi::Buffer<char>::New(env, total);
    auto ends = Napi::Uint32Array::New(env, names_.size());
    size_t at = 0;
    for (size_t i = 0; i < names_.size(); i++) {
      memcpy(names.Data() + at, names_[i].data(), names_[i].size());
      at += names_[i].size();
      ends[i] = static_cast<uint32_t>(at);
    }
    auto stats = Napi::Float64Array::New(env, stats_.size());
    if (!stats_.empty()) memcpy(stats.Data(), stats_.data(), stats_.size() * sizeof(double));
    r.Set("names", names);
    r.Set("ends", ends);
    r.Set("stats", stats);
    r.Set("ring", Napi::Boolean::New(env, usedRing_));
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
#ifdef __linux__
  void Fill(size_t i, const struct statx& x) {
    double* f = &stats_[i * kStatFields];
    f[1] = x.stx_mode;
    f[2] = static_cast<double>(x.stx_size);
    f[3] = static_cast<double>(x.stx_mtime.tv_sec);
    f[4] = x.stx_mtime.tv_nsec;
    f[5] = static_cast<double>(x.stx_ctime.tv_sec);
    f[6] = x.stx_ctime.tv_nsec;
    f[7] = x.stx_uid;
    f[8] = x.stx_gid;
    f[9] = static_cast<double>(x.stx_ino);
    f[10] = static_cast<double>(makedev(x.stx_dev_major, x.stx_dev_minor));
    f[11] = x.stx_nlink;
    f[12] = static_cast<double>(makedev(x.stx_rdev_major, x.stx_rdev_minor));
  }
  void StatOne(int dfd, size_t i) {
    struct statx x;
    if (statx(dfd, names_[i].c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &x) != 0)
      stats_[i * kStatFields] = -errno;
    else
      Fill(i, x);
  }
  static constexpr size_t kListBatch = 128;
  // Returns false only when io_uring_enter itself fails (the caller then stats every entry itself).
  bool StatRing(Ring* ring, int dfd) {
    std::vector<struct statx> x(std::min(kListBatch, names_.size()));
    for (size_t base = 0; base < names_.size(); base += kListBatch) {
      size_t m = std::min(kListBatch, names_.size() - base);
      for (size_t k = 0; k < m; k++) {
        struct io_uring_sqe* e = ring->Next();
        e->opcode = IORING_OP_STATX;
        e->fd = dfd;
        e->addr = reinterpret_cast<uint64_t>(names_[base + k].c_str());
        e->statx_flags = AT_SYMLINK_NOFOLLOW;
        e->len = STATX_BASIC_STATS;
        e->off = reinterpret_cast<uint64_t>(&x[k]);
        e->user_data = k;
      }
      std::vector<int> res(m, 0);
      if (!ring->SubmitAndReap(static_cast<unsigned>(m), [&](uint64_t k, int r) { res[k] = r; })) return false;
      for (size_t k = 0; k < m; k++) {
        if (res[k] < 0)
          stats_[(base + k) * kStatFields] = res[k];
        else
          Fill(base + k, x[k]);
      }
    }
    return true;
  }
  bool usedRing_ = false;
#else
  void StatOne(int dfd, size_t i) {
    struct stat st;
    double* f = &stats_[i * kStatFields];
    if (fstatat(dfd, names_[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      f[0] = -errno;
      return;
    }
    f[1] = st.st_mode;
    f[2] = static_cast<double>(st.st_size);
#ifdef __APPLE__
    f[3] = static_cast<double>(st.st_mtimespec.tv_sec);
    f[4] = st.st_mtimespec.tv_nsec;
    f[5] = static_cast<double>(st.st_ctimespec.tv_sec);
    f[6] = st.st_ctimespec.tv_nsec;
#else
    f[3] = static_cast<double>(st.st_mtim.tv_sec);
    f[4] = st.st_mtim.tv_nsec;
    f[5] = static_cast<double>(st.st_ctim.tv_sec);
    f[6] = st.st_ctim.tv_nsec;
#endif
    f[7] = st.st_uid;
    f[8] = st.st_gid;
    f[9] = static_cast<double>(st.st_ino);
    f[10] = static_cast<double>(st.st_dev);
    f[11] = st.st_nlink;
    f[12] = static_cast<double>(st.st_rdev);
  }
  const bool usedRing_ = false;
#endif

  Napi::Promise::Deferred deferred_;
  std::string path_;
  bool ring_;
  int errno_ = 0;
  std::vector<std::string> names_;
  std::vector<double> stats_;
};
#endif

// listDir(path: Buffer, ring: boolean) → Promise<{ names: Buffer, ends: Uint32Array, stats: Float64Array,
// ring: boolean } | { errno: number }> (see ListDir)
static Napi::Value ListDirFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsBuffer() || !info[1].IsBoolean()) {
    Napi::TypeError::New(env, "listDir(path: Buffer, ring: boolean)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "listDir is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  std::string path;
  if (!PathArg(info, 0, &path)) return env.Undefined();
  auto* w = new ListDir(env, std::move(path), info[1].As<Napi::Boolean>().Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
#endif
}

// readScattered(fd, offsets: Float64Array, lengths: Uint32Array, target: Buffer, depth, aio: boolean)
//   → Promise<{ got: Uint32Array, aio: boolean }> (aio: whether the kernel's AIO read it, not threads)
static Napi::Value ReadScattered(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 6 || !info[0].IsNumber() || !info[1].IsTypedArray() || !info[2].IsTypedArray() ||
      !info[3].IsBuffer() || !info[4].IsNumber() || !info[5].IsBoolean()) {
    Napi::TypeError::New(env, "readScattered(fd, offsets: Float64Array, lengths: Uint32Array, target: Buffer, depth, aio: boolean)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "readScattered is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  auto offs = info[1].As<Napi::TypedArray>();
  auto lens = info[2].As<Napi::TypedArray>();
  if (offs.TypedArrayType() != napi_float64_array || lens.TypedArrayType() != napi_uint32_array ||
      offs.ElementLength() != lens.ElementLength()) {
    Napi::TypeError::New(env, "offsets must be a Float64Array and lengths a Uint32Array of the same length")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto o = offs.As<Napi::Float64Array>();
  auto l = lens.As<Napi::Uint32Array>();
  std::vector<double> offsets(o.Data(), o.Data() + o.ElementLength());
  std::vector<uint32_t> lengths(l.Data(), l.Data() + l.ElementLength());
  auto target = info[3].As<Napi::Buffer<uint8_t>>();
  size_t total = 0;
  for (size_t i = 0; i < lengths.size(); i++) {
    if (!(offsets[i] >= 0) || offsets[i] > 9007199254740991.0) {
      Napi::RangeError::New(env, "offsets must be non-negative integers").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    total += lengths[i];
  }
  if (total > target.Length()) {
    Napi::RangeError::New(env, "target is smaller than the sum of the lengths").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int depth = info[4].As<Napi::Number>().Int32Value();
  auto* w = new ScatterRead(env, info[0].As<Napi::Number>().Int32Value(), std::move(offsets),
                            std::move(lengths), target, depth > 64 ? 64 : depth,
                            info[5].As<Napi::Boolean>().Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
#endif
}

// writeWhole(path, data, mode, chmod, uid, gid, mtimeNs): a restore's single-blob file in one call —
// create it (O_EXCL with its permission bits; an existing one is truncated), write it (all zeros: sized,
// sparse), chown it (uid >= 0), chmod it when the creation mode could not carry its bits, set its times
// and close it. Returns 0, or errno * 8 + the failed step (1 open, 2 write, 3 ftruncate, 4 fchown,
// 5 fchmod, 6 futimens, 7 close) for the caller to word the error as Node would. Synchronous: a worker
// thread writing the files it decoded made six fs calls per file, most of their cost in JavaScript.
static Napi::Value WriteWhole(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 7 || !info[0].IsBuffer() || !info[1].IsBuffer() || !info[2].IsNumber() ||
      !info[3].IsBoolean() || !info[4].IsNumber() || !info[5].IsNumber() || !info[6].IsBigInt()) {
    Napi::TypeError::New(env, "writeWhole(path, data, mode, chmod, uid, gid, mtimeNs: bigint)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
#ifdef _WIN32
  Napi::Error::New(env, "writeWhole is not available on Windows").ThrowAsJavaScriptException();
  return env.Undefined();
#else
  std::string path;
  if (!PathArg(info, 0, &path)) return env.Undefined();
  auto data = info[1].As<Napi::Buffer<uint8_t>>();
  const uint8_t* bytes = data.Data();
  size_t len = data.Length();
  mode_t mode = static_cast<mode_t>(info[2].As<Napi::Number>().Uint32Value()) & 07777;
  bool chmodNeeded = info[3].As<Napi::Boolean>().Value();
  int64_t uid = info[4].As<Napi::Number>().Int64Value();
  int64_t gid = info[5].As<Napi::Number>().Int64Value();
  bool lossless = true;
  int64_t ns = info[6].As<Napi::BigInt>().Int64Value(&lossless);
  auto fail = [&](int step) { return Napi::Number::New(env, errno * 8 + step); };
  const int base = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
  int fd;
  do fd = open(path.c_str(), base | O_EXCL, mode & 0777);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == EEXIST) {
    chmodNeeded = true;  // not created here: its mode is set explicitly
    do fd = open(path.c_str(), base, 0600);
    while (fd < 0 && errno == EINTR);
  }
  if (fd < 0) return fail(1);
  int step = 0;
  bool zero = true;
  for (size_t i = 0; zero && i < len; i++) zero = bytes[i] == 0;
  if (zero) {
    if (len && ftruncate(fd, static_cast<off_t>(len)) != 0) step = 3;
  } else {
    for (size_t done = 0; done < len;) {
      ssize_t k = pwrite(fd, bytes + done, len - done, static_cast<off_t>(done));
      if (k < 0) {
        if (errno == EINTR) continue;
        step = 2;
        break;
      }
      done += static_cast<size_t>(k);
    }
  }
  if (!step && uid >= 0 && fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) step = 4;
  if (!step && chmodNeeded && fchmod(fd, mode) != 0) step = 5;
  if (!step) {
    struct timespec ts[2] = {TimespecOf(ns), TimespecOf(ns)};
    if (futimens(fd, ts) != 0) step = 6;
  }
  int e = errno;
  if (close(fd) != 0 && !step) return fail(7);
  errno = e;
  return step ? fail(step) : Napi::Number::New(env, 0);
#endif
}

// How many threads the batches' reads have started in all (tests: they are kept and used again).
static Napi::Value ReadThreadsStarted(const Napi::CallbackInfo& info) {
#ifdef _WIN32
  return Napi::Number::New(info.Env(), 0);
#else
  pthread_mutex_lock(&poolMu);
  int n = poolThreads;
  pthread_mutex_unlock(&poolMu);
  return Napi::Number::New(info.Env(), n);
#endif
}

// Asks Linux for transparent huge pages behind an ArrayBuffer's memory (madvise MADV_HUGEPAGE; the
// system's THP mode "madvise" gives them only on request). For the WebAssembly memories the engine keeps
// as aligned buffers (src/main/engine/aligned.ts): V8 maps those itself, so glibc's hugetlb tunable does
// not reach them, and each fresh 4 KiB page of a pack's buffer or a read block cost a fault. Returns 0 or
// an errno (EINVAL where the kernel has no THP); -1 elsewhere than Linux.
static Napi::Value AdviseHugePages(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsArrayBuffer()) {
    Napi::TypeError::New(info.Env(), "adviseHugePages(arrayBuffer)").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  auto ab = info[0].As<Napi::ArrayBuffer>();
  uintptr_t start = reinterpret_cast<uintptr_t>(ab.Data());
  size_t len = ab.ByteLength();
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || start % static_cast<uintptr_t>(page) != 0 || len == 0)
    return Napi::Number::New(info.Env(), EINVAL);
  int rc = madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return Napi::Number::New(info.Env(), rc == 0 ? 0 : errno);
#else
  return Napi::Number::New(info.Env(), -1);
#endif
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("adviseHugePages", Napi::Function::New(env, AdviseHugePages));
  exports.Set("readThreadsStarted", Napi::Function::New(env, ReadThreadsStarted));
  exports.Set("writeWhole", Napi::Function::New(env, WriteWhole));
  exports.Set("setTimes", Napi::Function::New(env, SetTimes));
  exports.Set("setTimesFd", Napi::Function::New(env, SetTimesFd));
  exports.Set("readScattered", Napi::Function::New(env, ReadScattered));
  exports.Set("readFiles", Napi::Function::New(env, ReadFilesFn));
  exports.Set("listDir", Napi::Function::New(env, ListDirFn));
  return exports;
}

NODE_API_MODULE(tidemark_fsmeta, Init)
