// Bad input against TCPStoreServer, sent as raw bytes: each closes only the
// offending connection, with a log line naming the peer and the reason; the
// server keeps serving everyone else and loses no keys. Also: requests cut
// into single bytes, silent clients, and torch 1.13's dialect.
#include <gtest/gtest.h>

#include <thread>

#include "base/error.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/store/store_test_util.h"

namespace trainrun {
namespace {

using namespace std::chrono_literals;
using wire::Query;

class ServerBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    TCPStoreServer::Options o;
    o.log = log_.sink();
    server_ = std::make_unique<TCPStoreServer>(o);
    TCPStoreOptions c;
    c.timeout = 5s;
    c.auth_token = std::nullopt;
    good_ = std::make_unique<TCPStore>("127.0.0.1", server_->port(), c);
    good_->set("keep", std::string("safe"));
  }

  // Sends bytes on a fresh connection and expects the server to close it
  // with a log line containing every fragment.
  void expect_rejected(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> fragments,
                       bool with_handshake = true) {
    RawSocket raw(server_->port());
    if (with_handshake) {
      raw.send(handshake(42));
      EXPECT_EQ(raw.recv(4).size(), 4u);
    }
    raw.send(bytes);
    EXPECT_TRUE(raw.closed_by_peer()) << "the server kept the connection open";
    EXPECT_TRUE(log_.wait_for(fragments)) << log_.all();
    EXPECT_TRUE(log_.wait_for({"closing the connection from 127.0.0.1:"})) << log_.all();
    // Everyone else is still served, and nothing was lost.
    EXPECT_EQ(good_->get_string("keep"), "safe");
    EXPECT_EQ(good_->add("still_alive", 1) > 0, true);
  }

  LogCapture log_;
  std::unique_ptr<TCPStoreServer> server_;
  std::unique_ptr<TCPStore> good_;
};

TEST_F(ServerBadInput, UnknownQueryType) { expect_rejected({0x7e}, {"unknown query type 0x7e"}); }

TEST_F(ServerBadInput, AbsurdLengthPrefix) {
  std::vector<uint8_t> req;
  wire::Encoder(&req).u8(static_cast<uint8_t>(Query::kSet)).u64(uint64_t(1) << 40);
  expect_rejected(req, {"key length 1099511627776", "limit"});
  std::vector<uint8_t> value;
  wire::Encoder(&value).u8(static_cast<uint8_t>(Query::kSet)).str("k").u64(uint64_t(1) << 50);
  expect_rejected(value, {"value length", "limit"});
  std::vector<uint8_t> keys;
  wire::Encoder(&keys).u8(static_cast<uint8_t>(Query::kWait)).u64(uint64_t(1) << 32);
  expect_rejected(keys, {"key count 4294967296"});
}

TEST_F(ServerBadInput, InvalidMagic) {
  // 00 + a wrong magic: neither a modern VALIDATE nor a sane torch 1.13 SET.
  expect_rejected({0x00, 0xde, 0xad, 0xbe, 0xef, 0x0d, 0x01, 0x02, 0x03}, {"neither VALIDATE", "0x3c85f7ce"},
                  /*with_handshake=*/false);
  // A modern connection that validates again with a wrong magic.
  std::vector<uint8_t> again;
  wire::Encoder(&again).u8(0x00).u32(0x12345678);
  expect_rejected(again, {"invalid VALIDATE magic 0x12345678"});
}

TEST_F(ServerBadInput, NonNumericAdd) {
  good_->set("text", std::string("abc"));
  std::vector<uint8_t> req;
  wire::Encoder(&req).u8(static_cast<uint8_t>(Query::kAdd)).str("/text").i64(1);
  expect_rejected(req, {"ADD failed", "not a decimal integer"});
  EXPECT_EQ(good_->get_string("text"), "abc");
}

TEST_F(ServerBadInput, GetOfAMissingKey) {
  expect_rejected(modern(Query::kGet, {"/nope"}), {"GET of missing key '/nope'"});
  std::vector<uint8_t> req;
  wire::Encoder(&req).u8(static_cast<uint8_t>(Query::kMultiGet)).u64(2).str("/keep").str("/nope");
  expect_rejected(req, {"MULTI_GET of missing key '/nope'"});
}

TEST_F(ServerBadInput, TooManyParkedWaits) {
  // Only torch 1.13 connections can park several WAITs (a modern one holds
  // everything behind its first).
  std::vector<uint8_t> req;
  for (int i = 0; i < 1025; ++i) wire::Encoder(&req).u8(0x05).u64(1).str("/missing" + std::to_string(i));
  expect_rejected(req, {"more than 1024 WAITs parked"}, /*with_handshake=*/false);
  EXPECT_EQ(server_->num_parked_waits(), 0);
}

TEST_F(ServerBadInput, TruncatedRequestThenCloseCreatesNothing) {
  {
    RawSocket raw(server_->port());
    raw.send(handshake());
    raw.recv(4);
    std::vector<uint8_t> req = modern(Query::kSet, {"/half"}, {"value"});
    req.resize(req.size() - 3);
    raw.send(req);
  }  // closed mid-request
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(good_->check({"half"}));
  EXPECT_EQ(good_->get_string("keep"), "safe");
}

TEST_F(ServerBadInput, SilentAndHalfSentClientsDoNotStallOthers) {
  RawSocket silent(server_->port());
  RawSocket half(server_->port());
  half.send(handshake());
  half.recv(4);
  std::vector<uint8_t> req = modern(Query::kSet, {"/slow"}, {std::string(1000, 'v')});
  half.send(std::vector<uint8_t>(req.begin(), req.begin() + 500));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) good_->add("fast", 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(good_->add("fast", 0), 200);
  EXPECT_GE(server_->num_connections(), 3);
  half.send(std::vector<uint8_t>(req.begin() + 500, req.end()));  // finishing it later works
  EXPECT_EQ(good_->get_string("slow"), std::string(1000, 'v'));
}

TEST_F(ServerBadInput, RequestsSplitIntoSingleBytes) {
  RawSocket raw(server_->port());
  std::vector<uint8_t> session = handshake(0x49c9);
  auto set = modern(Query::kSet, {"/k1"}, {"v1"});
  auto get = modern(Query::kGet, {"/k1"});
  session.insert(session.end(), set.begin(), set.end());
  session.insert(session.end(), get.begin(), get.end());
  for (uint8_t b : session) {
    raw.send({b});
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(raw.recv(4), (std::vector<uint8_t>{0xc9, 0x49, 0, 0}));  // PING echo
  EXPECT_EQ(raw.recv(10), (std::vector<uint8_t>{2, 0, 0, 0, 0, 0, 0, 0, 'v', '1'}));
}

TEST_F(ServerBadInput, ModernRequestsBehindAParkedWaitWaitForIt) {
  RawSocket raw(server_->port());
  raw.send(handshake());
  raw.recv(4);
  std::vector<uint8_t> features = {static_cast<uint8_t>(Query::kFeatures)};
  raw.send(features);
  EXPECT_EQ(raw.recv(8), (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 0}));
  std::vector<uint8_t> wait_get;
  wire::Encoder(&wait_get).u8(static_cast<uint8_t>(Query::kWait)).u64(1).str("/soon");
  auto get = modern(Query::kGet, {"/soon"});
  wait_get.insert(wait_get.end(), get.begin(), get.end());
  raw.send(wait_get);
  EXPECT_TRUE(raw.recv(1, 100).empty());  // held: the key does not exist yet
  good_->set("soon", std::string("ab"));
  EXPECT_EQ(raw.recv(11), (std::vector<uint8_t>{0, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'}));
  // CANCEL_WAIT overtakes a parked WAIT and is always answered WAIT_CANCELED.
  std::vector<uint8_t> wait2;
  wire::Encoder(&wait2).u8(static_cast<uint8_t>(Query::kWait)).u64(1).str("/never");
  raw.send(wait2);
  raw.send({static_cast<uint8_t>(Query::kCancelWait)});
  EXPECT_EQ(raw.recv(1), (std::vector<uint8_t>{wire::kWaitCanceled}));
  EXPECT_EQ(server_->num_parked_waits(), 0);
  raw.send({static_cast<uint8_t>(Query::kCancelWait)});
  EXPECT_EQ(raw.recv(1), (std::vector<uint8_t>{wire::kWaitCanceled}));
}

TEST_F(ServerBadInput, ServesTorch113Dialect) {
  RawSocket raw(server_->port());
  // ADD "/n" 3 exactly as torch 1.13 sends it, then a WAIT that parks and a
  // SET (1.13 SET = 0x00) from the same client that the server still serves.
  raw.send({0x03, 2, 0, 0, 0, 0, 0, 0, 0, '/', 'n', 3, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(raw.recv(8), (std::vector<uint8_t>{3, 0, 0, 0, 0, 0, 0, 0}));
  raw.send({0x05, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, '/', 'w'});
  raw.send({0x00, 2, 0, 0, 0, 0, 0, 0, 0, '/', 'w', 1, 0, 0, 0, 0, 0, 0, 0, 'x'});
  EXPECT_EQ(raw.recv(1), (std::vector<uint8_t>{0}));  // STOP_WAITING, woken by its own SET
  EXPECT_EQ(good_->get_string("w"), "x");
  EXPECT_EQ(good_->add("n", 0), 3);
  raw.send({0x07, 1, 0, 0, 0, 0, 0, 0, 0, 'k'});  // WATCH_KEY is not served
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_TRUE(log_.wait_for({"torch-1.13", "WATCH_KEY"})) << log_.all();
}

}  // namespace
}  // namespace trainrun
