// TensorList ops: EmptyTensorList, TensorListReserve, TensorListFromTensor,
// TensorListStack, TensorListGetItem, TensorListSetItem, TensorListPushBack,
// TensorListPopBack, TensorListSplit, TensorListConcatV2 (a TensorArray's
// split and concat), TensorListLength, TensorListElementShape, and the
// variant kernels of AddN (a list's gradients summed) and ZerosLike. Control flow v2
// builds TensorArrays and while-loop gradient accumulators from them: a list
// is a TensorList (framework/tensor_list.h) in a scalar DT_VARIANT tensor.
//
// As in TensorFlow, a kernel that changes a list (SetItem, PushBack, PopBack)
// never changes the list its input holds when another consumer may see it: it
// changes the input's list in place only when it holds the only reference to
// that tensor's buffer, and otherwise a copy (the element tensors' buffers
// are shared, not copied). Error texts are TensorFlow's.
//
// On a GPU, as TensorFlow registers them, a list's elements stay in device
// memory (int32 elements in host memory, as dflow keeps int32 on a GPU);
// the list itself, indices, lengths and element shapes are host values. So
// a control flow v2 loop on a GPU (tf.TensorArray, while_v2's gradient
// accumulators) reads and writes its elements there each iteration.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor_list.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/element_memory.h"

namespace dflow {
namespace {

using tensorflow::DT_VARIANT;

// The element types of a list on a CPU.
const DataTypeVector& ListElementTypes() {
  static const DataTypeVector* types =
      new DataTypeVector{DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL, DT_STRING};
  return *types;
}

// --- shapes ------------------------------------------------------------------------

// TensorFlow's TensorShapeFromTensor: a scalar -1 is the unknown shape, a
// vector lists the dimensions (-1 unknown).
absl::StatusOr<PartialShape> ShapeFromTensor(const Tensor& t) {
  auto value = [&t](int64_t i) -> int64_t {
    return t.dtype() == DT_INT32 ? t.flat<int32_t>()[i] : t.flat<int64_t>()[i];
  };
  if (t.dtype() != DT_INT32 && t.dtype() != DT_INT64) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected an int32 or int64 shape tensor; found ", DataTypeString(t.dtype())));
  }
  if (t.dims() == 0) {
    if (value(0) == -1) return PartialShape::Unknown();
    return absl::InvalidArgumentError(
        "The only valid scalar shape tensor is the fully unknown shape specified as -1.");
  }
  if (t.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shape must be at most rank 1 but is rank ", t.dims()));
  }
  std::vector<int64_t> dims(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    dims[i] = value(i);
    if (dims[i] < -1) {
      return absl::InvalidArgumentError(absl::StrCat("Dimension ", dims[i], " must be >= -1"));
    }
  }
  return PartialShape(std::move(dims));
}

// TensorFlow's PartialTensorShape::MergeWith, with its message.
absl::StatusOr<PartialShape> MergeShapes(const PartialShape& a, const PartialShape& b) {
  if (!a.IsCompatibleWith(b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PartialTensorShape: Incompatible shapes during merge: ", a.DebugString(),
                     " vs. ", b.DebugString()));
  }
  return PartialShape::Merge(a, b);
}

// The shape input `i` gives, or InvalidArgument naming the kernel.
absl::StatusOr<PartialShape> ShapeInput(OpKernelContext* ctx, int i) {
  absl::StatusOr<PartialShape> shape = ShapeFromTensor(ctx->input(i));
  if (!shape.ok()) return ctx->InvalidArgument(shape.status().message());
  return shape;
}

// The element shape input `i` gives, merged with the list's.
absl::StatusOr<PartialShape> ElementShapeFromInput(OpKernelContext* ctx, const TensorList& list,
                                                   int i) {
  ASSIGN_OR_RETURN(PartialShape shape, ShapeFromTensor(ctx->input(i)));
  return MergeShapes(shape, list.element_shape);
}

// `shape` merged with the shape of every set element of `list` (how
// TensorFlow finds the shape of an unset element it has to read).
absl::StatusOr<PartialShape> MergeWithElements(PartialShape shape, const TensorList& list) {
  for (const Tensor& t : list.tensors) {
    if (!t.IsInitialized()) continue;
    ASSIGN_OR_RETURN(shape, MergeShapes(shape, PartialShape(t.shape())));
  }
  return shape;
}

// The dimensions after the first (of a rank >= 1 shape).
std::vector<int64_t> DimsAfterFirst(absl::Span<const int64_t> dims) {
  return std::vector<int64_t>(dims.begin() + 1, dims.end());
}

// Tensors of a list take this much memory each before holding any data.
absl::Status CheckListSize(OpKernelContext* ctx, int64_t num_elements) {
  const uint64_t bytes = static_cast<uint64_t>(num_elements) * sizeof(Tensor);
  if (num_elements <= 0 || bytes <= TensorByteLimit()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(ctx->Prefix(), "a list of ", num_elements, " elements would take ", bytes,
                   " bytes, over the limit of ", TensorByteLimit(),
                   " bytes for one tensor (SetTensorByteLimit / DFLOW_MAX_TENSOR_BYTES)"));
}

// --- kernel helpers --------------------------------------------------------------

absl::StatusOr<const TensorList*> InputList(OpKernelContext* ctx, int i) {
  absl::StatusOr<TensorList*> list = GetTensorList(ctx->input(i));
  if (!list.ok()) return ctx->InvalidArgument(list.status().message());
  return *list;
}

absl::Status CheckDtype(OpKernelContext* ctx, DataType op, const TensorList& list) {
  if (op == list.element_dtype) return absl::OkStatus();
  return ctx->InvalidArgument("Invalid data types; op elements ", DataTypeString(op),
                              " but list elements ", DataTypeString(list.element_dtype));
}

absl::StatusOr<int32_t> ScalarInt32(OpKernelContext* ctx, int i, const char* what) {
  const Tensor& t = ctx->input(i);
  if (t.dims() != 0) {
    return ctx->InvalidArgument(what, " must be a scalar, but got shape ", t.shape().DebugString());
  }
  return t.scalar<int32_t>();
}

// Output `o` holding the list of input `i` for this kernel to change: the
// input's own when this kernel holds the only reference to its buffer (no one
// else can see the change), else a copy.
TensorList* ForwardOrCopyList(OpKernelContext* ctx, int i, int o, const TensorList& in) {
  const Tensor& t = ctx->input(i);
  if (t.BufferUseCount() == 1) {
    ctx->set_output(o, t);
    return VariantScalar(t).get<TensorList>();
  }
  Tensor copy = TensorListTensor(in);
  TensorList* list = VariantScalar(copy).get<TensorList>();
  ctx->set_output(o, std::move(copy));
  return list;
}

// `t` (an element of a list) in the memory of this kernel's output `o`: a
// list filled on one device may be read by a kernel of another.
absl::StatusOr<Tensor> InOutputMemory(OpKernelContext* ctx, const Tensor& t, int o) {
  const MemoryType want = ctx->op_kernel().output_memory_type(o);
  if (t.memory_type() == want) return t;
  if (ctx->device()->device_allocator() == nullptr) {
    return ctx->InvalidArgument("a list element in ", MemoryTypeName(t.memory_type()),
                                " memory, read on ", ctx->device()->name());
  }
  return ctx->device()->CopyTensor(t, want);
}

// Element `t` of a list as output `o`, or zeros of `shape` when it is unset;
// `unknown` is the error when the shape is not fully defined.
absl::StatusOr<Tensor> ReadElement(OpKernelContext* ctx, int o, const Tensor& t, DataType dtype,
                                   const PartialShape& shape, const std::string& unknown) {
  if (t.IsInitialized()) return InOutputMemory(ctx, t, o);
  if (!shape.IsFullyDefined()) return ctx->InvalidArgument(unknown);
  ASSIGN_OR_RETURN(TensorShape s, shape.ToTensorShape());
  absl::Status fits = CheckTensorBytes(dtype, s);
  if (!fits.ok()) return WithPrefix(fits, ctx->Prefix());
  return ElementMemory::OfOutput(ctx, o).New(dtype, s, /*zero=*/true);
}

// --- shape functions -------------------------------------------------------------

// The shape a constant element_shape input gives; unknown otherwise.
PartialShape ElementShapeInput(InferenceContext* c, int i) {
  const Tensor* t = c->input_tensor(i);
  if (t == nullptr) return PartialShape::Unknown();
  absl::StatusOr<PartialShape> s = ShapeFromTensor(*t);
  return s.ok() ? *s : PartialShape::Unknown();
}

absl::Status StackShape(InferenceContext* c) {
  PartialShape element = ElementShapeInput(c, 1);
  int64_t num_elements = -1;
  RETURN_IF_ERROR(c->GetAttr("num_elements", &num_elements));
  if (!element.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> dims = {num_elements < 0 ? kUnknownDim : num_elements};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

// --- op definitions ---------------------------------------------------------------

REGISTER_OP("EmptyTensorList")
    .Input("element_shape: shape_type")
    .Input("max_num_elements: int32")
    .Output("handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListReserve")
    .Input("element_shape: shape_type")
    .Input("num_elements: int32")
    .Output("handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListFromTensor")
    .Input("tensor: element_dtype")
    .Input("element_shape: shape_type")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListStack")
    .Input("input_handle: variant")
    .Input("element_shape: int32")
    .Output("tensor: element_dtype")
    .Attr("element_dtype: type")
    .Attr("num_elements: int = -1")
    .SetShapeFn(StackShape);

REGISTER_OP("TensorListGetItem")
    .Input("input_handle: variant")
    .Input("index: int32")
    .Input("element_shape: Tshape")
    .Output("item: element_dtype")
    .Attr("element_dtype: type")
    .Attr("Tshape: {int32, int64} = DT_INT32")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, ElementShapeInput(c, 2));
      return absl::OkStatus();
    });

REGISTER_OP("TensorListSetItem")
    .Input("input_handle: variant")
    .Input("index: int32")
    .Input("item: element_dtype")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .Attr("resize_if_index_out_of_bounds: bool = false")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListPushBack")
    .Input("input_handle: variant")
    .Input("tensor: element_dtype")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListPopBack")
    .Input("input_handle: variant")
    .Input("element_shape: int32")
    .Output("output_handle: variant")
    .Output("tensor: element_dtype")
    .Attr("element_dtype: type")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape::Scalar());
      c->set_output(1, ElementShapeInput(c, 1));
      return absl::OkStatus();
    });

REGISTER_OP("TensorListSplit")
    .Input("tensor: element_dtype")
    .Input("element_shape: shape_type")
    .Input("lengths: int64")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListConcatV2")
    .Input("input_handle: variant")
    .Input("element_shape: shape_type")
    .Input("leading_dims: int64")
    .Output("tensor: element_dtype")
    .Output("lengths: int64")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn([](InferenceContext* c) {
      PartialShape element = ElementShapeInput(c, 1);
      if (element.rank_known() && element.rank() > 0) {
        std::vector<int64_t> dims = element.dims();
        dims[0] = kUnknownDim;
        element = PartialShape(std::move(dims));
      }
      c->set_output(0, element);
      c->set_output(1, PartialShape({kUnknownDim}));
      return absl::OkStatus();
    });

REGISTER_OP("TensorListLength")
    .Input("input_handle: variant")
    .Output("length: int32")
    .SetShapeFn(ScalarShape);

REGISTER_OP("TensorListElementShape")
    .Input("input_handle: variant")
    .Output("element_shape: shape_type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(UnknownShape);

// --- kernels -------------------------------------------------------------------------

// Base of the kernels with an element_dtype attr.
class ListOpKernel : public OpKernel {
 public:
  explicit ListOpKernel(OpKernelConstruction* c) : OpKernel(c) {
    if (c->HasAttr("element_dtype")) c->GetAttr("element_dtype", &dtype_).IgnoreError();
  }
  bool IsExpensive() const override { return false; }

 protected:
  DataType dtype_ = DT_INVALID;
};

class EmptyTensorListOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& max = ctx->input(1);
    if (max.dims() != 0) {
      return ctx->InvalidArgument("max_num_elements expected to be a scalar but got shape: ",
                                  max.shape().DebugString());
    }
    TensorList list(dtype_, PartialShape::Unknown());
    list.max_num_elements = max.scalar<int32_t>();
    ASSIGN_OR_RETURN(const PartialShape shape, ShapeInput(ctx, 0));
    list.element_shape = shape;
    ctx->set_output(0, TensorListTensor(std::move(list)));
    return absl::OkStatus();
  }
};

class TensorListReserveOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const PartialShape shape, ShapeInput(ctx, 0));
    const Tensor& n = ctx->input(1);
    if (n.dims() != 0) {
      return ctx->InvalidArgument("The num_elements to reserve must be a tensor size 1, but got ",
                                  n.shape().DebugString());
    }
    const int32_t num_elements = n.scalar<int32_t>();
    if (num_elements < 0) {
      return ctx->InvalidArgument(
          "The num_elements to reserve must be a non negative number, but got ", num_elements);
    }
    RETURN_IF_ERROR(CheckListSize(ctx, num_elements));
    TensorList list(dtype_, shape);
    list.tensors.resize(num_elements);
    ctx->set_output(0, TensorListTensor(std::move(list)));
    return absl::OkStatus();
  }
};

class TensorListFromTensorOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const PartialShape shape, ShapeInput(ctx, 1));
    const Tensor& t = ctx->input(0);
    if (t.dims() < 1) {
      return ctx->InvalidArgument("Tensor must be at least a vector, but saw shape: ",
                                  t.shape().DebugString());
    }
    TensorShape element_shape = t.shape();
    element_shape.RemoveDim(0);
    if (!shape.IsCompatibleWith(element_shape)) {
      return ctx->InvalidArgument("Specified a list with shape ", shape.DebugString(),
                                  " from a tensor with shape ", element_shape.DebugString());
    }
    TensorList list(t.dtype(), shape);
    const int64_t n = t.dim_size(0), size = element_shape.num_elements();
    const ElementMemory memory = ElementMemory::OfInput(ctx, 0);
    std::vector<ElementCopy> copies;
    list.tensors.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Tensor element, memory.New(t.dtype(), element_shape, /*zero=*/false));
      copies.push_back({t, i * size, element, 0, size});
      list.tensors.push_back(std::move(element));
    }
    RETURN_IF_ERROR(memory.CopyAll(copies));
    ctx->set_output(0, TensorListTensor(std::move(list)));
    return absl::OkStatus();
  }
};

class TensorListStackOp : public ListOpKernel {
 public:
  explicit TensorListStackOp(OpKernelConstruction* c) : ListOpKernel(c) {
    c->GetAttr("num_elements", &num_elements_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    const int64_t n = static_cast<int64_t>(list->tensors.size());
    if (num_elements_ != -1 && n != num_elements_) {
      return ctx->InvalidArgument("Operation expected a list with ", num_elements_,
                                  " elements but got a list with ", n, " elements.");
    }
    absl::StatusOr<PartialShape> shape = ElementShapeFromInput(ctx, *list, 1);
    if (shape.ok() && !shape->IsFullyDefined() && n == 0) {
      return ctx->InvalidArgument(
          "Tried to stack elements of an empty list with non-fully-defined element_shape: ",
          shape->DebugString());
    }
    if (shape.ok() && !list->element_shape.IsFullyDefined()) {
      shape = MergeWithElements(*shape, *list);
    }
    if (!shape.ok()) return ctx->InvalidArgument(shape.status().message());
    if (!shape->IsFullyDefined()) {
      return ctx->InvalidArgument(
          "Tried to stack list which only contains uninitialized tensors and has a "
          "non-fully-defined element_shape: ",
          shape->DebugString());
    }
    std::vector<int64_t> dims = {n};
    dims.insert(dims.end(), shape->dims().begin(), shape->dims().end());
    absl::StatusOr<TensorShape> out_shape = TensorShape::FromDims(dims);
    if (!out_shape.ok()) return ctx->InvalidArgument(out_shape.status().message());
    absl::Status fits = CheckTensorBytes(dtype_, *out_shape);
    if (!fits.ok()) return WithPrefix(fits, ctx->Prefix());
    Tensor* out = ctx->allocate_output(0, *out_shape);  // Unset elements stay zero.
    if (!ctx->allocation_status().ok()) return absl::OkStatus();
    const TensorShape element_shape(absl::MakeConstSpan(dims).subspan(1));
    const int64_t size = element_shape.num_elements();
    std::vector<ElementCopy> copies;
    for (int64_t i = 0; i < n; ++i) {
      if (!list->tensors[i].IsInitialized()) continue;
      ASSIGN_OR_RETURN(Tensor t, InOutputMemory(ctx, list->tensors[i], 0));
      copies.push_back({std::move(t), 0, *out, i * size, size});
    }
    return ElementMemory::OfOutput(ctx, 0).CopyAll(copies);
  }

 private:
  int64_t num_elements_ = -1;
};

class TensorListGetItemOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    ASSIGN_OR_RETURN(int32_t index, ScalarInt32(ctx, 1, "index"));
    const int64_t n = static_cast<int64_t>(list->tensors.size());
    if (index < 0 || index >= n) {
      return ctx->InvalidArgument("Trying to access element ", index, " in a list with ", n,
                                  " elements.");
    }
    const Tensor& t = list->tensors[index];
    PartialShape shape;
    if (!t.IsInitialized()) {
      absl::StatusOr<PartialShape> s = ElementShapeFromInput(ctx, *list, 2);
      if (s.ok() && !s->IsFullyDefined()) s = MergeWithElements(*s, *list);
      if (!s.ok()) return ctx->InvalidArgument(s.status().message());
      shape = *s;
    }
    ASSIGN_OR_RETURN(
        Tensor item,
        ReadElement(ctx, 0, t, dtype_, shape,
                    absl::StrCat("Trying to read an uninitialized tensor but element_shape is "
                                 "not fully defined: ",
                                 shape.DebugString(), " and no list element is set.")));
    ctx->set_output(0, std::move(item));
    return absl::OkStatus();
  }
};

class TensorListSetItemOp : public ListOpKernel {
 public:
  explicit TensorListSetItemOp(OpKernelConstruction* c) : ListOpKernel(c) {
    c->GetAttr("resize_if_index_out_of_bounds", &resize_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    ASSIGN_OR_RETURN(int32_t index, ScalarInt32(ctx, 1, "index"));
    const int64_t n = static_cast<int64_t>(list->tensors.size());
    if (index < 0 || (!resize_ && index >= n)) {
      return ctx->InvalidArgument("Trying to modify element ", index, " in a list with ", n,
                                  " elements.");
    }
    const Tensor& item = ctx->input(2);
    if (!list->element_shape.IsCompatibleWith(item.shape())) {
      return ctx->InvalidArgument(
          "Tried to set a tensor with incompatible shape at a list index. Item element shape: ",
          item.shape().DebugString(), " list shape: ", list->element_shape.DebugString());
    }
    if (index >= n) RETURN_IF_ERROR(CheckListSize(ctx, int64_t{index} + 1));
    TensorList* out = ForwardOrCopyList(ctx, 0, 0, *list);
    if (index >= n) out->tensors.resize(index + 1);
    out->tensors[index] = item;
    return absl::OkStatus();
  }

 private:
  bool resize_ = false;
};

class TensorListPushBackOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& item = ctx->input(1);
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    if (!list->element_shape.IsCompatibleWith(item.shape())) {
      return ctx->InvalidArgument(
          "Tried to append a tensor with incompatible shape to a list. Op element shape: ",
          item.shape().DebugString(), " list shape: ", list->element_shape.DebugString());
    }
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    const int64_t n = static_cast<int64_t>(list->tensors.size());
    if (list->max_num_elements != -1 && n >= list->max_num_elements) {
      return ctx->InvalidArgument("Tried to push item into a full list list size: ", n,
                                  " max_num_elements: ", list->max_num_elements);
    }
    RETURN_IF_ERROR(CheckListSize(ctx, n + 1));
    ForwardOrCopyList(ctx, 0, 0, *list)->tensors.push_back(item);
    return absl::OkStatus();
  }
};

class TensorListPopBackOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    if (list->tensors.empty()) return ctx->InvalidArgument("Trying to pop from an empty list.");
    const Tensor& last = list->tensors.back();
    PartialShape shape;
    if (!last.IsInitialized()) {
      absl::StatusOr<PartialShape> s = ElementShapeFromInput(ctx, *list, 1);
      if (!s.ok()) return ctx->InvalidArgument(s.status().message());
      shape = *s;
    }
    ASSIGN_OR_RETURN(Tensor item,
                     ReadElement(ctx, 1, last, dtype_, shape,
                                 absl::StrCat("Trying to read an uninitialized tensor but "
                                              "element_shape is not fully defined.",
                                              shape.DebugString())));
    ctx->set_output(1, std::move(item));
    ForwardOrCopyList(ctx, 0, 0, *list)->tensors.pop_back();
    return absl::OkStatus();
  }
};

// Rows [start, start + lengths[i]) of the tensor as element i.
class TensorListSplitOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const PartialShape shape, ShapeInput(ctx, 1));
    if (shape.rank_known() && shape.rank() < 1) {
      return ctx->InvalidArgument(
          "TensorListSplit requires element_shape to be at least of rank 1, but saw: ",
          shape.DebugString());
    }
    const Tensor& t = ctx->input(0);
    if (t.dims() < 1) {
      return ctx->InvalidArgument("Tensor must be at least a vector, but saw shape: ",
                                  t.shape().DebugString());
    }
    const std::vector<int64_t> rest = DimsAfterFirst(t.shape().dim_sizes());
    const PartialShape shape_rest =
        shape.rank_known() ? PartialShape(DimsAfterFirst(shape.dims())) : PartialShape::Unknown();
    if (!shape_rest.IsCompatibleWith(PartialShape(rest))) {
      return ctx->InvalidArgument("tensor shape ", t.shape().DebugString(),
                                  " is not compatible with element_shape ", shape.DebugString());
    }
    const Tensor& lengths = ctx->input(2);
    if (lengths.dims() != 1) {
      return ctx->InvalidArgument("Expected lengths to be a vector, received shape: ",
                                  lengths.shape().DebugString());
    }
    RETURN_IF_ERROR(CheckListSize(ctx, lengths.NumElements()));
    TensorList list(t.dtype(), shape);
    list.tensors.reserve(lengths.NumElements());
    const ElementMemory memory = ElementMemory::OfInput(ctx, 0);
    std::vector<ElementCopy> copies;
    const int64_t rows = t.dim_size(0), row_size = DimProduct(rest, 0, rest.size());
    int64_t end = 0;
    for (int64_t i = 0; i < lengths.NumElements(); ++i) {
      const int64_t length = lengths.flat<int64_t>()[i];
      if (length < 0) return ctx->InvalidArgument("Invalid value in lengths: ", length);
      const int64_t start = end;
      if (length > rows - start) {
        return ctx->InvalidArgument("Attempting to slice [", start, ", ", start + length,
                                    "] from tensor with length ", rows);
      }
      end = start + length;
      std::vector<int64_t> dims = rest;
      dims.insert(dims.begin(), length);
      ASSIGN_OR_RETURN(Tensor element, memory.New(t.dtype(), TensorShape(dims), /*zero=*/false));
      copies.push_back({t, start * row_size, element, 0, length * row_size});
      list.tensors.push_back(std::move(element));
    }
    if (end != rows) {
      return ctx->InvalidArgument("Unused values in tensor. Length of tensor: ", rows,
                                  " Values used: ", end);
    }
    RETURN_IF_ERROR(memory.CopyAll(copies));
    ctx->set_output(0, TensorListTensor(std::move(list)));
    return absl::OkStatus();
  }
};

// The elements one after another along their first dimension, and each
// one's length; an unset element is zeros, as long as leading_dims[i] (or
// the length every set element shares).
class TensorListConcatOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    RETURN_IF_ERROR(CheckDtype(ctx, dtype_, *list));
    absl::StatusOr<PartialShape> shape = ElementShapeFromInput(ctx, *list, 1);
    if (!shape.ok()) return ctx->InvalidArgument(shape.status().message());
    if (shape->rank_known() && shape->rank() < 1) {
      return ctx->InvalidArgument(
          "Concat requires elements to be at least vectors, found scalars instead.");
    }
    int64_t first_dim = shape->rank_known() ? shape->dim(0) : kUnknownDim;
    PartialShape rest =
        shape->rank_known() ? PartialShape(DimsAfterFirst(shape->dims())) : PartialShape::Unknown();
    const std::vector<Tensor>& elements = list->tensors;
    if (elements.empty() && !rest.IsFullyDefined()) {
      return ctx->InvalidArgument(
          "All except the first dimension must be fully defined when concating an empty "
          "tensor list. element_shape: ",
          rest.DebugString());
    }
    if (!list->element_shape.IsFullyDefined()) {
      // Every set element's shape, and their shared first dimension if any.
      bool shared = first_dim == kUnknownDim;
      int64_t inferred = first_dim;
      for (size_t i = 0; i < elements.size(); ++i) {
        const Tensor& t = elements[i];
        if (!t.IsInitialized()) continue;
        if (t.dims() < 1) {
          return ctx->InvalidArgument("Concat saw a scalar shape at index ", i,
                                      " but requires at least vectors.");
        }
        absl::StatusOr<PartialShape> merged =
            MergeShapes(rest, PartialShape(DimsAfterFirst(t.shape().dim_sizes())));
        if (!merged.ok()) return ctx->InvalidArgument(merged.status().message());
        rest = *std::move(merged);
        if (first_dim != kUnknownDim && first_dim != t.dim_size(0)) {
          return ctx->InvalidArgument(
              "First entry of element_shape input does not match the first dim of list element "
              "at index: ",
              i, " Expected: ", first_dim, " Actual: ", t.dim_size(0));
        }
        if (shared) {
          if (inferred == kUnknownDim) {
            inferred = t.dim_size(0);
          } else if (inferred != t.dim_size(0)) {
            inferred = kUnknownDim;
            shared = false;
          }
        }
      }
      first_dim = inferred;
    }
    if (!rest.IsFullyDefined()) {
      return ctx->InvalidArgument(
          "Trying to concat list with only uninitialized tensors but "
          "element_shape_except_first_dim is not fully defined: ",
          rest.DebugString());
    }
    const Tensor& leading = ctx->input(2);
    Tensor* lengths = ctx->allocate_output(1, TensorShape({static_cast<int64_t>(elements.size())}));
    int64_t total = 0;
    for (size_t i = 0; i < elements.size(); ++i) {
      int64_t dim;
      const int64_t i64 = static_cast<int64_t>(i);
      if (elements[i].IsInitialized()) {
        dim = elements[i].dim_size(0);
      } else if (i64 >= leading.NumElements() && first_dim != kUnknownDim) {
        dim = first_dim;
      } else if (i64 >= leading.NumElements()) {
        return ctx->InvalidArgument("List contains uninitialized tensor at index ", i,
                                    " but leading_dims has only ", leading.NumElements(),
                                    " elements.");
      } else {
        dim = leading.flat<int64_t>()[i];
        if (dim < 0) return ctx->InvalidArgument("Invalid value in leading_dims: ", dim);
      }
      lengths->flat<int64_t>()[i] = dim;
      total += dim;
    }
    std::vector<int64_t> dims = rest.dims();
    dims.insert(dims.begin(), total);
    absl::StatusOr<TensorShape> out_shape = TensorShape::FromDims(dims);
    if (!out_shape.ok()) return ctx->InvalidArgument(out_shape.status().message());
    absl::Status fits = CheckTensorBytes(dtype_, *out_shape);
    if (!fits.ok()) return WithPrefix(fits, ctx->Prefix());
    Tensor* out = ctx->allocate_output(0, *out_shape);  // Unset elements stay zero.
    if (!ctx->allocation_status().ok()) return absl::OkStatus();
    const int64_t row_size = DimProduct(rest.dims(), 0, rest.rank());
    std::vector<ElementCopy> copies;
    int64_t offset = 0;
    for (size_t i = 0; i < elements.size(); ++i) {
      const int64_t size = lengths->flat<int64_t>()[i] * row_size;
      if (elements[i].IsInitialized()) {
        ASSIGN_OR_RETURN(Tensor t, InOutputMemory(ctx, elements[i], 0));
        copies.push_back({std::move(t), 0, *out, offset, size});
      }
      offset += size;
    }
    return ElementMemory::OfOutput(ctx, 0).CopyAll(copies);
  }
};

class TensorListLengthOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(list->tensors.size())));
    return absl::OkStatus();
  }
};

class TensorListElementShapeOp : public ListOpKernel {
 public:
  using ListOpKernel::ListOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* list, InputList(ctx, 0));
    const PartialShape& s = list->element_shape;
    const bool known = s.rank_known();
    Tensor* out = ctx->allocate_output(0, known ? TensorShape({s.rank()}) : TensorShape());
    const int64_t n = out->NumElements();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t d = known ? std::max<int64_t>(s.dim(i), -1) : -1;
      if (out->dtype() == DT_INT32) {
        out->flat<int32_t>()[i] = static_cast<int32_t>(d);
      } else {
        out->flat<int64_t>()[i] = d;
      }
    }
    return absl::OkStatus();
  }
};

// AddN of lists (the gradients of one list from two consumers, e.g. in a
// control flow v2 gradient loop): TensorFlow's TensorListBinaryAdd, element by
// element; an unset element adds as zeros.
class AddNListsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* first, InputList(ctx, 0));
    TensorList sum = *first;
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      ASSIGN_OR_RETURN(const TensorList* next, InputList(ctx, i));
      absl::StatusOr<TensorList> s = AddLists(ctx, sum, *next);
      if (!s.ok()) return ctx->InvalidArgument(s.status().message());
      sum = *std::move(s);
    }
    ctx->set_output(0, TensorListTensor(std::move(sum)));
    return absl::OkStatus();
  }

 private:
  static absl::StatusOr<Tensor> AddElements(OpKernelContext* ctx, const Tensor& a,
                                            const Tensor& b) {
    if (!a.IsInitialized()) return b;
    if (!b.IsInitialized()) return a;
    if (a.shape() != b.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trying to add two tensors with incompatible element shapes. One is ",
                       a.shape().DebugString(), " and the other is ", b.shape().DebugString()));
    }
    return ElementMemory(ctx, a.memory_type()).Add(a, b);
  }

  static absl::StatusOr<TensorList> AddLists(OpKernelContext* ctx, const TensorList& a,
                                             const TensorList& b) {
    if (a.element_dtype != b.element_dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Trying to add two lists of tensors of different dtypes. One is ",
          DataTypeString(a.element_dtype), " and the other is ", DataTypeString(b.element_dtype)));
    }
    if (!a.element_shape.IsCompatibleWith(b.element_shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Trying to add two lists of tensors with incompatible element shapes. One is ",
          a.element_shape.DebugString(), " and the other is ", b.element_shape.DebugString()));
    }
    if (a.tensors.size() != b.tensors.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trying to add two lists of tensors with different lengths. One is ",
                       a.tensors.size(), " and the other is ", b.tensors.size()));
    }
    ASSIGN_OR_RETURN(PartialShape shape, PartialShape::Merge(a.element_shape, b.element_shape));
    TensorList out(a.element_dtype, shape);
    out.max_num_elements = a.max_num_elements;
    out.tensors.reserve(a.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor t, AddElements(ctx, a.tensors[i], b.tensors[i]));
      out.tensors.push_back(std::move(t));
    }
    return out;
  }
};

// ZerosLike of a list: TensorFlow's TensorListZerosLike, a list of the same
// dtype, shape and length whose set elements are zeros (unset ones stay unset).
class ZerosLikeListOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const TensorList* in, InputList(ctx, 0));
    TensorList out(in->element_dtype, in->element_shape);
    out.max_num_elements = in->max_num_elements;
    out.tensors.reserve(in->tensors.size());
    for (const Tensor& t : in->tensors) {
      if (!t.IsInitialized()) {
        out.tensors.emplace_back();
        continue;
      }
      ASSIGN_OR_RETURN(Tensor zeros,
                       ElementMemory(ctx, t.memory_type()).New(t.dtype(), t.shape(), /*zero=*/true));
      out.tensors.push_back(std::move(zeros));
    }
    ctx->set_output(0, TensorListTensor(std::move(out)));
    return absl::OkStatus();
  }
};

// Registers K for `op` on a CPU (every list element type) and on a GPU as
// TensorFlow does: `host_args` (indices, lengths, element shapes) in host
// memory; the `element_args` in device memory for GpuTensorTypes(), in host
// memory for int32. The lists themselves are variants, host values.
template <typename K>
void RegisterListKernels(const char* op, std::initializer_list<const char*> host_args,
                         std::initializer_list<const char*> element_args) {
  const KernelFactory make = [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
    return std::make_unique<K>(c);
  };
  KernelRegistry* registry = KernelRegistry::Global();
  registry->Register(KernelDefBuilder(op)
                         .Device(kDeviceCPU)
                         .TypeConstraint("element_dtype", ListElementTypes())
                         .Build(),
                     make);
  KernelDefBuilder gpu(op), gpu_int32(op);
  gpu.Device(kDeviceGPU).TypeConstraint("element_dtype", GpuTensorTypes());
  gpu_int32.Device(kDeviceGPU).TypeConstraint("element_dtype", {DT_INT32});
  for (const char* arg : host_args) {
    gpu.HostMemory(arg);
    gpu_int32.HostMemory(arg);
  }
  for (const char* arg : element_args) gpu_int32.HostMemory(arg);
  registry->Register(gpu.Build(), make);
  registry->Register(gpu_int32.Build(), make);
}

const bool kListKernelsRegistered = [] {
  RegisterListKernels<EmptyTensorListOp>("EmptyTensorList", {"element_shape", "max_num_elements"},
                                         {});
  RegisterListKernels<TensorListReserveOp>("TensorListReserve", {"element_shape", "num_elements"},
                                           {});
  RegisterListKernels<TensorListFromTensorOp>("TensorListFromTensor", {"element_shape"},
                                              {"tensor"});
  RegisterListKernels<TensorListStackOp>("TensorListStack", {"element_shape"}, {"tensor"});
  RegisterListKernels<TensorListGetItemOp>("TensorListGetItem", {"index", "element_shape"},
                                           {"item"});
  RegisterListKernels<TensorListSetItemOp>("TensorListSetItem", {"index"}, {"item"});
  RegisterListKernels<TensorListPushBackOp>("TensorListPushBack", {}, {"tensor"});
  RegisterListKernels<TensorListPopBackOp>("TensorListPopBack", {"element_shape"}, {"tensor"});
  RegisterListKernels<TensorListSplitOp>("TensorListSplit", {"element_shape", "lengths"},
                                         {"tensor"});
  RegisterListKernels<TensorListConcatOp>("TensorListConcatV2",
                                          {"element_shape", "leading_dims", "lengths"}, {"tensor"});
  return true;
}();

// The kernels that touch no element (or only through the list, a host value).
#define DFLOW_REGISTER_LIST_KERNEL(BUILDER, KERNEL)                     \
  REGISTER_KERNEL(BUILDER.Device(kDeviceCPU), KERNEL);                  \
  REGISTER_KERNEL(BUILDER.Device(kDeviceGPU), KERNEL)
DFLOW_REGISTER_LIST_KERNEL(KernelDefBuilder("TensorListLength").HostMemory("length"),
                           TensorListLengthOp);
DFLOW_REGISTER_LIST_KERNEL(KernelDefBuilder("TensorListElementShape").HostMemory("element_shape"),
                           TensorListElementShapeOp);
DFLOW_REGISTER_LIST_KERNEL(KernelDefBuilder("ZerosLike").TypeConstraint("T", {DT_VARIANT}),
                           ZerosLikeListOp);
DFLOW_REGISTER_LIST_KERNEL(KernelDefBuilder("AddN").TypeConstraint("T", {DT_VARIANT}),
                           AddNListsOp);
#undef DFLOW_REGISTER_LIST_KERNEL

}  // namespace
}  // namespace dflow
