// The Volume Shadow Copy (VSS) requestor's sequence, apart from COM so that it is unit-tested on any OS
// (test/vss_test.cc drives it with a fake). src/windows/vss_snapshot.cc supplies the real Api over
// IVssBackupComponents. The sequence: initialize for backup (auto-release context: the shadow copies go
// away when the session is released or the process dies), gather writer metadata (so writers such as
// SQL Server or Exchange flush and freeze), start a set, add each volume, prepare, do the snapshot set,
// read each shadow copy's device; on any failure after the set was started, abort the backup so VSS
// drops what it made. A shadow copy's files are read through its device path:
// \\?\GLOBALROOT\Device\HarddiskVolumeShadowCopyN\<path below the volume root>.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tidemark {
namespace vss {

using HResult = int32_t;

inline bool Failed(HResult hr) { return hr < 0; }

// Names of the HRESULTs a backup meets most, with what the user can do.
inline std::string ErrorText(HResult hr) {
  switch (static_cast<uint32_t>(hr)) {
    case 0x80070005u: return "access denied (E_ACCESSDENIED): shadow copies need an administrator (run Tidemark elevated)";
    case 0x80042301u: return "VSS_E_BAD_STATE: the shadow copy service was called out of order";
    case 0x80042306u: return "VSS_E_PROVIDER_VETO: the shadow copy provider refused (see the System event log)";
    case 0x80042308u: return "VSS_E_OBJECT_NOT_FOUND: no such shadow copy";
    case 0x8004230Cu: return "VSS_E_VOLUME_NOT_SUPPORTED: this volume has no shadow copies (not NTFS/ReFS, or removable)";
    case 0x8004230Fu: return "VSS_E_UNEXPECTED_PROVIDER_ERROR: the shadow copy provider failed";
    case 0x80042312u: return "VSS_E_MAXIMUM_NUMBER_OF_VOLUMES_REACHED: too many volumes in one shadow copy set";
    case 0x80042313u: return "VSS_E_FLUSH_WRITES_TIMEOUT: the system could not flush writes in time (try again when the disk is less busy)";
    case 0x80042314u: return "VSS_E_HOLD_WRITES_TIMEOUT: the system could not hold writes in time (try again)";
    case 0x80042316u: return "VSS_E_SNAPSHOT_SET_IN_PROGRESS: another shadow copy is being made (try again)";
    case 0x80042317u: return "VSS_E_MAXIMUM_NUMBER_OF_SNAPSHOTS_REACHED: the volume has as many shadow copies as it can hold";
    case 0x8004231Fu: return "VSS_E_INSUFFICIENT_STORAGE: not enough free space for the shadow copy storage area";
    case 0x80042326u: return "VSS_E_UNSUPPORTED_CONTEXT: this Windows edition does not support the shadow copy context";
    default: {
      char buf[48];
      std::snprintf(buf, sizeof buf, "HRESULT 0x%08X", static_cast<unsigned>(static_cast<uint32_t>(hr)));
      return buf;
    }
  }
}

// A volume as VSS takes it: a drive root "C:\" or a volume GUID path "\\?\Volume{…}\".
inline bool IsVolumeRoot(const std::string &v) {
  if (v.size() == 3 && ((v[0] >= 'A' && v[0] <= 'Z') || (v[0] >= 'a' && v[0] <= 'z')) && v[1] == ':' && v[2] == '\\')
    return true;
  return v.rfind("\\\\?\\Volume{", 0) == 0 && v.back() == '\\';
}

// Where `path` (on the volume `volumeRoot`) is read inside the shadow copy whose device is `device`.
inline std::string ShadowPath(const std::string &device, const std::string &volumeRoot, const std::string &path) {
  std::string rest = path.size() > volumeRoot.size() ? path.substr(volumeRoot.size()) : "";
  std::string dev = device;
  if (!dev.empty() && dev.back() == '\\') dev.pop_back();
  return rest.empty() ? dev + "\\" : dev + "\\" + rest;
}

struct Shadow {
  std::string volume;
  std::string snapshotId;
  std::string device;
};

struct SetResult {
  std::string setId;
  std::vector<Shadow> shadows;
  std::string error;  // empty on success: "<step>: <ErrorText>"
};

// The steps a requestor takes, each returning an HRESULT (asynchronous ones wait inside).
//   struct Api {
//     HResult Initialize();                                    // create, InitializeForBackup, SetContext, SetBackupState
//     HResult GatherWriterMetadata();
//     HResult StartSnapshotSet(std::string *setId);
//     HResult AddToSnapshotSet(const std::string &volume, std::string *snapshotId);
//     HResult PrepareForBackup();
//     HResult DoSnapshotSet();
//     HResult SnapshotDevice(const std::string &snapshotId, std::string *device);
//     HResult AbortBackup();
//   };
template <typename Api>
bool TakeShadowCopies(Api &api, const std::vector<std::string> &volumes, SetResult *out) {
  auto fail = [&](const char *step, HResult hr, bool started) {
    out->error = std::string(step) + ": " + ErrorText(hr);
    out->shadows.clear();
    if (started) api.AbortBackup();
    return false;
  };
  std::vector<std::string> unique;
  for (const auto &v : volumes) {
    if (!IsVolumeRoot(v)) {
      out->error = "not a volume root: " + v;
      return false;
    }
    bool seen = false;
    for (const auto &u : unique) seen = seen || u == v;
    if (!seen) unique.push_back(v);
  }
  if (unique.empty()) {
    out->error = "no volumes given";
    return false;
  }
  HResult hr = api.Initialize();
  if (Failed(hr)) return fail("initializing the backup", hr, false);
  hr = api.GatherWriterMetadata();
  if (Failed(hr)) return fail("asking the writers", hr, false);
  hr = api.StartSnapshotSet(&out->setId);
  if (Failed(hr)) return fail("starting a shadow copy set", hr, false);
  for (const auto &v : unique) {
    Shadow s;
    s.volume = v;
    hr = api.AddToSnapshotSet(v, &s.snapshotId);
    if (Failed(hr)) return fail(("adding " + v).c_str(), hr, true);
    out->shadows.push_back(s);
  }
  hr = api.PrepareForBackup();
  if (Failed(hr)) return fail("preparing the backup", hr, true);
  hr = api.DoSnapshotSet();
  if (Failed(hr)) return fail("making the shadow copies", hr, true);
  for (auto &s : out->shadows) {
    hr = api.SnapshotDevice(s.snapshotId, &s.device);
    if (Failed(hr) || s.device.empty()) return fail(("reading the shadow copy of " + s.volume).c_str(), hr, true);
  }
  return true;
}

}  // namespace vss
}  // namespace tidemark
