// fanotify backend: one FAN_MARK_FILESYSTEM mark per filesystem holding a source root, reporting
// directory file handle + entry name (FAN_REPORT_DFID_NAME) and the object's handle (FAN_REPORT_FID).
// Needs CAP_SYS_ADMIN. Directory handles are resolved to paths with open_by_handle_at() against an
// fd on the root's filesystem; every event outside the roots is dropped.
//
// Hard links: a link count change arrives as an event carrying only the object's handle. When that
// inode is still alive its other names are in directories no event mentions, so the batch is marked
// `lost` (the journal falls back to a full scan). The same holds for content/metadata changes of an
// in-root file with more than one link.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <map>
#include <string>
#include <unordered_map>

#include "reader_base.h"

namespace tidemark {

namespace {

constexpr uint64_t kMask = FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_MODIFY | FAN_ATTRIB |
                           FAN_CLOSE_WRITE | FAN_DELETE_SELF | FAN_MOVE_SELF | FAN_ONDIR;

struct FsidKey {
  int32_t a, b;
  bool operator<(const FsidKey &o) const { return a < o.a || (a == o.a && b < o.b); }
};

class FanotifyBackend : public LinuxReaderBase {
 public:
  ~FanotifyBackend() override { Stop(); }
  const char *Name() const override { return "fanotify"; }

  bool Start(const BackendOptions &opts, BatchSink sink, std::string &error) override {
    coalescer_ = std::make_unique<Coalescer>(opts.roots);
    notifyFd_ = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK,
                              O_RDONLY | O_LARGEFILE | O_CLOEXEC);
    if (notifyFd_ < 0) {
      error = std::string("fanotify_init: ") + strerror(errno);
      return false;
    }
    for (const auto &root : opts.roots) {
      struct statfs sfs;
      if (statfs(root.c_str(), &sfs) != 0) {
        error = "statfs " + root + ": " + strerror(errno);
        CloseKernel();
        return false;
      }
      FsidKey key;
      memcpy(&key, &sfs.f_fsid, sizeof key);
      if (mountFds_.count(key)) continue;
      if (fanotify_mark(notifyFd_, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, kMask, AT_FDCWD, root.c_str()) != 0) {
        error = "fanotify_mark " + root + ": " + strerror(errno);
        CloseKernel();
        return false;
      }
      int mfd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (mfd < 0) {
        error = "open " + root + ": " + strerror(errno);
        CloseKernel();
        return false;
      }
      mountFds_[key] = mfd;
    }
    return StartReader(opts, std::move(sink), error);
  }

 protected:
  void CloseKernel() override {
    for (auto &kv : mountFds_) close(kv.second);
    mountFds_.clear();
    if (notifyFd_ >= 0) close(notifyFd_);
    notifyFd_ = -1;
  }

  bool Drain() override {
    alignas(fanotify_event_metadata) static thread_local char buf[256 * 1024];
    if (cache_.size() > 65536) cache_.clear();
    for (;;) {
      ssize_t n = read(notifyFd_, buf, sizeof buf);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        broken_ = std::string("fanotify read: ") + strerror(errno);
        return false;
      }
      if (n == 0) return true;
      auto *m = reinterpret_cast<fanotify_event_metadata *>(buf);
      while (FAN_EVENT_OK(m, n)) {
        if (m->vers != FANOTIFY_METADATA_VERSION) {
          broken_ = "fanotify metadata version mismatch";
          return false;
        }
        Handle(m);
        m = FAN_EVENT_NEXT(m, n);
      }
    }
  }

 private:
  // Resolves a handle to an open O_PATH fd (caller closes) or -1.
  int OpenHandle(const fanotify_event_info_fid *fid) {
    FsidKey key;
    memcpy(&key, &fid->fsid, sizeof key);
    auto it = mountFds_.find(key);
    if (it == mountFds_.end()) return -1;
    auto *fh = reinterpret_cast<file_handle *>(const_cast<unsigned char *>(fid->handle));
    return open_by_handle_at(it->second, fh, O_PATH | O_CLOEXEC);
  }

  static std::string FdPath(int fd) {
    char link[64], target[PATH_MAX + 1];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, PATH_MAX);
    if (n <= 0) return std::string();
    std::string p(target, static_cast<size_t>(n));
    static const std::string kDeleted = " (deleted)";
    if (p.size() > kDeleted.size() && p.compare(p.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
      return std::string();
    if (p.empty() || p[0] != '/') return std::string();
    return p;
  }

  // Directory handle → path. Handles name an inode for its lifetime (with its generation), but the
  // path changes when the directory or an ancestor is renamed, so the cache is dropped whenever a
  // directory is renamed or deleted anywhere on the marked filesystems.
  const std::string &DirPath(const fanotify_event_info_fid *fid) {
    auto *fh = reinterpret_cast<const file_handle *>(fid->handle);
    std::string key(reinterpret_cast<const char *>(&fid->fsid), sizeof fid->fsid);
    key.append(reinterpret_cast<const char *>(fh), sizeof(file_handle) + fh->handle_bytes);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::string path;
    int fd = OpenHandle(fid);
    if (fd >= 0) {
      path = FdPath(fd);
      close(fd);
    }
    return cache_.emplace(std::move(key), std::move(path)).first->second;
  }

  void Handle(const fanotify_event_metadata *m) {
    coalescer_->CountEvent();
    if (m->mask & FAN_Q_OVERFLOW) {
      coalescer_->Lost("fanotify event queue overflowed");
      return;
    }
    if (m->fd >= 0) close(m->fd);  // not expected with FID reporting
    const fanotify_event_info_fid *dfid = nullptr, *ofid = nullptr;
    std::string name;
    const char *p = reinterpret_cast<const char *>(m) + m->metadata_len;
    const char *end = reinterpret_cast<const char *>(m) + m->event_len;
    while (p + sizeof(fanotify_event_info_header) <= end) {
      auto *h = reinterpret_cast<const fanotify_event_info_header *>(p);
      if (h->len == 0 || p + h->len > end) break;
      auto *fid = reinterpret_cast<const fanotify_event_info_fid *>(p);
      if (h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
        dfid = fid;
        auto *fh = reinterpret_cast<const file_handle *>(fid->handle);
        const char *nm = reinterpret_cast<const char *>(fh->f_handle) + fh->handle_bytes;
        name.assign(nm, strnlen(nm, static_cast<size_t>(end - nm)));
      } else if (h->info_type == FAN_EVENT_INFO_TYPE_DFID) {
        dfid = fid;
      } else if (h->info_type == FAN_EVENT_INFO_TYPE_FID) {
        ofid = fid;
      }
      p += h->len;
    }
    bool isDir = (m->mask & FAN_ONDIR) != 0;
    if (isDir && (m->mask & (FAN_MOVED_FROM | FAN_MOVED_TO | FAN_DELETE | FAN_MOVE_SELF | FAN_DELETE_SELF)))
      cache_.clear();
    if (!dfid) {
      // Only the object's handle: the link count of a non-directory changed (link/unlink/rename
      // over it). Harmless when the inode is gone; otherwise its other names are unknown.
      if (ofid && !isDir && (m->mask & FAN_ATTRIB)) {
        int fd = OpenHandle(ofid);
        if (fd >= 0) {
          struct stat st;
          bool alive = fstat(fd, &st) == 0 && st.st_nlink > 0;
          std::string path = alive ? FdPath(fd) : std::string();
          close(fd);
          // Trust the name only when it really is this inode (a disconnected dentry reports a
          // made-up path). A file linked only from outside the roots is not our concern.
          struct stat st2;
          if (!path.empty() && (lstat(path.c_str(), &st2) != 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev))
            path.clear();
          if (alive && (path.empty() || coalescer_->InRoots(path)))
            coalescer_->Lost("the link count of a hard-linked file changed; its other names cannot be located");
        }
      }
      return;
    }
    const std::string &dir = DirPath(dfid);
    if (dir.empty()) return;  // the directory is gone: its parent saw the deletion
    if (name.empty() || name == ".") {
      if (m->mask & (FAN_ATTRIB | FAN_MODIFY)) coalescer_->MarkSelf(dir);
      return;  // DELETE_SELF / MOVE_SELF: the parent saw DELETE / MOVED_FROM
    }
    bool whole = isDir && (m->mask & (FAN_CREATE | FAN_MOVED_TO));
    coalescer_->MarkEntry(dir, name, isDir, whole);
    if (!isDir && (m->mask & (FAN_CREATE | FAN_MOVED_TO | FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE)) &&
        coalescer_->InRoots(dir)) {
      struct stat st;
      std::string full = coalescer_->Join(dir, name);
      if (lstat(full.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
        coalescer_->Lost("a file with several hard links changed (" + full + "); its other names cannot be located");
    }
  }

  std::map<FsidKey, int> mountFds_;
  std::unordered_map<std::string, std::string> cache_;
};

}  // namespace

std::unique_ptr<Backend> CreateFanotifyBackend() { return std::make_unique<FanotifyBackend>(); }

}  // namespace tidemark
