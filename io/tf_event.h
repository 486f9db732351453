// The bytes of a TensorBoard event file: tensorflow.Event protocol buffers, each framed as a
// TFRecord. Only the fields scalar summaries need are encoded, by hand, so no protobuf dependency.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tg {

// Serialized tensorflow.Event{wall_time = 1, file_version = 3}: the first record of an event file.
std::string encode_file_version_event(double wall_time, std::string_view file_version = "brain.Event:2");

// Serialized tensorflow.Event{wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}}}.
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

// One TFRecord: uint64 length (little-endian), masked CRC32C of those 8 bytes, the data, masked
// CRC32C of the data (CRCs little-endian too).
std::string frame_tfrecord(std::string_view data);

}  // namespace tg
