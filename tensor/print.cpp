// PyTorch-style printing: the same number formats, line wrapping, summarization and suffixes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "ops/core/dispatch.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace tg {
namespace {

// PyTorch's default print options.
constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Python's float formatting for the cases PyTorch uses ("nan" never gets a sign).
std::string fmt_fixed(double v, int precision) {
  if (std::isnan(v)) return "nan";
  return printf_str(("%." + std::to_string(precision) + "f").c_str(), v);
}

std::string fmt_sci(double v) {
  if (std::isnan(v)) return "nan";
  return printf_str(("%." + std::to_string(kPrecision) + "e").c_str(), v);
}

// Chooses one format for all elements (integer-valued floats, fixed or scientific) and a width.
class Formatter {
 public:
  Formatter(DType dtype, const std::vector<double>& values) : floating_(is_floating(dtype)), bool_(dtype == kBool) {
    if (!floating_) {
      for (double v : values) width_ = std::max(width_, format_raw(v).size());
      return;
    }
    std::vector<double> finite;
    for (double v : values)
      if (std::isfinite(v) && v != 0.0) finite.push_back(v);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8;
      for (double v : finite) width_ = std::max(width_, sci_mode_ ? fmt_sci(v).size() : fmt_fixed(v, 0).size() + 1);
    } else {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
      for (double v : finite) width_ = std::max(width_, sci_mode_ ? fmt_sci(v).size() : fmt_fixed(v, kPrecision).size());
    }
  }

  size_t width() const { return width_; }

  // One element, right-aligned to the common width.
  std::string format(double v) const {
    std::string s = format_raw(v);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  std::string format_raw(double v) const {
    if (bool_) return v != 0.0 ? "True" : "False";
    if (!floating_) return std::to_string(static_cast<int64_t>(v));
    if (sci_mode_) return fmt_sci(v);
    if (int_mode_) {
      std::string s = fmt_fixed(v, 0);
      if (std::isfinite(v)) s += ".";
      return s;
    }
    return fmt_fixed(v, kPrecision);
  }

  bool floating_, bool_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// Row-major host values with their sizes; sub-tensors are addressed by a flat base index.
struct HostValues {
  std::vector<double> data;
  Shape sizes;
  Shape strides;  // contiguous strides of sizes
};

// The indices along a dim that printing shows (all, or the edges when summarizing).
std::vector<int64_t> shown(int64_t size, bool summarize) {
  std::vector<int64_t> out;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) out.push_back(i);
    for (int64_t i = size - kEdgeItems; i < size; ++i) out.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) out.push_back(i);
  }
  return out;
}

// The values the formatter sees: only the printed ones when summarizing.
void collect(const HostValues& h, size_t dim, int64_t base, bool summarize, std::vector<double>& out) {
  if (dim == h.sizes.size()) {
    out.push_back(h.data[static_cast<size_t>(base)]);
    return;
  }
  for (int64_t i : shown(h.sizes[dim], summarize)) collect(h, dim + 1, base + i * h.strides[dim], summarize, out);
}

std::string vector_str(const HostValues& h, int64_t base, int64_t indent, bool summarize, const Formatter& f) {
  const int64_t size = h.sizes.back();
  const int64_t element_length = static_cast<int64_t>(f.width()) + 2;
  const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / element_length);
  std::vector<std::string> items;
  const bool cut = summarize && size > 2 * kEdgeItems;
  for (int64_t i : shown(size, summarize)) {
    if (cut && i == size - kEdgeItems) items.push_back(" ...");
    items.push_back(f.format(h.data[static_cast<size_t>(base + i)]));
  }
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i % static_cast<size_t>(per_line) == 0 ? ",\n" + std::string(static_cast<size_t>(indent + 1), ' ') : ", ";
    out += items[i];
  }
  return out + "]";
}

std::string tensor_str(const HostValues& h, size_t dim, int64_t base, int64_t indent, bool summarize,
                       const Formatter& f) {
  const size_t ndim = h.sizes.size() - dim;
  if (ndim == 0) return f.format(h.data[static_cast<size_t>(base)]);
  if (ndim == 1) return vector_str(h, base, indent, summarize, f);
  const int64_t size = h.sizes[dim];
  const bool cut = summarize && size > 2 * kEdgeItems;
  std::vector<std::string> slices;
  for (int64_t i : shown(size, summarize)) {
    if (cut && i == size - kEdgeItems) slices.push_back("...");
    slices.push_back(tensor_str(h, dim + 1, base + i * h.strides[dim], indent + 1, summarize, f));
  }
  const std::string sep = "," + std::string(ndim - 1, '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
  std::string out = "[";
  for (size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
  return out + "]";
}

std::string size_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// PyTorch's _add_suffixes: suffixes go on the last line unless it would pass the line width.
std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes, size_t indent) {
  std::string out = body;
  const size_t nl = body.rfind('\n');
  // Python's len(s) - s.rfind("\n") + 1, where rfind gives -1 when there is no newline.
  size_t last_line_len = nl == std::string::npos ? body.size() + 2 : body.size() - nl + 1;
  for (const std::string& s : suffixes) {
    if (last_line_len + s.size() + 2 > static_cast<size_t>(kLineWidth)) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line_len = indent + s.size();
    } else {
      out += ", " + s;
      last_line_len += s.size() + 2;
    }
  }
  return out + ")";
}

HostValues host_values(const Tensor& t) {
  // Printing must not show up on the tape or in a trace.
  NoGradGuard no_grad;
  OpObserverGuard no_observer(nullptr);
  HostValues h;
  h.sizes = t.sizes();
  h.strides = contiguous_strides(h.sizes);
  const Tensor d = t.detach();
  if (is_floating(t.dtype())) {
    h.data = d.to_vector<double>();
  } else {
    for (int64_t v : d.to_vector<int64_t>()) h.data.push_back(static_cast<double>(v));
  }
  return h;
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const bool fake = impl()->storage()->is_fake();
  const std::string prefix = fake && !is_meta() ? "FakeTensor(" : "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  const bool default_dtype = dtype() == kFloat32 || dtype() == kInt64 || dtype() == kBool;
  const std::string dtype_suffix = "dtype=torch." + std::string(dtype_name(dtype()));
  std::string body;
  if (fake) {
    suffixes.push_back("size=" + size_tuple(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(dtype_suffix);
    body = "...";
  } else if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + size_tuple(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back(dtype_suffix);
    const HostValues h = host_values(*this);
    const bool summarize = numel() > kThreshold;
    std::vector<double> seen;
    collect(h, 0, 0, summarize, seen);
    const Formatter f(dtype(), seen);
    body = tensor_str(h, 0, 0, indent, summarize, f);
  }
  if (const auto& fn = grad_fn()) {
    suffixes.push_back("grad_fn=<" + fn->name() + ">");
  } else if (requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return add_suffixes(prefix + body, suffixes, static_cast<size_t>(indent));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace tg
