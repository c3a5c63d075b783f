// Unit tests of the platform-neutral C++ (USN record parser, event coalescer), built with the host
// compiler and run by tests/tracking/usn.test.ts. Exit status 0 = all passed; failures are printed.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../src/common/batch.h"
#include "../src/common/usn_record.h"

using namespace tidemark;

static int failures = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                          \
    }                                                                      \
  } while (0)

static void Put16(std::vector<uint8_t> &b, size_t off, uint16_t v) {
  b[off] = v & 0xff;
  b[off + 1] = v >> 8;
}
static void Put32(std::vector<uint8_t> &b, size_t off, uint32_t v) {
  Put16(b, off, v & 0xffff);
  Put16(b, off + 2, v >> 16);
}
static void Put64(std::vector<uint8_t> &b, size_t off, uint64_t v) {
  Put32(b, off, static_cast<uint32_t>(v));
  Put32(b, off + 4, static_cast<uint32_t>(v >> 32));
}

// Appends a V2 or V3 record with a UTF-16 name.
static void AddRecord(std::vector<uint8_t> &b, int major, uint64_t file, uint64_t parent, int64_t usn, uint32_t reason,
                      uint32_t attrs, const std::u16string &name) {
  size_t fixed = major == 2 ? 60 : 76;
  size_t len = (fixed + name.size() * 2 + 7) & ~size_t(7);
  size_t off = b.size();
  b.resize(off + len, 0);
  Put32(b, off, static_cast<uint32_t>(len));
  Put16(b, off + 4, static_cast<uint16_t>(major));
  size_t q;
  if (major == 2) {
    Put64(b, off + 8, file);
    Put64(b, off + 16, parent);
    q = 24;
  } else {
    Put64(b, off + 8, file);
    Put64(b, off + 16, 0x1111);
    Put64(b, off + 24, parent);
    Put64(b, off + 32, 0);
    q = 40;
  }
  Put64(b, off + q, static_cast<uint64_t>(usn));
  Put64(b, off + q + 8, 132000000000000000ULL);
  Put32(b, off + q + 16, reason);
  Put32(b, off + q + 28, attrs);
  Put16(b, off + q + 32, static_cast<uint16_t>(name.size() * 2));
  Put16(b, off + q + 34, static_cast<uint16_t>(fixed));
  for (size_t i = 0; i < name.size(); i++) Put16(b, off + fixed + 2 * i, name[i]);
}

static void TestUsn() {
  std::vector<uint8_t> b(8, 0);
  Put64(b, 0, 4096);
  AddRecord(b, 2, 0x0005000000001234ULL, 0x0005000000000005ULL, 100, usn::kFileCreate | usn::kClose, 0x20, u"report.docx");
  AddRecord(b, 3, 77, 5, 200, usn::kRenameNewName, usn::kFileAttributeDirectory, u"Caf\u00e9 \U0001F600");
  auto r = usn::Parse(b.data(), b.size(), true);
  CHECK(r.error.empty());
  CHECK(r.nextUsn == 4096);
  CHECK(r.records.size() == 2);
  if (r.records.size() == 2) {
    CHECK(r.records[0].majorVersion == 2);
    CHECK(r.records[0].file.low == 0x0005000000001234ULL && r.records[0].file.high == 0);
    CHECK(r.records[0].parent.low == 0x0005000000000005ULL);
    CHECK(r.records[0].usn == 100);
    CHECK(r.records[0].name == "report.docx");
    CHECK(!r.records[0].IsDirectory());
    CHECK(r.records[1].majorVersion == 3);
    CHECK(r.records[1].file.high == 0x1111);
    CHECK(r.records[1].IsDirectory());
    CHECK(r.records[1].name == "Caf\xc3\xa9 \xf0\x9f\x98\x80");
  }
  // truncated: the second record's length points past the end
  auto t = usn::Parse(b.data(), b.size() - 8, true);
  CHECK(!t.error.empty());
  CHECK(t.records.size() == 1);
  // a name offset outside the record is rejected
  std::vector<uint8_t> bad(8, 0);
  AddRecord(bad, 2, 1, 2, 3, 0, 0, u"x");
  Put16(bad, 8 + 58, 250);
  CHECK(!usn::Parse(bad.data(), bad.size(), true).error.empty());
  // unpaired surrogate → U+FFFD
  std::vector<uint8_t> sur(4);
  Put16(sur, 0, 0xD800);
  Put16(sur, 2, 'a');
  CHECK(usn::Utf16ToUtf8(sur.data(), 2) == "\xef\xbf\xbd" "a");
  // too short for the header
  CHECK(!usn::Parse(b.data(), 4, true).error.empty());
}

static void TestCoalescer() {
  Coalescer c({"/home/ann/docs/", "/srv/data"});
  c.MarkEntry("/home/ann/docs/a", "f", false, false);
  c.MarkEntry("/home/ann/docs", "newdir", true, true);
  c.MarkEntry("/home/ann/docsx", "f", false, false);   // a sibling with a common prefix
  c.MarkEntry("/home/ann", "docs", true, false);       // the root itself renamed/deleted
  c.MarkSelf("/home/ann/docs/a");                       // chmod of a directory
  c.MarkSelf("/srv/data");                              // chmod of a root
  c.MarkDir("/elsewhere");
  Batch b = c.Take();
  std::vector<std::string> dirs = {"/home/ann/docs", "/home/ann/docs/a", "/srv/data"};
  std::vector<std::string> trees = {"/home/ann/docs", "/home/ann/docs/newdir"};
  CHECK(b.dirtyDirs == dirs);
  CHECK(b.dirtyTrees == trees);
  CHECK(c.Empty());
  Coalescer w({"C:\\Users\\ann"}, '\\');
  w.MarkEntry("C:\\Users\\ann\\Documents", "x.txt", false, false);
  w.MarkEntry("C:\\Users\\annex", "x.txt", false, false);
  Batch wb = w.Take();
  CHECK(wb.dirtyDirs.size() == 1 && wb.dirtyDirs[0] == "C:\\Users\\ann\\Documents");
}

int main() {
  TestUsn();
  TestCoalescer();
  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all native unit tests passed\n");
  return 0;
}
