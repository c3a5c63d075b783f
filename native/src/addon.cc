// N-API face of the change tracker. JavaScript sees:
//   backends(): string[]                                 backends compiled into this build
//   new Tracker(backend, roots, onBatch, batchMillis?, resume?)
//                                                        onBatch({dirtyDirs, dirtyTrees, lost, broken, flushToken, events, position})
//   tracker.start() (throws with the reason when the backend cannot run; the first batch then says
//   `ready` or `broken`), tracker.stop(), tracker.flush(token)
//   parseUsnRecords(buffer, hasNextUsnHeader)            the platform-neutral USN record parser (for tests)
// Batches travel from the backend's reader thread through a ThreadSafeFunction. Every entry point
// catches C++ exceptions and turns them into JS errors, so none crosses into JS unhandled.
#include <napi.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/usn_record.h"
#include "common/vss_flow.h"
#if defined(_WIN32)
#include "windows/vss_snapshot.h"
#endif

namespace {

using tidemark::Backend;
using tidemark::Batch;

template <typename F>
Napi::Value Guard(const Napi::Env &env, F &&fn) {
  try {
    return fn();
  } catch (const Napi::Error &) {
    throw;
  } catch (const std::exception &e) {
    throw Napi::Error::New(env, std::string("tidemark tracker: ") + e.what());
  } catch (...) {
    throw Napi::Error::New(env, "tidemark tracker: unknown native error");
  }
}

Napi::Array ToArray(Napi::Env env, const std::vector<std::string> &v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); i++) a.Set(static_cast<uint32_t>(i), Napi::String::New(env, v[i]));
  return a;
}

void DeliverBatch(Napi::Env env, Napi::Function callback, Batch *raw) {
  std::unique_ptr<Batch> b(raw);
  if (env == nullptr || callback.IsEmpty()) return;
  try {
    Napi::Object o = Napi::Object::New(env);
    o.Set("dirtyDirs", ToArray(env, b->dirtyDirs));
    o.Set("dirtyTrees", ToArray(env, b->dirtyTrees));
    if (!b->lost.empty()) o.Set("lost", b->lost);
    if (!b->broken.empty()) o.Set("broken", b->broken);
    o.Set("flushToken", Napi::Number::New(env, static_cast<double>(b->flushToken)));
    o.Set("events", Napi::Number::New(env, static_cast<double>(b->events)));
    if (!b->position.empty()) o.Set("position", b->position);
    if (b->ready) o.Set("ready", true);
    callback.Call({o});
  } catch (const Napi::Error &e) {
    // The JS side wraps its handler; an exception here is a bug there. Report, never crash.
    fprintf(stderr, "tidemark tracker: batch handler threw: %s\n", e.Message().c_str());
  } catch (const std::exception &e) {
    fprintf(stderr, "tidemark tracker: delivering a batch failed: %s\n", e.what());
  }
}

class TrackerWrap : public Napi::ObjectWrap<TrackerWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Tracker",
                       {InstanceMethod("start", &TrackerWrap::Start), InstanceMethod("stop", &TrackerWrap::Stop),
                        InstanceMethod("flush", &TrackerWrap::Flush)});
  }

  explicit TrackerWrap(const Napi::CallbackInfo &info) : Napi::ObjectWrap<TrackerWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsFunction())
      throw Napi::TypeError::New(env, "Tracker(backend: string, roots: string[], onBatch: function, batchMillis?)");
    backendName_ = info[0].As<Napi::String>().Utf8Value();
    Napi::Array roots = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < roots.Length(); i++) {
      Napi::Value r = roots.Get(i);
      if (!r.IsString()) throw Napi::TypeError::New(env, "roots must be strings");
      opts_.roots.push_back(r.As<Napi::String>().Utf8Value());
    }
    if (opts_.roots.empty()) throw Napi::TypeError::New(env, "at least one root is required");
    if (info.Length() > 3 && info[3].IsNumber()) opts_.batchMillis = info[3].As<Napi::Number>().Int32Value();
    if (info.Length() > 4 && info[4].IsString()) opts_.resume = info[4].As<Napi::String>().Utf8Value();
    callback_ = Napi::Persistent(info[2].As<Napi::Function>());
  }

  ~TrackerWrap() override { Shutdown(); }

 private:
  Napi::Value Start(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    return Guard(env, [&]() -> Napi::Value {
      if (backend_) throw Napi::Error::New(env, "tracker already started");
      std::unique_ptr<Backend> backend = tidemark::CreateBackend(backendName_);
      if (!backend) throw Napi::Error::New(env, "backend '" + backendName_ + "' is not available on this platform");
      tsfn_ = Napi::ThreadSafeFunction::New(env, callback_.Value(), "tidemark-tracker", 0, 1);
      Napi::ThreadSafeFunction tsfn = tsfn_;
      auto sink = [tsfn](Batch &&b) mutable {
        Batch *p = new Batch(std::move(b));
        if (tsfn.NonBlockingCall(p, DeliverBatch) != napi_ok) delete p;
      };
      std::string error;
      if (!backend->Start(opts_, sink, error)) {
        tsfn_.Release();
        tsfn_ = Napi::ThreadSafeFunction();
        throw Napi::Error::New(env, error.empty() ? "cannot start " + backendName_ : error);
      }
      backend_ = std::move(backend);
      Ref();
      return env.Undefined();
    });
  }

  Napi::Value Stop(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    return Guard(env, [&]() -> Napi::Value {
      bool wasRunning = backend_ != nullptr;
      Shutdown();
      if (wasRunning) Unref();
      return env.Undefined();
    });
  }

  Napi::Value Flush(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    return Guard(env, [&]() -> Napi::Value {
      if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "flush(token: number)");
      if (!backend_) throw Napi::Error::New(env, "tracker is not running");
      backend_->Flush(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
      return env.Undefined();
    });
  }

  void Shutdown() {
    if (backend_) {
      backend_->Stop();  // joins the reader: no sink call after this
      backend_.reset();
      tsfn_.Release();
      tsfn_ = Napi::ThreadSafeFunction();
    }
  }

  std::string backendName_;
  tidemark::BackendOptions opts_;
  Napi::FunctionReference callback_;
  Napi::ThreadSafeFunction tsfn_;
  std::unique_ptr<Backend> backend_;
};

std::string RefHex(const tidemark::usn::FileRef &r) {
  char buf[40];
  snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(r.high),
           static_cast<unsigned long long>(r.low));
  return buf;
}

Napi::Value ParseUsnRecords(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  return Guard(env, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsBuffer()) throw Napi::TypeError::New(env, "parseUsnRecords(buffer, hasHeader?)");
    auto buf = info[0].As<Napi::Buffer<uint8_t>>();
    bool header = info.Length() > 1 && info[1].ToBoolean().Value();
    tidemark::usn::ParseResult res = tidemark::usn::Parse(buf.Data(), buf.Length(), header);
    Napi::Object out = Napi::Object::New(env);
    out.Set("nextUsn", Napi::BigInt::New(env, res.nextUsn));
    out.Set("skipped", Napi::Number::New(env, static_cast<double>(res.skipped)));
    if (!res.error.empty()) out.Set("error", res.error);
    Napi::Array recs = Napi::Array::New(env, res.records.size());
    for (size_t i = 0; i < res.records.size(); i++) {
      const auto &r = res.records[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("majorVersion", r.majorVersion);
      o.Set("minorVersion", r.minorVersion);
      o.Set("fileRef", RefHex(r.file));
      o.Set("parentRef", RefHex(r.parent));
      o.Set("usn", Napi::BigInt::New(env, r.usn));
      o.Set("timestamp", Napi::BigInt::New(env, r.timestamp));
      o.Set("reason", Napi::Number::New(env, r.reason));
      o.Set("sourceInfo", Napi::Number::New(env, r.sourceInfo));
      o.Set("securityId", Napi::Number::New(env, r.securityId));
      o.Set("attributes", Napi::Number::New(env, r.attributes));
      o.Set("isDirectory", r.IsDirectory());
      o.Set("name", r.name);
      recs.Set(static_cast<uint32_t>(i), o);
    }
    out.Set("records", recs);
    return out;
  });
}

// The shadow-copy path mapping and error texts of src/common/vss_flow.h (the same code on every OS).
Napi::Value VssShadowPath(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString())
    throw Napi::TypeError::New(env, "vssShadowPath(device, volumeRoot, path)");
  return Napi::String::New(env, tidemark::vss::ShadowPath(info[0].As<Napi::String>().Utf8Value(),
                                                          info[1].As<Napi::String>().Utf8Value(),
                                                          info[2].As<Napi::String>().Utf8Value()));
}

Napi::Value VssErrorText(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "vssErrorText(hresult)");
  return Napi::String::New(env, tidemark::vss::ErrorText(static_cast<tidemark::vss::HResult>(
                                    static_cast<uint32_t>(info[0].As<Napi::Number>().Int64Value()))));
}

Napi::Value Backends(const Napi::CallbackInfo &info) {
  std::vector<std::string> names;
#if defined(__linux__)
  names = {"fanotify", "inotify"};
#elif defined(_WIN32)
  names = {"usn"};
#endif
  return ToArray(info.Env(), names);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("Tracker", TrackerWrap::Define(env));
  exports.Set("parseUsnRecords", Napi::Function::New(env, ParseUsnRecords));
  exports.Set("backends", Napi::Function::New(env, Backends));
  exports.Set("vssShadowPath", Napi::Function::New(env, VssShadowPath));
  exports.Set("vssErrorText", Napi::Function::New(env, VssErrorText));
#if defined(_WIN32)
  tidemark::RegisterVss(env, exports);
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(tidemark_tracker, Init)
