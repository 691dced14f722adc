// Ops that exist for the gradients of the array ops (array_grad.cc):
// ConcatOffset (where each ConcatV2 input starts in the output),
// InvertPermutation (undoes a Transpose) and Pad (scatters a Slice's
// gradient back into the input's shape).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// Writes `values` into output `i`, of the op's integer output type.
void SetIndexVector(OpKernelContext* ctx, int i, const std::vector<int64_t>& values) {
  Tensor* out = ctx->allocate_output(i, TensorShape({static_cast<int64_t>(values.size())}));
  for (size_t k = 0; k < values.size(); ++k) {
    if (out->dtype() == DT_INT32) {
      out->flat<int32_t>()[k] = static_cast<int32_t>(values[k]);
    } else {
      out->flat<int64_t>()[k] = values[k];
    }
  }
}

// --- ConcatOffset ------------------------------------------------------------

class ConcatOffsetOp : public OpKernel {
 public:
  explicit ConcatOffsetOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  absl::Status Compute(OpKernelContext* ctx) override {
    auto axis = IndexScalar(ctx->input(0), "concat_dim");
    if (!axis.ok()) return ctx->InvalidArgument(axis.status().message());
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      auto s = IndexValues(ctx->input(i), "shape");
      if (!s.ok()) return ctx->InvalidArgument(s.status().message());
      shapes.push_back(*std::move(s));
    }
    const int rank = static_cast<int>(shapes[0].size());
    int64_t dim = 0;
    if (!CanonicalAxis(*axis, rank, &dim)) {
      return ctx->InvalidArgument("concat_dim ", *axis, " is out of range for rank ", rank);
    }
    int64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      RETURN_IF_ERROR(CheckCompatible(ctx, shapes[0], shapes[i], dim, i));
      std::vector<int64_t> out(rank, 0);
      out[dim] = offset;
      offset += shapes[i][dim];
      SetIndexVector(ctx, static_cast<int>(i), out);
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status CheckCompatible(OpKernelContext* ctx, const std::vector<int64_t>& first,
                                      const std::vector<int64_t>& s, int64_t dim, size_t i) {
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = d == dim || s[d] == first[d];
    if (ok) return absl::OkStatus();
    return ctx->InvalidArgument("shape ", i, " ", DimsString(s), " does not match shape 0 ",
                                DimsString(first), " outside concat_dim ", dim);
  }
};

absl::Status ConcatOffsetShape(InferenceContext* c) {
  for (int i = 1; i < c->num_inputs(); ++i) c->set_output(i - 1, c->input(i));
  return absl::OkStatus();
}

REGISTER_OP("ConcatOffset")
    .Input("concat_dim: int32")
    .Input("shape: N * shape_type")
    .Output("offset: N * shape_type")
    .Attr("N: int >= 2")
    .Attr("shape_type: {int32, int64} = DT_INT32")
    .SetShapeFn(ConcatOffsetShape);
REGISTER_KERNEL(KernelDefBuilder("ConcatOffset")
                    .Device(kDeviceCPU)
                    .TypeConstraint("shape_type", {DT_INT32, DT_INT64})
                    .HostMemory("concat_dim")
                    .HostMemory("shape")
                    .HostMemory("offset"),
                ConcatOffsetOp);
REGISTER_KERNEL(KernelDefBuilder("ConcatOffset")
                    .Device(kDeviceGPU)
                    .TypeConstraint("shape_type", {DT_INT32, DT_INT64})
                    .HostMemory("concat_dim")
                    .HostMemory("shape")
                    .HostMemory("offset"),
                ConcatOffsetOp);

// --- InvertPermutation -------------------------------------------------------

class InvertPermutationOp : public OpKernel {
 public:
  explicit InvertPermutationOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->input(0).dims() != 1) {
      return ctx->InvalidArgument("x must be a vector, got shape ",
                                  ctx->input(0).shape().DebugString());
    }
    auto x = IndexValues(ctx->input(0), "x");
    if (!x.ok()) return ctx->InvalidArgument(x.status().message());
    const int64_t n = static_cast<int64_t>(x->size());
    std::vector<int64_t> y(n, -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = (*x)[i];
      if (v < 0 || v >= n || y[v] != -1) {
        return ctx->InvalidArgument("x is not a permutation: ", DimsString(*x));
      }
      y[v] = i;
    }
    SetIndexVector(ctx, 0, y);
    return absl::OkStatus();
  }
};

absl::Status InvertPermutationShape(InferenceContext* c) {
  PartialShape x;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &x));
  c->set_output(0, x);
  return absl::OkStatus();
}

REGISTER_OP("InvertPermutation")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {int32, int64} = DT_INT32")
    .SetShapeFn(InvertPermutationShape);
REGISTER_KERNEL(KernelDefBuilder("InvertPermutation")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_INT32, DT_INT64})
                    .HostMemory("x")
                    .HostMemory("y"),
                InvertPermutationOp);

// --- Pad -----------------------------------------------------------------------

// Reads paddings ([rank, 2], non-negative) for an input of rank `rank`.
absl::StatusOr<std::vector<int64_t>> ReadPaddings(const Tensor& p, int rank) {
  if (p.dims() != 2 || p.dim_size(0) != rank || p.dim_size(1) != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paddings must be a [", rank, ",2] matrix, got shape ", p.shape().DebugString()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> v, IndexValues(p, "paddings"));
  for (int64_t x : v) {
    if (x < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("paddings must be non-negative, got ", DimsString(v)));
    }
  }
  return v;
}

// Copies `in` into the interior of `out` (already filled with zeros), one
// innermost row at a time.
template <typename T>
void PadCopy(const Tensor& in, const std::vector<int64_t>& pads, Tensor* out) {
  const int rank = in.dims();
  const T* src = ElementsOf<T>(in);
  T* dst = MutableElementsOf<T>(out);
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t cols = in.dim_size(rank - 1);
  if (cols == 0) return;
  const int64_t rows = in.NumElements() / cols;
  std::vector<int64_t> out_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) out_strides[d] = out_strides[d + 1] * out->dim_size(d + 1);
  std::vector<int64_t> index(rank, 0);  // Over the input's leading dims.
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = pads[2 * (rank - 1)];
    for (int d = 0; d < rank - 1; ++d) offset += (index[d] + pads[2 * d]) * out_strides[d];
    std::copy(src + r * cols, src + (r + 1) * cols, dst + offset);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < in.dim_size(d)) break;
      index[d] = 0;
    }
  }
}

class PadOp : public OpKernel {
 public:
  explicit PadOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    auto pads = ReadPaddings(ctx->input(1), in.dims());
    if (!pads.ok()) return ctx->InvalidArgument(pads.status().message());
    std::vector<int64_t> dims;
    for (int d = 0; d < in.dims(); ++d) {
      dims.push_back(in.dim_size(d) + (*pads)[2 * d] + (*pads)[2 * d + 1]);
    }
    RETURN_IF_ERROR(CheckOutputSize(DimProduct(dims, 0, dims.size()), in.dtype(), "Pad"));
    Tensor* out = ctx->allocate_output(0, TensorShape(dims));  // Zeros, on either device.
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    if (in.NumElements() == 0) return absl::OkStatus();
    if (out->memory_type() == MemoryType::kDevice) {
      std::vector<int64_t> before, ones(in.dims(), 1);
      for (int d = 0; d < in.dims(); ++d) before.push_back((*pads)[2 * d]);
      return StridedScatterOnDevice(ctx, in, before, ones, out);
    }
    return SwitchByElementSize(in.dtype(), "Pad", [&](auto tag) -> absl::Status {
      PadCopy<typename decltype(tag)::type>(in, *pads, out);
      return absl::OkStatus();
    });
  }
};

absl::Status PadShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  const Tensor* p = c->input_tensor(1);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (p == nullptr) {
    c->set_output(0, PartialShape::UnknownDims(in.rank()));
    return absl::OkStatus();
  }
  auto pads = ReadPaddings(*p, in.rank());
  if (!pads.ok()) return c->Error(std::string(pads.status().message()));
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t v = in.dim(d);
    dims.push_back(v == kUnknownDim ? v : v + (*pads)[2 * d] + (*pads)[2 * d + 1]);
  }
  c->set_output(0, PartialShape(dims));
  return absl::OkStatus();
}

REGISTER_OP("Pad")
    .Input("input: T")
    .Input("paddings: Tpaddings")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tpaddings: {int32, int64} = DT_INT32")
    .SetShapeFn(PadShape);
REGISTER_KERNEL(KernelDefBuilder("Pad")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tpaddings", IndexTypes())
                    .HostMemory("paddings"),
                PadOp);
// On a GPU (Slice's gradient, tf.pad): the output's zeros and the copy of
// the input into its interior are queued in device memory; an int32 Pad is
// of a shape, in host memory.
REGISTER_KERNEL(KernelDefBuilder("Pad")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Tpaddings", IndexTypes())
                    .HostMemory("paddings"),
                PadOp);
REGISTER_KERNEL(KernelDefBuilder("Pad")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("Tpaddings", IndexTypes())
                    .HostMemory("input")
                    .HostMemory("paddings")
                    .HostMemory("output"),
                PadOp);

}  // namespace
}  // namespace dflow
