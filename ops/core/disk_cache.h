// The on-disk cache of compiled artifacts (generated kernels, library algorithm choices and plans),
// so that a second process skips what the first one computed. See Note [Warm start] in
// docs/warm_start.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tg {

// What the cache did in this process (reset_disk_cache_stats() starts again from zero).
struct DiskCacheStats {
  int64_t hits = 0;            // entries found, intact and for the same key
  int64_t misses = 0;          // lookups that found no usable entry (rejected ones included)
  int64_t rejected = 0;        // entries found damaged, truncated or stale, warned about and rebuilt
  int64_t stores = 0;          // entries written
  int64_t write_failures = 0;  // entries that could not be written
};

// The process's counters.
DiskCacheStats disk_cache_stats();
// The same, per kind of artifact ("nvrtc", "cublaslt", ...), for the kinds used so far.
std::map<std::string, DiskCacheStats> disk_cache_stats_by_kind();
// Sets the counters to zero (tests call this first).
void reset_disk_cache_stats();

// The directory in use: TG_CACHE_DIR, else $XDG_CACHE_HOME/tapegraph, else ~/.cache/tapegraph; empty
// when TG_CACHE_DIR=off (or no home is known).
std::string disk_cache_dir();
// Replaces the environment's choice for the rest of the process: a directory, "off", or "" for the
// environment's choice again. Forgets earlier warnings (tests point it at a temporary directory).
void set_disk_cache_dir(const std::string& dir);

// The payload stored under (kind, key), or nothing: no entry, or one that was damaged, truncated,
// written by another cache format or for another key (a file-name collision). A bad entry is
// reported once on stderr and removed, and the caller rebuilds it. `kind` names the artifact
// ("nvrtc", "cublaslt", "cudnn_sdpa"): a short file-name-safe word; `key` is the full text of
// everything the artifact depends on (sources, options, device, library versions).
std::optional<std::string> disk_cache_load(std::string_view kind, std::string_view key);
// Stores `payload` under (kind, key), replacing any entry, atomically: a concurrent reader sees the
// old file or the new one, never part of one. An unwritable directory is reported once, after which
// the process runs without storing.
void disk_cache_store(std::string_view kind, std::string_view key, std::string_view payload);
// For a payload disk_cache_load returned that its user found unusable (a library refused it):
// reports it once with `why`, counts it as rejected (and a miss instead of a hit), removes it.
void disk_cache_reject(std::string_view kind, std::string_view key, std::string_view why);

// The file (kind, key) is stored in, or "" when the cache is off.
std::string disk_cache_path(std::string_view kind, std::string_view key);
// A 64-bit FNV-1a hash of `bytes`: the entry's file name and its checksum.
uint64_t disk_cache_hash(std::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace tg
