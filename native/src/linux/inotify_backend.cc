// Recursive inotify backend for unprivileged processes: one watch per directory under the roots,
// new directories watched as they appear (their subtree is also marked dirty, since events inside
// them may predate the watch). Watches form a tree (wd → parent wd + name) so a renamed directory
// needs one update, not a rewrite of every path below it.
//
// Queue overflow marks the batch `lost`; running out of watches (fs.inotify.max_user_watches) or the
// removal of a root marks the backend broken. inotify cannot see link-count changes, so a file with
// several hard links changing under any of its names is reported as `lost` when seen; a link that is
// created and removed before the reader looks at it is a known blind spot of this backend.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "reader_base.h"

namespace tidemark {

namespace {

constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |
                           IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr int kNoParent = -1;
constexpr int kDetached = -2;

struct WatchNode {
  int parent;
  std::string name;  // full path for roots
};

class InotifyBackend : public LinuxReaderBase {
 public:
  ~InotifyBackend() override { Stop(); }
  const char *Name() const override { return "inotify"; }

  bool Start(const BackendOptions &opts, BatchSink sink, std::string &error) override {
    coalescer_ = std::make_unique<Coalescer>(opts.roots);
    notifyFd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (notifyFd_ < 0) {
      error = std::string("inotify_init1: ") + strerror(errno);
      return false;
    }
    for (const auto &root : opts.roots) {
      std::string err;
      int wd = AddTree(root, kNoParent, root, err);
      if (wd < 0 || !err.empty()) {
        error = err.empty() ? "cannot watch " + root : err;
        CloseKernel();
        return false;
      }
    }
    return StartReader(opts, std::move(sink), error);
  }

 protected:
  void CloseKernel() override {
    if (notifyFd_ >= 0) close(notifyFd_);
    notifyFd_ = -1;
    nodes_.clear();
  }

  bool Drain() override {
    alignas(inotify_event) static thread_local char buf[256 * 1024];
    checked_.clear();
    for (;;) {
      ssize_t n = read(notifyFd_, buf, sizeof buf);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        broken_ = std::string("inotify read: ") + strerror(errno);
        return false;
      }
      if (n == 0) return true;
      for (char *p = buf; p < buf + n;) {
        auto *ev = reinterpret_cast<inotify_event *>(p);
        Handle(ev);
        if (!broken_.empty()) return false;
        p += sizeof(inotify_event) + ev->len;
      }
    }
  }

 private:
  // Adds a watch on `path` and every directory below it. Returns the wd, or -1 when `path` is not a
  // directory any more. Sets `err` (and broken_) when the watch limit is reached.
  int AddTree(const std::string &path, int parent, const std::string &name, std::string &err) {
    int wd = inotify_add_watch(notifyFd_, path.c_str(), kMask);
    if (wd < 0) {
      if (errno == ENOSPC || errno == ENOMEM) {
        err = "inotify watch limit reached (raise fs.inotify.max_user_watches)";
        broken_ = err;
      } else if (errno != ENOENT && errno != ENOTDIR && errno != EACCES && errno != ELOOP) {
        err = "inotify_add_watch " + path + ": " + strerror(errno);
      }
      return -1;
    }
    nodes_[wd] = WatchNode{parent, name};
    DIR *d = opendir(path.c_str());
    if (!d) return wd;
    std::vector<std::string> subdirs;
    while (dirent *de = readdir(d)) {
      if (de->d_name[0] == '.' && (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0))) continue;
      bool isDir = de->d_type == DT_DIR;
      if (de->d_type == DT_UNKNOWN) {
        struct stat st;
        std::string child = coalescer_->Join(path, de->d_name);
        isDir = lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      if (isDir) subdirs.emplace_back(de->d_name);
    }
    closedir(d);
    for (const auto &s : subdirs) {
      AddTree(coalescer_->Join(path, s), wd, s, err);
      if (!broken_.empty()) break;
    }
    return wd;
  }

  // Path of a watched directory, or "" when it (or an ancestor) was moved out of the roots.
  std::string PathOf(int wd) const {
    std::vector<const WatchNode *> chain;
    for (int cur = wd; cur != kNoParent;) {
      auto it = nodes_.find(cur);
      if (it == nodes_.end() || it->second.parent == kDetached) return std::string();
      chain.push_back(&it->second);
      cur = it->second.parent;
      if (chain.size() > 4096) return std::string();
    }
    std::string path = chain.back()->name;
    for (size_t i = chain.size() - 1; i-- > 0;) path = coalescer_->Join(path, chain[i]->name);
    return path;
  }

  bool IsRoot(int wd) const {
    auto it = nodes_.find(wd);
    return it != nodes_.end() && it->second.parent == kNoParent;
  }

  void Handle(const inotify_event *ev) {
    coalescer_->CountEvent();
    if (ev->mask & IN_Q_OVERFLOW) {
      coalescer_->Lost("inotify event queue overflowed");
      return;
    }
    if (ev->mask & IN_IGNORED) {
      if (IsRoot(ev->wd)) broken_ = "a source root was removed, moved or unmounted";
      nodes_.erase(ev->wd);
      return;
    }
    if (ev->mask & IN_UNMOUNT) {
      broken_ = "a watched filesystem was unmounted";
      return;
    }
    if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && IsRoot(ev->wd)) {
      broken_ = "a source root was removed or moved";
      return;
    }
    std::string dir = PathOf(ev->wd);
    if (dir.empty()) return;
    std::string name = ev->len ? std::string(ev->name, strnlen(ev->name, ev->len)) : std::string();
    if (name.empty()) {
      if (ev->mask & IN_ATTRIB) coalescer_->MarkSelf(dir);
      return;
    }
    bool isDir = (ev->mask & IN_ISDIR) != 0;
    bool arrived = (ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0;
    coalescer_->MarkEntry(dir, name, isDir, isDir && arrived);
    std::string full = coalescer_->Join(dir, name);
    if (isDir && (ev->mask & IN_MOVED_FROM)) {
      // Detach until (unless) the matching IN_MOVED_TO re-attaches it by re-adding the watch.
      for (auto &kv : nodes_)
        if (kv.second.parent == ev->wd && kv.second.name == name) kv.second.parent = kDetached;
    }
    if (isDir && arrived) {
      std::string err;
      AddTree(full, ev->wd, name, err);
      return;
    }
    if (!isDir && (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)) &&
        checked_.insert(full).second) {
      struct stat st;
      if (lstat(full.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
        coalescer_->Lost("a file with several hard links changed (" + full + "); its other names cannot be located");
    }
  }

  std::unordered_map<int, WatchNode> nodes_;
  std::unordered_set<std::string> checked_;
};

}  // namespace

std::unique_ptr<Backend> CreateInotifyBackend() { return std::make_unique<InotifyBackend>(); }

}  // namespace tidemark
