// The destination speed test's I/O engine (src/main/engine/speedtest): issues a pattern of reads and
// writes against one test file — sequential or random, a read share, a block size, an offset alignment,
// `threads` workers each keeping `depth` operations in flight — for a duration (or one pass over the
// file, to lay it out), and counts what it issued: operations and bytes per kind, misaligned operations,
// the most in flight, and a latency histogram per kind. The JavaScript thread only starts a run, polls
// its counters and is told when it ends; all I/O happens on threads of its own.
//
// Caches are bypassed where the platform allows: O_DIRECT on Linux, F_NOCACHE on macOS,
// FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH on Windows (DiskSpd's -Sh). A filesystem that refuses
// it (Linux tmpfs, some FUSE and SMB mounts: EINVAL) is used through the page cache instead, and the run
// says so (`direct: false`, `note`); writes are then flushed at the end of the run and the flush counted
// in its time, so buffered writes are not reported at memory speed.
//
// Two engines: on Linux with O_DIRECT, the kernel's AIO (io_submit/io_getevents, by system call: no
// libaio), one context per worker with `depth` operations in flight — what fio's libaio engine does, so
// the two tools' figures are comparable (`npm run bench:speed`). Everywhere else (buffered files, where
// AIO would run each operation inside io_submit one at a time; macOS; Windows), `depth` threads per
// worker, each with one synchronous positioned read or write at a time.
#include <napi.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifdef _WIN32
#include <malloc.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif
#ifdef __linux__
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#endif

namespace {

constexpr uint64_t kAlignMemory = 4096;

// ---- latency histogram ---------------------------------------------------------------------------
// Log-linear buckets over nanoseconds: exact below 64 ns, then 32 buckets per power of two (each at most
// 1/32 of its value wide: a percentile read from its bucket's middle is within 1.6%).
constexpr int kBuckets = 64 + 58 * 32;

inline int Msb(uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(v);
#else
  int n = 0;
  while (v >>= 1) n++;
  return n;
#endif
}

inline int BucketOf(uint64_t v) {
  if (v < 64) return static_cast<int>(v);
  int e = Msb(v) - 5;
  return 64 + (e - 1) * 32 + static_cast<int>((v >> e) - 32);
}

inline void BucketBounds(int i, uint64_t* lo, uint64_t* hi) {
  if (i < 64) {
    *lo = *hi = static_cast<uint64_t>(i);
    return;
  }
  int e = (i - 64) / 32 + 1;
  uint64_t m = 32 + static_cast<uint64_t>((i - 64) % 32);
  *lo = m << e;
  *hi = ((m + 1) << e) - 1;
}

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// xorshift64*: a fast per-thread generator for offsets and the read/write choice.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed ? seed : 0x9e3779b97f4a7c15ULL) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
  }
};

// ---- files ---------------------------------------------------------------------------------------
#ifdef _WIN32
using Fd = HANDLE;
const Fd kNoFd = INVALID_HANDLE_VALUE;

int ErrnoOfWin(DWORD e) {
  switch (e) {
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
      return ENOSPC;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
      return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_WRITE_PROTECT:
      return EACCES;
    case ERROR_INVALID_PARAMETER:
      return EINVAL;
    case ERROR_NOT_READY:
    case ERROR_DEV_NOT_EXIST:
    case ERROR_NETNAME_DELETED:
    case ERROR_BAD_NETPATH:
      return ENODEV;
    default:
      return EIO;
  }
}

std::wstring Wide(const std::string& s) {
  int n = MultiByteToWideChar(CP_UTF8, 0, s.c_str(), -1, nullptr, 0);
  std::wstring w(n > 0 ? n : 1, L'\0');
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, s.c_str(), -1, &w[0], n);
  return w;
}

// Opens (creating) `path` for reading and writing; with `unbuffered`, past the system's cache and the
// disk's write cache (DiskSpd's -Sh). Returns 0 or an errno.
int OpenFile(const std::string& path, bool create, bool unbuffered, Fd* fd, bool* direct, std::string* note) {
  std::wstring w = Wide(path);
  const DWORD disposition = create ? OPEN_ALWAYS : OPEN_EXISTING;
  DWORD share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
  if (unbuffered) {
    *fd = CreateFileW(w.c_str(), GENERIC_READ | GENERIC_WRITE, share, nullptr, disposition,
                      FILE_ATTRIBUTE_NORMAL | FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH, nullptr);
    if (*fd != INVALID_HANDLE_VALUE) {
      *direct = true;
      return 0;
    }
    DWORD e = GetLastError();
    if (e != ERROR_INVALID_PARAMETER && e != ERROR_NOT_SUPPORTED) return ErrnoOfWin(e);
    *note = "the filesystem refused FILE_FLAG_NO_BUFFERING: measured through the system cache";
  }
  *fd = CreateFileW(w.c_str(), GENERIC_READ | GENERIC_WRITE, share, nullptr, disposition,
                    FILE_ATTRIBUTE_NORMAL, nullptr);
  if (*fd == INVALID_HANDLE_VALUE) return ErrnoOfWin(GetLastError());
  *direct = false;
  return 0;
}

// One positioned transfer (a synchronous handle with an OVERLAPPED offset is Windows' pread/pwrite).
int64_t Transfer(Fd fd, bool write, uint8_t* buf, size_t len, uint64_t off) {
  OVERLAPPED ov;
  memset(&ov, 0, sizeof ov);
  ov.Offset = static_cast<DWORD>(off & 0xffffffffULL);
  ov.OffsetHigh = static_cast<DWORD>(off >> 32);
  DWORD n = 0;
  BOOL ok = write ? WriteFile(fd, buf, static_cast<DWORD>(len), &n, &ov)
                  : ReadFile(fd, buf, static_cast<DWORD>(len), &n, &ov);
  if (!ok) {
    DWORD e = GetLastError();
    if (e == ERROR_HANDLE_EOF) return 0;
    return -ErrnoOfWin(e);
  }
  return static_cast<int64_t>(n);
}

int SyncFile(Fd fd) { return FlushFileBuffers(fd) ? 0 : ErrnoOfWin(GetLastError()); }
void CloseFile(Fd fd) { CloseHandle(fd); }
void* AlignedAlloc(size_t n) { return _aligned_malloc(n, kAlignMemory); }
void AlignedFree(void* p) { _aligned_free(p); }
#else
using Fd = int;
const Fd kNoFd = -1;

int OpenFile(const std::string& path, bool create, bool unbuffered, Fd* fd, bool* direct, std::string* note) {
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
#ifdef O_DIRECT
  if (unbuffered) {
    *fd = open(path.c_str(), flags | O_DIRECT, 0600);
    if (*fd >= 0) {
      *direct = true;
      return 0;
    }
    if (errno != EINVAL) return errno;
    *note = "the filesystem refused O_DIRECT (EINVAL; e.g. ramfs, tmpfs before Linux 6.6): measured through the page cache";
  }
#endif
  *fd = open(path.c_str(), flags, 0600);
  if (*fd < 0) return errno;
  *direct = false;
#ifdef __APPLE__
  if (unbuffered) {
    if (fcntl(*fd, F_NOCACHE, 1) == 0)
      *direct = true;
    else
      *note = "the filesystem refused F_NOCACHE: measured through the cache";
  }
#elif !defined(O_DIRECT)
  if (unbuffered) *note = "this system has no way to bypass the cache: measured through it";
#endif
  return 0;
}

int64_t Transfer(Fd fd, bool write, uint8_t* buf, size_t len, uint64_t off) {
  for (;;) {
    ssize_t r = write ? pwrite(fd, buf, len, static_cast<off_t>(off)) : pread(fd, buf, len, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    return r < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(r);
  }
}

int SyncFile(Fd fd) {
#ifdef __APPLE__
  return fsync(fd) == 0 ? 0 : errno;
#else
  return fdatasync(fd) == 0 ? 0 : errno;
#endif
}
void CloseFile(Fd fd) { close(fd); }
void* AlignedAlloc(size_t n) {
  void* p = nullptr;
  return posix_memalign(&p, kAlignMemory, n) == 0 ? p : nullptr;
}
void AlignedFree(void* p) { free(p); }
#endif

// ---- a run ---------------------------------------------------------------------------------------
struct Params {
  std::string path;
  uint64_t fileSize = 0;
  uint64_t blockSize = 0;
  uint64_t align = 4096;
  int readPercent = 0;
  bool random = false;
  int threads = 1;
  int depth = 1;
  int64_t durationNs = 0;
  // one pass over each worker's region, then stop (laying the file out); else until the duration ends
  bool onePass = false;
  // create the file (laying it out); a pattern opens the file that is there, so a test file removed
  // meanwhile (a cancel, a vanished destination) is not made again
  bool create = false;
  bool unbuffered = true;
  bool forceThreads = false;
  uint32_t trace = 0;
  uint64_t seed = 1;
};

enum Op { kOpOpen = 1, kOpRead = 2, kOpWrite = 3, kOpSync = 4, kOpSetup = 5 };

struct alignas(64) Stats {
  std::atomic<uint64_t> reads{0}, writes{0}, bytesRead{0}, bytesWritten{0}, misaligned{0};
  std::atomic<uint64_t> inFlight{0}, maxInFlight{0};
  // the next block of a sequential worker (shared by its threads in the threads engine)
  std::atomic<uint64_t> cursor{0};
  std::unique_ptr<std::atomic<uint64_t>[]> histRead{new std::atomic<uint64_t>[kBuckets]()};
  std::unique_ptr<std::atomic<uint64_t>[]> histWrite{new std::atomic<uint64_t>[kBuckets]()};
};

struct Run {
  Params p;
  Fd fd = kNoFd;
  bool direct = false;
  std::string note;
  std::string engine = "threads";
  std::vector<std::unique_ptr<Stats>> stats;
  std::atomic<bool> stop{false};
  std::atomic<int> error{0};
  std::atomic<int> errorOp{0};
  std::atomic<int> state{0};  // 0 opening, 1 running, 2 done
  std::atomic<int64_t> startNs{0}, endNs{0}, syncNs{0};
  // The measured span: from the first operation issued to the last one finished, taken by the workers
  // themselves (as fio times its jobs). The run's own start and end also hold the threads' start-up and
  // the controller's wake-up after the join, tens of milliseconds each on a busy machine.
  std::atomic<int64_t> firstIssueNs{0}, lastDoneNs{0};
  int64_t deadlineNs = 0;
  uint64_t regionLen = 0;  // each worker's share of the file for sequential patterns
  uint64_t blocksPerRegion = 0;
  uint64_t randomSlots = 0;  // aligned offsets a random operation may start at
  std::vector<double> trace;
  std::atomic<uint64_t> traceNext{0};

  void Fail(int err, int op) {
    int expected = 0;
    if (error.compare_exchange_strong(expected, err)) errorOp.store(op);
    stop.store(true);
  }

  // (each worker thread's first operation is issued whatever the time: a thread that started late on a
  // busy machine still measures something)
  bool Expired(int64_t now) const { return !p.onePass && now >= deadlineNs; }

  // Chooses the next operation of worker `w`: false when the worker is to stop issuing.
  bool NextOp(int w, Rng& rng, bool* write, uint64_t* offset) {
    if (stop.load(std::memory_order_relaxed)) return false;
    Stats& st = *stats[w];
    if (p.random) {
      *offset = (rng.Next() % randomSlots) * p.align;
    } else {
      uint64_t k = st.cursor.fetch_add(1, std::memory_order_relaxed);
      if (p.onePass && k >= blocksPerRegion) return false;
      *offset = static_cast<uint64_t>(w) * regionLen + (k % blocksPerRegion) * p.blockSize;
    }
    *write = p.readPercent <= 0 ? true
             : p.readPercent >= 100 ? false
                                    : static_cast<int>(rng.Next() % 100) >= p.readPercent;
    return true;
  }

  void Issued(int w, bool write, uint64_t offset, uint64_t len, const uint8_t* buf) {
    Stats& st = *stats[w];
    if (firstIssueNs.load(std::memory_order_relaxed) == 0) {
      int64_t zero = 0;
      firstIssueNs.compare_exchange_strong(zero, NowNs());
    }
    if (offset % p.align || len % p.align || reinterpret_cast<uintptr_t>(buf) % p.align)
      st.misaligned.fetch_add(1, std::memory_order_relaxed);
    uint64_t n = st.inFlight.fetch_add(1, std::memory_order_relaxed) + 1;
    uint64_t m = st.maxInFlight.load(std::memory_order_relaxed);
    while (n > m && !st.maxInFlight.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
    }
    if (p.trace) {
      uint64_t i = traceNext.fetch_add(1, std::memory_order_relaxed);
      if (i < p.trace) {
        trace[i * 4] = write ? 1 : 0;
        trace[i * 4 + 1] = static_cast<double>(offset);
        trace[i * 4 + 2] = static_cast<double>(len);
        trace[i * 4 + 3] = w;
      }
    }
  }

  // Books a finished operation; false (and the run stopped) when it failed or came back short.
  bool Done(int w, bool write, int64_t result, uint64_t len, int64_t latencyNs) {
    Stats& st = *stats[w];
    st.inFlight.fetch_sub(1, std::memory_order_relaxed);
    int64_t now = NowNs();
    for (int64_t last = lastDoneNs.load(std::memory_order_relaxed);
         now > last && !lastDoneNs.compare_exchange_weak(last, now, std::memory_order_relaxed);) {
    }
    if (result < 0) {
      Fail(static_cast<int>(-result), write ? kOpWrite : kOpRead);
      return false;
    }
    if (static_cast<uint64_t>(result) != len) {
      // a short write is the disk filling up; a short read, a file cut under us
      Fail(write ? ENOSPC : EIO, write ? kOpWrite : kOpRead);
      return false;
    }
    int b = BucketOf(static_cast<uint64_t>(latencyNs < 0 ? 0 : latencyNs));
    if (write) {
      st.writes.fetch_add(1, std::memory_order_relaxed);
      st.bytesWritten.fetch_add(len, std::memory_order_relaxed);
      st.histWrite[b].fetch_add(1, std::memory_order_relaxed);
    } else {
      st.reads.fetch_add(1, std::memory_order_relaxed);
      st.bytesRead.fetch_add(len, std::memory_order_relaxed);
      st.histRead[b].fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
};

// A buffer of random bytes (what is written must not compress or deduplicate on the storage side).
uint8_t* RandomBuffer(size_t len, uint64_t seed) {
  auto* buf = static_cast<uint8_t*>(AlignedAlloc(len));
  if (!buf) return nullptr;
  Rng rng(seed);
  for (size_t i = 0; i + 8 <= len; i += 8) {
    uint64_t v = rng.Next();
    memcpy(buf + i, &v, 8);
  }
  return buf;
}

// The threads engine: one synchronous operation at a time on each of a worker's `depth` threads.
void ThreadLoop(Run* run, int w, int j) {
  const Params& p = run->p;
  uint8_t* buf = RandomBuffer(p.blockSize, p.seed * 131 + w * 7919 + j + 1);
  if (!buf) {
    run->Fail(ENOMEM, kOpSetup);
    return;
  }
  Rng rng(p.seed * 977 + w * 131 + j * 17 + 3);
  bool write = false;
  uint64_t offset = 0;
  for (bool first = true; (first || !run->Expired(NowNs())) && run->NextOp(w, rng, &write, &offset); first = false) {
    run->Issued(w, write, offset, p.blockSize, buf);
    int64_t t0 = NowNs();
    int64_t done = 0;
    int64_t r = 0;
    // a buffered transfer may come back short (a signal, a page-cache hiccup): finish it
    while (done < static_cast<int64_t>(p.blockSize)) {
      r = Transfer(run->fd, write, buf + done, p.blockSize - done, offset + done);
      if (r <= 0) break;
      done += r;
      if (run->direct) break;  // a short direct transfer is not retried (it means the end of space)
    }
    if (!run->Done(w, write, r < 0 ? r : done, p.blockSize, NowNs() - t0)) break;
  }
  AlignedFree(buf);
}

#ifdef __linux__
long IoSetup(unsigned n, aio_context_t* ctx) { return syscall(SYS_io_setup, n, ctx); }
long IoDestroy(aio_context_t ctx) { return syscall(SYS_io_destroy, ctx); }
long IoSubmit(aio_context_t ctx, long n, struct iocb** cbs) { return syscall(SYS_io_submit, ctx, n, cbs); }
long IoGetevents(aio_context_t ctx, long min, long max, struct io_event* ev) {
  return syscall(SYS_io_getevents, ctx, min, max, ev, nullptr);
}

// The AIO engine: one thread per worker keeping `depth` operations in flight on its own context.
void AioLoop(Run* run, int w, aio_context_t ctx) {
  const Params& p = run->p;
  const int depth = p.depth;
  struct Slot {
    struct iocb cb;
    uint8_t* buf;
    int64_t start;
    bool write;
  };
  std::vector<Slot> slots(depth);
  for (int i = 0; i < depth; i++) {
    slots[i].buf = RandomBuffer(p.blockSize, p.seed * 131 + w * 7919 + i + 1);
    if (!slots[i].buf) {
      for (int k = 0; k < i; k++) AlignedFree(slots[k].buf);
      run->Fail(ENOMEM, kOpSetup);
      return;
    }
  }
  Rng rng(p.seed * 977 + w * 131 + 3);
  std::vector<struct iocb*> ready;
  std::vector<struct io_event> events(depth);
  long inFlight = 0;
  auto prepare = [&](int i, int64_t now, bool first) {
    Slot& s = slots[i];
    uint64_t offset = 0;
    if ((!first && run->Expired(now)) || !run->NextOp(w, rng, &s.write, &offset)) return;
    memset(&s.cb, 0, sizeof s.cb);
    s.cb.aio_data = static_cast<uint64_t>(i);
    s.cb.aio_lio_opcode = s.write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
    s.cb.aio_fildes = static_cast<uint32_t>(run->fd);
    s.cb.aio_buf = reinterpret_cast<uint64_t>(s.buf);
    s.cb.aio_nbytes = p.blockSize;
    s.cb.aio_offset = static_cast<int64_t>(offset);
    run->Issued(w, s.write, offset, p.blockSize, s.buf);
    s.start = NowNs();
    ready.push_back(&s.cb);
  };
  // Submits what is ready. A context set up for `depth` events always has room for a worker's `depth`
  // operations, so a refusal is an error (what was not taken is booked back as not in flight).
  auto submit = [&]() {
    size_t sent = 0;
    while (sent < ready.size()) {
      long r = IoSubmit(ctx, static_cast<long>(ready.size() - sent), ready.data() + sent);
      if (r > 0) {
        sent += static_cast<size_t>(r);
        inFlight += r;
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      run->Fail(r < 0 ? errno : EAGAIN, slots[ready[sent]->aio_data].write ? kOpWrite : kOpRead);
      break;
    }
    for (size_t k = sent; k < ready.size(); k++) run->stats[w]->inFlight.fetch_sub(1, std::memory_order_relaxed);
    ready.clear();
  };
  int64_t now = NowNs();
  for (int i = 0; i < depth; i++) prepare(i, now, i == 0);
  submit();
  while (inFlight > 0) {
    long n = IoGetevents(ctx, 1, depth, events.data());
    if (n < 0) {
      if (errno == EINTR) continue;
      // cannot reap: the kernel may still fill the buffers, so they are never freed
      run->Fail(errno, kOpRead);
      return;
    }
    now = NowNs();
    for (long k = 0; k < n; k++) {
      int i = static_cast<int>(events[k].data);
      Slot& s = slots[i];
      inFlight--;
      if (run->Done(w, s.write, static_cast<int64_t>(events[k].res), p.blockSize, now - s.start))
        prepare(i, now, false);
    }
    submit();
  }
  for (auto& s : slots) AlignedFree(s.buf);
}
#endif

// Lays out the run, runs its workers and closes the file; on the run's own thread.
void Control(std::shared_ptr<Run> run) {
  Params& p = run->p;
  int err = OpenFile(p.path, p.create, p.unbuffered, &run->fd, &run->direct, &run->note);
  if (err) {
    run->Fail(err, kOpOpen);
    run->state.store(2);
    return;
  }

#ifdef __linux__
  std::vector<aio_context_t> ctxs;
  if (run->direct && !p.forceThreads) {
    for (int w = 0; w < p.threads; w++) {
      aio_context_t ctx = 0;
      if (IoSetup(static_cast<unsigned>(p.depth), &ctx) != 0) break;
      ctxs.push_back(ctx);
    }
    if (static_cast<int>(ctxs.size()) != p.threads) {
      for (auto c : ctxs) IoDestroy(c);
      ctxs.clear();
    }
  }
  if (!ctxs.empty()) run->engine = "aio";
#endif

  std::vector<std::thread> workers;
  run->startNs.store(NowNs());
  run->deadlineNs = run->startNs.load() + p.durationNs;
  run->state.store(1);
#ifdef __linux__
  if (!ctxs.empty()) {
    for (int w = 0; w < p.threads; w++) workers.emplace_back(AioLoop, run.get(), w, ctxs[w]);
  } else
#endif
  {
    for (int w = 0; w < p.threads; w++)
      for (int j = 0; j < p.depth; j++) workers.emplace_back(ThreadLoop, run.get(), w, j);
  }
  for (auto& t : workers) t.join();
#ifdef __linux__
  for (auto c : ctxs) IoDestroy(c);
#endif
  uint64_t written = 0;
  for (auto& s : run->stats) written += s->writes.load();
  if (!run->direct && written > 0 && !run->error.load()) {
    int64_t t0 = NowNs();
    int e = SyncFile(run->fd);
    run->syncNs.store(NowNs() - t0);
    if (e) run->Fail(e, kOpSync);
  }
  run->endNs.store(NowNs());
  // the span measured: first issue to last completion, and a buffered run's flush after it
  int64_t first = run->firstIssueNs.load(), last = run->lastDoneNs.load();
  if (first && last >= first) {
    run->startNs.store(first);
    run->endNs.store(last + run->syncNs.load());
  }
  CloseFile(run->fd);
  run->fd = kNoFd;
  run->state.store(2);
}

const char* OpName(int op) {
  switch (op) {
    case kOpOpen:
      return "open";
    case kOpRead:
      return "read";
    case kOpWrite:
      return "write";
    case kOpSync:
      return "sync";
    case kOpSetup:
      return "setup";
    default:
      return "";
  }
}

Napi::Float64Array HistogramOf(Napi::Env env, const Run& run, bool write) {
  std::vector<double> out;
  for (int b = 0; b < kBuckets; b++) {
    uint64_t n = 0;
    for (auto& s : run.stats) n += (write ? s->histWrite[b] : s->histRead[b]).load();
    if (!n) continue;
    uint64_t lo, hi;
    BucketBounds(b, &lo, &hi);
    out.push_back(static_cast<double>(lo));
    out.push_back(static_cast<double>(hi));
    out.push_back(static_cast<double>(n));
  }
  auto a = Napi::Float64Array::New(env, out.size());
  for (size_t i = 0; i < out.size(); i++) a[i] = out[i];
  return a;
}

// The counters as they stand (while running: so far), with the histograms and trace when `full`.
Napi::Object Snapshot(Napi::Env env, const Run& run, bool full) {
  uint64_t reads = 0, writes = 0, bytesRead = 0, bytesWritten = 0, misaligned = 0, maxInFlight = 0;
  for (auto& s : run.stats) {
    reads += s->reads.load();
    writes += s->writes.load();
    bytesRead += s->bytesRead.load();
    bytesWritten += s->bytesWritten.load();
    misaligned += s->misaligned.load();
    maxInFlight = std::max<uint64_t>(maxInFlight, s->maxInFlight.load());
  }
  int state = run.state.load();
  // while running: since the first operation (before it, nothing has been measured)
  int64_t first = run.firstIssueNs.load();
  int64_t start = state == 2 ? run.startNs.load() : first;
  int64_t end = state == 2 ? run.endNs.load() : NowNs();
  auto o = Napi::Object::New(env);
  o.Set("state", state == 0 ? "opening" : state == 1 ? "running" : "done");
  o.Set("reads", static_cast<double>(reads));
  o.Set("writes", static_cast<double>(writes));
  o.Set("bytesRead", static_cast<double>(bytesRead));
  o.Set("bytesWritten", static_cast<double>(bytesWritten));
  o.Set("misaligned", static_cast<double>(misaligned));
  o.Set("maxInFlight", static_cast<double>(maxInFlight));
  o.Set("elapsedNs", static_cast<double>(start && end > start ? end - start : 0));
  if (state >= 1) {
    o.Set("direct", run.direct);
    o.Set("engine", run.engine);
    if (!run.note.empty()) o.Set("note", run.note);
  }
  int e = run.error.load();
  if (e) {
    o.Set("errno", e);
    o.Set("errorOp", OpName(run.errorOp.load()));
  }
  if (full) {
    o.Set("syncNs", static_cast<double>(run.syncNs.load()));
    o.Set("histRead", HistogramOf(env, run, false));
    o.Set("histWrite", HistogramOf(env, run, true));
    uint64_t n = std::min<uint64_t>(run.traceNext.load(), run.p.trace);
    auto t = Napi::Float64Array::New(env, static_cast<size_t>(n) * 4);
    for (size_t i = 0; i < n * 4; i++) t[i] = run.trace[i];
    o.Set("trace", t);
  }
  return o;
}

// What the run's thread hands the JavaScript thread when it is done.
struct Completion {
  Napi::Promise::Deferred deferred;
  std::shared_ptr<Run> run;
};

class IoRun : public Napi::ObjectWrap<IoRun> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "IoRun",
                       {InstanceMethod("poll", &IoRun::Poll), InstanceMethod("stop", &IoRun::Stop),
                        InstanceAccessor("done", &IoRun::GetDone, nullptr)});
  }

  // new IoRun({ path, fileSize, blockSize, align, readPercent, random, threads, depth, durationMs,
  //             onePass, create, unbuffered, engine: 'auto' | 'threads', trace, seed })
  explicit IoRun(const Napi::CallbackInfo& info) : Napi::ObjectWrap<IoRun>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) {
      Napi::TypeError::New(env, "IoRun(params)").ThrowAsJavaScriptException();
      return;
    }
    auto o = info[0].As<Napi::Object>();
    auto num = [&](const char* k, double d) {
      auto v = o.Get(k);
      return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : d;
    };
    auto flag = [&](const char* k, bool d) {
      auto v = o.Get(k);
      return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : d;
    };
    run_ = std::make_shared<Run>();
    Params& p = run_->p;
    if (!o.Get("path").IsString()) {
      Napi::TypeError::New(env, "path must be a string").ThrowAsJavaScriptException();
      return;
    }
    p.path = o.Get("path").As<Napi::String>().Utf8Value();
    p.fileSize = static_cast<uint64_t>(num("fileSize", 0));
    p.blockSize = static_cast<uint64_t>(num("blockSize", 0));
    p.align = static_cast<uint64_t>(num("align", 4096));
    p.readPercent = static_cast<int>(num("readPercent", 0));
    p.random = flag("random", false);
    p.threads = static_cast<int>(num("threads", 1));
    p.depth = static_cast<int>(num("depth", 1));
    p.durationNs = static_cast<int64_t>(num("durationMs", 0) * 1e6);
    p.onePass = flag("onePass", false);
    p.create = flag("create", false);
    p.unbuffered = flag("unbuffered", true);
    auto engine = o.Get("engine");
    p.forceThreads = engine.IsString() && engine.As<Napi::String>().Utf8Value() == "threads";
    p.trace = static_cast<uint32_t>(num("trace", 0));
    p.seed = static_cast<uint64_t>(num("seed", 1));
    if (p.path.empty() || p.path.find('\0') != std::string::npos || p.blockSize == 0 || p.align == 0 ||
        p.blockSize % p.align || p.threads < 1 || p.threads > 256 || p.depth < 1 || p.depth > 1024 ||
        p.fileSize < p.blockSize * static_cast<uint64_t>(p.threads) || p.readPercent < 0 || p.readPercent > 100) {
      Napi::RangeError::New(env, "IoRun: invalid parameters").ThrowAsJavaScriptException();
      return;
    }
    // laid out here, before the run's thread starts, so poll() never sees them change
    run_->regionLen = (p.fileSize / p.threads) / p.blockSize * p.blockSize;
    run_->blocksPerRegion = run_->regionLen / p.blockSize;
    run_->randomSlots = (p.fileSize - p.blockSize) / p.align + 1;
    if (p.trace) run_->trace.assign(static_cast<size_t>(p.trace) * 4, 0);
    for (int w = 0; w < p.threads; w++) run_->stats.emplace_back(new Stats());
    auto* done = new Completion{Napi::Promise::Deferred::New(env), run_};
    done_ = Napi::Persistent(done->deferred.Promise());
    auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}),
                                              "tidemark-iotest", 0, 1);
    std::thread([tsfn, done]() mutable {
      Control(done->run);
      tsfn.BlockingCall(done, [](Napi::Env env, Napi::Function, Completion* c) {
        Napi::HandleScope scope(env);
        c->deferred.Resolve(Snapshot(env, *c->run, true));
        delete c;
      });
      tsfn.Release();
    }).detach();
  }

 private:
  Napi::Value Poll(const Napi::CallbackInfo& info) { return Snapshot(info.Env(), *run_, false); }
  Napi::Value Stop(const Napi::CallbackInfo& info) {
    run_->stop.store(true);
    return info.Env().Undefined();
  }
  Napi::Value GetDone(const Napi::CallbackInfo& info) { return done_.Value(); }

  std::shared_ptr<Run> run_;
  Napi::Reference<Napi::Promise> done_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("IoRun", IoRun::Define(env));
  exports.Set("histogramBuckets", Napi::Number::New(env, kBuckets));
  return exports;
}

}  // namespace

NODE_API_MODULE(tidemark_iotest, Init)
