// Platform-neutral parser for NTFS USN change-journal records (USN_RECORD_V2 / USN_RECORD_V3), as
// returned by FSCTL_READ_USN_JOURNAL (an 8-byte next-USN followed by records). Compiled on every
// platform so it is unit-tested on synthetic buffers; the Windows backend uses it on real ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tidemark {
namespace usn {

// USN reason flags (winioctl.h values).
enum : uint32_t {
  kDataOverwrite = 0x00000001,
  kDataExtend = 0x00000002,
  kDataTruncation = 0x00000004,
  kNamedDataOverwrite = 0x00000010,
  kNamedDataExtend = 0x00000020,
  kNamedDataTruncation = 0x00000040,
  kFileCreate = 0x00000100,
  kFileDelete = 0x00000200,
  kEaChange = 0x00000400,
  kSecurityChange = 0x00000800,
  kRenameOldName = 0x00001000,
  kRenameNewName = 0x00002000,
  kIndexableChange = 0x00004000,
  kBasicInfoChange = 0x00008000,
  kHardLinkChange = 0x00010000,
  kCompressionChange = 0x00020000,
  kEncryptionChange = 0x00040000,
  kObjectIdChange = 0x00080000,
  kReparsePointChange = 0x00100000,
  kStreamChange = 0x00200000,
  kClose = 0x80000000,
};
constexpr uint32_t kFileAttributeDirectory = 0x10;

// A 128-bit file reference (V3); V2's 64-bit references are zero-extended (high = 0).
struct FileRef {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const FileRef &o) const { return low == o.low && high == o.high; }
  bool operator<(const FileRef &o) const { return high < o.high || (high == o.high && low < o.low); }
};

struct Record {
  uint16_t majorVersion = 0;
  uint16_t minorVersion = 0;
  FileRef file;
  FileRef parent;
  int64_t usn = 0;
  int64_t timestamp = 0;  // FILETIME (100 ns since 1601)
  uint32_t reason = 0;
  uint32_t sourceInfo = 0;
  uint32_t securityId = 0;
  uint32_t attributes = 0;
  std::string name;  // UTF-8
  bool IsDirectory() const { return (attributes & kFileAttributeDirectory) != 0; }
};

struct ParseResult {
  std::vector<Record> records;
  int64_t nextUsn = 0;
  // Non-empty when the buffer was malformed; records before the bad one are still returned.
  std::string error;
  // Records of versions this parser does not decode (e.g. V4 range records), skipped.
  size_t skipped = 0;
};

// Parses records from `data` (little-endian). With `hasNextUsnHeader`, the first 8 bytes are the
// next USN to read from (the layout FSCTL_READ_USN_JOURNAL returns).
ParseResult Parse(const uint8_t *data, size_t size, bool hasNextUsnHeader);

// UTF-16LE (possibly unpaired surrogates, replaced with U+FFFD) to UTF-8.
std::string Utf16ToUtf8(const uint8_t *data, size_t units);

}  // namespace usn
}  // namespace tidemark
