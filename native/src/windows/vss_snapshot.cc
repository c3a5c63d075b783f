// Volume Shadow Copy Service requestor (Windows only; compiled here with mingw-w64, never run here).
// The sequence is src/common/vss_flow.h (unit-tested with a fake); this file is its Api over
// IVssBackupComponents and the N-API face:
//   const s = new VssSession(); await s.create(['C:\\'])  → { setId, shadows: [{ volume, snapshotId, device }] }
//   await s.release()                                      → BackupComplete, then the shadow copies go
//   await vssDeleteSnapshots(['{guid}', …])                → { deleted, notFound, errors } (leftovers)
// The context is VSS_CTX_BACKUP without NO_AUTORELEASE: the shadow copies live while the session's
// IVssBackupComponents does, and Windows deletes them when the process dies, so a crash leaves none.
// COM work runs on the thread pool (each call initializes COM for its thread, multithreaded apartment).
#include "vss_snapshot.h"

#include <windows.h>
#include <objbase.h>
#include <vss.h>
#include <vswriter.h>
#include <vsbackup.h>

#include <string>
#include <vector>

#include "../common/vss_flow.h"

namespace tidemark {
namespace {

std::wstring Wide(const std::string &s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), &w[0], n);
  return w;
}

std::string Narrow(const wchar_t *w) {
  if (!w || !*w) return std::string();
  int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<size_t>(n > 0 ? n - 1 : 0), '\0');
  if (n > 1) WideCharToMultiByte(CP_UTF8, 0, w, -1, &s[0], n, nullptr, nullptr);
  return s;
}

std::string GuidText(const GUID &g) {
  wchar_t buf[64];
  if (StringFromGUID2(g, buf, 64) == 0) return std::string();
  return Narrow(buf);
}

bool ParseGuid(const std::string &s, GUID *g) {
  std::wstring w = Wide(s);
  return SUCCEEDED(CLSIDFromString(w.c_str(), g));
}

// Waits for an asynchronous VSS call and returns its final status.
HRESULT Wait(HRESULT started, IVssAsync *async) {
  if (FAILED(started)) {
    if (async) async->Release();
    return started;
  }
  HRESULT hr = async->Wait();
  HRESULT status = S_OK;
  if (SUCCEEDED(hr)) hr = async->QueryStatus(&status, nullptr);
  async->Release();
  if (FAILED(hr)) return hr;
  return FAILED(status) ? status : S_OK;
}

class ComScope {
 public:
  ComScope() : hr_(CoInitializeEx(nullptr, COINIT_MULTITHREADED)) {}
  ~ComScope() {
    if (SUCCEEDED(hr_)) CoUninitialize();
  }

 private:
  HRESULT hr_;
};

// The real Api of vss::TakeShadowCopies.
class ComVssApi {
 public:
  explicit ComVssApi(IVssBackupComponents **slot) : bc_(slot) {}
  vss::HResult Initialize() {
    HRESULT hr = CreateVssBackupComponents(bc_);
    if (FAILED(hr)) return hr;
    hr = (*bc_)->InitializeForBackup(nullptr);
    if (FAILED(hr)) return hr;
    hr = (*bc_)->SetContext(VSS_CTX_BACKUP);
    if (FAILED(hr)) return hr;
    // a copy backup: writers keep their own backup history (Tidemark is not their log-truncating backup)
    return (*bc_)->SetBackupState(false, false, VSS_BT_COPY, false);
  }
  vss::HResult GatherWriterMetadata() {
    IVssAsync *a = nullptr;
    HRESULT hr = Wait((*bc_)->GatherWriterMetadata(&a), a);
    // without writers' metadata the shadow copy is still crash-consistent: carry on
    return hr == static_cast<HRESULT>(VSS_E_WRITER_INFRASTRUCTURE) ? S_OK : hr;
  }
  vss::HResult StartSnapshotSet(std::string *setId) {
    VSS_ID id;
    HRESULT hr = (*bc_)->StartSnapshotSet(&id);
    if (SUCCEEDED(hr)) *setId = GuidText(id);
    return hr;
  }
  vss::HResult AddToSnapshotSet(const std::string &volume, std::string *snapshotId) {
    std::wstring w = Wide(volume);
    VSS_ID id;
    HRESULT hr = (*bc_)->AddToSnapshotSet(&w[0], GUID_NULL, &id);
    if (SUCCEEDED(hr)) *snapshotId = GuidText(id);
    return hr;
  }
  vss::HResult PrepareForBackup() {
    IVssAsync *a = nullptr;
    return Wait((*bc_)->PrepareForBackup(&a), a);
  }
  vss::HResult DoSnapshotSet() {
    IVssAsync *a = nullptr;
    return Wait((*bc_)->DoSnapshotSet(&a), a);
  }
  vss::HResult SnapshotDevice(const std::string &snapshotId, std::string *device) {
    GUID id;
    if (!ParseGuid(snapshotId, &id)) return E_INVALIDARG;
    VSS_SNAPSHOT_PROP prop;
    HRESULT hr = (*bc_)->GetSnapshotProperties(id, &prop);
    if (FAILED(hr)) return hr;
    *device = Narrow(prop.m_pwszSnapshotDeviceObject);
    VssFreeSnapshotProperties(&prop);
    return S_OK;
  }
  vss::HResult AbortBackup() { return (*bc_)->AbortBackup(); }

 private:
  IVssBackupComponents **bc_;
};

class VssSessionWrap;

class CreateWorker : public Napi::AsyncWorker {
 public:
  CreateWorker(Napi::Env env, VssSessionWrap *session, std::vector<std::string> volumes);
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error &e) override { deferred_.Reject(e.Value()); }
  Napi::Promise Promise() { return deferred_.Promise(); }

 private:
  Napi::Promise::Deferred deferred_;
  VssSessionWrap *session_;
  std::vector<std::string> volumes_;
  vss::SetResult result_;
};

class ReleaseWorker : public Napi::AsyncWorker {
 public:
  ReleaseWorker(Napi::Env env, IVssBackupComponents *bc)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), bc_(bc) {}
  void Execute() override {
    ComScope com;
    if (!bc_) return;
    IVssAsync *a = nullptr;
    HRESULT hr = Wait(bc_->BackupComplete(&a), a);
    bc_->Release();  // the auto-release shadow copies are deleted here
    bc_ = nullptr;
    if (FAILED(hr)) SetError("completing the backup: " + vss::ErrorText(hr));
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error &e) override { deferred_.Reject(e.Value()); }
  Napi::Promise Promise() { return deferred_.Promise(); }

 private:
  Napi::Promise::Deferred deferred_;
  IVssBackupComponents *bc_;
};

class VssSessionWrap : public Napi::ObjectWrap<VssSessionWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "VssSession",
                       {InstanceMethod("create", &VssSessionWrap::Create), InstanceMethod("release", &VssSessionWrap::Release)});
  }
  explicit VssSessionWrap(const Napi::CallbackInfo &info) : Napi::ObjectWrap<VssSessionWrap>(info) {}
  ~VssSessionWrap() override {
    if (bc_) {
      ComScope com;
      bc_->Release();
    }
  }
  IVssBackupComponents **Slot() { return &bc_; }
  bool busy = false;

 private:
  Napi::Value Create(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "create(volumes: string[])");
    if (bc_ || busy) throw Napi::Error::New(env, "this shadow copy session is already in use");
    Napi::Array a = info[0].As<Napi::Array>();
    std::vector<std::string> volumes;
    for (uint32_t i = 0; i < a.Length(); i++) {
      Napi::Value v = a.Get(i);
      if (!v.IsString()) throw Napi::TypeError::New(env, "volumes must be strings");
      volumes.push_back(v.As<Napi::String>().Utf8Value());
    }
    busy = true;
    Ref();  // kept alive until the worker finished
    auto *w = new CreateWorker(env, this, volumes);
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }
  Napi::Value Release(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (busy) throw Napi::Error::New(env, "the shadow copies are still being made");
    auto *w = new ReleaseWorker(env, bc_);
    bc_ = nullptr;
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }
  IVssBackupComponents *bc_ = nullptr;
};

CreateWorker::CreateWorker(Napi::Env env, VssSessionWrap *session, std::vector<std::string> volumes)
    : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), session_(session), volumes_(std::move(volumes)) {}

void CreateWorker::Execute() {
  ComScope com;
  ComVssApi api(session_->Slot());
  if (!vss::TakeShadowCopies(api, volumes_, &result_)) {
    IVssBackupComponents **slot = session_->Slot();
    if (*slot) {
      (*slot)->Release();  // drops whatever the aborted set made
      *slot = nullptr;
    }
    SetError("shadow copy: " + result_.error);
  }
}

void CreateWorker::OnOK() {
  Napi::Env env = Env();
  session_->busy = false;
  session_->Unref();
  Napi::Object o = Napi::Object::New(env);
  o.Set("setId", result_.setId);
  Napi::Array shadows = Napi::Array::New(env, result_.shadows.size());
  for (size_t i = 0; i < result_.shadows.size(); i++) {
    Napi::Object s = Napi::Object::New(env);
    s.Set("volume", result_.shadows[i].volume);
    s.Set("snapshotId", result_.shadows[i].snapshotId);
    s.Set("device", result_.shadows[i].device);
    shadows.Set(static_cast<uint32_t>(i), s);
  }
  o.Set("shadows", shadows);
  deferred_.Resolve(o);
}

class DeleteWorker : public Napi::AsyncWorker {
 public:
  DeleteWorker(Napi::Env env, std::vector<std::string> ids)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), ids_(std::move(ids)) {}
  void Execute() override {
    ComScope com;
    IVssBackupComponents *bc = nullptr;
    HRESULT hr = CreateVssBackupComponents(&bc);
    if (SUCCEEDED(hr)) hr = bc->InitializeForBackup(nullptr);
    if (SUCCEEDED(hr)) hr = bc->SetContext(VSS_CTX_ALL);
    if (FAILED(hr)) {
      if (bc) bc->Release();
      SetError("shadow copy: " + vss::ErrorText(hr));
      return;
    }
    for (const auto &s : ids_) {
      GUID id;
      if (!ParseGuid(s, &id)) {
        errors_.push_back(s + ": not a shadow copy ID");
        continue;
      }
      LONG deleted = 0;
      VSS_ID bad;
      hr = bc->DeleteSnapshots(id, VSS_OBJECT_SNAPSHOT, TRUE, &deleted, &bad);
      if (SUCCEEDED(hr)) deleted_.push_back(s);
      else if (hr == static_cast<HRESULT>(VSS_E_OBJECT_NOT_FOUND)) notFound_.push_back(s);
      else errors_.push_back(s + ": " + vss::ErrorText(hr));
    }
    bc->Release();
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto list = [&](const std::vector<std::string> &v) {
      Napi::Array a = Napi::Array::New(env, v.size());
      for (size_t i = 0; i < v.size(); i++) a.Set(static_cast<uint32_t>(i), v[i]);
      return a;
    };
    Napi::Object o = Napi::Object::New(env);
    o.Set("deleted", list(deleted_));
    o.Set("notFound", list(notFound_));
    o.Set("errors", list(errors_));
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error &e) override { deferred_.Reject(e.Value()); }
  Napi::Promise Promise() { return deferred_.Promise(); }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<std::string> ids_, deleted_, notFound_, errors_;
};

Napi::Value DeleteSnapshots(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "vssDeleteSnapshots(ids: string[])");
  Napi::Array a = info[0].As<Napi::Array>();
  std::vector<std::string> ids;
  for (uint32_t i = 0; i < a.Length(); i++) ids.push_back(a.Get(i).ToString().Utf8Value());
  auto *w = new DeleteWorker(env, ids);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace

void RegisterVss(Napi::Env env, Napi::Object exports) {
  exports.Set("VssSession", VssSessionWrap::Define(env));
  exports.Set("vssDeleteSnapshots", Napi::Function::New(env, DeleteSnapshots));
}

}  // namespace tidemark
