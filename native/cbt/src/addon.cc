// tidemark_cbt: Linux changed-block tracking for Tidemark (docs/architecture.md §3, level 1).
//
// What it does: loads the eBPF program (cbt.bpf.c, embedded as a libbpf skeleton), attaches it to the
// block-layer tracepoints, and hands out per-disk generations of the changed-block bitmap. Also exposes the
// file-system calls the TypeScript side needs to map files onto that bitmap: FIEMAP, syncfs, the
// filesystem UUID and the inode generation.
//
// Guarantees: a bit set by the kernel is returned by exactly one readAndSwap() (words are exchanged with
// zero atomically through the mmapped map), or remains for the next one; no bit is lost. Errors surface as
// JS exceptions with an errno-style `code` and a message saying what failed; nothing aborts the process.
//
// Deliberately not here: deciding what is safe to trust (continuity, extent flags, file identity). That
// policy lives in src/main/tracking/blocks, which treats anything doubtful as "read the whole file".
#include <napi.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

extern "C" {
#include "cbt_shared.h"
}
#include "cbt.skel.h"

namespace {

// ---- libbpf diagnostics: collected so a failed load explains itself in the exception message ----
std::mutex g_log_mu;
std::string g_log;

int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[1024];
  int n = vsnprintf(buf, sizeof buf, fmt, args);
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_log.size() < 16384) g_log.append(buf, n > 0 ? std::min<size_t>(n, sizeof buf - 1) : 0);
  return 0;
}

std::string TakeLog() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::string s;
  s.swap(g_log);
  // keep the tail, where the reason usually is
  if (s.size() > 1500) s = "…" + s.substr(s.size() - 1500);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Detail() {
  std::string log = TakeLog();
  return log.empty() ? "" : " (libbpf: " + log + ")";
}

// For a permission error the fix is privileges, and libbpf's own advice (RLIMIT_MEMLOCK) would mislead.
std::string PermissionHintOrDetail(int e) {
  if (e == EPERM || e == EACCES) {
    TakeLog();
    return " (needs root, or CAP_BPF and CAP_PERFMON)";
  }
  return Detail();
}

Napi::Error MakeError(Napi::Env env, const std::string& code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  return e;
}

std::string ErrnoCode(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case ENOTSUP: return "ENOTSUP";
    case ENOTTY: return "ENOTTY";
    case EBADF: return "EBADF";
    case ENOSYS: return "ENOSYS";
    case E2BIG: return "E2BIG";
    case EBUSY: return "EBUSY";
    case EISDIR: return "EISDIR";
    default: return "E" + std::to_string(err);
  }
}

uint32_t KernelDevt(uint32_t major, uint32_t minor) { return (major << 20) | minor; }

struct DevSlot {
  uint32_t major, minor, shift;
  uint64_t nsect;
  cbt_dev_cfg cfg;
};

const char* kMapNames[] = {"devs", "bitmap", "stats", "meta", "inflight"};
const char* kLinkNames[] = {"link_bio_queue", "link_rq_complete", "link_bio_complete"};
constexpr unsigned long kBpfFsMagic = 0xcafe4a11;

// Serialises swaps (and teardown) between processes sharing one pinned tracker, so two of them can never
// split one generation between them without the sequence numbers showing it.
class SwapLock {
 public:
  explicit SwapLock(const std::string& path, bool create = false) {
    if (path.empty()) return;
    fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~SwapLock() {
    if (fd_ >= 0) {
      flock(fd_, LOCK_UN);
      close(fd_);
    }
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// ---- Tracker: one loaded+attached eBPF object tracking a fixed set of whole disks ----
// Optionally pinned in bpffs (start(devices, {pinDir, lockPath})): the kernel part then keeps tracking when
// this process stops or exits, and a later start() with the same devices resumes the same session.
class Tracker : public Napi::ObjectWrap<Tracker> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "Tracker",
                       {InstanceMethod("start", &Tracker::Start), InstanceMethod("readAndSwap", &Tracker::ReadAndSwap),
                        InstanceMethod("stop", &Tracker::Stop), InstanceMethod("status", &Tracker::Status)});
  }
  explicit Tracker(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Tracker>(info) {}
  ~Tracker() override { Release(); }

 private:
  cbt_bpf* skel_ = nullptr;  // only in the process that loaded the program
  int fds_[5] = {-1, -1, -1, -1, -1};  // devs, bitmap, stats, meta, inflight (owned when resumed)
  uint64_t* words_ = nullptr;
  size_t words_len_ = 0;
  uint64_t* stats_ = nullptr;
  size_t stats_len_ = 0;
  cbt_meta* meta_ = nullptr;
  size_t meta_len_ = 0;
  std::vector<DevSlot> devs_;
  std::string pin_dir_, lock_path_;
  bool running_ = false, resumed_ = false;

  // Drops this process's hold: unmaps, closes. A pinned tracker keeps running in the kernel.
  void Release() {
    if (words_) munmap(words_, words_len_);
    if (stats_) munmap(stats_, stats_len_);
    if (meta_) munmap(meta_, meta_len_);
    words_ = nullptr;
    stats_ = nullptr;
    meta_ = nullptr;
    if (skel_) cbt_bpf::destroy(skel_);  // closes fds; pinned links stay attached
    skel_ = nullptr;
    for (int& fd : fds_) {
      if (fd >= 0 && resumed_) close(fd);
      fd = -1;
    }
    devs_.clear();
    running_ = false;
    resumed_ = false;
  }

  void Unpin() {
    for (const char* n : kLinkNames) unlink((pin_dir_ + "/" + n).c_str());
    for (const char* n : kMapNames) unlink((pin_dir_ + "/" + n).c_str());
    rmdir(pin_dir_.c_str());
  }

  void MarkPinnedStopped() {
    int fd = bpf_obj_get((pin_dir_ + "/meta").c_str());
    if (fd < 0) return;
    cbt_meta m{};
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(fd, &zero, &m) == 0) {
      m.stopped = 1;
      bpf_map_update_elem(fd, &zero, &m, BPF_ANY);
    }
    close(fd);
  }

  static void* MapFd(int fd, size_t len, int* err) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      *err = errno;
      return nullptr;
    }
    return p;
  }

  static size_t PageRound(size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    return ((n + page - 1) / page) * page;
  }

  // Maps bitmap, stats and meta of fds_[1..3]; throws on failure.
  void MapAll(Napi::Env env, uint64_t total_words) {
    int err = 0;
    words_len_ = PageRound(total_words * 8);
    words_ = (uint64_t*)MapFd(fds_[1], words_len_, &err);
    if (!words_) throw MakeError(env, ErrnoCode(err), "mapping the bitmap failed: " + std::string(strerror(err)));
    stats_len_ = PageRound(CBT_MAX_DEVICES * CBT_STAT_WORDS * 8);
    stats_ = (uint64_t*)MapFd(fds_[2], stats_len_, &err);
    if (!stats_) throw MakeError(env, ErrnoCode(err), "mapping the counters failed: " + std::string(strerror(err)));
    meta_len_ = PageRound(sizeof(cbt_meta));
    meta_ = (cbt_meta*)MapFd(fds_[3], meta_len_, &err);
    if (!meta_) throw MakeError(env, ErrnoCode(err), "mapping the tracker identity failed: " + std::string(strerror(err)));
  }

  // Tries to adopt a pinned tracker with exactly these devices. false: nothing usable is pinned.
  bool TryResume(Napi::Env env, const std::vector<DevSlot>& want, uint64_t total_words) {
    int fds[5];
    for (int i = 0; i < 5; i++) {
      fds[i] = bpf_obj_get((pin_dir_ + "/" + kMapNames[i]).c_str());
      if (fds[i] < 0) {
        for (int j = 0; j < i; j++) close(fds[j]);
        return false;
      }
    }
    for (const char* n : kLinkNames) {
      if (access((pin_dir_ + "/" + n).c_str(), F_OK) != 0) {
        for (int fd : fds) close(fd);
        return false;
      }
    }
    bool same = true;
    for (auto& d : want) {
      uint32_t key = KernelDevt(d.major, d.minor);
      cbt_dev_cfg cfg{};
      if (bpf_map_lookup_elem(fds[0], &key, &cfg) != 0 || memcmp(&cfg, &d.cfg, sizeof cfg) != 0) same = false;
    }
    uint32_t key = 0, next = 0, count = 0;
    void* prev = nullptr;
    while (bpf_map_get_next_key(fds[0], prev, &next) == 0) {
      count++;
      key = next;
      prev = &key;
    }
    if (count != want.size()) same = false;
    cbt_meta m{};
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(fds[3], &zero, &m) != 0 || m.layout != CBT_LAYOUT_VERSION || m.stopped) same = false;
    struct bpf_map_info info {};
    uint32_t ilen = sizeof info;
    if (bpf_obj_get_info_by_fd(fds[1], &info, &ilen) != 0 || info.max_entries != total_words) same = false;
    if (!same) {
      for (int fd : fds) close(fd);
      return false;
    }
    for (int i = 0; i < 5; i++) fds_[i] = fds[i];
    resumed_ = true;
    MapAll(env, total_words);
    devs_ = want;
    return true;
  }

  // start([{major, minor, sectors, blockShift}], {pinDir?, lockPath?}) → {sessionId, resumed}
  Napi::Value Start(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (running_) throw MakeError(env, "EBUSY", "tracker already started; stop() it first");
    if (info.Length() < 1 || !info[0].IsArray()) throw MakeError(env, "EINVAL", "start(devices): devices must be an array");
    Napi::Array arr = info[0].As<Napi::Array>();
    if (arr.Length() == 0 || arr.Length() > CBT_MAX_DEVICES)
      throw MakeError(env, "EINVAL", "start(devices): between 1 and " + std::to_string(CBT_MAX_DEVICES) + " devices");
    std::string pin_dir, lock_path;
    if (info.Length() > 1 && info[1].IsObject()) {
      Napi::Object o = info[1].As<Napi::Object>();
      if (o.Get("pinDir").IsString()) pin_dir = o.Get("pinDir").As<Napi::String>().Utf8Value();
      if (o.Get("lockPath").IsString()) lock_path = o.Get("lockPath").As<Napi::String>().Utf8Value();
    }
    std::vector<DevSlot> devs;
    uint64_t total_words = 0;
    for (uint32_t i = 0; i < arr.Length(); i++) {
      Napi::Value v = arr.Get(i);
      if (!v.IsObject()) throw MakeError(env, "EINVAL", "start(devices): device " + std::to_string(i) + " is not an object");
      Napi::Object o = v.As<Napi::Object>();
      auto num = [&](const char* k) -> double {
        Napi::Value x = o.Get(k);
        if (!x.IsNumber()) throw MakeError(env, "EINVAL", std::string("start(devices): device ") + std::to_string(i) + " needs numeric " + k);
        return x.As<Napi::Number>().DoubleValue();
      };
      DevSlot d{};
      d.major = (uint32_t)num("major");
      d.minor = (uint32_t)num("minor");
      d.nsect = (uint64_t)num("sectors");
      d.shift = (uint32_t)num("blockShift");
      if (d.shift > 24 || d.nsect == 0)
        throw MakeError(env, "EINVAL", "start(devices): device " + std::to_string(i) + ": sectors must be > 0 and blockShift <= 24");
      for (auto& other : devs)
        if (other.major == d.major && other.minor == d.minor)
          throw MakeError(env, "EINVAL", "start(devices): device " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " listed twice");
      uint64_t nblocks = (d.nsect + (1ull << d.shift) - 1) >> d.shift;
      uint64_t nwords = (nblocks + 63) / 64;
      d.cfg.slot = i;
      d.cfg.word_off = (uint32_t)total_words;
      d.cfg.nwords = (uint32_t)nwords;
      d.cfg.shift = d.shift;
      d.cfg.nsect = d.nsect;
      total_words += nwords;
      if (total_words > (1ull << 26))  // 512 MiB of bitmap: a misconfiguration, not a disk
        throw MakeError(env, "E2BIG", "start(devices): bitmap too large; use a larger blockShift");
      devs.push_back(d);
    }

    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_MEMLOCK, &rl);  // only needed on kernels < 5.11; harmless otherwise
    libbpf_set_print(LibbpfPrint);
    TakeLog();

    pin_dir_ = pin_dir;
    lock_path_ = lock_path;
    SwapLock lock(lock_path_, true);
    if (!pin_dir_.empty()) {
      struct statfs sfs;
      std::string parent = pin_dir_.substr(0, pin_dir_.find_last_of('/'));
      if (statfs(parent.empty() ? "/" : parent.c_str(), &sfs) != 0 || (unsigned long)sfs.f_type != kBpfFsMagic)
        throw MakeError(env, "ENOTSUP", "cannot pin the tracker: " + parent + " is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)");
      try {
        if (TryResume(env, devs, total_words)) {
          running_ = true;
          Napi::Object out = Napi::Object::New(env);
          out.Set("sessionId", std::string(meta_->session, strnlen(meta_->session, sizeof meta_->session)));
          out.Set("resumed", true);
          return out;
        }
      } catch (...) {
        Release();
        throw;
      }
      // Stale or different: start over with a new session (so every store notices). A process still holding
      // the old tracker must not go on swapping a bitmap nothing feeds any more: mark it stopped first.
      MarkPinnedStopped();
      Unpin();
    }

    cbt_bpf* skel = cbt_bpf::open();
    if (!skel) {
      int err = errno;
      throw MakeError(env, ErrnoCode(err), "opening the eBPF object failed: " + std::string(strerror(err)) + Detail());
    }
    if (bpf_map__set_max_entries(skel->maps.bitmap, (uint32_t)total_words) != 0) {
      cbt_bpf::destroy(skel);
      throw MakeError(env, "EINVAL", "sizing the bitmap map failed" + Detail());
    }
    int err = cbt_bpf::load(skel);
    if (err) {
      cbt_bpf::destroy(skel);
      int e = -err;
      throw MakeError(env, ErrnoCode(e), "loading the eBPF program failed: " + std::string(strerror(e)) + PermissionHintOrDetail(e));
    }
    skel_ = skel;
    fds_[0] = bpf_map__fd(skel->maps.devs);
    fds_[1] = bpf_map__fd(skel->maps.bitmap);
    fds_[2] = bpf_map__fd(skel->maps.stats);
    fds_[3] = bpf_map__fd(skel->maps.meta);
    fds_[4] = bpf_map__fd(skel->maps.inflight);
    try {
      for (auto& d : devs) {
        uint32_t key = KernelDevt(d.major, d.minor);
        if (bpf_map_update_elem(fds_[0], &key, &d.cfg, BPF_ANY) != 0) {
          int e = errno;
          throw MakeError(env, ErrnoCode(e), "configuring tracked devices failed: " + std::string(strerror(e)));
        }
      }
      MapAll(env, total_words);
      std::random_device rd;
      char buf[40];
      snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
      memset(meta_, 0, sizeof(cbt_meta));
      memcpy(meta_->session, buf, strlen(buf));
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      meta_->started_ms = (unsigned long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
      meta_->layout = CBT_LAYOUT_VERSION;
      err = cbt_bpf::attach(skel);
      if (err) {
        int e = err < 0 ? -err : errno;
        throw MakeError(env, ErrnoCode(e), "attaching to the block tracepoints failed: " + std::string(strerror(e)) + Detail());
      }
      if (!pin_dir_.empty()) {
        if (mkdir(pin_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
          int e = errno;
          throw MakeError(env, ErrnoCode(e), "cannot create " + pin_dir_ + ": " + strerror(e));
        }
        bpf_map* maps[] = {skel->maps.devs, skel->maps.bitmap, skel->maps.stats, skel->maps.meta, skel->maps.inflight};
        bpf_link* links[] = {skel->links.cbt_bio_queue, skel->links.cbt_rq_complete, skel->links.cbt_bio_complete};
        for (int i = 0; i < 5; i++)
          if (bpf_map__pin(maps[i], (pin_dir_ + "/" + kMapNames[i]).c_str()) != 0) {
            int e = errno;
            Unpin();
            throw MakeError(env, ErrnoCode(e), "pinning the tracker failed: " + std::string(strerror(e)) + Detail());
          }
        for (int i = 0; i < 3; i++)
          if (bpf_link__pin(links[i], (pin_dir_ + "/" + kLinkNames[i]).c_str()) != 0) {
            int e = errno;
            Unpin();
            throw MakeError(env, ErrnoCode(e), "pinning the tracker failed: " + std::string(strerror(e)) + Detail());
          }
      }
    } catch (...) {
      Release();
      throw;
    }
    devs_ = devs;
    running_ = true;
    Napi::Object out = Napi::Object::New(env);
    out.Set("sessionId", std::string(meta_->session, strnlen(meta_->session, sizeof meta_->session)));
    out.Set("resumed", false);
    return out;
  }

  // readAndSwap(major, minor) → {bitmap: Buffer, blockShift, blocks, seq, events, overflow, inflightLost}
  Napi::Value ReadAndSwap(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!running_) throw MakeError(env, "ENOTRUNNING", "tracker is not running");
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber())
      throw MakeError(env, "EINVAL", "readAndSwap(major, minor): numbers expected");
    uint32_t major = info[0].As<Napi::Number>().Uint32Value(), minor = info[1].As<Napi::Number>().Uint32Value();
    DevSlot* d = nullptr;
    for (auto& x : devs_)
      if (x.major == major && x.minor == minor) d = &x;
    if (!d) throw MakeError(env, "ENOENT", "device " + std::to_string(major) + ":" + std::to_string(minor) + " is not tracked");
    SwapLock lock(lock_path_);
    if (!lock_path_.empty() && !lock.ok()) {
      // the lock file goes away with an unpin by another process
      if (errno == ENOENT) throw MakeError(env, "ESTALE", "the pinned tracker was stopped by another process");
      throw MakeError(env, ErrnoCode(errno), "cannot take the tracker lock " + lock_path_ + ": " + strerror(errno));
    }
    if (__atomic_load_n(&meta_->stopped, __ATOMIC_SEQ_CST))
      throw MakeError(env, "ESTALE", "the pinned tracker was stopped by another process");
    if (!pin_dir_.empty())
      for (const char* n : kLinkNames)
        if (access((pin_dir_ + "/" + n).c_str(), F_OK) != 0 && !skel_)
          throw MakeError(env, "ESTALE", "the pinned tracker's attachment " + pin_dir_ + "/" + n + " was removed");
    // Counters first: an overflow flagged before this point belongs to this generation. A bit set after the
    // exchange of its word goes to the next generation; one set before is returned now.
    uint64_t* st = stats_ + (size_t)d->cfg.slot * CBT_STAT_WORDS;
    uint64_t overflow = __atomic_exchange_n(&st[CBT_STAT_OVERFLOW], 0, __ATOMIC_SEQ_CST);
    uint64_t lost = __atomic_exchange_n(&st[CBT_STAT_INFLIGHT_LOST], 0, __ATOMIC_SEQ_CST);
    uint64_t events = __atomic_exchange_n(&st[CBT_STAT_EVENTS], 0, __ATOMIC_SEQ_CST);
    Napi::Buffer<uint8_t> buf = Napi::Buffer<uint8_t>::New(env, (size_t)d->cfg.nwords * 8);
    uint64_t* out = (uint64_t*)buf.Data();
    uint64_t* src = words_ + d->cfg.word_off;
    for (uint32_t i = 0; i < d->cfg.nwords; i++) {
      uint64_t v = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
      if (v) v = __atomic_exchange_n(&src[i], 0, __ATOMIC_SEQ_CST);
      out[i] = v;
    }
    uint64_t seq = __atomic_add_fetch(&meta_->seq[d->cfg.slot], 1, __ATOMIC_SEQ_CST);
    Napi::Object o = Napi::Object::New(env);
    o.Set("bitmap", buf);
    o.Set("blockShift", d->shift);
    o.Set("blocks", (double)(((d->nsect + (1ull << d->shift) - 1) >> d->shift)));
    o.Set("seq", (double)seq);
    o.Set("events", (double)events);
    o.Set("overflow", overflow != 0);
    o.Set("inflightLost", (double)lost);
    return o;
  }

  // stop({unpin?}): this process lets go. A pinned tracker keeps tracking unless unpin is true.
  Napi::Value Stop(const Napi::CallbackInfo& info) {
    bool unpin = false;
    if (info.Length() > 0 && info[0].IsObject()) unpin = info[0].As<Napi::Object>().Get("unpin").ToBoolean().Value();
    if (running_ && (pin_dir_.empty() || unpin)) {
      SwapLock lock(lock_path_);
      if (meta_) __atomic_store_n(&meta_->stopped, 1u, __ATOMIC_SEQ_CST);
      if (!pin_dir_.empty()) {
        Unpin();
        if (!lock_path_.empty()) unlink(lock_path_.c_str());  // the next start is a new session anyway
      }
      Release();
    } else {
      Release();
    }
    return info.Env().Undefined();
  }

  Napi::Value Status(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("running", running_);
    if (!running_) return o;
    o.Set("sessionId", std::string(meta_->session, strnlen(meta_->session, sizeof meta_->session)));
    o.Set("startedAt", (double)meta_->started_ms);
    o.Set("pinned", !pin_dir_.empty());
    o.Set("resumed", resumed_);
    o.Set("stopped", meta_->stopped != 0);
    Napi::Array a = Napi::Array::New(env, devs_.size());
    for (size_t i = 0; i < devs_.size(); i++) {
      Napi::Object d = Napi::Object::New(env);
      d.Set("major", devs_[i].major);
      d.Set("minor", devs_[i].minor);
      d.Set("sectors", (double)devs_[i].nsect);
      d.Set("blockShift", devs_[i].shift);
      d.Set("seq", (double)__atomic_load_n(&meta_->seq[devs_[i].cfg.slot], __ATOMIC_SEQ_CST));
      a.Set((uint32_t)i, d);
    }
    o.Set("devices", a);
    return o;
  }
};

// ---- file-system helpers (async: syncfs and FIEMAP with SYNC may wait for the disk) ----

struct Extent {
  uint64_t logical, physical, length;
  uint32_t flags;
};

class FiemapWorker : public Napi::AsyncWorker {
 public:
  FiemapWorker(Napi::Env env, std::string path)
      : Napi::AsyncWorker(env), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return Fail(errno, "open");
    struct stat before;
    if (fstat(fd, &before) != 0) return Fail(errno, "fstat", fd);
    if (!S_ISREG(before.st_mode)) return Fail(EINVAL, "not a regular file", fd);
    struct statfs sfs;
    if (fstatfs(fd, &sfs) != 0) return Fail(errno, "fstatfs", fd);
    fs_type_ = (uint64_t)sfs.f_type;
    unsigned int gen = 0;
    has_gen_ = ioctl(fd, FS_IOC_GETVERSION, &gen) == 0;
    generation_ = gen;
    const uint32_t kBatch = 512;
    std::vector<uint8_t> mem(sizeof(struct fiemap) + kBatch * sizeof(struct fiemap_extent));
    uint64_t start = 0;
    uint32_t flags = FIEMAP_FLAG_SYNC;  // flush delayed allocation so the map is final
    for (int rounds = 0; rounds < 1000000; rounds++) {
      memset(mem.data(), 0, mem.size());
      struct fiemap* fm = (struct fiemap*)mem.data();
      fm->fm_start = start;
      fm->fm_length = FIEMAP_MAX_OFFSET - start;
      fm->fm_flags = flags;
      fm->fm_extent_count = kBatch;
      if (ioctl(fd, FS_IOC_FIEMAP, fm) != 0) return Fail(errno, "FS_IOC_FIEMAP", fd);
      if (fm->fm_mapped_extents == 0) break;
      bool last = false;
      for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
        const struct fiemap_extent& e = fm->fm_extents[i];
        extents_.push_back({e.fe_logical, e.fe_physical, e.fe_length, e.fe_flags});
        if (e.fe_flags & FIEMAP_EXTENT_LAST) last = true;
      }
      const struct fiemap_extent& tail = fm->fm_extents[fm->fm_mapped_extents - 1];
      if (last || tail.fe_length == 0) break;
      start = tail.fe_logical + tail.fe_length;
      flags = 0;  // already synced
    }
    struct stat after;
    if (fstat(fd, &after) != 0) return Fail(errno, "fstat", fd);
    close(fd);
    st_ = before;
    // A file that changed while it was being mapped gives a map of no single moment: report it.
    stable_ = before.st_size == after.st_size && before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
              before.st_mtim.tv_nsec == after.st_mtim.tv_nsec && before.st_ctim.tv_sec == after.st_ctim.tv_sec &&
              before.st_ctim.tv_nsec == after.st_ctim.tv_nsec;
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) {
      Napi::Error e = MakeError(env, ErrnoCode(err_), what_ + " " + path_ + ": " + strerror(err_));
      e.Set("errno", Napi::Number::New(env, err_));
      deferred_.Reject(e.Value());
      return;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("size", (double)st_.st_size);
    o.Set("ino", (double)st_.st_ino);
    o.Set("devMajor", major(st_.st_dev));
    o.Set("devMinor", minor(st_.st_dev));
    o.Set("mtimeNs", Napi::BigInt::New(env, (uint64_t)(st_.st_mtim.tv_sec * 1000000000ull + st_.st_mtim.tv_nsec)));
    o.Set("ctimeNs", Napi::BigInt::New(env, (uint64_t)(st_.st_ctim.tv_sec * 1000000000ull + st_.st_ctim.tv_nsec)));
    o.Set("blockSize", (double)st_.st_blksize);
    o.Set("fsType", (double)fs_type_);
    o.Set("generation", has_gen_ ? Napi::Value(Napi::Number::New(env, generation_)) : env.Null());
    o.Set("stable", stable_);
    Napi::Array a = Napi::Array::New(env, extents_.size());
    for (size_t i = 0; i < extents_.size(); i++) {
      Napi::Object e = Napi::Object::New(env);
      e.Set("logical", (double)extents_[i].logical);
      e.Set("physical", (double)extents_[i].physical);
      e.Set("length", (double)extents_[i].length);
      e.Set("flags", extents_[i].flags);
      a.Set((uint32_t)i, e);
    }
    o.Set("extents", a);
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  void Fail(int err, const char* what, int fd = -1) {
    if (fd >= 0) close(fd);
    err_ = err;
    what_ = what;
  }
  std::string path_;
  Napi::Promise::Deferred deferred_;
  int err_ = 0;
  std::string what_;
  struct stat st_ {};
  uint64_t fs_type_ = 0;
  bool has_gen_ = false;
  uint32_t generation_ = 0;
  bool stable_ = false;
  std::vector<Extent> extents_;
};

// syncfs(path): flush the whole filesystem holding path (so every earlier write has reached the block layer).
class SyncfsWorker : public Napi::AsyncWorker {
 public:
  SyncfsWorker(Napi::Env env, std::string path)
      : Napi::AsyncWorker(env), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      err_ = errno;
      what_ = "open";
      return;
    }
    if (syncfs(fd) != 0) {
      err_ = errno;
      what_ = "syncfs";
    }
    close(fd);
  }
  void OnOK() override {
    if (err_) {
      deferred_.Reject(MakeError(Env(), ErrnoCode(err_), what_ + " " + path_ + ": " + strerror(err_)).Value());
      return;
    }
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  std::string path_;
  Napi::Promise::Deferred deferred_;
  int err_ = 0;
  std::string what_;
};

std::string PathArg(const Napi::CallbackInfo& info, const char* fn) {
  if (info.Length() < 1 || !info[0].IsString()) throw MakeError(info.Env(), "EINVAL", std::string(fn) + "(path): path must be a string");
  return info[0].As<Napi::String>().Utf8Value();
}

Napi::Value Fiemap(const Napi::CallbackInfo& info) {
  auto* w = new FiemapWorker(info.Env(), PathArg(info, "fiemap"));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value Syncfs(const Napi::CallbackInfo& info) {
  auto* w = new SyncfsWorker(info.Env(), PathArg(info, "syncfs"));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

#ifndef FS_IOC_GETFSUUID
struct fsuuid2 {
  __u8 len;
  __u8 uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

// fsUuid(path) → hex string, or null when the kernel/filesystem does not report one.
Napi::Value FsUuid(const Napi::CallbackInfo& info) {
  std::string path = PathArg(info, "fsUuid");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    throw MakeError(info.Env(), ErrnoCode(e), "open " + path + ": " + strerror(e));
  }
  struct fsuuid2 u {};
  int r = ioctl(fd, FS_IOC_GETFSUUID, &u);
  close(fd);
  if (r != 0 || u.len == 0 || u.len > 16) return info.Env().Null();
  char hex[33];
  for (int i = 0; i < u.len; i++) snprintf(hex + 2 * i, 3, "%02x", u.uuid[i]);
  return Napi::String::New(info.Env(), std::string(hex, 2 * u.len));
}

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

// mountIdUnique(path) → decimal string of the mount's 64-bit never-reused ID (Linux 6.8+), or null.
// (The classic mount ID of /proc/self/mountinfo is reused after an unmount, so it cannot detect remounts.)
Napi::Value MountIdUnique(const Napi::CallbackInfo& info) {
  std::string path = PathArg(info, "mountIdUnique");
  struct statx sx {};
  if (statx(AT_FDCWD, path.c_str(), AT_NO_AUTOMOUNT, STATX_MNT_ID_UNIQUE, &sx) != 0) {
    int e = errno;
    throw MakeError(info.Env(), ErrnoCode(e), "statx " + path + ": " + strerror(e));
  }
  if (!(sx.stx_mask & STATX_MNT_ID_UNIQUE)) return info.Env().Null();
  return Napi::String::New(info.Env(), std::to_string((unsigned long long)sx.stx_mnt_id));
}

// probe() → {available, reason?}: can this process load and attach the tracker? (loads nothing persistent)
Napi::Value Probe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  auto no = [&](const std::string& why) {
    o.Set("available", false);
    o.Set("reason", why);
    return o;
  };
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) return no("kernel has no BTF (/sys/kernel/btf/vmlinux missing)");
  struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
  setrlimit(RLIMIT_MEMLOCK, &rl);
  libbpf_set_print(LibbpfPrint);
  TakeLog();
  cbt_bpf* skel = cbt_bpf::open();
  if (!skel) return no(std::string("cannot open eBPF object: ") + strerror(errno));
  int err = cbt_bpf::load(skel);
  if (err) {
    int e = -err;
    cbt_bpf::destroy(skel);
    return no(std::string("cannot load eBPF program: ") + strerror(e) + PermissionHintOrDetail(e));
  }
  err = cbt_bpf::attach(skel);
  cbt_bpf::destroy(skel);
  if (err) {
    int e = err < 0 ? -err : errno;
    return no(std::string("cannot attach to block tracepoints: ") + strerror(e) + Detail());
  }
  o.Set("available", true);
  return o;
}

}  // namespace

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("Tracker", Tracker::Init(env));
  exports.Set("fiemap", Napi::Function::New(env, Fiemap));
  exports.Set("syncfs", Napi::Function::New(env, Syncfs));
  exports.Set("fsUuid", Napi::Function::New(env, FsUuid));
  exports.Set("probe", Napi::Function::New(env, Probe));
  exports.Set("mountIdUnique", Napi::Function::New(env, MountIdUnique));
  return exports;
}

NODE_API_MODULE(tidemark_cbt, InitAll)
