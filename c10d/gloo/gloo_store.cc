#include "c10d/gloo/gloo_store.h"

namespace trainrun {
namespace c10d {

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  Bytes b = store_->get(key);
  return std::vector<char>(b.begin(), b.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { store_->wait(keys); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  store_->wait(keys, timeout);
}

}  // namespace c10d
}  // namespace trainrun
