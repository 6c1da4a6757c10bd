// Our TCPStore client against someone else's server (tests/python runs it
// against PyTorch 1.13's): every operation, checked, then a key for the
// caller to read. Prints the dialect it found; exits 0 when all passed.
//   peer_client_check HOST PORT
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "store/tcp_store.h"

namespace {

void expect(bool ok, const char* what) {
  if (!ok) throw trainrun::Error(std::string("check failed: ") + what);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trainrun;
  if (argc != 3) {
    std::fprintf(stderr, "usage: peer_client_check HOST PORT\n");
    return 2;
  }
  try {
    TCPStoreOptions o;
    o.timeout = Milliseconds(10000);
    TCPStore s(argv[1], static_cast<uint16_t>(std::atoi(argv[2])), o);
    std::printf("dialect=%s\n", wire::dialect_name(s.dialect()));
    expect(s.get_string("from_torch") == "hello", "get of a key torch set");
    s.set("k1", std::string("v1"));
    expect(s.get_string("k1") == "v1", "set/get");
    expect(s.add("cnt", 5) == 5 && s.add("cnt", -2) == 3, "add");
    expect(s.get_string("cnt") == "3", "add stores decimal text");
    expect(s.check({"k1", "cnt"}) && !s.check({"k1", "nokey"}), "check");
    expect(to_string(s.compare_set("k1", to_bytes("v1"), to_bytes("new"))) == "new", "compare_set match");
    expect(to_string(s.compare_set("k1", to_bytes("WRONG"), to_bytes("x"))) == "new", "compare_set mismatch");
    expect(to_string(s.compare_set("missing", to_bytes("exp"), to_bytes("des"))) == "exp", "compare_set quirk");
    s.append("k1", to_bytes("+more"));
    expect(s.get_string("k1") == "new+more", "append");
    s.multi_set({"a", "b"}, {to_bytes("1"), to_bytes("22")});
    auto values = s.multi_get({"b", "a"});
    expect(to_string(values[0]) == "22" && to_string(values[1]) == "1", "multi_set/multi_get");
    bool timed_out = false;
    try {
      s.wait({"late"}, Milliseconds(200));
    } catch (const TimeoutError&) {
      timed_out = true;
    }
    expect(timed_out, "wait times out");
    expect(s.delete_key("a") && !s.delete_key("a"), "delete_key");
    int64_t n = s.num_keys();
    expect(n == 4, "num_keys (from_torch, k1, cnt, b)");
    s.set("from_trainrun", std::string("world"));  // read back by the caller
    std::printf("num_keys=%lld\nall checks passed\n", static_cast<long long>(n));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_client_check: %s\n", e.what());
    return 1;
  }
  return 0;
}
