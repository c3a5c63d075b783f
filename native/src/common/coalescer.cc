#include "batch.h"

#include <utility>

namespace tidemark {

Coalescer::Coalescer(std::vector<std::string> roots, char sep) : roots_(std::move(roots)), sep_(sep) {
  for (auto &r : roots_) {
    while (r.size() > 1 && r.back() == sep_) r.pop_back();
  }
}

bool Coalescer::IsUnder(const std::string &path, const std::string &root) const {
  if (path.size() < root.size() || path.compare(0, root.size(), root) != 0) return false;
  if (path.size() == root.size()) return true;
  if (root.size() == 1 && root[0] == sep_) return true;  // root is "/"
  return path[root.size()] == sep_;
}

bool Coalescer::InRoots(const std::string &path) const {
  for (const auto &r : roots_)
    if (IsUnder(path, r)) return true;
  return false;
}

std::string Coalescer::Join(const std::string &dir, const std::string &name) const {
  if (!dir.empty() && dir.back() == sep_) return dir + name;
  return dir + sep_ + name;
}

std::string Coalescer::Parent(const std::string &path) const {
  auto pos = path.find_last_of(sep_);
  if (pos == std::string::npos) return path;
  if (pos == 0) return path.substr(0, 1);
  return path.substr(0, pos);
}

void Coalescer::MarkDir(const std::string &dir) {
  if (InRoots(dir)) dirs_.insert(dir);
}

void Coalescer::MarkTree(const std::string &dir) {
  if (InRoots(dir)) trees_.insert(dir);
}

void Coalescer::MarkEntry(const std::string &dir, const std::string &name, bool isDir, bool wholeTree) {
  if (InRoots(dir)) {
    dirs_.insert(dir);
    if (isDir && wholeTree) trees_.insert(Join(dir, name));
    return;
  }
  // `dir` is outside the roots; the entry may still be a root or an ancestor of one (a root was
  // renamed away, deleted or re-created). Every root under it is then unknown territory.
  std::string full = Join(dir, name);
  for (const auto &r : roots_)
    if (IsUnder(r, full)) trees_.insert(r);
}

void Coalescer::MarkSelf(const std::string &dir) {
  if (!InRoots(dir)) return;
  std::string parent = Parent(dir);
  if (InRoots(parent) && parent != dir)
    dirs_.insert(parent);
  else
    dirs_.insert(dir);  // a root's own metadata: the scanner re-reads the roots themselves
}

Batch Coalescer::Take() {
  Batch b;
  b.dirtyDirs.assign(dirs_.begin(), dirs_.end());
  b.dirtyTrees.assign(trees_.begin(), trees_.end());
  b.lost = std::move(lost_);
  b.events = events_;
  dirs_.clear();
  trees_.clear();
  lost_.clear();
  events_ = 0;
  return b;
}

}  // namespace tidemark
