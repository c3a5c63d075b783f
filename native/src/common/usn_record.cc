#include "usn_record.h"

#include <cstring>

namespace tidemark {
namespace usn {

namespace {

uint16_t Rd16(const uint8_t *p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Rd32(const uint8_t *p) { return static_cast<uint32_t>(Rd16(p)) | (static_cast<uint32_t>(Rd16(p + 2)) << 16); }
uint64_t Rd64(const uint8_t *p) { return static_cast<uint64_t>(Rd32(p)) | (static_cast<uint64_t>(Rd32(p + 4)) << 32); }

void PutUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Fixed part sizes (up to and including FileName[0] offset): V2 = 60 bytes, V3 = 76 bytes.
constexpr size_t kV2Fixed = 60;
constexpr size_t kV3Fixed = 76;

}  // namespace

std::string Utf16ToUtf8(const uint8_t *data, size_t units) {
  std::string out;
  out.reserve(units);
  for (size_t i = 0; i < units; i++) {
    uint32_t u = Rd16(data + 2 * i);
    if (u >= 0xD800 && u <= 0xDBFF && i + 1 < units) {
      uint32_t lo = Rd16(data + 2 * (i + 1));
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        PutUtf8(out, 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00));
        i++;
        continue;
      }
    }
    if (u >= 0xD800 && u <= 0xDFFF) u = 0xFFFD;
    PutUtf8(out, u);
  }
  return out;
}

ParseResult Parse(const uint8_t *data, size_t size, bool hasNextUsnHeader) {
  ParseResult res;
  size_t off = 0;
  if (hasNextUsnHeader) {
    if (size < 8) {
      res.error = "buffer shorter than the 8-byte next-USN header";
      return res;
    }
    res.nextUsn = static_cast<int64_t>(Rd64(data));
    off = 8;
  }
  while (off < size) {
    if (size - off < 8) {
      res.error = "truncated record header at offset " + std::to_string(off);
      break;
    }
    const uint8_t *p = data + off;
    uint32_t len = Rd32(p);
    uint16_t major = Rd16(p + 4);
    if (len == 0) break;  // padding at the end of a buffer
    if (len < 8 || len > size - off) {
      res.error = "record length " + std::to_string(len) + " out of bounds at offset " + std::to_string(off);
      break;
    }
    if (major != 2 && major != 3) {
      res.skipped++;
      off += len;
      continue;
    }
    size_t fixed = major == 2 ? kV2Fixed : kV3Fixed;
    if (len < fixed) {
      res.error = "record at offset " + std::to_string(off) + " shorter than its fixed part";
      break;
    }
    Record r;
    r.majorVersion = major;
    r.minorVersion = Rd16(p + 6);
    size_t q;
    if (major == 2) {
      r.file.low = Rd64(p + 8);
      r.parent.low = Rd64(p + 16);
      q = 24;
    } else {
      r.file.low = Rd64(p + 8);
      r.file.high = Rd64(p + 16);
      r.parent.low = Rd64(p + 24);
      r.parent.high = Rd64(p + 32);
      q = 40;
    }
    r.usn = static_cast<int64_t>(Rd64(p + q));
    r.timestamp = static_cast<int64_t>(Rd64(p + q + 8));
    r.reason = Rd32(p + q + 16);
    r.sourceInfo = Rd32(p + q + 20);
    r.securityId = Rd32(p + q + 24);
    r.attributes = Rd32(p + q + 28);
    uint16_t nameLen = Rd16(p + q + 32);
    uint16_t nameOff = Rd16(p + q + 34);
    if ((nameLen & 1) != 0 || nameOff < q + 36 || static_cast<size_t>(nameOff) + nameLen > len) {
      res.error = "file name out of bounds in record at offset " + std::to_string(off);
      break;
    }
    r.name = Utf16ToUtf8(p + nameOff, nameLen / 2);
    res.records.push_back(std::move(r));
    off += len;
  }
  return res;
}

}  // namespace usn
}  // namespace tidemark
