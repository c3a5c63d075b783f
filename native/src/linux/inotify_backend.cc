// Recursive inotify backend for unprivileged processes: one watch per directory under the roots,
// new directories watched as they appear (their subtree is also marked dirty, since events inside
// them may predate the watch). Watches form a tree (wd → parent wd + name) so a renamed directory
// needs one update, not a rewrite of every path below it.
//
// Queue overflow marks the batch `lost`; running out of watches (fs.inotify.max_user_watches) or the
// removal of a root marks the backend broken.
//
// Hard links: inotify reports a change only to the directory of the name it was made through, and
// link-count changes not at all. So the backend keeps a map of every file with several links it has
// seen (from an lstat of each file when a directory is first watched, and from events): inode → its
// names (watch, name). A change through one name, or the removal/addition of a name, dirties the
// directories of all known names. A new link to a file it knew with one name is resolved by searching
// the watched directories for the inode; so is every multi-link file found in a directory that was
// created or moved in (links made there before its watch existed gave no event). A name that appeared
// and vanished before the reader could lstat it (and was not a file written and closed, like an
// editor's temp file) may have been a link, so it marks the batch `lost`, as does a file with names
// outside the roots. A name caught as it is being unlinked shows the link count of the names left, so
// an arrived name seen with one link is checked once more (PinIfVanishing). Changes made through a name
// outside the roots are not seen (as with every backend).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "reader_base.h"

namespace tidemark {

namespace {

constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |
                           IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr int kNoParent = -1;
constexpr int kDetached = -2;
constexpr size_t kMaxSearchDirs = 20000;
constexpr size_t kMaxPins = 1024;

struct WatchNode {
  int parent;
  std::string name;  // full path for roots
};

using InodeKey = std::pair<dev_t, ino_t>;
using NameKey = std::pair<int, std::string>;  // (watch of the directory, entry name)

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
      struct stat st;
      int rc = stat(root.c_str(), &st);
      if (rc != 0 || !S_ISDIR(st.st_mode)) {
        error = "cannot watch " + root + ": " + (rc != 0 ? strerror(errno) : "not a directory");
        CloseKernel();
        return false;
      }
    }
    roots_ = opts.roots;
    // The recursive walk (a watch per directory, an lstat per file) runs on the reader thread.
    return StartReader(opts, std::move(sink), error);
  }

 protected:
  bool Prepare() override {
    for (const auto &root : roots_) {
      std::string err;
      int wd = AddTree(root, kNoParent, root, err);
      if (wd < 0 || !err.empty()) {
        if (broken_.empty()) broken_ = err.empty() ? "cannot watch " + root : err;
        return false;
      }
    }
    return true;
  }

  void CloseKernel() override {
    if (notifyFd_ >= 0) close(notifyFd_);
    notifyFd_ = -1;
    nodes_.clear();
    links_.clear();
    byName_.clear();
    unexamined_.clear();
    DropPins();
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
  // directory any more. Sets `err` (and broken_) when the watch limit is reached. With `found`, every
  // file with several links met on the way is added to it (for ResolveLinks).
  int AddTree(const std::string &path, int parent, const std::string &name, std::string &err,
              std::map<InodeKey, nlink_t> *found = nullptr) {
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
    int dfd = dirfd(d);
    while (dirent *de = readdir(d)) {
      if (de->d_name[0] == '.' && (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0))) continue;
      if (de->d_type == DT_DIR) {
        subdirs.emplace_back(de->d_name);
        continue;
      }
      struct stat st;
      if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode))
        subdirs.emplace_back(de->d_name);
      else if (st.st_nlink > 1) {
        NoteName(st, NameKey(wd, de->d_name));
        if (found) (*found)[InodeKey(st.st_dev, st.st_ino)] = st.st_nlink;
      }
    }
    closedir(d);
    for (const auto &s : subdirs) {
      AddTree(coalescer_->Join(path, s), wd, s, err, found);
      if (!broken_.empty()) break;
    }
    return wd;
  }

  // Records that inode `st` (several links) has the name `nk`; returns true when it was known before.
  bool NoteName(const struct stat &st, const NameKey &nk) {
    InodeKey key(st.st_dev, st.st_ino);
    auto it = links_.find(key);
    bool known = it != links_.end();
    links_[key].insert(nk);
    byName_[nk] = key;
    return known;
  }

  // Dirties the directory of every known name of `key`.
  void MarkNames(const InodeKey &key) {
    auto it = links_.find(key);
    if (it == links_.end()) return;
    for (const auto &nk : it->second) {
      std::string dir = PathOf(nk.first);
      if (!dir.empty()) coalescer_->MarkDir(dir);
    }
  }

  // A name went away (deleted or moved from): the other names' link count and ctime changed.
  void ForgetName(const NameKey &nk) {
    auto b = byName_.find(nk);
    if (b == byName_.end()) return;
    InodeKey key = b->second;
    byName_.erase(b);
    auto it = links_.find(key);
    if (it == links_.end()) return;
    it->second.erase(nk);
    MarkNames(key);
    if (it->second.empty()) links_.erase(it);
  }

  // Drops every name inside a watch that no longer exists.
  void ForgetWatch(int wd) {
    for (auto it = byName_.begin(); it != byName_.end();) {
      if (it->first.first != wd) {
        ++it;
        continue;
      }
      auto l = links_.find(it->second);
      if (l != links_.end()) {
        l->second.erase(it->first);
        if (l->second.empty()) links_.erase(l);
      }
      it = byName_.erase(it);
    }
  }

  // Finds every name of the inodes `targets` in the watched directories, in one pass over them.
  // False when there are too many directories to search.
  // With `anyCount`, names of one link are noted too (the inode's other names are gone or going).
  bool FindNames(const std::set<InodeKey> &targets, bool anyCount = false) {
    if (targets.empty()) return true;
    if (nodes_.size() > kMaxSearchDirs) return false;
    std::unordered_set<ino_t> inos;
    for (const auto &t : targets) inos.insert(t.second);
    std::vector<int> wds;
    wds.reserve(nodes_.size());
    for (const auto &kv : nodes_) wds.push_back(kv.first);
    for (int wd : wds) {
      std::string dir = PathOf(wd);
      if (dir.empty()) continue;
      DIR *d = opendir(dir.c_str());
      if (!d) continue;
      int dfd = dirfd(d);
      while (dirent *de = readdir(d)) {
        if (de->d_type == DT_DIR) continue;
        // d_ino is the inode on the directory's own filesystem: a cheap filter before the lstat
        if (de->d_type != DT_UNKNOWN && !inos.count(de->d_ino)) continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (anyCount || st.st_nlink > 1) &&
            targets.count(InodeKey(st.st_dev, st.st_ino)))
          NoteName(st, NameKey(wd, de->d_name));
      }
      closedir(d);
    }
    return true;
  }

  // A name was created, moved in, or changed: keep the link map current and dirty every name's
  // directory when the file has (or had) several links.
  void CheckLinks(int wd, const std::string &dir, const std::string &full, const std::string &name, bool arrived) {
    NameKey nk(wd, name);
    struct stat st;
    // An arrived name is opened (O_PATH: no access to its data needed) so its inode can still be asked
    // about after the name is gone (PinIfVanishing).
    int fd = arrived ? open(full.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
    bool exists = arrived ? fd >= 0 && fstat(fd, &st) == 0 : lstat(full.c_str(), &st) == 0;
    int err = errno;
    if (!exists || S_ISDIR(st.st_mode)) {
      if (fd >= 0) close(fd);
      auto b = byName_.find(nk);
      if (b != byName_.end()) MarkNames(b->second);
      // gone, or already replaced by a folder (the event named a file): what arrived was never examined
      if (arrived && (exists || err == ENOENT)) unexamined_.insert(nk);
      return;
    }
    unexamined_.erase(nk);
    auto b = byName_.find(nk);
    if (b != byName_.end() && b->second != InodeKey(st.st_dev, st.st_ino)) ForgetName(nk);  // replaced
    if (st.st_nlink <= 1) {
      if (fd >= 0) PinIfVanishing(nk, dir, full, st, fd);
      auto again = byName_.find(nk);
      if (again != byName_.end()) {
        MarkNames(again->second);  // it lost its other names
        ForgetName(nk);
      }
      return;
    }
    if (fd >= 0) close(fd);
    bool known = NoteName(st, nk);
    InodeKey key(st.st_dev, st.st_ino);
    if (!known) {
      if (!FindNames({key}))
        coalescer_->Lost("a hard link was created (" + full + ") and there are too many folders to search for its other names");
      else if (links_[key].size() < st.st_nlink)
        coalescer_->Lost("a file with hard links outside the tracked folders changed (" + full + ")");
    }
    MarkNames(key);
  }

  // An arrived name seen with one link may be a hard link caught while it is being unlinked: the
  // filesystem drops the inode's link count before the name leaves the directory, so a look-up in
  // between sees the name with the count already down to the other names' (a link made and removed at
  // once, and the file's other names, whose link count and ctime changed, would go unmarked). The
  // unlink holds the directory's lock until the name is gone and its event queued; reading the
  // directory takes that lock, so once one read returns, a name still there with the same inode was
  // not being removed (the count seen was its own), and a name gone has its removal event queued.
  // That name's inode stays open (`pinned_`) until the event is handled (ResolvePin).
  void PinIfVanishing(const NameKey &nk, const std::string &dir, const std::string &full, const struct stat &st, int fd) {
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      alignas(8) char entries[512];
      (void)syscall(SYS_getdents64, dfd, entries, sizeof entries);
      close(dfd);
    }
    struct stat now;
    if (lstat(full.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
      close(fd);
      return;
    }
    auto old = pinned_.find(nk);
    if (old != pinned_.end()) {
      close(old->second);
      pinned_.erase(old);
    }
    if (pinned_.size() >= kMaxPins) {
      DropPins();
      coalescer_->Lost("too many names appeared and vanished at once to check each for hard links");
    }
    pinned_[nk] = fd;
  }

  // The removal (or replacement) of a pinned name was handled: if its inode still has names, they
  // were hard links whose link count and ctime just changed: find them and dirty their folders.
  void ResolvePin(const NameKey &nk, bool movedAway) {
    auto it = pinned_.find(nk);
    if (it == pinned_.end()) return;
    int fd = it->second;
    pinned_.erase(it);
    struct stat st;
    bool others = !movedAway && fstat(fd, &st) == 0 && st.st_nlink > 0;
    close(fd);
    if (!others) return;
    InodeKey key(st.st_dev, st.st_ino);
    if (!FindNames({key}, true))
      coalescer_->Lost("a hard link vanished (" + PathOf(nk.first) + "/" + nk.second + ") and there are too many folders to search for its other names");
    MarkNames(key);
    if (st.st_nlink > 1) return;
    // one name left: not a link any more
    auto l = links_.find(key);
    if (l == links_.end()) return;
    for (const auto &n : l->second) byName_.erase(n);
    links_.erase(l);
  }

  void DropPins() {
    for (auto &kv : pinned_) close(kv.second);
    pinned_.clear();
  }

  // Files with several links found in a directory tree that arrived (created or moved in): links
  // made there before its watch existed gave no event, yet changed the other names' link count and
  // ctime, and a later change or removal through the new names must dirty the old ones. So every
  // name of each such inode is searched for (once, for all of them) and its directory dirtied.
  void ResolveLinks(const std::map<InodeKey, nlink_t> &found, const std::string &where) {
    std::set<InodeKey> missing;
    for (const auto &kv : found) {
      auto it = links_.find(kv.first);
      if (it == links_.end() || it->second.size() < kv.second) missing.insert(kv.first);
    }
    if (!FindNames(missing)) {
      coalescer_->Lost("hard links arrived (" + where + ") and there are too many folders to search for their other names");
      return;
    }
    for (const auto &kv : found) {
      auto it = links_.find(kv.first);
      if (it == links_.end() || it->second.size() < kv.second) {
        coalescer_->Lost("a file with hard links outside the tracked folders arrived (" + where + ")");
        break;
      }
    }
    for (const auto &kv : found) MarkNames(kv.first);
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
      DropPins();
      return;
    }
    if (ev->mask & IN_IGNORED) {
      if (IsRoot(ev->wd)) broken_ = "a source root was removed, moved or unmounted";
      nodes_.erase(ev->wd);
      ForgetWatch(ev->wd);
      for (auto it = unexamined_.begin(); it != unexamined_.end();) it = it->first == ev->wd ? unexamined_.erase(it) : std::next(it);
      for (auto it = pinned_.begin(); it != pinned_.end();) {
        if (it->first.first != ev->wd) {
          ++it;
          continue;
        }
        close(it->second);
        it = pinned_.erase(it);
      }
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
      std::map<InodeKey, nlink_t> found;
      AddTree(full, ev->wd, name, err, &found);
      ResolveLinks(found, full);
      return;
    }
    if (isDir) return;
    if (!pinned_.empty() && (ev->mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE)))
      ResolvePin(NameKey(ev->wd, name), (ev->mask & IN_MOVED_FROM) != 0);
    if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
      if (unexamined_.erase(NameKey(ev->wd, name)))
        coalescer_->Lost("an entry appeared and vanished before it could be examined (" + full + "); it may have been a hard link");
      ForgetName(NameKey(ev->wd, name));
      checked_.erase(full);
      return;
    }
    if (ev->mask & IN_CLOSE_WRITE) unexamined_.erase(NameKey(ev->wd, name));  // a file written and closed, not a link
    if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) || checked_.insert(full).second) {
      CheckLinks(ev->wd, dir, full, name, arrived);
    }
  }

  std::vector<std::string> roots_;
  std::unordered_map<int, WatchNode> nodes_;
  std::unordered_set<std::string> checked_;
  std::map<InodeKey, std::set<NameKey>> links_;
  std::map<NameKey, InodeKey> byName_;
  std::set<NameKey> unexamined_;
  // Names that vanished as they were examined, their inode held open until their removal event (PinIfVanishing).
  std::map<NameKey, int> pinned_;
};

}  // namespace

std::unique_ptr<Backend> CreateInotifyBackend() { return std::make_unique<InotifyBackend>(); }

}  // namespace tidemark
