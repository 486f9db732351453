#include "io/tf_event.h"

#include <bit>

#include "io/crc32c.h"

namespace tg {
namespace {

// Protocol buffer wire types (the low 3 bits of a field's key).
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_le(std::string& out, uint64_t v, int nbytes) {
  for (int i = 0; i < nbytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

// int64 fields are varints of the two's-complement value, so a negative step takes 10 bytes.
void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_double(std::string& out, uint32_t field, double v) {
  put_key(out, field, kFixed64);
  put_le(out, std::bit_cast<uint64_t>(v), 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  put_key(out, field, kFixed32);
  put_le(out, std::bit_cast<uint32_t>(v), 4);
}

// Strings, bytes and embedded messages alike: the length as a varint, then the bytes.
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// proto3 leaves plain scalar fields at their default (zero) out of the encoding, as protobuf's own
// serializer does; oneof members (file_version, summary, simple_value) are always written.
void put_wall_time(std::string& out, double wall_time) {
  if (wall_time != 0.0) put_double(out, 1, wall_time);
}

}  // namespace

std::string encode_file_version_event(double wall_time, std::string_view file_version) {
  std::string event;
  put_wall_time(event, wall_time);
  put_bytes(event, 3, file_version);
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;  // tensorflow.Summary.Value
  put_bytes(summary_value, 1, tag);
  put_float(summary_value, 2, value);
  std::string summary;  // tensorflow.Summary
  put_bytes(summary, 1, summary_value);
  std::string event;  // tensorflow.Event
  put_wall_time(event, wall_time);
  if (step != 0) put_int64(event, 2, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string frame_tfrecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, data.size(), 8);
  put_le(record, mask_crc32c(crc32c(record)), 4);
  record.append(data);
  put_le(record, mask_crc32c(crc32c(data)), 4);
  return record;
}

}  // namespace tg
