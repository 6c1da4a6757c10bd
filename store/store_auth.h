#pragma once
// Optional shared-secret authentication between trainrun store clients and
// servers: a challenge-response over HMAC-SHA256, so the token never crosses
// the wire. Each side proves it knows the token:
//   client -> AUTH_HELLO  client_nonce[32]
//   server -> server_nonce[32] HMAC(token, "server" | client_nonce)
//   client -> AUTH_PROOF  HMAC(token, "client" | server_nonce)
//   server -> 01 (or closes the connection)
// PyTorch clients know nothing of this: a server with a token refuses them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainrun {

// The environment variable holding the token on both sides.
constexpr const char* kStoreTokenEnv = "TRAINRUN_STORE_TOKEN";

// The token from TRAINRUN_STORE_TOKEN, or nullopt when unset or empty.
std::optional<std::string> store_token_from_env();

std::vector<uint8_t> random_nonce();  // 32 bytes from the OS's CSPRNG
// HMAC-SHA256(token, role | nonce).
std::vector<uint8_t> auth_mac(const std::string& token, const std::string& role, const std::vector<uint8_t>& nonce);
// Constant-time comparison.
bool macs_equal(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

}  // namespace trainrun
