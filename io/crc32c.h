// CRC32C (Castagnoli), the checksum TFRecord files guard each length and payload with.
#pragma once

#include <cstdint>
#include <string_view>

namespace tg {

// CRC32C of `bytes` (reflected polynomial 0x82F63B78); crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view bytes);

// TFRecord's masked form of a CRC: rotated right by 15 bits plus a constant, so that a CRC stored
// inside checksummed data does not make the outer checksum degenerate.
uint32_t mask_crc32c(uint32_t crc);

}  // namespace tg
