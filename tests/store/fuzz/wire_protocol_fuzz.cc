// libFuzzer target over what the TCPStore server does with received bytes:
// tell the dialect apart, parse requests one after another, and apply them
// to a key-value table. Invariants: the parser never reads past the input,
// always makes progress on a complete request, never completes a request
// from fewer bytes than it claimed to need, and only trainrun's own errors
// escape the table.
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "store/key_value_table.h"
#include "store/wire_protocol.h"

using namespace trainrun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<wire::Dialect> dialect = wire::detect_dialect(data, size);
  if (!dialect) return 0;
  wire::Limits limits;
  limits.max_key_bytes = 1 << 10;
  limits.max_value_bytes = 1 << 16;
  limits.max_keys_per_request = 64;
  limits.max_request_bytes = 1 << 18;
  KeyValueTable table;
  size_t off = 0;
  while (off < size) {
    wire::Request req;
    wire::ParseResult r = wire::parse_request(data + off, size - off, *dialect, limits, &req);
    if (r.status == wire::ParseStatus::kNeedMore) {
      if (r.needed <= size - off) std::abort();  // claimed to need bytes it already had
      break;
    }
    if (r.status == wire::ParseStatus::kInvalid) {
      if (r.error.empty()) std::abort();  // every rejection says why
      break;
    }
    if (r.consumed == 0 || r.consumed > size - off) std::abort();
    // The same request split anywhere must ask for more, never complete early.
    wire::Request partial;
    if (r.consumed > 1 &&
        wire::parse_request(data + off, r.consumed - 1, *dialect, limits, &partial).status != wire::ParseStatus::kNeedMore)
      std::abort();
    try {
      bool created = false;
      switch (req.type) {
        case wire::Query::kSet: table.set(req.keys.at(0), req.values.at(0)); break;
        case wire::Query::kAppend: table.append(req.keys.at(0), req.values.at(0)); break;
        case wire::Query::kAdd: table.add(req.keys.at(0), req.delta, &created); break;
        case wire::Query::kCompareSet: table.compare_set(req.keys.at(0), req.values.at(0), req.values.at(1), &created); break;
        case wire::Query::kDeleteKey: table.erase(req.keys.at(0)); break;
        case wire::Query::kMultiSet:
          if (req.keys.size() != req.values.size()) std::abort();
          for (size_t i = 0; i < req.keys.size(); ++i) table.set(req.keys[i], req.values[i]);
          break;
        case wire::Query::kCheck:
        case wire::Query::kWait:
        case wire::Query::kMultiGet: table.contains_all(req.keys); break;
        case wire::Query::kGet: table.find(req.keys.at(0)); break;
        default: break;
      }
    } catch (const Error&) {
      // ADD on a non-number or overflow: the server closes that connection.
    }
    off += r.consumed;
  }
  return 0;
}
