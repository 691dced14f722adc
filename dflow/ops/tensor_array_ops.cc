// TensorArrays (the V3 ops): a step's list of tensors, written and read by
// index, as tf.TensorArray and dynamic_rnn use them inside while loops. The
// array lives for one step on one device (step_resource.h). The float "flow"
// tensor each op passes on only orders the ops; its value is always 0.
//
// TensorFlow's rules, with its messages: an element is written once (a
// gradient array instead adds later writes to it), read once unless
// clear_after_read is false, and an unwritten element reads as zeros only when
// the element shape is fully known. A gradient array (TensorArrayGradV3) is
// found again by its forward array and source, so every gradient op of one
// source shares it.
//
// On a GPU, as TensorFlow registers them, the elements stay in device memory
// (handles, indices, sizes and lengths in host memory), so a dynamic_rnn on a
// GPU reads its inputs and writes its outputs there each iteration.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/element_memory.h"
#include "dflow/ops/step_resource.h"

namespace dflow {
namespace {

struct TensorArrayOptions {
  DataType dtype = DT_INVALID;
  PartialShape element_shape;
  bool dynamic_size = false;
  bool clear_after_read = true;
  bool identical_element_shapes = false;
  bool aggregate = false;  // Gradient arrays: later writes add.
};

class TensorArray : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "TensorArray";
  TensorArray(std::string name, int64_t size, TensorArrayOptions opts)
      : name_(std::move(name)), opts_(std::move(opts)), size_(size) {}
  std::string DebugString() const override { return absl::StrCat("TensorArray ", name_); }
  const std::string& name() const { return name_; }
  const TensorArrayOptions& options() const { return opts_; }

  absl::Status Write(int64_t index, const Tensor& value, const ElementMemory& memory) {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckOpen());
    if (value.dtype() != opts_.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorArray dtype is ", DataTypeString(opts_.dtype),
          " but Op is trying to write dtype ", DataTypeString(value.dtype()), "."));
    }
    if (index < 0) return Error("Tried to write to index ", index, " but it is negative");
    if (index >= size_) {
      if (!opts_.dynamic_size) {
        return Error("Tried to write to index ", index,
                     " but array is not resizeable and size is: ", size_);
      }
      size_ = index + 1;
    }
    Elem& e = elems_[index];
    if (e.cleared) {
      return Error("Could not write to TensorArray index ", index,
                   " because it has already been read and cleared.");
    }
    if (e.written) {
      if (!opts_.aggregate) {
        return Error("Could not write to TensorArray index ", index,
                     " because it has already been written to.");
      }
      if (e.value.shape() != value.shape()) {
        return Error("Could not aggregate to TensorArray index ", index,
                     " because the existing shape is ", e.value.shape().DebugString(),
                     " but the new input shape is ", value.shape().DebugString(), ".");
      }
      ASSIGN_OR_RETURN(e.value, memory.Add(e.value, value));
      return absl::OkStatus();
    }
    if (!element_shape_.IsCompatibleWith(value.shape())) {
      return Error("Could not write to TensorArray index ", index,
                   " because the value shape is ", value.shape().DebugString(),
                   " which is incompatible with the TensorArray's inferred element shape: ",
                   element_shape_.DebugString(), " (consider setting infer_shape=False).");
    }
    if ((opts_.identical_element_shapes || opts_.aggregate) && !element_shape_.IsFullyDefined()) {
      element_shape_ = PartialShape(value.shape());
    }
    e.value = value;
    e.written = true;
    return absl::OkStatus();
  }

  // The element (cleared when clear_after_read), or zeros in `memory` when it
  // was never written and the element shape is fully known.
  absl::StatusOr<Tensor> Read(int64_t index, const ElementMemory& memory) {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckOpen());
    if (index < 0 || index >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("Tried to read from index ", index,
                                                     " but array size is: ", size_));
    }
    auto it = elems_.find(index);
    if (it != elems_.end() && it->second.cleared) {
      return Error("Could not read index ", index,
                   " twice because it was cleared after a previous read (perhaps try setting "
                   "clear_after_read = false?).");
    }
    if (it == elems_.end() || !it->second.written) {
      if (!element_shape_.IsFullyDefined()) {
        return Error("Could not read from TensorArray index ", index,
                     ".  Furthermore, the element shape is not fully defined: ",
                     element_shape_.DebugString(),
                     ".  It is possible you are working with a resizeable TensorArray and "
                     "stop_gradients is not allowing the gradients to be written.  If you set "
                     "the full element_shape property on the forward TensorArray, the proper "
                     "all-zeros tensor will be returned instead of incurring this error.");
      }
      ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(element_shape_.dims()));
      RETURN_IF_ERROR(CheckOutputSize(shape.num_elements(), opts_.dtype, "TensorArray"));
      return memory.New(opts_.dtype, shape, /*zero=*/true);
    }
    if (!opts_.clear_after_read || opts_.aggregate) return it->second.value;
    it->second.cleared = true;
    return std::move(it->second.value);  // Its buffer is freed with the reader's.
  }

  int64_t Size() {
    absl::MutexLock l(&mu_);
    return size_;
  }
  PartialShape ElementShape() {
    absl::MutexLock l(&mu_);
    return element_shape_;
  }
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
    elems_.clear();
  }

 private:
  struct Elem {
    Tensor value;
    bool written = false;
    bool cleared = false;
  };
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(DebugString(), ": ", args...));
  }
  absl::Status CheckOpen() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ ? Error("has already been closed.") : absl::OkStatus();
  }

  const std::string name_;
  const TensorArrayOptions opts_;
  absl::Mutex mu_;
  int64_t size_ ABSL_GUARDED_BY(mu_);
  PartialShape element_shape_ ABSL_GUARDED_BY(mu_) = opts_.element_shape;
  // Only written (or cleared) elements take memory: a huge size costs nothing.
  absl::flat_hash_map<int64_t, Elem> elems_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// --- OpDefs ------------------------------------------------------------------------

absl::Status FlowShape(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

REGISTER_OP("TensorArrayV3")
    .Input("size: int32")
    .Output("handle: resource")
    .Output("flow: float")
    .Attr("dtype: type")
    .Attr("element_shape: shape = { unknown_rank: true }")
    .Attr("dynamic_size: bool = false")
    .Attr("clear_after_read: bool = true")
    .Attr("identical_element_shapes: bool = false")
    .Attr("tensor_array_name: string = ''")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape::Scalar());
      c->set_output(1, PartialShape::Scalar());
      return absl::OkStatus();
    });

REGISTER_OP("TensorArrayGradV3")
    .Input("handle: resource")
    .Input("flow_in: float")
    .Output("grad_handle: resource")
    .Output("flow_out: float")
    .Attr("source: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape::Scalar());
      c->set_output(1, PartialShape::Scalar());
      return absl::OkStatus();
    });

REGISTER_OP("TensorArrayWriteV3")
    .Input("handle: resource")
    .Input("index: int32")
    .Input("value: T")
    .Input("flow_in: float")
    .Output("flow_out: float")
    .Attr("T: type")
    .SetIsStateful()
    .SetShapeFn(FlowShape);

REGISTER_OP("TensorArrayReadV3")
    .Input("handle: resource")
    .Input("index: int32")
    .Input("flow_in: float")
    .Output("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

REGISTER_OP("TensorArrayGatherV3")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("flow_in: float")
    .Output("value: dtype")
    .Attr("dtype: type")
    .Attr("element_shape: shape = { unknown_rank: true }")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

REGISTER_OP("TensorArrayScatterV3")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("value: T")
    .Input("flow_in: float")
    .Output("flow_out: float")
    .Attr("T: type")
    .SetIsStateful()
    .SetShapeFn(FlowShape);

REGISTER_OP("TensorArrayConcatV3")
    .Input("handle: resource")
    .Input("flow_in: float")
    .Output("value: dtype")
    .Output("lengths: int64")
    .Attr("dtype: type")
    .Attr("element_shape_except0: shape = { unknown_rank: true }")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape());
      c->set_output(1, PartialShape({kUnknownDim}));
      return absl::OkStatus();
    });

REGISTER_OP("TensorArraySplitV3")
    .Input("handle: resource")
    .Input("value: T")
    .Input("lengths: int64")
    .Input("flow_in: float")
    .Output("flow_out: float")
    .Attr("T: type")
    .SetIsStateful()
    .SetShapeFn(FlowShape);

REGISTER_OP("TensorArraySizeV3")
    .Input("handle: resource")
    .Input("flow_in: float")
    .Output("size: int32")
    .SetIsStateful()
    .SetShapeFn(FlowShape);

REGISTER_OP("TensorArrayCloseV3").Input("handle: resource").SetIsStateful()
    .SetShapeFn(NoOutputs);

// --- kernels --------------------------------------------------------------------

absl::StatusOr<PartialShape> ShapeAttr(OpKernelConstruction* c, const std::string& name) {
  tensorflow::TensorShapeProto p;
  RETURN_IF_ERROR(GetNodeAttr(c->def(), name, &p));
  return PartialShape::FromProto(p);
}

// A kernel reading the array named by input 0; `flow_input` is passed on as
// output `flow_output` when both are set.
class TensorArrayKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }

 protected:
  static absl::StatusOr<std::shared_ptr<TensorArray>> Array(OpKernelContext* ctx) {
    return LookupStepResource<TensorArray>(ctx, 0);
  }
  static absl::StatusOr<int64_t> Index(OpKernelContext* ctx, int input) {
    const Tensor& t = ctx->input(input);
    if (t.dtype() != DT_INT32 || t.dims() != 0) {
      return ctx->InvalidArgument("index must be an int32 scalar, got ",
                                  DataTypeString(t.dtype()), " of shape ",
                                  t.shape().DebugString());
    }
    return t.scalar<int32_t>();
  }
  static absl::Status CheckDtype(OpKernelContext* ctx, const TensorArray& ta, DataType want) {
    if (ta.options().dtype == want) return absl::OkStatus();
    return ctx->InvalidArgument("TensorArray dtype is ", DataTypeString(ta.options().dtype),
                                " but Op requested dtype ", DataTypeString(want), ".");
  }
  // Elements [begin, begin + rows) of `value` along axis 0, as a new tensor
  // in `memory` whose copy is appended to `copies` (to run before it is read).
  static absl::StatusOr<Tensor> Rows(const Tensor& value, int64_t begin, int64_t rows,
                                     bool keep_axis, const ElementMemory& memory,
                                     std::vector<ElementCopy>* copies) {
    std::vector<int64_t> dims(value.shape().dim_sizes().begin(), value.shape().dim_sizes().end());
    const int64_t row_elems = value.NumElements() / std::max<int64_t>(dims[0], 1);
    if (keep_axis) {
      dims[0] = rows;
    } else {
      dims.erase(dims.begin());
    }
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor out, memory.New(value.dtype(), shape, /*zero=*/false));
    copies->push_back({value, begin * row_elems, out, 0, rows * row_elems});
    return out;
  }
  // Stacks (or, with `concat`, concatenates along axis 0) `elems`, which
  // share one shape (trailing shape with `concat`), into output 0.
  static absl::Status Join(OpKernelContext* ctx, const std::vector<Tensor>& elems,
                           const PartialShape& empty_shape, bool concat, DataType dtype) {
    if (elems.empty()) {
      if (!empty_shape.IsFullyDefined()) {
        return absl::UnimplementedError(absl::StrCat(
            "TensorArray has size zero, but element shape ", empty_shape.DebugString(),
            " is not fully defined. Currently only static shapes are supported when packing "
            "zero-size TensorArrays."));
      }
      std::vector<int64_t> dims = empty_shape.dims();
      dims.insert(dims.begin(), 0);
      ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
      ctx->allocate_output(0, shape);
      return absl::OkStatus();
    }
    std::vector<int64_t> dims(elems[0].shape().dim_sizes().begin(),
                              elems[0].shape().dim_sizes().end());
    if (concat && dims.empty()) {
      return ctx->InvalidArgument("Concat saw a scalar shape at index 0 but requires at least "
                                  "vectors.");
    }
    int64_t rows = 0;
    for (size_t i = 0; i < elems.size(); ++i) {
      const absl::Span<const int64_t> d = elems[i].shape().dim_sizes();
      const bool same = concat ? !d.empty() && std::equal(d.begin() + 1, d.end(),
                                                          dims.begin() + 1, dims.end())
                               : std::equal(d.begin(), d.end(), dims.begin(), dims.end());
      if (!same) {
        return ctx->InvalidArgument("TensorArray has inconsistent shapes.  Index 0 has shape ",
                                    DimsString(dims), " but index ", i, " has shape ",
                                    DimsString(d));
      }
      rows += concat ? d[0] : 1;
    }
    if (concat) {
      dims[0] = rows;
    } else {
      dims.insert(dims.begin(), rows);
    }
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    RETURN_IF_ERROR(CheckOutputSize(shape.num_elements(), dtype, "TensorArray"));
    Tensor* out = ctx->allocate_output_for_overwrite(0, shape);
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    std::vector<ElementCopy> copies;
    int64_t at = 0;
    for (const Tensor& e : elems) {
      copies.push_back({e, 0, *out, at, e.NumElements()});
      at += e.NumElements();
    }
    return ElementMemory::OfOutput(ctx, 0).CopyAll(copies);
  }
};

class TensorArrayOp : public TensorArrayKernel {
 public:
  explicit TensorArrayOp(OpKernelConstruction* c) : TensorArrayKernel(c) {
    c->GetAttr("dtype", &opts_.dtype).IgnoreError();
    absl::StatusOr<PartialShape> shape = ShapeAttr(c, "element_shape");
    c->SetStatus(shape.status());
    if (shape.ok()) opts_.element_shape = *shape;
    c->GetAttr("dynamic_size", &opts_.dynamic_size).IgnoreError();
    c->GetAttr("clear_after_read", &opts_.clear_after_read).IgnoreError();
    c->GetAttr("identical_element_shapes", &opts_.identical_element_shapes).IgnoreError();
    c->GetAttr("tensor_array_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& size = ctx->input(0);
    if (size.dtype() != DT_INT32 || size.dims() != 0) {
      return ctx->InvalidArgument("size must be an int32 scalar, got shape ",
                                  size.shape().DebugString());
    }
    const int32_t n = size.scalar<int32_t>();
    if (n < 0) return ctx->InvalidArgument("Size should be >= 0.");
    if (!IsSupportedDataType(opts_.dtype) || opts_.dtype == DT_RESOURCE) {
      return ctx->InvalidArgument("dflow has no TensorArray of ", DataTypeString(opts_.dtype));
    }
    ASSIGN_OR_RETURN(Tensor handle, CreateStepResource<TensorArray>(
                                        ctx, name_, [&](const std::string& unique) {
                                          return std::make_shared<TensorArray>(unique, n, opts_);
                                        }));
    ctx->set_output(0, std::move(handle));
    ctx->allocate_output(1, TensorShape({}));  // The flow: 0, in the flow's memory.
    return absl::OkStatus();
  }

 private:
  TensorArrayOptions opts_;
  std::string name_;
};

class TensorArrayGradOp : public TensorArrayKernel {
 public:
  explicit TensorArrayGradOp(OpKernelConstruction* c) : TensorArrayKernel(c) {
    c->GetAttr("source", &source_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> fwd, Array(ctx));
    TensorArrayOptions opts = fwd->options();
    opts.element_shape = fwd->ElementShape();
    opts.dynamic_size = false;
    opts.aggregate = true;
    const std::string name = absl::StrCat(fwd->name(), "@", source_);
    const int64_t size = fwd->Size();
    RETURN_IF_ERROR(ctx->step_resources()
                        ->LookupOrCreate<TensorArray>(
                            kStepContainer, name,
                            [&]() -> absl::StatusOr<std::shared_ptr<TensorArray>> {
                              return std::make_shared<TensorArray>(name, size, opts);
                            })
                        .status());
    ctx->set_output(0, ResourceHandleTensor<TensorArray>(ctx->device()->name(),
                                                         kStepContainer, name));
    ctx->set_output(1, ctx->input(1));
    return absl::OkStatus();
  }

 private:
  std::string source_;
};

class TensorArrayWriteOp : public TensorArrayKernel {
 public:
  using TensorArrayKernel::TensorArrayKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    ASSIGN_OR_RETURN(int64_t index, Index(ctx, 1));
    RETURN_IF_ERROR(ta->Write(index, ctx->input(2), ElementMemory::OfInput(ctx, 2)));
    ctx->set_output(0, ctx->input(3));
    return absl::OkStatus();
  }
};

class TensorArrayReadOp : public TensorArrayKernel {
 public:
  explicit TensorArrayReadOp(OpKernelConstruction* c) : TensorArrayKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    RETURN_IF_ERROR(CheckDtype(ctx, *ta, dtype_));
    ASSIGN_OR_RETURN(int64_t index, Index(ctx, 1));
    ASSIGN_OR_RETURN(Tensor value, ta->Read(index, ElementMemory::OfOutput(ctx, 0)));
    ctx->set_output(0, std::move(value));
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
};

class TensorArrayGatherOp : public TensorArrayKernel {
 public:
  explicit TensorArrayGatherOp(OpKernelConstruction* c) : TensorArrayKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    absl::StatusOr<PartialShape> shape = ShapeAttr(c, "element_shape");
    c->SetStatus(shape.status());
    if (shape.ok()) element_shape_ = *shape;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    RETURN_IF_ERROR(CheckDtype(ctx, *ta, dtype_));
    const Tensor& indices = ctx->input(1);
    if (indices.dtype() != DT_INT32 || indices.dims() != 1) {
      return ctx->InvalidArgument("indices must be an int32 vector, got shape ",
                                  indices.shape().DebugString());
    }
    std::vector<Tensor> elems;
    for (int32_t i : indices.flat<int32_t>()) {
      ASSIGN_OR_RETURN(Tensor t, ta->Read(i, ElementMemory::OfOutput(ctx, 0)));
      elems.push_back(std::move(t));
    }
    absl::StatusOr<PartialShape> empty = PartialShape::Merge(ta->ElementShape(), element_shape_);
    return Join(ctx, elems, empty.ok() ? *empty : element_shape_, /*concat=*/false, dtype_);
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape element_shape_;
};

class TensorArrayConcatOp : public TensorArrayKernel {
 public:
  explicit TensorArrayConcatOp(OpKernelConstruction* c) : TensorArrayKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    absl::StatusOr<PartialShape> shape = ShapeAttr(c, "element_shape_except0");
    c->SetStatus(shape.status());
    if (shape.ok()) except0_ = *shape;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    RETURN_IF_ERROR(CheckDtype(ctx, *ta, dtype_));
    const int64_t n = ta->Size();
    std::vector<Tensor> elems;
    Tensor* lengths = ctx->allocate_output(1, TensorShape({n}));
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Tensor t, ta->Read(i, ElementMemory::OfOutput(ctx, 0)));
      lengths->flat<int64_t>()[i] = t.dims() > 0 ? t.dim_size(0) : 0;
      elems.push_back(std::move(t));
    }
    return Join(ctx, elems, except0_, /*concat=*/true, dtype_);
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape except0_;
};

class TensorArrayScatterOp : public TensorArrayKernel {
 public:
  using TensorArrayKernel::TensorArrayKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    const Tensor& indices = ctx->input(1);
    const Tensor& value = ctx->input(2);
    if (indices.dtype() != DT_INT32 || indices.dims() != 1) {
      return ctx->InvalidArgument("indices must be an int32 vector, got shape ",
                                  indices.shape().DebugString());
    }
    if (value.dims() == 0 || value.dim_size(0) != indices.NumElements()) {
      return ctx->InvalidArgument("Expected len(indices) == values.shape[0], but saw: ",
                                  indices.NumElements(), " vs. ", value.shape().DebugString());
    }
    const int64_t size = ta->Size();
    for (int32_t i : indices.flat<int32_t>()) {
      if (!ta->options().dynamic_size && i >= size) {
        return ctx->InvalidArgument("Max scatter index must be < array size (", i, " vs. ",
                                    size, ")");
      }
    }
    const ElementMemory memory = ElementMemory::OfInput(ctx, 2);
    std::vector<Tensor> rows;
    std::vector<ElementCopy> copies;
    for (int64_t k = 0; k < indices.NumElements(); ++k) {
      ASSIGN_OR_RETURN(Tensor row, Rows(value, k, 1, /*keep_axis=*/false, memory, &copies));
      rows.push_back(std::move(row));
    }
    RETURN_IF_ERROR(memory.CopyAll(copies));  // Before a gradient array's write adds them.
    for (int64_t k = 0; k < indices.NumElements(); ++k) {
      RETURN_IF_ERROR(ta->Write(indices.flat<int32_t>()[k], rows[k], memory));
    }
    ctx->set_output(0, ctx->input(3));
    return absl::OkStatus();
  }
};

class TensorArraySplitOp : public TensorArrayKernel {
 public:
  using TensorArrayKernel::TensorArrayKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    const Tensor& value = ctx->input(1);
    const Tensor& lengths = ctx->input(2);
    if (lengths.dtype() != DT_INT64 || lengths.dims() != 1) {
      return ctx->InvalidArgument("Expected lengths to be a vector, received shape: ",
                                  lengths.shape().DebugString());
    }
    if (value.dims() == 0) {
      return ctx->InvalidArgument("Expected value to be at least a vector, but received shape: ",
                                  value.shape().DebugString());
    }
    int64_t total = 0;
    for (int64_t len : lengths.flat<int64_t>()) {
      if (len < 0 || len > value.dim_size(0)) {
        return ctx->InvalidArgument("length ", len, " is outside [0, ", value.dim_size(0), "]");
      }
      total += len;
    }
    if (total != value.dim_size(0)) {
      return ctx->InvalidArgument("Expected sum of lengths to be equal to values.shape[0], but "
                                  "sum of lengths is ", total, " and value's shape is: ",
                                  value.shape().DebugString());
    }
    const ElementMemory memory = ElementMemory::OfInput(ctx, 1);
    std::vector<Tensor> parts;
    std::vector<ElementCopy> copies;
    int64_t begin = 0;
    for (int64_t k = 0; k < lengths.NumElements(); ++k) {
      const int64_t len = lengths.flat<int64_t>()[k];
      ASSIGN_OR_RETURN(Tensor part,
                       Rows(value, begin, len, /*keep_axis=*/true, memory, &copies));
      parts.push_back(std::move(part));
      begin += len;
    }
    RETURN_IF_ERROR(memory.CopyAll(copies));  // Before a gradient array's write adds them.
    for (int64_t k = 0; k < lengths.NumElements(); ++k) {
      RETURN_IF_ERROR(ta->Write(k, parts[k], memory));
    }
    ctx->set_output(0, ctx->input(3));
    return absl::OkStatus();
  }
};

class TensorArraySizeOp : public TensorArrayKernel {
 public:
  using TensorArrayKernel::TensorArrayKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    ctx->set_output(0, Tensor::Scalar(static_cast<int32_t>(ta->Size())));
    return absl::OkStatus();
  }
};

class TensorArrayCloseOp : public TensorArrayKernel {
 public:
  using TensorArrayKernel::TensorArrayKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Array(ctx));
    ta->Close();
    return absl::OkStatus();
  }
};

REGISTER_KERNEL(KernelDefBuilder("TensorArrayV3").Device(kDeviceCPU), TensorArrayOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayGradV3").Device(kDeviceCPU), TensorArrayGradOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayWriteV3").Device(kDeviceCPU), TensorArrayWriteOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayReadV3").Device(kDeviceCPU), TensorArrayReadOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayGatherV3").Device(kDeviceCPU), TensorArrayGatherOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayConcatV3").Device(kDeviceCPU), TensorArrayConcatOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayScatterV3").Device(kDeviceCPU),
                TensorArrayScatterOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArraySplitV3").Device(kDeviceCPU), TensorArraySplitOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArraySizeV3").Device(kDeviceCPU), TensorArraySizeOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayCloseV3").Device(kDeviceCPU), TensorArrayCloseOp);

// On a GPU, as TensorFlow registers them: elements and flows in device
// memory; handles, sizes, indices and lengths in host memory. An array of
// another dtype (int32) stays on the CPU with every op on its handle.
REGISTER_KERNEL(KernelDefBuilder("TensorArrayV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuTensorTypes())
                    .HostMemory("size"),
                TensorArrayOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayGradV3").Device(kDeviceGPU), TensorArrayGradOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayWriteV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .HostMemory("index"),
                TensorArrayWriteOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayReadV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuTensorTypes())
                    .HostMemory("index"),
                TensorArrayReadOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayGatherV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuTensorTypes())
                    .HostMemory("indices"),
                TensorArrayGatherOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayConcatV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuTensorTypes())
                    .HostMemory("lengths"),
                TensorArrayConcatOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayScatterV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .HostMemory("indices"),
                TensorArrayScatterOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArraySplitV3")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .HostMemory("lengths"),
                TensorArraySplitOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArraySizeV3").Device(kDeviceGPU).HostMemory("size"),
                TensorArraySizeOp);
REGISTER_KERNEL(KernelDefBuilder("TensorArrayCloseV3").Device(kDeviceGPU), TensorArrayCloseOp);

}  // namespace
}  // namespace dflow
