// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/capture/functional_ops.h"

#include <algorithm>

#include "ops/elementwise/copy.h"
#include "ops/shape/view.h"

namespace tg::graphs {
namespace {

std::string geometry_str(const Shape& sizes, const Shape& strides, int64_t offset) {
  return "size=" + shape_str(sizes) + ", stride=" + shape_str(strides) + ", offset=" + std::to_string(offset);
}

}  // namespace

Shape dense_strides_like(const TensorMeta& m) {
  const bool dense = !has_internal_overlap(m.sizes, m.strides) && storage_span(m.sizes, m.strides) == shape_numel(m.sizes);
  return dense && m.strides.size() == m.sizes.size() ? m.strides : contiguous_strides(m.sizes);
}

FunctionalizedOp::FunctionalizedOp(OpPtr inplace) : inplace_(std::move(inplace)) {
  const OpSchema& s = inplace_->schema();
  name_ = std::string(s.name);
  if (!name_.empty() && name_.back() == '_') name_.pop_back();
  schema_ = OpSchema{name_, s.flags & ~(kInPlace | kMetadataMutation | kOverwritesTarget), -1, -1};
}

std::vector<TensorMeta> FunctionalizedOp::infer(const TensorList& inputs) const {
  const auto m = static_cast<size_t>(inplace_->schema().mutates);
  const Tensor& target = inputs[m];
  if (inplace_->has(kMetadataMutation)) {
    // Apply the metadata change to a data-less stand-in and read off the resulting geometry.
    const TensorImpl& t = *target.impl();
    auto storage = std::make_shared<StorageImpl>(t.device(), t.storage()->nbytes(), /*fake=*/true);
    Tensor stand_in(std::make_shared<TensorImpl>(storage, t.sizes(), t.strides(), t.storage_offset(), t.dtype()));
    TensorList args = inputs;
    args[m] = stand_in;
    TensorList outs{stand_in};
    inplace_->eval(args, outs);
    return single_output(contiguous_meta(stand_in.sizes(), stand_in.dtype(), t.device()));
  }
  inplace_->infer(inputs);  // validates exactly as the in-place op would
  std::vector<TensorMeta> outs;
  for (int k : mutated_inputs(inplace_->schema())) {
    TensorMeta out = meta_of(inputs[static_cast<size_t>(k)]);
    out.strides = dense_strides_like(out);
    out.offset = 0;
    outs.push_back(std::move(out));
  }
  return outs;
}

void FunctionalizedOp::eval(const TensorList& inputs, TensorList& outputs) const {
  const auto m = static_cast<size_t>(inplace_->schema().mutates);
  if (inplace_->has(kMetadataMutation)) {
    // resize_ keeps the leading elements of the old contents.
    const Tensor& target = inputs[m];
    Tensor out = outputs[0];
    const int64_t n = std::min(out.numel(), target.numel());
    if (n > 0) out.view({-1}).narrow(0, 0, n).copy_(target.reshape({-1}).narrow(0, 0, n));
    return;
  }
  // Each result starts as a copy of the target it replaces; the in-place op then writes the copies.
  TensorList args = inputs;
  const std::vector<int> written = mutated_inputs(inplace_->schema());
  for (size_t j = 0; j < written.size(); ++j) {
    const auto k = static_cast<size_t>(written[j]);
    if (!inplace_->has(kOverwritesTarget)) outputs[j].copy_(inputs[k]);
    args[k] = outputs[j];
  }
  TensorList outs = outputs;
  inplace_->eval(args, outs);
}

ViewScatterOp::ViewScatterOp(Shape sizes, Shape strides, int64_t relative_offset)
    : sizes_(std::move(sizes)), strides_(std::move(strides)), relative_offset_(relative_offset) {}

const OpSchema& ViewScatterOp::schema() const {
  static const OpSchema s{"view_scatter", 0, -1, -1};
  return s;
}

std::vector<TensorMeta> ViewScatterOp::infer(const TensorList& inputs) const {
  const Tensor& base = inputs[0];
  const Tensor& src = inputs[1];
  TG_CHECK(src.sizes() == sizes_, "[view_scatter] source has sizes ", shape_str(src.sizes()), ", expected ",
           shape_str(sizes_));
  TensorMeta out = meta_of(base);
  out.strides = dense_strides_like(out);
  out.offset = 0;
  return {out};
}

void ViewScatterOp::eval(const TensorList& inputs, TensorList& outputs) const {
  Tensor out = outputs[0];
  out.copy_(inputs[0]);
  out.as_strided(sizes_, strides_, out.storage_offset() + relative_offset_).copy_(inputs[1]);
}

std::string ViewScatterOp::attrs() const { return geometry_str(sizes_, strides_, relative_offset_); }

AliasViewOp::AliasViewOp(Shape sizes, Shape strides, int64_t relative_offset)
    : sizes_(std::move(sizes)), strides_(std::move(strides)), relative_offset_(relative_offset) {}

const OpSchema& AliasViewOp::schema() const {
  static const OpSchema s{"alias_view", kView, -1, 0};
  return s;
}

std::vector<TensorMeta> AliasViewOp::infer(const TensorList& inputs) const {
  const Tensor& base = inputs[0];
  TensorMeta out{sizes_, strides_, base.storage_offset() + relative_offset_, base.dtype(), base.device()};
  TG_CHECK(out.offset >= 0, "[alias_view] negative storage offset ", out.offset);
  return {out};
}

std::string AliasViewOp::attrs() const { return geometry_str(sizes_, strides_, relative_offset_); }

const OpSchema& SnapshotOp::schema() const {
  static const OpSchema s{"clone", 0, -1, -1};
  return s;
}

std::vector<TensorMeta> SnapshotOp::infer(const TensorList& inputs) const {
  return single_output(contiguous_meta(inputs[0].sizes(), inputs[0].dtype(), inputs[0].device()));
}

void SnapshotOp::eval(const TensorList& inputs, TensorList& outputs) const { outputs[0].copy_(inputs[0]); }

const OpSchema& WriteBackOp::schema() const {
  static const OpSchema s{"copy_back_", kInPlace | kOverwritesTarget, 0, -1};
  return s;
}

std::vector<TensorMeta> WriteBackOp::infer(const TensorList& inputs) const {
  TG_CHECK(inputs[0].sizes() == inputs[1].sizes(), "[copy_back_] final value has sizes ",
           shape_str(inputs[1].sizes()), " but the input has sizes ", shape_str(inputs[0].sizes()));
  return single_output(meta_of(inputs[0]));
}

void WriteBackOp::eval(const TensorList& inputs, TensorList& outputs) const { outputs[0].copy_(inputs[1]); }

}  // namespace tg::graphs
