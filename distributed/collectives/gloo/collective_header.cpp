// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/collective_header.h"

#include "distributed/rendezvous/socket.h"

namespace tg::distributed {
namespace {

constexpr char kMagic[] = "TGCH";

bool is_reduction(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
}

}  // namespace

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
  }
  return "an unknown collective";
}

CollectiveHeader CollectiveHeader::make(CollectiveKind kind, DType dtype, int64_t numel, ReduceOp op, int root,
                                        int64_t sequence) {
  CollectiveHeader h;
  h.kind = kind;
  h.dtype = dtype;
  h.op = is_reduction(kind) ? op : ReduceOp::Sum;
  h.root = kind == CollectiveKind::kBroadcast ? root : 0;
  h.sequence = sequence;
  h.numel = numel;
  return h;
}

std::string CollectiveHeader::encode() const {
  std::string out(kMagic, 4);
  net::put_u8(out, static_cast<uint8_t>(kind));
  net::put_u8(out, static_cast<uint8_t>(dtype));
  net::put_u8(out, static_cast<uint8_t>(op));
  net::put_u32(out, static_cast<uint32_t>(root));
  net::put_i64(out, sequence);
  net::put_i64(out, numel);
  return out;
}

std::optional<CollectiveHeader> CollectiveHeader::decode(const std::string& bytes) {
  if (bytes.size() != kBytes || bytes.compare(0, 4, kMagic) != 0) return std::nullopt;
  CollectiveHeader h;
  h.kind = static_cast<CollectiveKind>(bytes[4]);
  h.dtype = static_cast<DType>(bytes[5]);
  h.op = static_cast<ReduceOp>(bytes[6]);
  h.root = static_cast<int32_t>(net::read_u32(bytes.data() + 7));
  net::Reader r(std::string_view(bytes).substr(11));
  h.sequence = r.i64();
  h.numel = r.i64();
  return h;
}

std::string CollectiveHeader::describe() const {
  std::string s = std::string(collective_kind_name(kind)) + " #" + std::to_string(sequence) + " of " +
                  std::to_string(numel) + " " + std::string(dtype_name(dtype)) + " elements";
  if (is_reduction(kind)) s += std::string(", ") + reduce_op_name(op);
  if (kind == CollectiveKind::kBroadcast) s += ", root " + std::to_string(root);
  return s;
}

}  // namespace tg::distributed
