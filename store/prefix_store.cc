#include "store/prefix_store.h"

#include "base/error.h"

namespace trainrun {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultTimeout), prefix_(std::move(prefix)), store_(std::move(store)) {
  TR_CHECK(store_ != nullptr, ValueError, "PrefixStore('{}'): the underlying store is null", prefix_);
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(join(k));
  return out;
}

// get and multi_get block for the underlying store's timeout, as PyTorch's
// PrefixStore does (a wait first would cost the TCPStore a round trip).
void PrefixStore::set(const std::string& key, const Bytes& value) { store_->set(join(key), value); }
Bytes PrefixStore::get(const std::string& key) { return store_->get(join(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t delta) { return store_->add(join(key), delta); }
Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return store_->compare_set(join(key), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return store_->check(join(keys)); }
void PrefixStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) { store_->wait(join(keys), timeout); }
bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(join(key)); }
int64_t PrefixStore::num_keys() { return store_->num_keys(); }
void PrefixStore::append(const std::string& key, const Bytes& value) { store_->append(join(key), value); }
std::vector<Bytes> PrefixStore::multi_get(const std::vector<std::string>& keys) {
  return store_->multi_get(join(keys));
}
void PrefixStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  check_multi_set("multi_set", keys, values);
  store_->multi_set(join(keys), values);
}

}  // namespace trainrun
