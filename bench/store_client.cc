// The trainrun side of bench/store.py. Each process connects, prints
// "ready", waits for a "go" line on stdin, runs, and prints the
// CLOCK_MONOTONIC nanoseconds at which it started and finished.
//   store_client ops PORT OP N              OP: set | get | add
//   store_client rendezvous PORT WORLD THREADS
// In rendezvous mode each of THREADS threads is one client: it connects,
// adds 1 to a counter, the one that completes it sets "done", and all wait
// for "done".
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "store/tcp_store.h"

using namespace trainrun;

namespace {

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

TCPStoreOptions options() {
  TCPStoreOptions o;
  o.timeout = Milliseconds(120000);
  return o;
}

void wait_for_go() {
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
}

int run_ops(uint16_t port, const std::string& op, int64_t n) {
  TCPStore s("127.0.0.1", port, options());
  const Bytes value(32, 'x');
  if (op == "get") s.set("bench/get", value);
  wait_for_go();
  int64_t start = now_ns();
  if (op == "set") {
    for (int64_t i = 0; i < n; ++i) s.set("k" + std::to_string(i % 100), value);
    s.check({"k0"});  // sets have no reply: one round trip to know they were all served
  } else if (op == "get") {
    for (int64_t i = 0; i < n; ++i) s.get("bench/get");
  } else if (op == "add") {
    for (int64_t i = 0; i < n; ++i) s.add("counter", 1);
  } else {
    std::fprintf(stderr, "unknown op %s\n", op.c_str());
    return 2;
  }
  std::printf("%lld %lld\n", static_cast<long long>(start), static_cast<long long>(now_ns()));
  return 0;
}

int run_rendezvous(uint16_t port, int64_t world, int threads) {
  wait_for_go();
  int64_t start = now_ns();
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t)
    clients.emplace_back([&] {
      TCPStore s("127.0.0.1", port, options());
      if (s.add("rdzv/count", 1) == world) s.set("rdzv/done", std::string("1"));
      s.wait({"rdzv/done"});
    });
  for (auto& c : clients) c.join();
  std::printf("%lld %lld\n", static_cast<long long>(start), static_cast<long long>(now_ns()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::strcmp(argv[1], "ops") == 0)
      return run_ops(static_cast<uint16_t>(std::atoi(argv[2])), argv[3], std::atoll(argv[4]));
    if (argc == 5 && std::strcmp(argv[1], "rendezvous") == 0)
      return run_rendezvous(static_cast<uint16_t>(std::atoi(argv[2])), std::atoll(argv[3]), std::atoi(argv[4]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_client: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: store_client ops PORT OP N | rendezvous PORT WORLD THREADS\n");
  return 2;
}
