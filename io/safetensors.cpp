#include "io/safetensors.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "ops/factory/factory.h"
#include "tensor/check.h"

namespace tg {
namespace {

using nlohmann::json;

// safetensors' spelling of a dtype.
const char* st_dtype(DType d) {
  switch (d) {
    case DType::Bool: return "BOOL";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  for (DType d : {DType::Bool, DType::Int32, DType::Int64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    if (s == st_dtype(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference reader's limit

}  // namespace

void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TG_CHECK(name != "__metadata__", "[save_safetensors] \"__metadata__\" is reserved and cannot name a tensor");
    TG_CHECK(t.defined(), "[save_safetensors] tensor \"", name, "\" is undefined");
    TG_CHECK(!t.is_meta(), "[save_safetensors] tensor \"", name, "\" is on the meta device and holds no data");
    Tensor c = t.detach().to(kCPU).contiguous();
    const auto nbytes = static_cast<uint64_t>(c.numel() * c.element_size());
    std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    host.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TG_CHECK(out.good(), "[save_safetensors] cannot open ", tmp, " for writing");
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor& c : host) {
      out.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.numel() * c.element_size()));
    }
    out.flush();
    if (!out.good()) {
      out.close();
      std::filesystem::remove(tmp);
      TG_FAIL("[save_safetensors] writing ", tmp, " failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    TG_FAIL("[save_safetensors] cannot rename ", tmp, " to ", path, ": ", ec.message());
  }
}

SafetensorsFile load_safetensors(const std::string& path, Device device) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "[load_safetensors] cannot open ", path);
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  TG_CHECK(file_size >= 8, "[load_safetensors] ", path, ": file of ", file_size,
           " bytes is too short for the 8-byte header length");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  TG_CHECK(n <= kMaxHeader && n <= file_size - 8, "[load_safetensors] ", path, ": header length ", n,
           " exceeds the file (", file_size, " bytes)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    TG_FAIL("[load_safetensors] ", path, ": the header is not valid JSON: ", e.what());
  }
  TG_CHECK(header.is_object(), "[load_safetensors] ", path, ": the header is not a JSON object");
  const uint64_t data_size = file_size - 8 - n;

  SafetensorsFile result;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      TG_CHECK(value.is_object(), "[load_safetensors] ", path, ": __metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        TG_CHECK(v.is_string(), "[load_safetensors] ", path, ": __metadata__ value \"", k, "\" is not a string");
        result.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const char* where = "[load_safetensors] ";
    TG_CHECK(value.is_object() && value.contains("dtype") && value.contains("shape") && value.contains("data_offsets"),
             where, path, ": tensor \"", name, "\" lacks dtype, shape or data_offsets");
    Entry e{name, DType::Float32, {}, 0, 0};
    TG_CHECK(value["dtype"].is_string() && parse_dtype(value["dtype"].get<std::string>(), e.dtype), where, path,
             ": tensor \"", name, "\" has dtype ", value["dtype"].dump(), "; expected one of BOOL, I32, I64, F32, F64");
    const json& shape = value["shape"];
    TG_CHECK(shape.is_array(), where, path, ": tensor \"", name, "\" has a shape that is not a list");
    uint64_t numel = 1;
    for (const json& s : shape) {
      TG_CHECK(s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0), where, path, ": tensor \"",
               name, "\" has shape ", shape.dump(), "; expected non-negative integers");
      e.shape.push_back(s.get<int64_t>());
      numel *= s.get<uint64_t>();
    }
    const json& off = value["data_offsets"];
    TG_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
             path, ": tensor \"", name, "\" has data_offsets ", off.dump(), "; expected [begin, end]");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    TG_CHECK(e.begin <= e.end && e.end <= data_size, where, path, ": tensor \"", name, "\" has data_offsets [", e.begin,
             ", ", e.end, "] beyond the ", data_size, " bytes of data (truncated file?)");
    TG_CHECK(e.end - e.begin == numel * static_cast<uint64_t>(dtype_size(e.dtype)), where, path, ": tensor \"", name,
             "\" of shape ", shape.dump(), " and dtype ", value["dtype"].get<std::string>(), " needs ",
             numel * static_cast<uint64_t>(dtype_size(e.dtype)), " bytes but data_offsets span ", e.end - e.begin);
    entries.push_back(std::move(e));
  }
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    in.seekg(static_cast<std::streamoff>(8 + n + e.begin));
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    TG_CHECK(in.good(), "[load_safetensors] ", path, ": reading tensor \"", e.name, "\" failed");
    if (e.dtype == DType::Bool) {
      const auto* b = static_cast<const unsigned char*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) {
        TG_CHECK(b[i] <= 1, "[load_safetensors] ", path, ": tensor \"", e.name, "\" holds a BOOL byte of value ",
                 int(b[i]));
      }
    }
    result.tensors.emplace(e.name, device.is_cpu() ? t : t.to(device));
  }
  return result;
}

}  // namespace tg
