// Volume Shadow Copy sessions for the JavaScript side (engine/snapshot/windows): see vss_snapshot.cc.
#pragma once
#include <napi.h>

namespace tidemark {
// Adds VssSession (create(volumes) → Promise, release() → Promise) and vssDeleteSnapshots(ids) → Promise.
void RegisterVss(Napi::Env env, Napi::Object exports);
}  // namespace tidemark
