// AES-256-GCM for the repository's blobs with the key set up once per thread. Node's
// crypto.createCipheriv builds a cipher object and expands the key for every call: for a block file's
// 8 KiB blocks that was ~9 µs a blob, of which the encryption itself is ~1.5 µs. The cipher is the
// OpenSSL that Node itself links (its headers ship with Node, its symbols are exported by the node
// binary); linked with -z now, so where those symbols are missing (an Electron build on BoringSSL
// without them) loading fails and the engine uses Node's crypto, with identical output.
//
//   newKey(key: 32 bytes) → handle
//   seal(handle, nonce: 12 bytes, aad | null, plain, out, at) → bytes written: nonce | ciphertext | tag
//   open(handle, sealed, aad | null, out, at) → plaintext length, or -1 when authentication fails
#include <napi.h>
#include <openssl/evp.h>
#include <cstring>

namespace {

constexpr int kNonce = 12;
constexpr int kTag = 16;

struct Key {
  EVP_CIPHER_CTX* enc = nullptr;
  EVP_CIPHER_CTX* dec = nullptr;
  ~Key() {
    if (enc) EVP_CIPHER_CTX_free(enc);
    if (dec) EVP_CIPHER_CTX_free(dec);
  }
};

struct Bytes {
  uint8_t* data = nullptr;
  size_t length = 0;
  bool ok = false;
};

Bytes BytesOf(const Napi::Value& v, bool optional = false) {
  Bytes b;
  if (optional && (v.IsNull() || v.IsUndefined())) {
    b.ok = true;
    return b;
  }
  if (!v.IsTypedArray()) return b;
  auto a = v.As<Napi::TypedArray>();
  if (a.TypedArrayType() != napi_uint8_array) return b;
  auto u = v.As<Napi::Uint8Array>();
  b.data = u.Data();
  b.length = u.ByteLength();
  b.ok = true;
  return b;
}

Napi::Value Fail(Napi::Env env, const char* message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value NewKey(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes key = info.Length() > 0 ? BytesOf(info[0]) : Bytes{};
  if (!key.ok || key.length != 32) return Fail(env, "newKey(key: 32 bytes)");
  auto* k = new Key();
  k->enc = EVP_CIPHER_CTX_new();
  k->dec = EVP_CIPHER_CTX_new();
  bool ok = k->enc && k->dec &&
            EVP_EncryptInit_ex(k->enc, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(k->enc, EVP_CTRL_GCM_SET_IVLEN, kNonce, nullptr) == 1 &&
            EVP_EncryptInit_ex(k->enc, nullptr, nullptr, key.data, nullptr) == 1 &&
            EVP_DecryptInit_ex(k->dec, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(k->dec, EVP_CTRL_GCM_SET_IVLEN, kNonce, nullptr) == 1 &&
            EVP_DecryptInit_ex(k->dec, nullptr, nullptr, key.data, nullptr) == 1;
  if (!ok) {
    delete k;
    Napi::Error::New(env, "AES-256-GCM is not available").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::External<Key>::New(env, k, [](Napi::Env, Key* p) { delete p; });
}

Key* KeyOf(const Napi::Value& v) {
  return v.IsExternal() ? v.As<Napi::External<Key>>().Data() : nullptr;
}

Napi::Value Seal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "seal(key, nonce: 12 bytes, aad: Uint8Array | null, plain, out, at) (out too short?)";
  if (info.Length() < 6 || !info[5].IsNumber()) return Fail(env, usage);
  Key* k = KeyOf(info[0]);
  Bytes nonce = BytesOf(info[1]), aad = BytesOf(info[2], true), plain = BytesOf(info[3]), out = BytesOf(info[4]);
  double at = info[5].As<Napi::Number>().DoubleValue();
  if (!k || !nonce.ok || nonce.length != kNonce || !aad.ok || !plain.ok || !out.ok || at < 0 ||
      plain.length > 0x7fffffff || aad.length > 0x7fffffff ||
      at + kNonce + static_cast<double>(plain.length) + kTag > static_cast<double>(out.length))
    return Fail(env, usage);
  uint8_t* dst = out.data + static_cast<size_t>(at);
  int n = 0, fin = 0;
  bool ok = EVP_EncryptInit_ex(k->enc, nullptr, nullptr, nullptr, nonce.data) == 1 &&
            (aad.length == 0 || EVP_EncryptUpdate(k->enc, nullptr, &n, aad.data, static_cast<int>(aad.length)) == 1) &&
            EVP_EncryptUpdate(k->enc, dst + kNonce, &n, plain.data, static_cast<int>(plain.length)) == 1 &&
            EVP_EncryptFinal_ex(k->enc, dst + kNonce + n, &fin) == 1 &&
            EVP_CIPHER_CTX_ctrl(k->enc, EVP_CTRL_GCM_GET_TAG, kTag, dst + kNonce + n + fin) == 1;
  if (!ok) {
    Napi::Error::New(env, "AES-256-GCM encryption failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::memmove(dst, nonce.data, kNonce);
  return Napi::Number::New(env, kNonce + n + fin + kTag);
}

Napi::Value Open(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "open(key, sealed, aad: Uint8Array | null, out, at) (out too short?)";
  if (info.Length() < 5 || !info[4].IsNumber()) return Fail(env, usage);
  Key* k = KeyOf(info[0]);
  Bytes sealed = BytesOf(info[1]), aad = BytesOf(info[2], true), out = BytesOf(info[3]);
  double at = info[4].As<Napi::Number>().DoubleValue();
  if (!k || !sealed.ok || !aad.ok || !out.ok || sealed.length < kNonce + kTag || at < 0 ||
      sealed.length > 0x7fffffff || aad.length > 0x7fffffff ||
      at + static_cast<double>(sealed.length - kNonce - kTag) > static_cast<double>(out.length))
    return Fail(env, usage);
  const int len = static_cast<int>(sealed.length) - kNonce - kTag;
  uint8_t tag[kTag];
  std::memcpy(tag, sealed.data + kNonce + len, kTag); // the tag call wants a writable pointer
  uint8_t* dst = out.data + static_cast<size_t>(at);
  int n = 0, fin = 0;
  bool ok = EVP_DecryptInit_ex(k->dec, nullptr, nullptr, nullptr, sealed.data) == 1 &&
            (aad.length == 0 || EVP_DecryptUpdate(k->dec, nullptr, &n, aad.data, static_cast<int>(aad.length)) == 1) &&
            EVP_DecryptUpdate(k->dec, dst, &n, sealed.data + kNonce, len) == 1 &&
            EVP_CIPHER_CTX_ctrl(k->dec, EVP_CTRL_GCM_SET_TAG, kTag, tag) == 1;
  if (!ok) {
    Napi::Error::New(env, "AES-256-GCM decryption failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (EVP_DecryptFinal_ex(k->dec, dst + n, &fin) != 1) return Napi::Number::New(env, -1);
  return Napi::Number::New(env, n + fin);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("newKey", Napi::Function::New(env, NewKey));
  exports.Set("seal", Napi::Function::New(env, Seal));
  exports.Set("open", Napi::Function::New(env, Open));
  return exports;
}

}  // namespace

NODE_API_MODULE(tidemark_aead, Init)
