// A coalesced batch of change events, as handed from a backend's reader thread to JavaScript.
// Backends never pass raw events across the thread boundary: they fold them into the set of
// directories whose listing changed (dirtyDirs) and directories whose whole subtree was not seen
// (dirtyTrees), already filtered to the job's source roots.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace tidemark {

struct Batch {
  std::vector<std::string> dirtyDirs;
  std::vector<std::string> dirtyTrees;
  // Events were lost (queue overflow) or a change could not be located (e.g. the link count of a
  // hard-linked file changed): the journal cannot prove continuity past this batch. Recoverable by
  // the next full scan.
  std::string lost;
  // The backend stopped working (watch limit, root removed, read error): nothing after this batch
  // is tracked until the tracker is restarted.
  std::string broken;
  // The backend finished setting up (e.g. the initial inotify walk) and tracks every root from now on.
  // The first batch of every backend carries it (or `broken`).
  bool ready = false;
  // Non-zero when this batch answers a flush request (every event queued before the request is in
  // this batch or an earlier one).
  uint64_t flushToken = 0;
  // Raw kernel/journal events folded into this batch (for statistics).
  uint64_t events = 0;
  // Resumable backends: the position every event before which is in this or an earlier batch
  // (USN: "C:|journalId|nextUsn;D:|..."). Empty for backends that cannot resume.
  std::string position;
};

using BatchSink = std::function<void(Batch &&)>;

// Folds events into dirty sets, filtering to the source roots. Paths are absolute, without a
// trailing slash (except "/"), in the platform's separator.
class Coalescer {
 public:
  explicit Coalescer(std::vector<std::string> roots, char sep = '/');

  // The listing of `dir` changed (an entry was created, deleted, renamed, or changed content or
  // metadata). Ignored unless `dir` is inside a root.
  void MarkDir(const std::string &dir);
  // An entry `name` of `dir` changed. When `isDir` and `wholeTree` (created / moved in), its subtree
  // is marked too. Handles events on the ancestors of a root (a root renamed, deleted or re-created).
  void MarkEntry(const std::string &dir, const std::string &name, bool isDir, bool wholeTree);
  // The directory `dir` itself changed metadata: its parent's listing changed.
  void MarkSelf(const std::string &dir);
  void MarkTree(const std::string &dir);
  void Lost(const std::string &reason) {
    if (lost_.empty()) lost_ = reason;
  }
  void CountEvent() { events_++; }

  bool InRoots(const std::string &path) const;
  bool Empty() const { return dirs_.empty() && trees_.empty() && lost_.empty(); }
  Batch Take();

  std::string Join(const std::string &dir, const std::string &name) const;
  std::string Parent(const std::string &path) const;

 private:
  bool IsUnder(const std::string &path, const std::string &root) const;
  std::vector<std::string> roots_;
  char sep_;
  std::set<std::string> dirs_, trees_;
  std::string lost_;
  uint64_t events_ = 0;
};

}  // namespace tidemark
