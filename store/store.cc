#include "store/store.h"

#include "base/error.h"

namespace trainrun {

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

void Store::check_multi_set(const char* op, const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  TR_CHECK(keys.size() == values.size(), ValueError, "{}: got {} keys but {} values", op, keys.size(),
           values.size());
}

}  // namespace trainrun
