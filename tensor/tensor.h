// Tensor: a shared handle to a TensorImpl, with the PyTorch-style method API.
// Methods are thin forwards to the free functions of ops/; each op family's .cpp defines its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/check.h"
#include "tensor/dtype.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/tensor_impl.h"

namespace tg {

class Node;

// How a loss reduces over its elements.
enum class Reduction { None, Mean, Sum };

// dtype, device and requires_grad for factories; use designated initializers: {.dtype = kFloat64}.
// An unset dtype means the factory's own default (float32 for most, int64 for randint and integer arange).
struct TensorOptions {
  std::optional<DType> dtype;
  Device device = kCPU;
  bool requires_grad = false;

  // The dtype, or `fallback` when none was given.
  DType dtype_or(DType fallback) const { return dtype.value_or(fallback); }
};

// A handle to tensor data; copies share the same tensor (as in PyTorch), clone() copies data.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  // Assigns to named tensors only: `p.grad() = g` or `x.view({2, 3}) = y` would rebind a temporary
  // handle and change nothing, so they do not compile (set_grad() and copy_() do what they say).
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  ~Tensor() = default;

  // ---- identity and metadata --------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // True when both handles refer to the same tensor (not merely equal values).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  const Shape& sizes() const { return checked()->sizes(); }
  const Shape& strides() const { return checked()->strides(); }
  // Size of dimension `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const { return checked()->dim(); }
  int64_t numel() const { return checked()->numel(); }
  DType dtype() const { return checked()->dtype(); }
  Device device() const { return checked()->device(); }
  TensorOptions options() const { return {dtype(), device(), false}; }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  int64_t element_size() const { return dtype_size(dtype()); }
  // Version counter shared with all views of the same storage; bumped by in-place ops.
  uint64_t version() const { return checked()->storage()->version(); }
  // Typed pointer to the first element; throws for fake/meta tensors and on dtype mismatch.
  template <typename T>
  T* data_ptr() const;
  // data_ptr(), or null for an undefined tensor (a kernel's absent optional operand).
  template <typename T>
  T* data_ptr_or_null() const {
    return defined() ? data_ptr<T>() : nullptr;
  }
  void* raw_data() const;

  // ---- host access ------------------------------------------------------------------------
  // The single element of a one-element tensor, converted to T (synchronizes with the device).
  template <typename T>
  T item() const;
  // All elements in row-major order, converted to T (copies from the device if needed).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd ---------------------------------------------------------------------------
  bool requires_grad() const;
  // Marks a leaf as requiring grad; errors on non-leaves and on non-floating dtypes.
  Tensor& requires_grad_(bool value = true);
  // The accumulated gradient (undefined until a backward reaches this tensor).
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  // Accumulates d(this)/d(leaves) into the leaves' grad; grad may be omitted for one-element tensors.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false, bool create_graph = false) const;
  // A tensor sharing data but cut from the graph.
  Tensor detach() const;
  Tensor& detach_();
  // Keeps this non-leaf's gradient in grad() after backward.
  void retain_grad() const;
  // Registers a hook on this tensor's gradient; returns its index.
  size_t register_hook(GradHook hook) const;
  // Registers a hook that runs after this leaf's .grad has been updated by a backward; returns its index.
  size_t register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;

  // ---- views (share storage) --------------------------------------------------------------
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  // Pieces of split_size along dim (the last may be shorter), `chunks` near-equal pieces, or every
  // index along dim (that dim removed): views, as torch.Tensor.split / chunk / unbind.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset = {}) const;
  // This tensor if already contiguous, else a contiguous copy.
  Tensor contiguous() const;

  // ---- copies and transfers ---------------------------------------------------------------
  Tensor clone() const;
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(cuda_device(index)); }
  // This tensor in other's dtype.
  Tensor type_as(const Tensor& other) const { return to(other.dtype()); }

  // ---- in-place ---------------------------------------------------------------------------
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& trunc_();
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  // Writes value where mask (broadcast to this tensor's shape) is true.
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  // Changes the sizes (contiguous), growing storage when needed; new elements are uninitialized.
  Tensor& resize_(const Shape& sizes);
  // Makes this tensor share source's storage and geometry.
  Tensor& set_(const Tensor& source);

  // ---- elementwise ------------------------------------------------------------------------
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor neg() const;
  Tensor pow(Scalar exponent) const;
  Tensor abs() const;
  Tensor sgn() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  // approximate: "none" (erf) or "tanh".
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor sqrt() const;
  // x * x.
  Tensor square() const;
  Tensor rsqrt() const;
  Tensor erf() const;
  Tensor trunc() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;

  // ---- reductions -------------------------------------------------------------------------
  Tensor sum(std::optional<DType> dtype = {}) const;
  Tensor sum(const Shape& dims, bool keepdim = false, std::optional<DType> dtype = {}) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  // Index of the maximum over all elements (flattened) or along dim.
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  // Variance with Bessel's correction by default (correction = 1).
  Tensor var(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  // Standard deviation with Bessel's correction by default.
  Tensor std(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  // The largest element as a 0-dim tensor.
  Tensor max() const;
  // The smallest element as a 0-dim tensor.
  Tensor min() const;
  // (values, int64 indices) of the largest elements along dim (torch.max(x, dim)).
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  // (values, int64 indices) of the smallest elements along dim (torch.min(x, dim)).
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  // Index of the minimum over all elements (flattened) or along dim.
  Tensor argmin(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  // Vector norm of order ord over dims, all when empty (tg::vector_norm).
  Tensor norm(double ord = 2, const Shape& dims = {}, bool keepdim = false) const;

  // ---- linear algebra, softmax, indexing --------------------------------------------------
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  // value where mask (broadcast to this tensor) is true.
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  // Copies of this tensor tiled `repeats[i]` times along dim i (leading repeats add dims).
  Tensor repeat(const Shape& repeats) const;
  // The lower (tril) or upper (triu) triangle of the last two dims, the rest zero.
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  // (values, int64 indices) of the k largest (or smallest) elements along dim.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;

  // PyTorch-style text, e.g. "tensor([[1., 2.], [3., 4.]])".
  std::string to_string() const;

 private:
  TensorImpl* checked() const {
    TG_CHECK(impl_ != nullptr, "[tensor] operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

using TensorList = std::vector<Tensor>;

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Arithmetic operators, tensor with tensor and tensor with scalar on either side.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

}  // namespace tg
