// Sharded checkpoints of ZeroRedundancyOptimizer: one safetensors file per rank and a JSON index of
// the flat layout, loadable by any number of ranks. See Note [Sharded optimizer] in
// docs/sharded_optimizer.md.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "distributed/collectives/collectives.h"
#include "distributed/zero/zero_optimizer.h"
#include "io/safetensors.h"
#include "ops/factory/factory.h"
#include "tensor/check.h"

namespace tg::distributed {
namespace {

using nlohmann::json;
using Dict = std::map<std::string, Tensor>;

constexpr const char* kIndexName = "zero_index.json";
constexpr const char* kIndexFormat = "tapegraph-zero-checkpoint";
constexpr const char* kShardFormat = "tapegraph-zero-shard";
constexpr int kVersion = 1;

std::string shard_name(int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "zero_shard_%05d_of_%05d.safetensors", rank, world);
  return buf;
}

DType parse_dtype_name(const std::string& path, const std::string& name) {
  for (DType d : {kFloat16, kBFloat16, kFloat32, kFloat64})
    if (name == dtype_name(d)) return d;
  TG_FAIL("[load_sharded] ", path, ": unknown dtype \"", name, "\"");
}

json layout_json(const ZeroLayout& layout) {
  json groups = json::array();
  for (const ZeroGroup& g : layout.groups) {
    json params = json::array(), buckets = json::array();
    for (size_t m = 0; m < g.members.size(); ++m)
      params.push_back({{"index", g.members[m]}, {"shape", g.shapes[m]}, {"offset", g.offsets[m]}});
    for (const ZeroBucket& b : g.buckets) buckets.push_back({b.offset, b.size});
    groups.push_back({{"dtype", std::string(dtype_name(g.dtype))}, {"params", params}, {"buckets", buckets}});
  }
  return groups;
}

// The layout an index describes, checked for consistency (a damaged index must not index past a shard).
ZeroLayout parse_layout(const std::string& path, const json& index) {
  ZeroLayout layout;
  layout.world_size = index.at("world_size").get<int>();
  TG_CHECK(layout.world_size >= 1, "[load_sharded] ", path, ": world_size ", layout.world_size);
  for (const json& jg : index.at("groups")) {
    ZeroGroup g;
    g.dtype = parse_dtype_name(path, jg.at("dtype").get<std::string>());
    int64_t end = 0;
    for (const json& jb : jg.at("buckets")) {
      const ZeroBucket b{jb.at(0).get<int64_t>(), jb.at(1).get<int64_t>()};
      TG_CHECK(b.offset == end && b.size > 0 && b.size % layout.world_size == 0, "[load_sharded] ", path,
               ": bucket [", b.offset, ", +", b.size, ") does not continue the flat space at ", end,
               " in blocks of the world size ", layout.world_size);
      end += b.size;
      g.buckets.push_back(b);
    }
    for (const json& jp : jg.at("params")) {
      g.members.push_back(jp.at("index").get<size_t>());
      g.shapes.push_back(jp.at("shape").get<Shape>());
      g.offsets.push_back(jp.at("offset").get<int64_t>());
      const size_t m = g.members.size() - 1;
      for (int64_t s : g.shapes[m]) TG_CHECK(s >= 0, "[load_sharded] ", path, ": a negative size in a shape");
      size_t b = 0;
      while (b < g.buckets.size() && g.buckets[b].offset + g.buckets[b].size <= g.offsets[m]) ++b;
      TG_CHECK(b < g.buckets.size() && g.offsets[m] >= g.buckets[b].offset &&
                   g.offsets[m] + g.numel(m) <= g.buckets[b].offset + g.buckets[b].size,
               "[load_sharded] ", path, ": parameter ", g.members[m], " at offset ", g.offsets[m],
               " lies outside the buckets");
      g.bucket_of.push_back(b);
    }
    layout.groups.push_back(std::move(g));
  }
  return layout;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "[load_sharded] can't open ", path, " (no sharded checkpoint there?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void ZeroRedundancyOptimizer::save_sharded(const std::string& dir) const {
  namespace fs = std::filesystem;
  TG_CHECK(fs::is_directory(dir), "[save_sharded] ", dir, " is not a directory");
  const int rank = group_->rank(), world = group_->world_size();
  // One id for this save on every rank, so that shards of different saves are never mixed up.
  Tensor id = zeros({1}, {.dtype = kInt64, .device = group_->device()});
  if (rank == 0) id.fill_(static_cast<int64_t>(std::random_device{}() >> 1) * 65536 + (std::random_device{}() & 0xffff));
  broadcast_(id, 0, group_);
  const std::string checkpoint_id = std::to_string(id.cpu().item<int64_t>());

  Dict tensors;
  for (const auto& [key, t] : inner_->state_dict()) tensors[key] = t;
  save_safetensors((fs::path(dir) / shard_name(rank, world)).string(), tensors,
                   {{"format", kShardFormat},
                    {"rank", std::to_string(rank)},
                    {"world_size", std::to_string(world)},
                    {"checkpoint_id", checkpoint_id}});
  group_->barrier("zero_save_shards");
  if (rank == 0) {
    json index = {{"format", kIndexFormat},
                  {"version", kVersion},
                  {"checkpoint_id", checkpoint_id},
                  {"world_size", world},
                  {"stage", stage_},
                  {"num_params", model_params_.size()},
                  {"groups", layout_json(layout_)}};
    index["initial_lr"] = initial_lr_ ? json(*initial_lr_) : json(nullptr);
    json shards = json::array();
    for (int r = 0; r < world; ++r) shards.push_back(shard_name(r, world));
    index["shards"] = shards;
    // Written under a temporary name and renamed: an index on disk means a complete checkpoint.
    const fs::path path = fs::path(dir) / kIndexName, tmp = fs::path(dir) / (std::string(kIndexName) + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << index.dump(1) << "\n";
      TG_CHECK(out.good(), "[save_sharded] can't write ", tmp.string());
    }
    fs::rename(tmp, path);
  }
  group_->barrier("zero_save_index");
}

void ZeroRedundancyOptimizer::load_sharded(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / kIndexName).string();
  const std::string text = read_text(path);
  Dict full;
  std::optional<double> initial_lr;
  try {
    const json index = json::parse(text);
    TG_CHECK(index.value("format", "") == kIndexFormat, "[load_sharded] ", path, " is not a sharded optimizer index");
    TG_CHECK(index.at("version").get<int>() == kVersion, "[load_sharded] ", path, " has version ",
             index.at("version").dump(), "; expected ", kVersion);
    const size_t num_params = index.at("num_params").get<size_t>();
    TG_CHECK(num_params == model_params_.size(), "[load_sharded] ", path, " holds the state of ", num_params,
             " parameters; this optimizer has ", model_params_.size());
    const ZeroLayout saved = parse_layout(path, index);
    // Every parameter once, with this model's shape and dtype.
    std::vector<bool> seen(num_params, false);
    for (const ZeroGroup& g : saved.groups) {
      for (size_t m = 0; m < g.members.size(); ++m) {
        const size_t k = g.members[m];
        TG_CHECK(k < num_params && !seen[k], "[load_sharded] ", path, ": parameter index ", k,
                 " is out of range or repeated");
        seen[k] = true;
        const Tensor& p = model_params_[k];
        TG_CHECK(p.sizes() == g.shapes[m] && p.dtype() == g.dtype, "[load_sharded] ", path, ": parameter ", k, " was ",
                 dtype_name(g.dtype), " of shape ", shape_str(g.shapes[m]), "; this model's is ", dtype_name(p.dtype()),
                 " of shape ", shape_str(p.sizes()));
      }
    }
    const std::string checkpoint_id = index.at("checkpoint_id").get<std::string>();
    const json& names = index.at("shards");
    TG_CHECK(names.size() == static_cast<size_t>(saved.world_size), "[load_sharded] ", path, " names ", names.size(),
             " shards for a world of ", saved.world_size);
    std::vector<Dict> shards;
    for (int r = 0; r < saved.world_size; ++r) {
      const std::string name = names.at(static_cast<size_t>(r)).get<std::string>();
      TG_CHECK(name.find('/') == std::string::npos, "[load_sharded] ", path, ": shard name \"", name,
               "\" is not a file name");
      const std::string shard_path = (fs::path(dir) / name).string();
      TG_CHECK(fs::exists(shard_path), "[load_sharded] shard ", r, " of ", saved.world_size, " is missing: ", shard_path);
      SafetensorsFile f = load_safetensors(shard_path, kCPU);
      auto meta = [&](const char* key) {
        auto it = f.metadata.find(key);
        return it == f.metadata.end() ? std::string() : it->second;
      };
      TG_CHECK(meta("format") == kShardFormat && meta("rank") == std::to_string(r) &&
                   meta("world_size") == std::to_string(saved.world_size),
               "[load_sharded] ", shard_path, " is not shard ", r, " of ", saved.world_size, " (its metadata says rank '",
               meta("rank"), "' of '", meta("world_size"), "')");
      TG_CHECK(meta("checkpoint_id") == checkpoint_id, "[load_sharded] ", shard_path,
               " belongs to another save than the index ", path, " (checkpoint id ", meta("checkpoint_id"), " vs ",
               checkpoint_id, ")");
      for (const auto& [key, t] : f.tensors) {
        if (key.rfind("state.", 0) != 0) continue;
        const size_t digits = key.find_first_not_of("0123456789", 6);
        TG_CHECK(digits > 6 && digits < 16 && digits != std::string::npos && key[digits] == '.', "[load_sharded] ",
                 shard_path, ": unexpected entry \"", key, "\"");
        const size_t g = std::stoul(key.substr(6, digits - 6));
        TG_CHECK(g < saved.groups.size(), "[load_sharded] ", shard_path, ": \"", key, "\" names no group of the index");
        TG_CHECK(t.numel() == 1 || t.numel() == saved.shard_size(g), "[load_sharded] ", shard_path, ": \"", key,
                 "\" holds ", t.numel(), " elements; the index gives each rank ", saved.shard_size(g));
      }
      shards.push_back(std::move(f.tensors));
    }
    full = full_dict(shards, saved);
    if (index.contains("initial_lr") && !index.at("initial_lr").is_null())
      initial_lr = index.at("initial_lr").get<double>();
  } catch (const json::exception& e) {
    TG_FAIL("[load_sharded] ", path, " is damaged: ", e.what());
  }
  // Drop the saved initial_lr (full_dict wrote this optimizer's) in favour of the index's.
  full.erase("param_groups.0.initial_lr");
  if (initial_lr) full["param_groups.0.initial_lr"] = tg::full({}, *initial_lr, {.dtype = kFloat64});
  load_state_dict(full);  // re-shards for this rank; checks everything before changing anything
}

}  // namespace tg::distributed
