// Unit test of the VSS requestor's sequence (src/common/vss_flow.h) with a fake Api: the order of the
// calls, that a failure at any step after the set was started aborts the backup (VSS then drops what it
// made), error texts, and the shadow-copy path mapping. Built with the host compiler and run by
// tests/snapshot/vss.test.ts; the real COM Api (src/windows/vss_snapshot.cc) only compiles here.
#include <cstdio>
#include <string>
#include <vector>

#include "../src/common/vss_flow.h"

using namespace tidemark::vss;

static int failures = 0;
#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                                   \
    }                                                                               \
  } while (0)

struct FakeApi {
  std::vector<std::string> calls;
  std::string failAt;  // the call that fails
  HResult failWith = static_cast<HResult>(0x80042316u);
  int n = 0;
  HResult step(const std::string &name) {
    calls.push_back(name);
    return name == failAt ? failWith : 0;
  }
  HResult Initialize() { return step("Initialize"); }
  HResult GatherWriterMetadata() { return step("GatherWriterMetadata"); }
  HResult StartSnapshotSet(std::string *id) {
    *id = "{set}";
    return step("StartSnapshotSet");
  }
  HResult AddToSnapshotSet(const std::string &v, std::string *id) {
    *id = "{snap" + std::to_string(++n) + "}";
    return step("AddToSnapshotSet " + v);
  }
  HResult PrepareForBackup() { return step("PrepareForBackup"); }
  HResult DoSnapshotSet() { return step("DoSnapshotSet"); }
  HResult SnapshotDevice(const std::string &id, std::string *dev) {
    *dev = "\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy" + id.substr(5, 1);
    return step("SnapshotDevice " + id);
  }
  HResult AbortBackup() { return step("AbortBackup"); }
};

static bool has(const std::vector<std::string> &v, const std::string &s) {
  for (const auto &x : v)
    if (x == s) return true;
  return false;
}

int main() {
  {  // the whole sequence, two volumes (one given twice)
    FakeApi api;
    SetResult r;
    CHECK(TakeShadowCopies(api, {"C:\\", "D:\\", "C:\\"}, &r));
    std::vector<std::string> want = {"Initialize",   "GatherWriterMetadata", "StartSnapshotSet", "AddToSnapshotSet C:\\",
                                     "AddToSnapshotSet D:\\", "PrepareForBackup", "DoSnapshotSet", "SnapshotDevice {snap1}",
                                     "SnapshotDevice {snap2}"};
    CHECK(api.calls == want);
    CHECK(r.error.empty());
    CHECK(r.setId == "{set}");
    CHECK(r.shadows.size() == 2);
    CHECK(r.shadows[0].volume == "C:\\" && r.shadows[0].device == "\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy1");
    CHECK(r.shadows[1].volume == "D:\\" && r.shadows[1].snapshotId == "{snap2}");
  }
  // a failure before the set started aborts nothing; after it, the backup is aborted and nothing is returned
  const char *steps[] = {"Initialize", "GatherWriterMetadata", "StartSnapshotSet", "AddToSnapshotSet C:\\",
                         "PrepareForBackup", "DoSnapshotSet", "SnapshotDevice {snap1}"};
  for (int i = 0; i < 7; i++) {
    FakeApi api;
    api.failAt = steps[i];
    SetResult r;
    CHECK(!TakeShadowCopies(api, {"C:\\"}, &r));
    CHECK(r.shadows.empty());
    CHECK(r.error.find("VSS_E_SNAPSHOT_SET_IN_PROGRESS") != std::string::npos);
    CHECK(has(api.calls, "AbortBackup") == (i >= 3));
    CHECK(api.calls.back() == (i >= 3 ? "AbortBackup" : steps[i]));
  }
  {  // error texts: known names, and the code for the rest
    CHECK(ErrorText(static_cast<HResult>(0x80070005u)).find("administrator") != std::string::npos);
    CHECK(ErrorText(static_cast<HResult>(0x8004230Cu)).find("VSS_E_VOLUME_NOT_SUPPORTED") != std::string::npos);
    CHECK(ErrorText(static_cast<HResult>(0x80004005u)) == "HRESULT 0x80004005");
  }
  {  // only volume roots are taken
    FakeApi api;
    SetResult r;
    CHECK(!TakeShadowCopies(api, {"C:\\Users"}, &r));
    CHECK(api.calls.empty());
    CHECK(r.error == "not a volume root: C:\\Users");
    CHECK(IsVolumeRoot("\\\\?\\Volume{0b6ec7f4-1c7a-4a4e-9c59-6c1f0f8a3f11}\\"));
    CHECK(!IsVolumeRoot("\\\\server\\share\\"));
  }
  {  // paths inside the shadow copy
    std::string dev = "\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy7";
    CHECK(ShadowPath(dev, "C:\\", "C:\\Users\\ann\\mail.pst") == dev + "\\Users\\ann\\mail.pst");
    CHECK(ShadowPath(dev, "C:\\", "C:\\") == dev + "\\");
    CHECK(ShadowPath(dev + "\\", "D:\\", "D:\\x") == dev + "\\x");
  }
  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all VSS unit tests passed\n");
  return 0;
}
