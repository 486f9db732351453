// See Note [Warm start] in docs/warm_start.md.
#include "ops/core/disk_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

namespace tg {
namespace {

// Bumped whenever the file layout, or the meaning of a payload of any kind, changes: every entry
// written before then is stale.
constexpr uint32_t kFormatVersion = 1;
constexpr char kMagic[8] = {'T', 'G', 'C', 'A', 'C', 'H', 'E', '\0'};

// The fixed part of a file, followed by the key text and the payload.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t key_size;
  uint64_t payload_size;
  uint64_t checksum;  // of the key text and the payload
};
static_assert(sizeof(Header) == 40);

struct State {
  std::mutex mutex;
  bool resolved = false;  // dir is the environment's (or the override's) choice
  std::string dir;        // empty: off
  bool unwritable = false;
  std::set<std::string> warned;  // entries reported bad this process
  DiskCacheStats stats;
  std::map<std::string, DiskCacheStats, std::less<>> by_kind;
};

State& state() {
  static State* s = new State;  // never destroyed: kernels may be compiled while the process exits
  return *s;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string directory_from_env() {
  const std::string chosen = env("TG_CACHE_DIR");
  if (chosen == "off" || chosen == "0") return {};
  if (!chosen.empty()) return chosen;
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/tapegraph";
  const std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/tapegraph";
  return {};
}

// The directory, resolved on first use; the caller holds the mutex.
const std::string& dir_locked(State& s) {
  if (!s.resolved) {
    s.dir = directory_from_env();
    s.resolved = true;
  }
  return s.dir;
}

// TG_LOGS names "cache" (or "all"): every lookup and store is printed.
bool logging() {
  const std::string logs = env("TG_LOGS");
  size_t start = 0;
  while (start <= logs.size()) {
    const size_t comma = std::min(logs.find(',', start), logs.size());
    const std::string_view item = std::string_view(logs).substr(start, comma - start);
    if (item == "cache" || item == "all") return true;
    start = comma + 1;
  }
  return false;
}

void log(const std::string& text) {
  if (logging()) std::cerr << "[tapegraph:cache] " << text << "\n";
}

std::string full_key(std::string_view kind, std::string_view key) {
  std::string k(kind);
  k += '\n';
  k += key;
  return k;
}

std::string path_for(const std::string& dir, std::string_view kind, const std::string& full) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(disk_cache_hash(full, disk_cache_hash(std::to_string(kFormatVersion)))));
  return dir + "/" + std::string(kind) + "-" + hex + ".bin";
}

uint64_t checksum(std::string_view key, std::string_view payload) {
  return disk_cache_hash(payload, disk_cache_hash(key));
}

// Applies `update` to the process's counters and to those of `kind`; the caller holds the mutex.
template <typename Update>
void count_locked(State& s, std::string_view kind, Update update) {
  update(s.stats);
  auto it = s.by_kind.find(kind);
  if (it == s.by_kind.end()) it = s.by_kind.emplace(std::string(kind), DiskCacheStats{}).first;
  update(it->second);
}

// Reports a bad entry once per process, counts it and removes the file (the caller rebuilds it).
void reject(std::string_view kind, const std::string& path, const std::string& why) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    count_locked(s, kind, [](DiskCacheStats& c) { ++c.rejected; });
    if (s.warned.insert(path).second)
      std::cerr << "[tapegraph] warning: cache entry " << path << " " << why << "; rebuilding it\n";
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

// Why `bytes` (a whole file) is not a good entry for `full`, or "" when it is one.
std::string check(const std::string& bytes, const std::string& full) {
  if (bytes.size() < sizeof(Header))
    return "is truncated (" + std::to_string(bytes.size()) + " bytes, shorter than its header)";
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return "is damaged (no cache header)";
  if (h.version != kFormatVersion)
    return "is stale (cache format " + std::to_string(h.version) + ", this build reads " +
           std::to_string(kFormatVersion) + ")";
  const uint64_t rest = bytes.size() - sizeof h;
  if (h.key_size > rest || h.payload_size > rest - h.key_size)
    return "is truncated (" + std::to_string(bytes.size()) + " bytes of " +
           std::to_string(sizeof h + h.key_size + h.payload_size) + ")";
  if (h.key_size + h.payload_size != rest)
    return "is damaged (" + std::to_string(bytes.size()) + " bytes, its header says " +
           std::to_string(sizeof h + h.key_size + h.payload_size) + ")";
  const std::string_view key(bytes.data() + sizeof h, h.key_size), payload(key.data() + key.size(), h.payload_size);
  if (checksum(key, payload) != h.checksum) return "is damaged (checksum mismatch)";
  if (key != full) return "is stale (written for another key)";
  return {};
}

bool read_file(const std::string& path, std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// Writes all of `bytes` to fd.
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Writes `bytes` to a temporary file beside `path` and renames it over `path`; errno on failure.
int write_atomically(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  const bool written = write_all(fd, bytes);
  int err = written ? 0 : (errno ? errno : EIO);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) ::unlink(tmp.c_str());
  return err;
}

}  // namespace

uint64_t disk_cache_hash(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

DiskCacheStats disk_cache_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

std::map<std::string, DiskCacheStats> disk_cache_stats_by_kind() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return {s.by_kind.begin(), s.by_kind.end()};
}

void reset_disk_cache_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats = DiskCacheStats{};
  s.by_kind.clear();
}

std::string disk_cache_dir() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return dir_locked(s);
}

void set_disk_cache_dir(const std::string& dir) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.dir = dir.empty() ? directory_from_env() : dir == "off" ? std::string() : dir;
  s.resolved = true;
  s.unwritable = false;
  s.warned.clear();
}

std::string disk_cache_path(std::string_view kind, std::string_view key) {
  const std::string dir = disk_cache_dir();
  return dir.empty() ? std::string() : path_for(dir, kind, full_key(kind, key));
}

std::optional<std::string> disk_cache_load(std::string_view kind, std::string_view key) {
  const std::string dir = disk_cache_dir();
  if (dir.empty()) return std::nullopt;
  const std::string full = full_key(kind, key);
  const std::string path = path_for(dir, kind, full);
  std::string bytes;
  const bool found = read_file(path, bytes);
  const std::string why = found ? check(bytes, full) : std::string();
  if (!why.empty()) reject(kind, path, why);
  const bool hit = found && why.empty();
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    count_locked(s, kind, [hit](DiskCacheStats& c) { ++(hit ? c.hits : c.misses); });
  }
  log(std::string(hit ? "hit " : "miss ") + path);
  if (!hit) return std::nullopt;
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return bytes.substr(sizeof h + h.key_size);
}

void disk_cache_store(std::string_view kind, std::string_view key, std::string_view payload) {
  State& s = state();
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    dir = dir_locked(s);
    if (dir.empty() || s.unwritable) return;
  }
  const std::string full = full_key(kind, key);
  const std::string path = path_for(dir, kind, full);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kFormatVersion;
  h.key_size = full.size();
  h.payload_size = payload.size();
  h.checksum = checksum(full, payload);
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes += full;
  bytes += payload;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const int err = ec ? ec.value() : write_atomically(path, bytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (err == 0) {
    count_locked(s, kind, [](DiskCacheStats& c) { ++c.stores; });
    log("store " + path + " (" + std::to_string(payload.size()) + " bytes)");
    return;
  }
  count_locked(s, kind, [](DiskCacheStats& c) { ++c.write_failures; });
  if (!s.unwritable)
    std::cerr << "[tapegraph] warning: cannot write the cache directory " << dir << " (" << std::strerror(err)
              << "); running without storing to it (set TG_CACHE_DIR to a writable directory, or TG_CACHE_DIR=off)\n";
  s.unwritable = true;
}

void disk_cache_reject(std::string_view kind, std::string_view key, std::string_view why) {
  const std::string path = disk_cache_path(kind, key);
  if (path.empty()) return;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    count_locked(s, kind, [](DiskCacheStats& c) {
      --c.hits;
      ++c.misses;
    });
  }
  reject(kind, path, "was refused (" + std::string(why) + ")");
}

}  // namespace tg
