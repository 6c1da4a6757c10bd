#pragma once
// Reading the workers' flight records (c10d/flight_recorder.h) the way
// PyTorch's offline torchfrtrace does, but at once and in words: per group,
// the first collective the ranks disagree on ("collective #5 on group
// 'default' does not match: rank 0 called broadcast(float32 [4], root 0),
// rank 1 called allreduce(float32 [4], SUM)"), the ranks that are behind
// ("rank 1 has not called collective #6 ..."), collectives every rank
// entered but some did not finish, and point-to-point operations still
// waiting. The agent prints it after a failure's summary; GetFlightRecord
// and `trainrun flight` return it on demand.
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace trainrun {

// The dumps in `dir` (rank<R>.json files), by global rank. Unreadable or
// malformed files are skipped and named in *problems (when given).
std::map<int, std::string> read_flight_dumps(const std::string& dir, std::vector<std::string>* problems);

// The findings, one line each, from the dumps of some or all ranks (JSON
// text, by global rank). `expected_ranks` are the ranks whose dumps should
// be there (those missing are named); empty: only the groups' members are.
std::vector<std::string> analyze_flight_records(const std::map<int, std::string>& dumps,
                                                const std::vector<int>& expected_ranks = {});

// After a failure: when `dir` holds a dump (a collective failed), waits up
// to `patience` for a dump from each of `running_ranks` (the other ranks'
// watchers answer within a few store polls). Returns at once otherwise.
void wait_for_flight_dumps(const std::string& dir, const std::vector<int>& running_ranks,
                           std::chrono::milliseconds patience);

// The report the agent prints: a heading naming the folder and how many of
// `ranks` dumped, then the unreadable files and the findings; empty when
// there is no dump.
std::vector<std::string> flight_report(const std::string& dir, const std::vector<int>& ranks);

}  // namespace trainrun
