#include "dflow/distributed/rpc/sealed_records.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#if DFLOW_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>

namespace dflow {

using sealed::kIvBytes;
using sealed::kRecordHeader;
using sealed::kTagBytes;

namespace {

constexpr size_t kKeyBytes = 16;  // AES-128.
constexpr char kExporterLabel[] = "EXPERIMENTAL dflow data plane records v2";
// What one connection's keys may seal each way: 2^36 bytes = 2^32 AES blocks,
// a fraction of AES-GCM's limit for a 2^-57 margin (RFC 8446 section 5.5:
// 2^24.5 records of 2^10 blocks). The receiver retires a connection at half.
std::atomic<uint64_t> key_limit_bytes{uint64_t{1} << 36};
constexpr char kWornOut[] = "this connection's keys reached their usage limit";

// TLS 1.3's per-record nonce: the IV xor the sequence number, big-endian, in
// its last 8 bytes.
void Nonce(const unsigned char* iv, uint64_t seq, unsigned char* nonce) {
  std::memcpy(nonce, iv, kIvBytes);
  for (int i = 0; i < 8; ++i) nonce[kIvBytes - 1 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
}

}  // namespace

// AES-128-GCM under one key: seals, or opens, records of one direction.
#if DFLOW_HAVE_IPSEC_MB
// Intel's ipsec-mb: VAES and AVX-512 where the CPU has them (12.4 GB/s a core
// on this machine's Zen 4, OpenSSL 3.0 4.8), the same ciphertext and tag.
class GcmKey {
 public:
  ~GcmKey() { OPENSSL_cleanse(&key_, sizeof(key_)); }
  bool Init(const unsigned char* key, bool /*seal*/) {
    IMB_MGR* m = Manager();
    if (m == nullptr) return false;
    IMB_AES128_GCM_PRE(m, key, &key_);
    return true;
  }
  bool Seal(const unsigned char* nonce, const unsigned char* aad, const iovec* pieces, int count,
            unsigned char* out, unsigned char* tag) {
    IMB_MGR* m = Manager();
    gcm_context_data ctx;
    IMB_AES128_GCM_INIT(m, &key_, &ctx, nonce, aad, kRecordHeader);
    for (int i = 0; i < count; ++i) {
      IMB_AES128_GCM_ENC_UPDATE(m, &key_, &ctx, out,
                                static_cast<const unsigned char*>(pieces[i].iov_base),
                                pieces[i].iov_len);
      out += pieces[i].iov_len;
    }
    IMB_AES128_GCM_ENC_FINALIZE(m, &key_, &ctx, tag, kTagBytes);
    return true;
  }
  bool Open(const unsigned char* nonce, const unsigned char* aad, unsigned char* body, size_t n,
            const unsigned char* tag) {
    IMB_MGR* m = Manager();
    gcm_context_data ctx;
    unsigned char computed[kTagBytes];
    IMB_AES128_GCM_INIT(m, &key_, &ctx, nonce, aad, kRecordHeader);
    IMB_AES128_GCM_DEC_UPDATE(m, &key_, &ctx, body, body, n);
    IMB_AES128_GCM_DEC_FINALIZE(m, &key_, &ctx, computed, kTagBytes);
    return CRYPTO_memcmp(computed, tag, kTagBytes) == 0;
  }

 private:
  // The library's function table for this CPU, made once; its GCM functions
  // keep no state of their own, so every thread shares it.
  static IMB_MGR* Manager() {
    static IMB_MGR* const manager = [] {
      IMB_MGR* m = alloc_mb_mgr(0);
      if (m == nullptr) return m;
      init_mb_mgr_auto(m, nullptr);
      if (imb_get_errno(m) != 0) {
        free_mb_mgr(m);
        return static_cast<IMB_MGR*>(nullptr);
      }
      return m;
    }();
    return manager;
  }
  alignas(64) gcm_key_data key_;
};
#else
class GcmKey {
 public:
  ~GcmKey() { EVP_CIPHER_CTX_free(ctx_); }
  bool Init(const unsigned char* key, bool seal) {
    ctx_ = EVP_CIPHER_CTX_new();
    return ctx_ != nullptr &&
           (seal ? EVP_EncryptInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, key, nullptr)
                 : EVP_DecryptInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, key, nullptr)) == 1;
  }
  bool Seal(const unsigned char* nonce, const unsigned char* aad, const iovec* pieces, int count,
            unsigned char* out, unsigned char* tag) {
    int len = 0;
    bool ok = EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce) == 1 &&
              EVP_EncryptUpdate(ctx_, nullptr, &len, aad, kRecordHeader) == 1;
    for (int i = 0; i < count && ok; ++i) {
      ok = EVP_EncryptUpdate(ctx_, out, &len, static_cast<const unsigned char*>(pieces[i].iov_base),
                             static_cast<int>(pieces[i].iov_len)) == 1;
      out += len;
    }
    return ok && EVP_EncryptFinal_ex(ctx_, out, &len) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1;
  }
  bool Open(const unsigned char* nonce, const unsigned char* aad, unsigned char* body, size_t n,
            const unsigned char* tag) {
    int len = 0;
    unsigned char expected[kTagBytes];
    std::memcpy(expected, tag, kTagBytes);
    return EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce) == 1 &&
           EVP_DecryptUpdate(ctx_, nullptr, &len, aad, kRecordHeader) == 1 &&
           EVP_DecryptUpdate(ctx_, body, &len, body, static_cast<int>(n)) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kTagBytes, expected) == 1 &&
           EVP_DecryptFinal_ex(ctx_, body + len, &len) == 1;
  }

 private:
  EVP_CIPHER_CTX* ctx_ = nullptr;  // Owned; keyed once, a nonce a record.
};
#endif

SealedRecords::Direction::Direction() : key(std::make_unique<GcmKey>()) {}

SealedRecords::Direction::~Direction() { OPENSSL_cleanse(iv, sizeof(iv)); }

SealedRecords::~SealedRecords() = default;

std::unique_ptr<SealedRecords> SealedRecords::FromSession(SSL* ssl, bool server,
                                                          std::string* error) {
  unsigned char material[2 * (kKeyBytes + kIvBytes)];
  if (SSL_export_keying_material(ssl, material, sizeof(material), kExporterLabel,
                                 sizeof(kExporterLabel) - 1, nullptr, 0, 0) != 1) {
    *error = "exporting the record keys failed";
    return nullptr;
  }
  // [server-to-client key][client-to-server key][server IV][client IV]
  const unsigned char* to_client = material;
  const unsigned char* to_server = material + kKeyBytes;
  const unsigned char* iv_to_client = material + 2 * kKeyBytes;
  const unsigned char* iv_to_server = iv_to_client + kIvBytes;
  std::unique_ptr<SealedRecords> records(new SealedRecords);
  const bool ok = records->seal_.key->Init(server ? to_client : to_server, /*seal=*/true) &&
                  records->open_.key->Init(server ? to_server : to_client, /*seal=*/false);
  std::memcpy(records->seal_.iv, server ? iv_to_client : iv_to_server, kIvBytes);
  std::memcpy(records->open_.iv, server ? iv_to_server : iv_to_client, kIvBytes);
  OPENSSL_cleanse(material, sizeof(material));
  if (!ok) {
    *error = "setting up AES-128-GCM failed";
    return nullptr;
  }
  return records;
}

const char* SealedRecords::Seal(const iovec* pieces, int count, size_t n, char* out) {
  if (seal_.bytes + n > key_limit()) return kWornOut;
  unsigned char nonce[kIvBytes];
  Nonce(seal_.iv, seal_.seq++, nonce);
  seal_.bytes += n;
  unsigned char* header = reinterpret_cast<unsigned char*>(out);
  PutLength(n, header);
  return seal_.key->Seal(nonce, header, pieces, count, header + kRecordHeader,
                         header + kRecordHeader + n)
             ? nullptr
             : "sealing a record failed";
}

const char* SealedRecords::Open(const unsigned char* header, char* body, size_t n,
                                const unsigned char* tag) {
  if (open_.bytes + n > key_limit()) return kWornOut;
  unsigned char nonce[kIvBytes];
  Nonce(open_.iv, open_.seq++, nonce);
  open_.bytes += n;
  return open_.key->Open(nonce, header, reinterpret_cast<unsigned char*>(body), n, tag)
             ? nullptr
             : "a sealed record failed to authenticate (damaged, forged, replayed or reordered)";
}

uint64_t SealedRecords::most_bytes() const { return std::max(seal_.bytes, open_.bytes); }

uint64_t SealedRecords::key_limit() { return key_limit_bytes.load(std::memory_order_relaxed); }

void SealedRecords::SetKeyLimitForTest(uint64_t bytes) {
  key_limit_bytes.store(bytes, std::memory_order_relaxed);
}

void SealedRecords::PutLength(size_t n, unsigned char* header) {
  for (size_t i = 0; i < kRecordHeader; ++i) {
    header[i] = static_cast<unsigned char>(n >> (8 * (kRecordHeader - 1 - i)));
  }
}

size_t SealedRecords::GetLength(const unsigned char* header) {
  size_t n = 0;
  for (size_t i = 0; i < kRecordHeader; ++i) n = (n << 8) | header[i];
  return n;
}

}  // namespace dflow
