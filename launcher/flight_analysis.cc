#include "launcher/flight_analysis.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

namespace trainrun {
namespace {

struct RecordedOp {
  uint32_t seq = 0;
  std::string op, state;
  int64_t created_ns = 0;
};

// One group as the dumps show it.
struct GroupView {
  std::vector<int> ranks;                                     // global ranks, in group order
  std::map<int, std::map<uint32_t, RecordedOp>> collectives;  // by global rank, then sequence number
  std::map<int, std::vector<RecordedOp>> pending_p2p;         // by global rank
};

// "rank 1" or "ranks 0, 2".
std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

std::string with_state(const RecordedOp& op) {
  return op.state == "completed" ? op.op : fmt::format("{} [{}]", op.op, op.state);
}

// What the ranks of one group disagree on, who is behind, what has not finished.
void analyze_group(const std::string& name, const GroupView& g, const std::map<int, int64_t>& dump_time,
                   std::vector<std::string>& out) {
  // Members with a dump (one that never used the group still counts: it is behind).
  std::vector<int> members;
  for (int r : g.ranks)
    if (dump_time.count(r)) members.push_back(r);
  if (members.empty()) return;
  // Compare only the sequence numbers every rank still holds (the ring buffer drops the oldest).
  uint32_t first_common = 0, last_seen = 0;
  for (int r : members) {
    auto it = g.collectives.find(r);
    if (it == g.collectives.end() || it->second.empty()) continue;
    first_common = std::max(first_common, it->second.begin()->first);
    last_seen = std::max(last_seen, it->second.rbegin()->first);
  }
  auto last_of = [&](int r) -> const RecordedOp* {
    auto it = g.collectives.find(r);
    return it == g.collectives.end() || it->second.empty() ? nullptr : &it->second.rbegin()->second;
  };
  auto op_at = [&](int r, uint32_t seq) -> const RecordedOp* {
    auto it = g.collectives.find(r);
    if (it == g.collectives.end()) return nullptr;
    auto jt = it->second.find(seq);
    return jt == it->second.end() ? nullptr : &jt->second;
  };

  // 1. The first collective whose call differs between ranks: everything after it follows from it.
  bool mismatch = false;
  for (uint32_t seq = std::max<uint32_t>(first_common, 1); seq <= last_seen && !mismatch; ++seq) {
    std::map<std::string, std::vector<int>> calls;
    for (int r : members)
      if (const RecordedOp* op = op_at(r, seq)) calls[op->op].push_back(r);
    if (calls.size() < 2) continue;
    // In rank order: "rank 0 called broadcast(...); rank 1 called allreduce(...)".
    std::vector<std::pair<int, std::string>> ordered;
    for (const auto& [call, ranks] : calls)
      ordered.emplace_back(ranks.front(), fmt::format("{} called {}", ranks_text(ranks), call));
    std::sort(ordered.begin(), ordered.end());
    std::vector<std::string> parts;
    for (auto& [first_rank, part] : ordered) parts.push_back(std::move(part));
    out.push_back(
        fmt::format("group '{}': collective #{} does not match across ranks: {}", name, seq, fmt::join(parts, "; ")));
    mismatch = true;
  }

  // 2. Ranks behind the others: they have not called the latest collective.
  std::map<uint32_t, std::vector<int>> by_last;
  for (int r : members) {
    const RecordedOp* last = last_of(r);
    by_last[last ? last->seq : 0].push_back(r);
  }
  if (by_last.size() > 1) {
    const uint32_t ahead = by_last.rbegin()->first;
    const std::vector<int>& leaders = by_last.rbegin()->second;
    for (const auto& [seq, ranks] : by_last) {
      if (seq == ahead) continue;
      const RecordedOp* waited = op_at(leaders.front(), seq + 1);
      const RecordedOp* last = last_of(ranks.front());
      const bool one = ranks.size() == 1;
      out.push_back(fmt::format(
          "group '{}': {} {} behind: {} not called collective #{}{}; {} last is {}", name, ranks_text(ranks),
          one ? "is" : "are", one ? "it has" : "they have", seq + 1,
          waited ? fmt::format(" ({} called {})", ranks_text(leaders), with_state(*waited)) : "", one ? "its" : "their",
          last ? fmt::format("#{} {}", seq, with_state(*last)) : "none (no collective recorded)"));
    }
  } else if (!mismatch) {
    // 3. Every rank reached the same collective: did it finish everywhere?
    std::vector<int> unfinished;
    for (int r : members)
      if (const RecordedOp* last = last_of(r); last && last->state != "completed") unfinished.push_back(r);
    const RecordedOp* last = last_of(members.front());
    if (!last) {
      out.push_back(fmt::format("group '{}': no collectives recorded", name));
    } else if (unfinished.empty()) {
      out.push_back(fmt::format("group '{}': every rank completed collective #{} {}", name, last->seq, last->op));
    } else {
      out.push_back(fmt::format("group '{}': every rank called collective #{} {}; it has not completed on {}", name,
                                last->seq, last->op, ranks_text(unfinished)));
    }
  }

  // 4. Point-to-point operations still waiting (pipeline stages waiting for each other).
  for (int r : members) {
    auto it = g.pending_p2p.find(r);
    if (it == g.pending_p2p.end()) continue;
    for (const RecordedOp& op : it->second) {
      const auto t = dump_time.find(r);
      const double waited = t == dump_time.end() ? 0 : static_cast<double>(t->second - op.created_ns) / 1e9;
      out.push_back(fmt::format("group '{}': rank {} waits on {} (p2p #{}, posted {:.1f} s before its dump)", name, r,
                                op.op, op.seq, waited));
    }
  }
}

}  // namespace

std::map<int, std::string> read_flight_dumps(const std::string& dir, std::vector<std::string>* problems) {
  std::map<int, std::string> dumps;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return dumps;
  while (dirent* e = ::readdir(d)) {
    const std::string file = e->d_name;
    int rank = -1;
    char tail = 0;
    if (std::sscanf(file.c_str(), "rank%d.json%c", &rank, &tail) != 1 || rank < 0) continue;  // skips temporaries
    std::ifstream in(dir + "/" + file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      if (problems) problems->push_back(fmt::format("{}/{}: cannot be read", dir, file));
      continue;
    }
    dumps[rank] = text.str();
  }
  ::closedir(d);
  return dumps;
}

std::vector<std::string> analyze_flight_records(const std::map<int, std::string>& dumps,
                                                const std::vector<int>& expected_ranks) {
  std::vector<std::string> out;
  std::map<std::string, GroupView> groups;
  std::map<int, int64_t> dump_time;
  std::set<int> expected(expected_ranks.begin(), expected_ranks.end());
  for (const auto& [rank, text] : dumps) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j.contains("groups")) {
      out.push_back(fmt::format("rank {}: its flight record is not a valid dump", rank));
      continue;
    }
    try {
      dump_time[rank] = j.value("time_ns", int64_t{0});
      for (const auto& g : j.at("groups")) {
        GroupView& view = groups[g.at("name").get<std::string>()];
        if (view.ranks.empty()) view.ranks = g.at("ranks").get<std::vector<int>>();
        for (int r : view.ranks) expected.insert(r);
      }
      for (const auto& e : j.at("entries")) {
        RecordedOp op;
        op.seq = e.at("seq").get<uint32_t>();
        op.op = e.at("op").get<std::string>();
        op.state = e.at("state").get<std::string>();
        op.created_ns = e.value("time_created_ns", int64_t{0});
        GroupView& view = groups[e.at("group").get<std::string>()];
        if (e.value("kind", std::string("collective")) == "collective") {
          view.collectives[rank][op.seq] = op;
        } else if (op.state == "scheduled" || op.state == "started") {
          view.pending_p2p[rank].push_back(op);
        }
      }
    } catch (const nlohmann::json::exception& e) {
      out.push_back(fmt::format("rank {}: its flight record is malformed ({})", rank, e.what()));
    }
  }
  std::vector<int> missing;
  for (int r : expected)
    if (!dumps.count(r)) missing.push_back(r);
  if (!missing.empty())
    out.push_back(fmt::format("no flight record from {} (exited before dumping, on another node, or not answering)",
                              ranks_text(missing)));
  for (const auto& [name, view] : groups) analyze_group(name, view, dump_time, out);
  return out;
}

void wait_for_flight_dumps(const std::string& dir, const std::vector<int>& running_ranks,
                           std::chrono::milliseconds patience) {
  if (read_flight_dumps(dir, nullptr).empty()) return;  // no collective failed: nothing to wait for
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const std::map<int, std::string> dumps = read_flight_dumps(dir, nullptr);
    const bool all = std::all_of(running_ranks.begin(), running_ranks.end(), [&](int r) { return dumps.count(r); });
    if (all || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<std::string> flight_report(const std::string& dir, const std::vector<int>& ranks) {
  std::vector<std::string> problems;
  const std::map<int, std::string> dumps = read_flight_dumps(dir, &problems);
  if (dumps.empty()) return {};
  std::vector<std::string> out = {
      fmt::format("flight recorder ({} of {} local ranks dumped, in {}):", dumps.size(), ranks.size(), dir)};
  for (const std::string& line : problems) out.push_back("  " + line);
  for (const std::string& line : analyze_flight_records(dumps, ranks)) out.push_back("  " + line);
  return out;
}

}  // namespace trainrun
