// Gloo's rendezvous store interface over tapegraph's TcpStore, so a Gloo context meets its peers
// through the same store as the rest of the job (as PyTorch's ProcessGroupGloo wraps its TCPStore).
// See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

namespace tg::distributed {

class TcpStore;

// Gloo's keys ("0", "rank_1", ...) live under `prefix` in `store`, so they cannot collide with the
// job's own keys. Every wait ends after its timeout (the store's own when Gloo gives none) with the
// store's tg::Error naming the key.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // `store` must outlive the adapter.
  GlooStoreAdapter(TcpStore& store, std::string prefix);

  // Stores `data` under the prefixed `key`.
  void set(const std::string& key, const std::vector<char>& data) override;
  // The value of `key`, waiting for some rank to set it (at most the store's timeout).
  std::vector<char> get(const std::string& key) override;
  // Returns once every key is set (at most the store's timeout for each).
  void wait(const std::vector<std::string>& keys) override;
  // Returns once every key is set, waiting at most `timeout` in all.
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  TcpStore& store_;
  std::string prefix_;
};

}  // namespace tg::distributed
