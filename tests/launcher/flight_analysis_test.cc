// What the agent says from workers' flight records: the first collective the
// ranks disagree on, the ranks behind, collectives not completed, waiting
// point-to-point operations, and dumps that are missing or malformed.
#include "launcher/flight_analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace trainrun {
namespace {

using nlohmann::json;

json entry(const std::string& group, uint32_t seq, const std::string& op, const std::string& state,
           const std::string& kind = "collective") {
  return json{{"id", seq},
              {"group", group},
              {"seq", seq},
              {"kind", kind},
              {"op", op},
              {"state", state},
              {"time_created_ns", 1'000'000'000}};
}

// A dump of `rank` with the default group of `world` ranks and these entries.
std::string dump(int rank, int world, const std::vector<json>& entries) {
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  return json{{"version", 1},
              {"rank", rank},
              {"time_ns", 3'500'000'000},
              {"groups", json::array({json{{"name", "default"}, {"backend", "gloo"}, {"ranks", ranks}}})},
              {"entries", entries}}
      .dump();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

const std::string kAllreduce = "allreduce(float32 [4], SUM)";

TEST(FlightAnalysis, NamesTheRankBehindAndTheCollectiveItHasNotCalled) {
  std::map<int, std::string> dumps = {
      {0, dump(0, 3, {entry("default", 1, kAllreduce, "completed"), entry("default", 2, "barrier()", "started")})},
      {1, dump(1, 3, {entry("default", 1, kAllreduce, "completed")})},
      {2, dump(2, 3, {entry("default", 1, kAllreduce, "completed"), entry("default", 2, "barrier()", "started")})}};
  const std::string out = joined(analyze_flight_records(dumps));
  EXPECT_NE(out.find("group 'default': rank 1 is behind: it has not called collective #2 (ranks 0, 2 called "
                     "barrier() [started]); its last is #1 allreduce(float32 [4], SUM)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("does not match"), std::string::npos) << out;
}

TEST(FlightAnalysis, ARankThatNeverUsedTheGroupIsBehindToo) {
  std::map<int, std::string> dumps = {
      {0, dump(0, 2, {entry("default", 1, kAllreduce, "started")})},
      {1, json{{"rank", 1}, {"groups", json::array()}, {"entries", json::array()}}.dump()}};
  const std::string out = joined(analyze_flight_records(dumps));
  EXPECT_NE(out.find("rank 1 is behind: it has not called collective #1"), std::string::npos) << out;
  EXPECT_NE(out.find("its last is none"), std::string::npos) << out;
}

TEST(FlightAnalysis, NamesBothCallsOfTheFirstMismatch) {
  std::map<int, std::string> dumps = {{0, dump(0, 2,
                                               {entry("default", 1, kAllreduce, "completed"),
                                                entry("default", 2, "broadcast(float32 [4], root 0)", "completed"),
                                                entry("default", 3, kAllreduce, "started")})},
                                      {1, dump(1, 2,
                                               {entry("default", 1, kAllreduce, "completed"),
                                                entry("default", 2, "allreduce(float32 [8], SUM)", "completed"),
                                                entry("default", 3, "barrier()", "started")})}};
  const std::vector<std::string> lines = analyze_flight_records(dumps);
  const std::string out = joined(lines);
  EXPECT_NE(out.find("group 'default': collective #2 does not match across ranks: rank 0 called broadcast(float32 "
                     "[4], root 0); rank 1 called allreduce(float32 [8], SUM)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("#3 does not match"), std::string::npos) << "only the first mismatch: " << out;
}

TEST(FlightAnalysis, SaysWhenEveryRankCalledItButItDidNotComplete) {
  std::map<int, std::string> dumps = {{0, dump(0, 2, {entry("default", 7, kAllreduce, "completed")})},
                                      {1, dump(1, 2, {entry("default", 7, kAllreduce, "started")})}};
  EXPECT_NE(joined(analyze_flight_records(dumps))
                .find("every rank called collective #7 allreduce(float32 [4], SUM); it has not completed on rank 1"),
            std::string::npos);
  dumps[1] = dump(1, 2, {entry("default", 7, kAllreduce, "completed")});
  EXPECT_NE(joined(analyze_flight_records(dumps)).find("every rank completed collective #7"), std::string::npos);
}

TEST(FlightAnalysis, ComparesOnlyWhatEveryRankStillHolds) {
  // Rank 0's ring buffer dropped #1-#2; rank 1 still holds them with other ops: not a mismatch.
  std::map<int, std::string> dumps = {
      {0, dump(0, 2, {entry("default", 3, kAllreduce, "completed")})},
      {1, dump(1, 2,
               {entry("default", 1, "barrier()", "completed"), entry("default", 2, "barrier()", "completed"),
                entry("default", 3, kAllreduce, "completed")})}};
  const std::string out = joined(analyze_flight_records(dumps));
  EXPECT_EQ(out.find("does not match"), std::string::npos) << out;
  EXPECT_NE(out.find("every rank completed collective #3"), std::string::npos) << out;
}

TEST(FlightAnalysis, ListsWaitingPointToPointOperations) {
  std::map<int, std::string> dumps = {
      {0, dump(0, 2, {entry("default", 1, "send(float32 [2, 8], to 1, tag 0)", "completed", "p2p")})},
      {1, dump(1, 2,
               {entry("default", 1, "recv(float32 [2, 8], from 0, tag 0)", "completed", "p2p"),
                entry("default", 2, "recv(float32 [2, 8], from 0, tag 0)", "started", "p2p")})}};
  const std::string out = joined(analyze_flight_records(dumps));
  EXPECT_NE(out.find("rank 1 waits on recv(float32 [2, 8], from 0, tag 0) (p2p #2, posted 2.5 s before its dump)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("waits on send"), std::string::npos) << out;
}

TEST(FlightAnalysis, NamesMissingAndMalformedDumps) {
  std::map<int, std::string> dumps = {{0, dump(0, 3, {entry("default", 1, kAllreduce, "started")})},
                                      {1, "{not json"},
                                      {3, json{{"rank", 3}, {"groups", 5}, {"entries", json::array()}}.dump()}};
  const std::string out = joined(analyze_flight_records(dumps, {0, 1, 2, 3}));
  EXPECT_NE(out.find("rank 1: its flight record is not a valid dump"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 3: its flight record is malformed"), std::string::npos) << out;
  EXPECT_NE(out.find("no flight record from rank 2 "), std::string::npos) << out;
}

TEST(FlightAnalysis, ReadsTheDumpsOfADirectoryAndSkipsTemporaries) {
  char tmpl[] = "/tmp/flight_analysis_test.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/rank0.json") << dump(0, 2, {});
  std::ofstream(dir + "/rank12.json") << dump(12, 2, {});
  std::ofstream(dir + "/rank1.json.tmp.77") << "partial";
  std::ofstream(dir + "/notes.txt") << "x";
  std::vector<std::string> problems;
  const std::map<int, std::string> dumps = read_flight_dumps(dir, &problems);
  EXPECT_EQ(dumps.size(), 2u);
  EXPECT_TRUE(dumps.count(0) && dumps.count(12));
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(read_flight_dumps(dir + "/missing", &problems).empty());
  for (const char* f : {"/rank0.json", "/rank12.json", "/rank1.json.tmp.77", "/notes.txt"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace trainrun
