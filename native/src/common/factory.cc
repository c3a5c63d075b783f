// Chooses the compiled-in backends by name; the TypeScript side decides the order of preference.
#include "backend.h"

namespace tidemark {

#if defined(__linux__)
std::unique_ptr<Backend> CreateFanotifyBackend();
std::unique_ptr<Backend> CreateInotifyBackend();
#elif defined(_WIN32)
std::unique_ptr<Backend> CreateUsnBackend();
#endif

std::unique_ptr<Backend> CreateBackend(const std::string &name) {
#if defined(__linux__)
  if (name == "fanotify") return CreateFanotifyBackend();
  if (name == "inotify") return CreateInotifyBackend();
#elif defined(_WIN32)
  if (name == "usn") return CreateUsnBackend();
#endif
  (void)name;
  return nullptr;
}

}  // namespace tidemark
