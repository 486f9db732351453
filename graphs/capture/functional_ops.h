// Ops that functionalization introduces: out-of-place forms of in-place ops, and view scatter/regeneration.
#pragma once

#include "ops/core/op.h"

namespace tg::graphs {

// The out-of-place form of an in-place op: copies the target into a fresh buffer (unless the op
// overwrites it anyway) and applies the in-place kernel there. Named like the op without its '_'.
class FunctionalizedOp final : public Op {
 public:
  explicit FunctionalizedOp(OpPtr inplace);
  const OpSchema& schema() const override { return schema_; }
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
  std::string attrs() const override { return inplace_->attrs(); }
  const OpPtr& inplace() const { return inplace_; }

 private:
  OpPtr inplace_;
  std::string name_;
  OpSchema schema_;
};

// base with the region (sizes, strides, base offset + relative_offset) replaced by src: the
// functional form of writing through a view of base.
class ViewScatterOp final : public Op {
 public:
  ViewScatterOp(Shape sizes, Shape strides, int64_t relative_offset);
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
  std::string attrs() const override;

 private:
  Shape sizes_;
  Shape strides_;
  int64_t relative_offset_;
};

// A view of its input with explicit geometry relative to the input's own offset: regenerates a
// view of a value whose buffer was replaced by functionalization.
class AliasViewOp final : public Op {
 public:
  AliasViewOp(Shape sizes, Shape strides, int64_t relative_offset);
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList&, TensorList&) const override {}
  std::string attrs() const override;

 private:
  Shape sizes_;
  Shape strides_;
  int64_t relative_offset_;
};

// A copy of its input in a fresh buffer: saves the pre-mutation value of an input that the function
// writes into, so the backward never reads the written data.
class SnapshotOp final : public Op {
 public:
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
};

// Writes a mutated input's final value back into the caller's tensor inside the graph (CUDA graphs
// capture this for inputs with fixed addresses, such as parameters updated by an optimizer step).
class WriteBackOp final : public Op {
 public:
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
};

// Strides for a fresh buffer holding a value laid out like `m`: m's strides when they are dense and
// non-overlapping (so regenerated views line up), else contiguous.
Shape dense_strides_like(const TensorMeta& m);

}  // namespace tg::graphs
