// FastCDC cut-point search (gear rolling hash, normalized chunking) in C++: the hot loop of chunking,
// which the JavaScript version in src/main/engine/chunk/index.ts runs at well under 1 GB/s.
// Same arithmetic as the JavaScript version (32-bit wrapping hash, masks of the top bits), so both
// always cut at the same places: the TypeScript side compares them in tests and falls back to
// JavaScript when this addon is not built.
#include <napi.h>
#include <cstdint>

// cut(buf, start, end, eof, min, avg, max, maskS, maskL, gear) -> length of the next chunk, or 0 when
// more data is needed (see FastCDC.nextCut).
static Napi::Value Cut(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 10 || !info[0].IsTypedArray() || !info[9].IsTypedArray()) {
    Napi::TypeError::New(env, "cut(buf, start, end, eof, min, avg, max, maskS, maskL, gear)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto bufArr = info[0].As<Napi::TypedArray>();
  auto gearArr = info[9].As<Napi::TypedArray>();
  if (bufArr.TypedArrayType() != napi_uint8_array || gearArr.TypedArrayType() != napi_uint32_array ||
      gearArr.ElementLength() != 256) {
    Napi::TypeError::New(env, "buf must be a Uint8Array and gear a Uint32Array(256)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const uint8_t* buf = static_cast<const uint8_t*>(bufArr.ArrayBuffer().Data()) + bufArr.ByteOffset();
  const uint32_t* gear =
      reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(gearArr.ArrayBuffer().Data()) + gearArr.ByteOffset());
  const size_t length = bufArr.ElementLength();
  const int64_t start = info[1].As<Napi::Number>().Int64Value();
  const int64_t end = info[2].As<Napi::Number>().Int64Value();
  const bool eof = info[3].As<Napi::Boolean>().Value();
  const int64_t min = info[4].As<Napi::Number>().Int64Value();
  const int64_t avg = info[5].As<Napi::Number>().Int64Value();
  const int64_t max = info[6].As<Napi::Number>().Int64Value();
  const uint32_t maskS = static_cast<uint32_t>(info[7].As<Napi::Number>().Int32Value());
  const uint32_t maskL = static_cast<uint32_t>(info[8].As<Napi::Number>().Int32Value());
  if (start < 0 || end < start || static_cast<size_t>(end) > length) {
    Napi::RangeError::New(env, "start/end outside the buffer").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int64_t n = end - start;
  if (n <= min) return Napi::Number::New(env, static_cast<double>(eof ? n : (n >= max ? n : 0)));
  const int64_t normal = avg < n ? avg : n;
  const int64_t limit = max < n ? max : n;
  uint32_t h = 0;
  int64_t i = start + min;
  const int64_t normalEnd = start + normal;
  const int64_t limitEnd = start + limit;
  for (; i < normalEnd; i++) {
    h = (h << 1) + gear[buf[i]];
    if ((h & maskS) == 0) return Napi::Number::New(env, static_cast<double>(i + 1 - start));
  }
  for (; i < limitEnd; i++) {
    h = (h << 1) + gear[buf[i]];
    if ((h & maskL) == 0) return Napi::Number::New(env, static_cast<double>(i + 1 - start));
  }
  if (limit == max || eof) return Napi::Number::New(env, static_cast<double>(limit));
  return Napi::Number::New(env, 0);
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("cut", Napi::Function::New(env, Cut));
  return exports;
}

NODE_API_MODULE(tidemark_cdc, Init)
