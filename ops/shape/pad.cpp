// F.pad: the padded tensor as a cat of the input with views of it (or constant blocks), per dim.
#include "ops/shape/pad.h"

#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"

namespace tg {
namespace {

// The border of `amount` elements added on one side of dim d (before when `front`).
Tensor border(const Tensor& x, int64_t d, int64_t amount, bool front, const std::string& mode, double value) {
  const int64_t n = x.size(d);
  if (mode == "constant") {
    Shape sizes = x.sizes();
    sizes[static_cast<size_t>(d)] = amount;
    return full(sizes, value, {.dtype = x.dtype(), .device = x.device()});
  }
  if (mode == "replicate") {
    Shape sizes = x.sizes();
    sizes[static_cast<size_t>(d)] = amount;
    return expand(narrow(x, d, front ? 0 : n - 1, 1), sizes);
  }
  if (mode == "circular") return narrow(x, d, front ? n - amount : 0, amount);
  // reflect: before = x[amount], ..., x[1]; after = x[n-2], ..., x[n-1-amount]
  TensorList pieces;
  for (int64_t i = 0; i < amount; ++i) pieces.push_back(narrow(x, d, front ? amount - i : n - 2 - i, 1));
  return cat(pieces, d);
}

}  // namespace

Tensor pad(const Tensor& x, const Shape& amounts, const std::string& mode, double value) {
  TG_CHECK(x.defined(), "[pad] got an undefined tensor");
  TG_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular",
           "[pad] mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got \"", mode, "\"");
  TG_CHECK(amounts.size() % 2 == 0, "[pad] padding length must be divisible by 2, got ", shape_str(amounts));
  const int64_t dims = static_cast<int64_t>(amounts.size()) / 2;
  TG_CHECK(dims <= x.dim(), "[pad] padding length ", amounts.size(), " is too large for input of shape ",
           shape_str(x.sizes()), " (at most ", 2 * x.dim(), ")");
  if (mode != "constant") {
    TG_CHECK(value == 0.0, "[pad] padding mode \"", mode, "\" does not take a fill value, got ", value);
    TG_CHECK(x.dim() >= dims + 1, "[pad] ", mode, " padding of ", dims, " dims expects at least ", dims + 1,
             "-D input (a batch or channel dim first), got shape ", shape_str(x.sizes()));
  }
  Tensor out = x;
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t d = x.dim() - 1 - i;
    const int64_t before = amounts[static_cast<size_t>(2 * i)], after = amounts[static_cast<size_t>(2 * i + 1)];
    const int64_t n = out.size(d);
    if (mode == "constant") {
      TG_CHECK(n + before + after >= 0, "[pad] padding ", shape_str(amounts), " crops dim ", d, " of shape ",
               shape_str(x.sizes()), " below zero");
      if (before < 0) out = narrow(out, d, -before, out.size(d) + before);
      if (after < 0) out = narrow(out, d, 0, out.size(d) + after);
    } else {
      TG_CHECK(before >= 0 && after >= 0, "[pad] ", mode, " padding needs non-negative amounts, got ",
               shape_str(amounts));
      if (mode == "reflect")
        TG_CHECK(before < n && after < n, "[pad] reflect padding ", shape_str(amounts),
                 " must be smaller than the padded dim ", d, " of input shape ", shape_str(x.sizes()));
      else if (mode == "circular")
        TG_CHECK(before <= n && after <= n, "[pad] circular padding ", shape_str(amounts),
                 " wraps around more than once: amounts must be at most the size of the padded dim ", d,
                 " of input shape ", shape_str(x.sizes()));
      else
        TG_CHECK(n > 0 || (before == 0 && after == 0), "[pad] replicate padding of the empty dim ", d,
                 " of input shape ", shape_str(x.sizes()));
    }
    TensorList parts;
    if (before > 0) parts.push_back(border(out, d, before, true, mode, value));
    parts.push_back(out);
    if (after > 0) parts.push_back(border(out, d, after, false, mode, value));
    if (parts.size() > 1) out = cat(parts, d);
  }
  return out;
}

}  // namespace tg
