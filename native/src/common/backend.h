// The interface every OS backend implements. A backend owns one reader thread that turns kernel
// events into coalesced Batches and hands them to a BatchSink (which is thread-safe). Backends never
// throw out of their thread: failures become Batch::broken.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "batch.h"

namespace tidemark {

struct BackendOptions {
  std::vector<std::string> roots;
  // Longest time events wait in the reader before a batch is emitted.
  int batchMillis = 50;
  // Where to resume reading, as a previous Batch::position reported it (backends whose kernel
  // journal outlives the process: the USN journal). Empty: start at the journal's current end.
  std::string resume;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Sets up the kernel side (marks/watches) synchronously; returns false with `error` set when the
  // backend cannot run here (missing privilege, unsupported filesystem, ...). Starts the reader.
  virtual bool Start(const BackendOptions &opts, BatchSink sink, std::string &error) = 0;
  // Stops the reader thread and releases kernel resources. Idempotent.
  virtual void Stop() = 0;
  // Asks the reader to emit a batch carrying `token` once every event queued so far is folded in.
  virtual void Flush(uint64_t token) = 0;
  virtual const char *Name() const = 0;
};

// Factory by name ("fanotify", "inotify", "usn"); nullptr when not available on this platform.
std::unique_ptr<Backend> CreateBackend(const std::string &name);

}  // namespace tidemark
