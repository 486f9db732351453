// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/store_adapter.h"

#include <algorithm>

#include "distributed/rendezvous/store.h"

namespace tg::distributed {

GlooStoreAdapter::GlooStoreAdapter(TcpStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefix_ + key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  const std::string value = store_.get(prefix_ + key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, store_.timeout()); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  for (const std::string& key : keys) {
    // At least a millisecond, so a late key still gets the store's own timed-out message.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    store_.get(prefix_ + key, std::max(left, std::chrono::milliseconds(1)));
  }
}

}  // namespace tg::distributed
