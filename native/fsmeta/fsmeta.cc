// File metadata calls Node does not offer with full precision: set access/modification times in
// nanoseconds (utimensat), optionally without following a symlink. Synchronous: one syscall each.
#include <napi.h>
#ifndef _WIN32
#include <fcntl.h>
#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <string>
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
  auto buf = info[0].As<Napi::Buffer<char>>();
  std::string path(buf.Data(), buf.Length());
  if (path.find('\0') != std::string::npos) {
    Napi::TypeError::New(env, "path contains NUL").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool lossless = true;
  int64_t a = info[1].As<Napi::BigInt>().Int64Value(&lossless);
  int64_t m = info[2].As<Napi::BigInt>().Int64Value(&lossless);
  struct timespec ts[2];
  ts[0].tv_sec = a / 1000000000LL;
  ts[0].tv_nsec = a % 1000000000LL;
  ts[1].tv_sec = m / 1000000000LL;
  ts[1].tv_nsec = m % 1000000000LL;
  for (auto& t : ts) {
    if (t.tv_nsec < 0) {
      t.tv_nsec += 1000000000LL;
      t.tv_sec -= 1;
    }
  }
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

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("setTimes", Napi::Function::New(env, SetTimes));
  return exports;
}

NODE_API_MODULE(tidemark_fsmeta, Init)
