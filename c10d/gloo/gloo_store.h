#pragma once
// Gloo's rendezvous store interface over a trainrun Store (TCP, file, hash
// or prefix): Gloo's ranks exchange their addresses through it.
#include <gloo/rendezvous/store.h>

#include <memory>

#include "store/store.h"

namespace trainrun {
namespace c10d {

class GlooStore final : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<trainrun::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<trainrun::Store> store_;
};

}  // namespace c10d
}  // namespace trainrun
