// NTFS USN change-journal backend. For each volume holding a source root it queries the journal
// (FSCTL_QUERY_USN_JOURNAL), then a reader thread reads records from the journal's next USN on
// (FSCTL_READ_USN_JOURNAL), parses them with the platform-neutral parser (common/usn_record), and
// resolves each record's parent file reference to a path (OpenFileById + GetFinalPathNameByHandleW,
// cached per batch). A journal that was deleted, re-created or wrapped past our USN marks the
// backend broken. The journal ID + next USN of each volume is reported with every batch
// (Batch::position) and accepted back (BackendOptions::resume), so tracking survives restarts and
// reboots: a resumed volume whose journal was re-created, or wrapped past the saved USN, starts at
// the journal's end and reports the gap as `lost`.
//
// Hard links: USN_REASON_HARD_LINK_CHANGE on a file that still exists marks the batch `lost`.
#ifdef _WIN32

#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0602
#endif
#include <windows.h>
#include <winioctl.h>

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "../common/backend.h"
#include "../common/usn_record.h"

namespace tidemark {

namespace {

// READ_USN_JOURNAL_DATA_V1 (not in every SDK's headers): asks for V2 and V3 records.
struct ReadUsnJournalDataV1 {
  LONGLONG StartUsn;
  DWORD ReasonMask;
  DWORD ReturnOnlyOnClose;
  DWORDLONG Timeout;
  DWORDLONG BytesToWaitFor;
  DWORDLONG UsnJournalID;
  WORD MinMajorVersion;
  WORD MaxMajorVersion;
};

std::string WideToUtf8(const std::wstring &w) {
  if (w.empty()) return std::string();
  int n = WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), &s[0], n, nullptr, nullptr);
  return s;
}

std::wstring Utf8ToWide(const std::string &s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), &w[0], n);
  return w;
}

// Parses "C:|journalId|usn;D:|journalId|usn" into letter → (journalId, usn).
std::map<std::string, std::pair<DWORDLONG, LONGLONG>> ParsePositions(const std::string &s) {
  std::map<std::string, std::pair<DWORDLONG, LONGLONG>> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(';', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    size_t a = item.find('|'), b = item.rfind('|');
    if (a != std::string::npos && b != a) {
      try {
        out[item.substr(0, a)] = {std::stoull(item.substr(a + 1, b - a - 1)), std::stoll(item.substr(b + 1))};
      } catch (...) {
      }
    }
    start = end + 1;
  }
  return out;
}

// "c:\\x" and "C:\\x" are the same path: compare with an upper-case drive letter.
std::string NormalizeDrive(std::string p) {
  if (p.size() >= 2 && p[1] == ':' && p[0] >= 'a' && p[0] <= 'z') p[0] = static_cast<char>(p[0] - 'a' + 'A');
  return p;
}

std::string LastError(const char *what) {
  return std::string(what) + " failed (error " + std::to_string(GetLastError()) + ")";
}

struct Volume {
  std::string letter;  // "C:"
  HANDLE handle = INVALID_HANDLE_VALUE;
  DWORDLONG journalId = 0;
  LONGLONG nextUsn = 0;
};

class UsnBackend : public Backend {
 public:
  ~UsnBackend() override { Stop(); }
  const char *Name() const override { return "usn"; }

  bool Start(const BackendOptions &opts, BatchSink sink, std::string &error) override {
    std::vector<std::string> roots = opts.roots;
    for (auto &r : roots) r = NormalizeDrive(r);
    coalescer_.reset(new Coalescer(roots, '\\'));
    batchMillis_ = opts.batchMillis > 0 ? opts.batchMillis : 50;
    auto resume = ParsePositions(opts.resume);
    for (const auto &root : roots) {
      if (root.size() < 2 || root[1] != ':') {
        error = "not a drive-letter path: " + root;
        return false;
      }
      std::string letter = root.substr(0, 2);
      bool seen = false;
      for (auto &v : volumes_) seen = seen || v.letter == letter;
      if (seen) continue;
      Volume v;
      v.letter = letter;
      std::wstring dev = L"\\\\.\\" + Utf8ToWide(letter);
      v.handle = CreateFileW(dev.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                             nullptr, OPEN_EXISTING, 0, nullptr);
      if (v.handle == INVALID_HANDLE_VALUE) {
        error = LastError(("opening volume " + letter).c_str());
        Stop();
        return false;
      }
      USN_JOURNAL_DATA data;
      DWORD got = 0;
      if (!DeviceIoControl(v.handle, FSCTL_QUERY_USN_JOURNAL, nullptr, 0, &data, sizeof data, &got, nullptr)) {
        error = LastError(("FSCTL_QUERY_USN_JOURNAL on " + letter).c_str());
        CloseHandle(v.handle);
        Stop();
        return false;
      }
      v.journalId = data.UsnJournalID;
      v.nextUsn = data.NextUsn;
      auto saved = resume.find(letter);
      if (saved != resume.end()) {
        if (saved->second.first == data.UsnJournalID && saved->second.second >= data.LowestValidUsn &&
            saved->second.second <= data.NextUsn)
          v.nextUsn = saved->second.second;  // resume: read what happened while we were not running
        else
          coalescer_->Lost("the USN journal of " + letter + " was re-created or wrapped since the tracker last ran");
      }
      volumes_.push_back(v);
    }
    wake_ = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    sink_ = std::move(sink);
    InitializeCriticalSection(&mu_);
    muReady_ = true;
    thread_ = CreateThread(nullptr, 0, &UsnBackend::ThreadMain, this, 0, nullptr);
    if (!thread_) {
      error = LastError("CreateThread");
      Stop();
      return false;
    }
    running_ = true;
    return true;
  }

  void Stop() override {
    if (running_) {
      stopping_ = true;
      SetEvent(wake_);
      WaitForSingleObject(thread_, INFINITE);
      CloseHandle(thread_);
      thread_ = nullptr;
      running_ = false;
    }
    for (auto &v : volumes_)
      if (v.handle != INVALID_HANDLE_VALUE) CloseHandle(v.handle);
    volumes_.clear();
    if (wake_) CloseHandle(wake_);
    wake_ = nullptr;
    if (muReady_) DeleteCriticalSection(&mu_);
    muReady_ = false;
  }

  void Flush(uint64_t token) override {
    if (!muReady_) return;
    EnterCriticalSection(&mu_);
    tokens_.push_back(token);
    LeaveCriticalSection(&mu_);
    if (wake_) SetEvent(wake_);
  }

 private:
  static DWORD WINAPI ThreadMain(LPVOID self) {
    static_cast<UsnBackend *>(self)->Run();
    return 0;
  }

  void Run() {
    try {
      {
        Batch ready = coalescer_->Take();
        ready.ready = true;
        ready.position = Position();
        sink_(std::move(ready));
      }
      while (!stopping_) {
        WaitForSingleObject(wake_, static_cast<DWORD>(batchMillis_));
        if (stopping_) break;
        std::vector<uint64_t> tokens;
        EnterCriticalSection(&mu_);
        tokens.swap(tokens_);
        LeaveCriticalSection(&mu_);
        if (broken_.empty())
          for (auto &v : volumes_) ReadVolume(v);
        if (tokens.empty()) tokens.push_back(0);
        // Report the position now and then even without relevant changes, so a restart does not
        // re-read (or lose to wrapping) a long stretch of other activity on the volume.
        std::string pos = Position();
        DWORD now = GetTickCount();
        bool positionDue = pos != lastPosition_ && now - lastPositionAt_ > 5000;
        for (uint64_t t : tokens) {
          if (t == 0 && coalescer_->Empty() && (broken_.empty() || reported_) && !positionDue) continue;
          positionDue = false;
          lastPosition_ = pos;
          lastPositionAt_ = now;
          Batch b = coalescer_->Take();
          b.flushToken = t;
          b.broken = broken_;
          b.position = Position();
          reported_ = reported_ || !broken_.empty();
          sink_(std::move(b));
        }
      }
    } catch (...) {
      broken_ = "tracker thread failed";
      try {
        Batch b = coalescer_->Take();
        b.broken = broken_;
        sink_(std::move(b));
      } catch (...) {
      }
    }
  }

  std::string Position() const {
    std::string out;
    for (const auto &v : volumes_) {
      if (!out.empty()) out += ';';
      out += v.letter + "|" + std::to_string(v.journalId) + "|" + std::to_string(v.nextUsn);
    }
    return out;
  }

  std::string ResolveDir(Volume &v, const usn::FileRef &ref, std::map<usn::FileRef, std::string> &cache) {
    auto it = cache.find(ref);
    if (it != cache.end()) return it->second;
    FILE_ID_DESCRIPTOR desc;
    ZeroMemory(&desc, sizeof desc);
    desc.dwSize = sizeof desc;
    if (ref.high == 0) {
      desc.Type = FileIdType;
      desc.FileId.QuadPart = static_cast<LONGLONG>(ref.low);
    } else {
      desc.Type = ExtendedFileIdType;
      memcpy(desc.ExtendedFileId.Identifier, &ref.low, 8);
      memcpy(desc.ExtendedFileId.Identifier + 8, &ref.high, 8);
    }
    std::string path;
    HANDLE h = OpenFileById(v.handle, &desc, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                            FILE_FLAG_BACKUP_SEMANTICS);
    if (h != INVALID_HANDLE_VALUE) {
      wchar_t buf[32768];
      DWORD n = GetFinalPathNameByHandleW(h, buf, 32768, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
      if (n > 0 && n < 32768) {
        std::wstring w(buf, n);
        if (w.compare(0, 4, L"\\\\?\\") == 0) w = w.substr(4);
        path = NormalizeDrive(WideToUtf8(w));
      }
      CloseHandle(h);
    }
    cache.emplace(ref, path);
    return path;
  }

  void ReadVolume(Volume &v) {
    std::vector<uint8_t> buf(256 * 1024);
    std::map<usn::FileRef, std::string> cache;
    for (int round = 0; round < 64; round++) {
      ReadUsnJournalDataV1 req;
      ZeroMemory(&req, sizeof req);
      req.StartUsn = v.nextUsn;
      req.ReasonMask = 0xFFFFFFFF;
      req.UsnJournalID = v.journalId;
      req.MinMajorVersion = 2;
      req.MaxMajorVersion = 3;
      DWORD got = 0;
      if (!DeviceIoControl(v.handle, FSCTL_READ_USN_JOURNAL, &req, sizeof req, buf.data(),
                           static_cast<DWORD>(buf.size()), &got, nullptr)) {
        DWORD err = GetLastError();
        if (err == ERROR_JOURNAL_ENTRY_DELETED)
          broken_ = "the USN journal of " + v.letter + " wrapped past the tracker's position";
        else if (err == ERROR_JOURNAL_DELETE_IN_PROGRESS || err == ERROR_JOURNAL_NOT_ACTIVE ||
                 err == ERROR_INVALID_PARAMETER)
          broken_ = "the USN journal of " + v.letter + " was deleted or re-created";
        else
          broken_ = LastError("FSCTL_READ_USN_JOURNAL");
        return;
      }
      usn::ParseResult res = usn::Parse(buf.data(), got, true);
      if (!res.error.empty()) {
        coalescer_->Lost("malformed USN record: " + res.error);
      }
      for (const auto &r : res.records) {
        coalescer_->CountEvent();
        std::string dir = ResolveDir(v, r.parent, cache);
        if (dir.empty()) continue;  // parent gone: its own parent records the deletion
        bool arrived = (r.reason & (usn::kFileCreate | usn::kRenameNewName)) != 0;
        coalescer_->MarkEntry(dir, r.name, r.IsDirectory(), r.IsDirectory() && arrived);
        if ((r.reason & usn::kHardLinkChange) && !r.IsDirectory() && !(r.reason & usn::kFileDelete))
          coalescer_->Lost("the link count of a hard-linked file changed; its other names cannot be located");
      }
      if (res.nextUsn <= v.nextUsn || res.records.empty()) {
        v.nextUsn = res.nextUsn > v.nextUsn ? res.nextUsn : v.nextUsn;
        return;
      }
      v.nextUsn = res.nextUsn;
    }
  }

  std::vector<Volume> volumes_;
  std::unique_ptr<Coalescer> coalescer_;
  BatchSink sink_;
  HANDLE wake_ = nullptr;
  HANDLE thread_ = nullptr;
  std::atomic<bool> stopping_{false};
  CRITICAL_SECTION mu_;
  bool muReady_ = false;
  std::vector<uint64_t> tokens_;
  std::string broken_;
  bool reported_ = false;
  std::string lastPosition_;
  DWORD lastPositionAt_ = 0;
  bool running_ = false;
  int batchMillis_ = 50;
};

}  // namespace

std::unique_ptr<Backend> CreateUsnBackend() { return std::unique_ptr<Backend>(new UsnBackend()); }

}  // namespace tidemark

#endif  // _WIN32
