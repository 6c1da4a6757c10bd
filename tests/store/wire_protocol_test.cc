// The request parser against the exact bytes PyTorch's clients send (from
// ../shared/protocols/), in every fragmentation, and its limits.
#include <gtest/gtest.h>

#include "store/wire_protocol.h"

namespace trainrun {
namespace {

using wire::Dialect;
using wire::ParseStatus;
using wire::Query;

std::vector<uint8_t> hex(const std::string& text) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ') { ++i; continue; }
    out.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return out;
}

wire::Request parse_whole(const std::vector<uint8_t>& bytes, Dialect d) {
  wire::Request req;
  wire::ParseResult r = wire::parse_request(bytes.data(), bytes.size(), d, wire::Limits(), &req);
  EXPECT_EQ(r.status, ParseStatus::kComplete) << r.error;
  EXPECT_EQ(r.consumed, bytes.size());
  // Every proper prefix asks for more bytes, and says at least how many.
  for (size_t n = 0; n < bytes.size(); ++n) {
    wire::Request partial;
    wire::ParseResult p = wire::parse_request(bytes.data(), n, d, wire::Limits(), &partial);
    EXPECT_EQ(p.status, ParseStatus::kNeedMore) << "prefix of " << n << " bytes";
    if (n > 0) EXPECT_GT(p.needed, n);
  }
  return req;
}

TEST(WireProtocol, ParsesTorch26ClientBytes) {
  auto set = parse_whole(hex("01 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"), Dialect::kModern);
  EXPECT_EQ(set.type, Query::kSet);
  EXPECT_EQ(set.keys[0], "/k1");
  EXPECT_EQ(to_string(set.values[0]), "v1");
  auto add = parse_whole(hex("04 04 00 00 00 00 00 00 00 2f 63 6e 74 fe ff ff ff ff ff ff ff"), Dialect::kModern);
  EXPECT_EQ(add.type, Query::kAdd);
  EXPECT_EQ(add.delta, -2);
  auto check = parse_whole(hex("05 02 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31 06 00 00 00 00 00 00 00 "
                               "2f 6e 6f 6b 65 79"),
                           Dialect::kModern);
  EXPECT_EQ(check.keys, (std::vector<std::string>{"/k1", "/nokey"}));
  auto cas = parse_whole(hex("02 06 00 00 00 00 00 00 00 2f 66 72 65 73 68 00 00 00 00 00 00 00 00 04 00 00 00 00 00 "
                             "00 00 69 6e 69 74"),
                         Dialect::kModern);
  EXPECT_EQ(cas.type, Query::kCompareSet);
  EXPECT_TRUE(cas.values[0].empty());
  EXPECT_EQ(to_string(cas.values[1]), "init");
  auto mset = parse_whole(hex("0b 02 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 2f 61 01 00 00 00 00 00 00 00 31 02 "
                              "00 00 00 00 00 00 00 2f 62 02 00 00 00 00 00 00 00 32 32"),
                          Dialect::kModern);
  EXPECT_EQ(mset.keys, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(to_string(mset.values[1]), "22");
  EXPECT_EQ(parse_whole(hex("07"), Dialect::kModern).type, Query::kGetNumKeys);
  EXPECT_EQ(parse_whole(hex("0c"), Dialect::kModern).type, Query::kCancelWait);
  auto ping = parse_whole(hex("0d c9 49 00 00"), Dialect::kModern);
  EXPECT_EQ(ping.word, 0x49c9u);
}

TEST(WireProtocol, ParsesTorch113ClientBytes) {
  auto add = parse_whole(hex("03 02 00 00 00 00 00 00 00 2f 6e 03 00 00 00 00 00 00 00"), Dialect::kLegacy113);
  EXPECT_EQ(add.type, Query::kAdd);
  EXPECT_EQ(add.keys[0], "/n");
  EXPECT_EQ(add.delta, 3);
  EXPECT_EQ(parse_whole(hex("00 01 00 00 00 00 00 00 00 61 00 00 00 00 00 00 00 00"), Dialect::kLegacy113).type,
            Query::kSet);
  EXPECT_EQ(parse_whole(hex("05 00 00 00 00 00 00 00 00"), Dialect::kLegacy113).type, Query::kWait);
  EXPECT_EQ(parse_whole(hex("06"), Dialect::kLegacy113).type, Query::kGetNumKeys);
  EXPECT_EQ(parse_whole(hex("08 01 00 00 00 00 00 00 00 61"), Dialect::kLegacy113).type, Query::kDeleteKey);
  wire::Request req;
  auto watch = hex("07 01 00 00 00 00 00 00 00 61");
  auto r = wire::parse_request(watch.data(), watch.size(), Dialect::kLegacy113, wire::Limits(), &req);
  EXPECT_EQ(r.status, ParseStatus::kInvalid);
  EXPECT_NE(r.error.find("WATCH_KEY"), std::string::npos);
  EXPECT_EQ(*wire::query_byte(Query::kWait, Dialect::kLegacy113), 0x05);
  EXPECT_FALSE(wire::query_byte(Query::kAppend, Dialect::kLegacy113).has_value());
}

TEST(WireProtocol, TellsDialectsApartFromTheFirstBytes) {
  auto validate = hex("00 ce f7 85 3c 0d c9 49 00 00");
  EXPECT_EQ(wire::detect_dialect(validate.data(), validate.size()), Dialect::kModern);
  EXPECT_FALSE(wire::detect_dialect(validate.data(), 3).has_value());  // 00 + partial magic: wait
  auto legacy_set = hex("00 01 00 00 00 00 00 00 00 61");
  EXPECT_EQ(wire::detect_dialect(legacy_set.data(), legacy_set.size()), Dialect::kLegacy113);
  auto legacy_add = hex("03");
  EXPECT_EQ(wire::detect_dialect(legacy_add.data(), 1), Dialect::kLegacy113);
}

TEST(WireProtocol, RejectsOverLimitLengthsBeforeTheBytesArrive) {
  wire::Limits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 100;
  limits.max_keys_per_request = 3;
  wire::Request req;
  auto long_key = hex("03 11 00 00 00 00 00 00 00");  // GET, key of 17 bytes: nothing after the length
  auto r = wire::parse_request(long_key.data(), long_key.size(), Dialect::kModern, limits, &req);
  EXPECT_EQ(r.status, ParseStatus::kInvalid);
  EXPECT_NE(r.error.find("key length 17"), std::string::npos) << r.error;
  auto huge_value = hex("01 01 00 00 00 00 00 00 00 61 ff ff ff ff ff ff ff 7f");
  r = wire::parse_request(huge_value.data(), huge_value.size(), Dialect::kModern, limits, &req);
  EXPECT_EQ(r.status, ParseStatus::kInvalid);
  EXPECT_NE(r.error.find("value length"), std::string::npos) << r.error;
  auto many_keys = hex("05 04 00 00 00 00 00 00 00");
  r = wire::parse_request(many_keys.data(), many_keys.size(), Dialect::kModern, limits, &req);
  EXPECT_EQ(r.status, ParseStatus::kInvalid);
  EXPECT_NE(r.error.find("key count 4"), std::string::npos) << r.error;
  auto unknown = hex("7e");
  r = wire::parse_request(unknown.data(), unknown.size(), Dialect::kModern, limits, &req);
  EXPECT_EQ(r.status, ParseStatus::kInvalid);
  EXPECT_NE(r.error.find("0x7e"), std::string::npos) << r.error;
}

// Builds a modern request: the type byte, then each part (le64 lengths and
// the bytes they announce) as given.
std::vector<uint8_t> le64(uint64_t n) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  return out;
}
std::vector<uint8_t> sized(const std::string& bytes) {
  std::vector<uint8_t> out = le64(bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}
std::vector<uint8_t> request(wire::Query type, const std::vector<std::vector<uint8_t>>& parts) {
  std::vector<uint8_t> out{static_cast<uint8_t>(type)};
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
ParseStatus status_of(const std::vector<uint8_t>& bytes, const wire::Limits& limits, std::string* error = nullptr) {
  wire::Request req;
  auto r = wire::parse_request(bytes.data(), bytes.size(), Dialect::kModern, limits, &req);
  if (error != nullptr) *error = r.error;
  return r.status;
}

// Every limit on both sides: a length exactly at it is served, one more is
// refused naming it.
TEST(WireProtocol, EveryLimitTakesItsValueAndRefusesOneMore) {
  wire::Limits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 100;
  limits.max_keys_per_request = 3;
  std::string error;
  EXPECT_EQ(status_of(request(wire::Query::kGet, {sized(std::string(16, 'k'))}), limits), ParseStatus::kComplete);
  EXPECT_EQ(status_of(request(wire::Query::kGet, {sized(std::string(17, 'k'))}), limits, &error),
            ParseStatus::kInvalid);
  EXPECT_NE(error.find("key length 17 is over the limit of 16"), std::string::npos) << error;
  EXPECT_EQ(status_of(request(wire::Query::kSet, {sized("k"), sized(std::string(100, 'v'))}), limits),
            ParseStatus::kComplete);
  EXPECT_EQ(status_of(request(wire::Query::kSet, {sized("k"), sized(std::string(101, 'v'))}), limits, &error),
            ParseStatus::kInvalid);
  EXPECT_NE(error.find("value length 101 is over the limit of 100"), std::string::npos) << error;
  const auto keys = [](int n) {
    std::vector<std::vector<uint8_t>> parts{le64(n)};
    for (int i = 0; i < n; ++i) parts.push_back(sized("key" + std::to_string(i)));
    return parts;
  };
  EXPECT_EQ(status_of(request(wire::Query::kCheck, keys(3)), limits), ParseStatus::kComplete);
  EXPECT_EQ(status_of(request(wire::Query::kCheck, keys(4)), limits, &error), ParseStatus::kInvalid);
  EXPECT_NE(error.find("key count 4 is over the limit of 3"), std::string::npos) << error;
  // The whole request: SET of key "k" is 1 + 8 + 1 + 8 bytes before its value.
  limits.max_value_bytes = 1000;
  limits.max_request_bytes = 200;
  EXPECT_EQ(status_of(request(wire::Query::kSet, {sized("k"), sized(std::string(200 - 18, 'v'))}), limits),
            ParseStatus::kComplete);
  EXPECT_EQ(status_of(request(wire::Query::kSet, {sized("k"), sized(std::string(201 - 18, 'v'))}), limits, &error),
            ParseStatus::kInvalid);
  EXPECT_NE(error.find("request is over the limit of 200 bytes"), std::string::npos) << error;
  // And through a key: GET is 1 + 8 bytes before it.
  limits.max_key_bytes = 1000;
  EXPECT_EQ(status_of(request(wire::Query::kGet, {sized(std::string(200 - 9, 'k'))}), limits), ParseStatus::kComplete);
  EXPECT_EQ(status_of(request(wire::Query::kGet, {sized(std::string(201 - 9, 'k'))}), limits), ParseStatus::kInvalid);
}

}  // namespace
}  // namespace trainrun
