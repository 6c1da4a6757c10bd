#include "store/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "base/error.h"
#include "store/wire_protocol.h"

namespace trainrun {

std::optional<std::string> store_token_from_env() {
  const char* v = std::getenv(kStoreTokenEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<uint8_t> random_nonce() {
  std::vector<uint8_t> nonce(wire::kAuthNonceBytes);
  TR_CHECK(RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) == 1, DistBackendError,
           "store authentication: the system's random generator failed");
  return nonce;
}

std::vector<uint8_t> auth_mac(const std::string& token, const std::string& role, const std::vector<uint8_t>& nonce) {
  std::vector<uint8_t> message(role.begin(), role.end());
  message.push_back('|');
  message.insert(message.end(), nonce.begin(), nonce.end());
  std::vector<uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  TR_CHECK(HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), message.data(), message.size(),
                mac.data(), &len) != nullptr,
           DistBackendError, "store authentication: HMAC-SHA256 failed");
  mac.resize(len);
  return mac;
}

bool macs_equal(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace trainrun
