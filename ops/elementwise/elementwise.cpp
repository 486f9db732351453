#include "ops/elementwise/elementwise.h"

#include <algorithm>
#include <sstream>

#include "ops/reduce/reduce.h"

namespace tg {
namespace {

// Moves dim `from` of every operand to position `to` (used while compacting dims).
void move_dim(TensorIter& it, int from, int to) {
  it.sizes[to] = it.sizes[from];
  for (int k = 0; k < it.nops; ++k) it.strides[k][to] = it.strides[k][from];
}

void swap_dims(TensorIter& it, int a, int b) {
  std::swap(it.sizes[a], it.sizes[b]);
  for (int k = 0; k < it.nops; ++k) std::swap(it.strides[k][a], it.strides[k][b]);
}

// -1 when dim a should be iterated inside dim b, 1 when outside, 0 when no operand cares.
// The output decides first; broadcast (stride 0) dims express no preference.
int compare_dims(const TensorIter& it, int a, int b) {
  for (int k = 0; k < it.nops; ++k) {
    const int64_t sa = it.strides[k][a];
    const int64_t sb = it.strides[k][b];
    if (sa == 0 || sb == 0) continue;
    if (sa < sb) return -1;
    if (sa > sb) return 1;
  }
  return 0;
}

void drop_unit_dims(TensorIter& it) {
  int kept = 0;
  for (int d = 0; d < it.ndim; ++d) {
    if (it.sizes[d] == 1) continue;
    if (kept != d) move_dim(it, d, kept);
    ++kept;
  }
  it.ndim = kept;
}

// Insertion sort, innermost first; a no-op pass for contiguous outputs.
void reorder_dims(TensorIter& it) {
  for (int i = 1; i < it.ndim; ++i) {
    for (int j = i; j > 0; --j) {
      const int c = compare_dims(it, j - 1, j);
      if (c > 0) {
        swap_dims(it, j - 1, j);
      } else if (c < 0) {
        break;
      }
    }
  }
}

// Merges neighbouring dims that every operand walks as one (stride[outer] == stride*size[inner]).
void coalesce_dims(TensorIter& it) {
  if (it.ndim <= 1) return;
  int prev = 0;
  for (int d = 1; d < it.ndim; ++d) {
    bool mergeable = true;
    for (int k = 0; k < it.nops && mergeable; ++k)
      mergeable = it.strides[k][prev] * it.sizes[prev] == it.strides[k][d];
    if (mergeable) {
      it.sizes[prev] *= it.sizes[d];
    } else {
      ++prev;
      if (prev != d) move_dim(it, d, prev);
    }
  }
  it.ndim = prev + 1;
}

Device operands_device(const char* op, std::initializer_list<const Tensor*> operands) {
  std::optional<Device> dev;
  for (const Tensor* t : operands) {
    const Device d = t->device();
    if (d.is_cpu() && t->dim() == 0) continue;  // CPU scalars join any device, as in PyTorch
    if (!dev) {
      dev = d;
    } else {
      TG_CHECK(*dev == d, "[", op, "] expected all tensors to be on the same device, but found at least two devices, ",
               dev->str(), " and ", d.str(), "!");
    }
  }
  return dev ? *dev : kCPU;
}

DType combine_categories(DType higher, DType lower) {
  if (is_floating(higher)) return higher;
  if (higher == kBool || is_floating(lower)) return promote_types(higher, lower);
  return higher;
}

}  // namespace

TensorIter TensorIter::make(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  TensorIter it;
  it.nops = 1 + static_cast<int>(inputs.size());
  TG_CHECK(it.nops <= kMaxIterOperands, "[elementwise] at most ", kMaxIterOperands - 1, " inputs, got ",
           inputs.size());
  const Shape& shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  TG_CHECK(nd <= kMaxIterDims, "[elementwise] tensors with more than ", kMaxIterDims, " dims are not supported, got ",
           nd);
  it.ndim = nd;
  it.numel = out.numel();
  it.device = out.device();
  it.data[0] = static_cast<char*>(out.impl()->data());
  it.dtypes[0] = out.dtype();
  const int64_t out_es = dtype_size(out.dtype());
  for (int d = 0; d < nd; ++d) {
    it.sizes[nd - 1 - d] = shape[static_cast<size_t>(d)];
    it.strides[0][nd - 1 - d] = out.strides()[static_cast<size_t>(d)] * out_es;
  }
  int k = 1;
  for (const Tensor* in : inputs) {
    it.data[k] = static_cast<char*>(in->impl()->data());
    it.dtypes[k] = in->dtype();
    const int64_t es = dtype_size(in->dtype());
    const Shape& s = in->sizes();
    const Shape& st = in->strides();
    const int lead = nd - static_cast<int>(s.size());
    TG_CHECK(lead >= 0, "[elementwise] input of shape ", shape_str(s), " has more dims than the output ",
             shape_str(shape));
    for (int d = 0; d < nd; ++d) {
      const int id = d - lead;
      int64_t stride = 0;
      if (id >= 0) {
        const int64_t size = s[static_cast<size_t>(id)];
        TG_CHECK(size == shape[static_cast<size_t>(d)] || size == 1, "[elementwise] input of shape ", shape_str(s),
                 " does not broadcast to the output shape ", shape_str(shape));
        if (size != 1) stride = st[static_cast<size_t>(id)] * es;
      }
      it.strides[k][nd - 1 - d] = stride;
    }
    ++k;
  }
  if (it.numel == 0) return it;
  drop_unit_dims(it);
  reorder_dims(it);
  coalesce_dims(it);
  if (it.ndim == 0) {  // a single element
    it.ndim = 1;
    it.sizes[0] = 1;
    for (int j = 0; j < it.nops; ++j) it.strides[j][0] = dtype_size(it.dtypes[j]);
  }
  return it;
}

bool TensorIter::is_contiguous() const {
  if (ndim != 1) return false;
  for (int k = 0; k < nops; ++k)
    if (strides[k][0] != dtype_size(dtypes[k])) return false;
  return true;
}

namespace {

// result_type over operands given as (dtype, has dims) pairs.
template <typename Operands, typename DTypeOf, typename HasDims>
DType result_type_of(const Operands& operands, DTypeOf dtype_of, HasDims has_dims) {
  std::optional<DType> dims, zero;
  for (const auto& t : operands) {
    std::optional<DType>& slot = has_dims(t) ? dims : zero;
    slot = slot ? promote_types(*slot, dtype_of(t)) : dtype_of(t);
  }
  if (!dims) return zero.value_or(kFloat32);
  if (!zero) return *dims;
  return combine_categories(*dims, *zero);
}

}  // namespace

DType result_type(std::initializer_list<const Tensor*> operands) {
  return result_type_of(operands, [](const Tensor* t) { return t->dtype(); }, [](const Tensor* t) { return t->dim() > 0; });
}

DType result_type(const std::vector<TensorMeta>& operands) {
  return result_type_of(operands, [](const TensorMeta& m) { return m.dtype; },
                        [](const TensorMeta& m) { return !m.sizes.empty(); });
}

DType result_type(const Tensor& t, const Scalar& s) { return promote_with_scalar(t.dtype(), s.kind()); }

const char* scalar_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "Bool";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
  }
  return "Unknown";
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && is_integral(to, false)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

std::string scalar_str(const Scalar& s) {
  switch (s.kind()) {
    case ScalarKind::Bool: return s.to_int() ? "true" : "false";
    case ScalarKind::Integral: return std::to_string(s.to_int());
    case ScalarKind::Floating: {
      std::ostringstream os;
      os << s.to_double();
      return os.str();
    }
  }
  return {};
}

TensorMeta elementwise_meta(const char* op, std::initializer_list<const Tensor*> operands, DType dtype) {
  TensorMeta m;
  m.dtype = dtype;
  m.device = operands_device(op, operands);
  bool first = true;
  for (const Tensor* t : operands) {
    if (first) {
      m.sizes = t->sizes();
      first = false;
    } else if (t->sizes() != m.sizes) {
      m.sizes = broadcast_shapes(m.sizes, t->sizes(), op);
    }
  }
  return m;
}

void check_inplace(const char* op, const Tensor& target, std::initializer_list<const Tensor*> others, DType result) {
  const Device dev = target.device();
  for (const Tensor* t : others) {
    const Device d = t->device();
    TG_CHECK(d == dev || (d.is_cpu() && t->dim() == 0), "[", op, "] expected all tensors to be on the same device, "
             "but found at least two devices, ", dev.str(), " and ", d.str(), "!");
    if (t->sizes() != target.sizes()) {
      const Shape b = broadcast_shapes(target.sizes(), t->sizes(), op);
      TG_CHECK(b == target.sizes(), "[", op, "] output with shape ", shape_str(target.sizes()),
               " doesn't match the broadcast shape ", shape_str(b));
    }
    check_no_partial_overlap(op, target, *t);
  }
  TG_CHECK(can_cast(result, target.dtype()), "[", op, "] result type ", scalar_type_name(result),
           " can't be cast to the desired output type ", scalar_type_name(target.dtype()));
}

void check_no_partial_overlap(const char* op, const Tensor& target, const Tensor& input) {
  const TensorImpl& a = *target.impl();
  const TensorImpl& b = *input.impl();
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return;
  if (a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset() &&
      a.dtype() == b.dtype()) {
    return;  // the very same elements: reading and writing each in one step is fine
  }
  auto range = [](const TensorImpl& t, int64_t& lo, int64_t& hi) {
    const int64_t es = dtype_size(t.dtype());
    int64_t extent = 0;
    for (size_t d = 0; d < t.sizes().size(); ++d) extent += (t.sizes()[d] - 1) * t.strides()[d];
    lo = t.storage_offset() * es;
    hi = (t.storage_offset() + extent) * es + es;
  };
  int64_t alo = 0, ahi = 0, blo = 0, bhi = 0;
  range(a, alo, ahi);
  range(b, blo, bhi);
  TG_CHECK(ahi <= blo || bhi <= alo, "[", op, "] unsupported operation: some elements of the input tensor and the "
           "written-to tensor refer to a single memory location. Please clone() the tensor before performing the "
           "operation.");
}

Scalar scalar_of(const Tensor& t) {
  TG_CHECK(t.numel() == 1 && t.is_cpu(), "[elementwise] expected a one-element CPU tensor, got shape ",
           shape_str(t.sizes()), " on ", t.device().str());
  return TG_DISPATCH_ALL(t.dtype(), "item", [&] { return Scalar(*static_cast<const scalar_t*>(t.raw_data())); });
}

Tensor reduce_grad(const Tensor& g, const TensorMeta& m) {
  Tensor r = g.sizes() == m.sizes ? g : sum_to(g, m.sizes);
  if (r.dtype() != m.dtype || r.device() != m.device) r = r.to(m.device, m.dtype);
  return r;
}

}  // namespace tg
