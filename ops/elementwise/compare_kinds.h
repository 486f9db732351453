// The comparison family, one row per kind. CompareKind, the schemas, the functor each backend
// launches and the name the fused-kernel generator calls are all generated from this list.
#pragma once

#include <cstdint>
#include <iterator>

#include "ops/elementwise/kind_traits.h"

// X(Kind, "schema name", Functor); every comparison computes in any dtype and returns bool.
#define TG_COMPARE_KINDS(X) \
  X(Eq, "eq", EqFn)         \
  X(Ne, "ne", NeFn)         \
  X(Lt, "lt", LtFn)         \
  X(Le, "le", LeFn)         \
  X(Gt, "gt", GtFn)         \
  X(Ge, "ge", GeFn)

namespace tg {

// Comparisons (bool results).
enum class CompareKind : uint8_t { TG_COMPARE_KINDS(TG_KIND_ENUMERATOR) };
inline constexpr int kCompareKinds = 0 TG_COMPARE_KINDS(TG_KIND_COUNT);

// A row of the list as data.
struct CompareInfo {
  const char* name;     // schema name (also the dtype dispatch's error prefix)
  const char* functor;  // the functor template in ops/elementwise/elementwise_math.h
};

#define TG_COMPARE_INFO(K, NAME, FN) CompareInfo{NAME, #FN},
inline constexpr CompareInfo kCompareInfo[] = {TG_COMPARE_KINDS(TG_COMPARE_INFO)};
#undef TG_COMPARE_INFO
static_assert(std::size(kCompareInfo) == kCompareKinds, "one CompareInfo per CompareKind");

// The row of kind k.
constexpr const CompareInfo& compare_info(CompareKind k) { return kCompareInfo[static_cast<int>(k)]; }

// The kind that computes k with its two operands swapped: gt and ge run as lt and le (a > b is
// b < a, false for NaN either way), so the backends compile the kernels of lt and le only.
constexpr CompareKind mirrored(CompareKind k) {
  return k == CompareKind::Gt ? CompareKind::Lt : k == CompareKind::Ge ? CompareKind::Le : k;
}
// True for the kinds launched as their mirror (no kernels of their own).
constexpr bool runs_mirrored(CompareKind k) { return mirrored(k) != k; }

}  // namespace tg
