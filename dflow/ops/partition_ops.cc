// Ops that split a tensor's rows by index and put them back together, as
// TensorFlow's partitioned embedding lookups do:
//
//   DynamicPartition(data, partitions)  outputs[p] = the rows data[i...] with
//       partitions[i...] == p, in order; partitions' shape is a prefix of data's
//   DynamicStitch(indices[N], data[N])  merged[indices[m][i...], ...] =
//       data[m][i...], ...; a later index wins over an earlier one; rows no
//       index names are zero. ParallelDynamicStitch is the same kernel (for
//       it TensorFlow leaves duplicates unordered: here the last one wins too)
//   Unique(x)   y = the distinct values of vector x in order of first
//       occurrence, idx[i] = where x[i] is in y (NaNs are all distinct,
//       -0 equals 0, as C++'s == says)
//
// OpDefs and error texts follow TensorFlow's; the gradients of
// DynamicPartition and the stitches are here too.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/grad_util.h"

namespace dflow {
namespace {

bool StartsWith(const TensorShape& shape, const TensorShape& prefix) {
  if (prefix.dims() > shape.dims()) return false;
  for (int d = 0; d < prefix.dims(); ++d) {
    if (shape.dim_size(d) != prefix.dim_size(d)) return false;
  }
  return true;
}

// shape[from:]
std::vector<int64_t> DimsFrom(const TensorShape& shape, int from) {
  return {shape.dim_sizes().begin() + from, shape.dim_sizes().end()};
}

// --- DynamicPartition --------------------------------------------------------------

class DynamicPartitionOp : public OpKernel {
 public:
  explicit DynamicPartitionOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("num_partitions", &num_partitions_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    const Tensor& partitions_t = ctx->input(1);
    if (!StartsWith(data.shape(), partitions_t.shape())) {
      return ctx->InvalidArgument("data.shape must start with partitions.shape, got data.shape = ",
                                  data.shape().DebugString(),
                                  ", partitions.shape = ", partitions_t.shape().DebugString());
    }
    auto partitions = partitions_t.flat<int32_t>();
    std::vector<int64_t> counts(num_partitions_);
    for (int64_t i = 0; i < partitions.size(); ++i) {
      if (partitions[i] < 0 || partitions[i] >= num_partitions_) {
        return ctx->InvalidArgument("partitions", DimsString({i}), " = ", partitions[i],
                                    " is not in [0, ", num_partitions_, ")");
      }
      ++counts[partitions[i]];
    }
    std::vector<int64_t> row_dims = DimsFrom(data.shape(), partitions_t.dims());
    const int64_t row = DimProduct(row_dims, 0, static_cast<int>(row_dims.size()));
    std::vector<Tensor*> outs(num_partitions_);
    for (int p = 0; p < num_partitions_; ++p) {
      std::vector<int64_t> dims = {counts[p]};
      dims.insert(dims.end(), row_dims.begin(), row_dims.end());
      outs[p] = ctx->allocate_output_for_overwrite(p, TensorShape(dims));
    }
    return SwitchByElementSize(data.dtype(), "DynamicPartition", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(data);
      std::vector<int64_t> next(num_partitions_);  // Rows written per output.
      for (int64_t i = 0; i < partitions.size(); ++i) {
        const int p = partitions[i];
        std::copy_n(src + i * row, row, MutableElementsOf<T>(outs[p]) + next[p]++ * row);
      }
      return absl::OkStatus();
    });
  }

 private:
  int num_partitions_ = 1;
};

absl::Status DynamicPartitionShape(InferenceContext* c) {
  int64_t n = 0;
  RETURN_IF_ERROR(c->GetAttr("num_partitions", &n));
  const PartialShape& data = c->input(0);
  const PartialShape& partitions = c->input(1);
  PartialShape out = PartialShape::Unknown();
  if (data.rank_known() && partitions.rank_known()) {
    if (partitions.rank() > data.rank()) {
      return c->Error(absl::StrCat(
          "data.shape must start with partitions.shape, got data.shape = ", data.DebugString(),
          ", partitions.shape = ", partitions.DebugString()));
    }
    std::vector<int64_t> dims = {kUnknownDim};
    dims.insert(dims.end(), data.dims().begin() + partitions.rank(), data.dims().end());
    out = PartialShape(std::move(dims));
  }
  for (int p = 0; p < n; ++p) c->set_output(p, out);
  return absl::OkStatus();
}

REGISTER_OP("DynamicPartition")
    .Input("data: T")
    .Input("partitions: int32")
    .Output("outputs: num_partitions * T")
    .Attr("num_partitions: int >= 1")
    .Attr("T: type")
    .SetShapeFn(DynamicPartitionShape);
REGISTER_KERNEL(
    KernelDefBuilder("DynamicPartition").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
    DynamicPartitionOp);

// --- DynamicStitch, ParallelDynamicStitch ------------------------------------------

class DynamicStitchOp : public OpKernel {
 public:
  explicit DynamicStitchOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("N", &n_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const TensorShape& index0 = ctx->input(0).shape();
    const TensorShape& data0 = ctx->input(n_).shape();
    if (!StartsWith(data0, index0)) return ShapeError(ctx, 0);
    const std::vector<int64_t> row_dims = DimsFrom(data0, index0.dims());
    const int64_t row = DimProduct(row_dims, 0, static_cast<int>(row_dims.size()));
    int64_t max_index = -1;
    for (int m = 0; m < n_; ++m) {
      const Tensor& indices = ctx->input(m);
      const TensorShape& data = ctx->input(n_ + m).shape();
      if (!StartsWith(data, indices.shape())) return ShapeError(ctx, m);
      if (DimsFrom(data, indices.dims()) != row_dims) {
        return ctx->InvalidArgument(
            "Need data[0].shape[", index0.dims(), ":] = data[", m, "].shape[", indices.dims(),
            ":], got data[0].shape = ", data0.DebugString(), ", data[", m,
            "].shape = ", data.DebugString(), ", indices[0].shape = ", index0.DebugString(),
            ", indices[", m, "].shape = ", indices.shape().DebugString());
      }
      auto flat = indices.flat<int32_t>();
      for (int64_t i = 0; i < flat.size(); ++i) {
        if (flat[i] < 0) {
          return ctx->InvalidArgument("indices[", m, "]", DimsString({i}), " = ", flat[i],
                                      " is out of range: it must be >= 0");
        }
        max_index = std::max<int64_t>(max_index, flat[i]);
      }
    }
    std::vector<int64_t> dims = {max_index + 1};
    dims.insert(dims.end(), row_dims.begin(), row_dims.end());
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, ctx->input(n_).dtype(), "DynamicStitch"));
    Tensor* out = ctx->allocate_output(0, shape);  // Rows no index names stay zero.
    return SwitchByElementSize(out->dtype(), "DynamicStitch", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      T* dst = MutableElementsOf<T>(out);
      for (int m = 0; m < n_; ++m) {
        auto flat = ctx->input(m).flat<int32_t>();
        const T* src = ElementsOf<T>(ctx->input(n_ + m));
        for (int64_t i = 0; i < flat.size(); ++i) {
          std::copy_n(src + i * row, row, dst + flat[i] * row);
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  absl::Status ShapeError(OpKernelContext* ctx, int m) const {
    return ctx->InvalidArgument("data[", m, "].shape = ", ctx->input(n_ + m).shape().DebugString(),
                                " does not start with indices[", m,
                                "].shape = ", ctx->input(m).shape().DebugString());
  }

  int n_ = 1;
};

// [?] + data[0].shape[rank(indices[0]):]
absl::Status DynamicStitchShape(InferenceContext* c) {
  const int n = c->num_inputs() / 2;
  const PartialShape& indices = c->input(0);
  const PartialShape& data = c->input(n);
  if (!indices.rank_known() || !data.rank_known() || indices.rank() > data.rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> dims = {kUnknownDim};
  dims.insert(dims.end(), data.dims().begin() + indices.rank(), data.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

OpDefBuilder StitchOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("indices: N * int32")
      .Input("data: N * T")
      .Output("merged: T")
      .Attr("N: int >= 1")
      .Attr("T: type")
      .SetShapeFn(DynamicStitchShape);
}

const OpDefBuilderReceiver dynamic_stitch_op = StitchOpDef("DynamicStitch");
REGISTER_KERNEL(
    KernelDefBuilder("DynamicStitch").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
    DynamicStitchOp);
// An int32 stitch on a GPU builds a shape (a reduction's gradient): in host
// memory, with the CPU kernel.
REGISTER_KERNEL(KernelDefBuilder("DynamicStitch")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .HostMemory("indices")
                    .HostMemory("data")
                    .HostMemory("merged"),
                DynamicStitchOp);
const OpDefBuilderReceiver parallel_dynamic_stitch_op = StitchOpDef("ParallelDynamicStitch");
REGISTER_KERNEL(KernelDefBuilder("ParallelDynamicStitch")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes()),
                DynamicStitchOp);

// --- Unique ------------------------------------------------------------------------

template <typename T>
class UniqueOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (x.dims() != 1) {
      return ctx->InvalidArgument("unique expects a 1D vector, got shape ",
                                  x.shape().DebugString());
    }
    auto values = x.flat<T>();
    std::unordered_map<T, int64_t> position;  // value -> index in y
    std::vector<int64_t> idx(values.size());
    std::vector<int64_t> first;  // Where each of y's values first occurs in x.
    for (int64_t i = 0; i < values.size(); ++i) {
      auto [it, inserted] = position.emplace(values[i], static_cast<int64_t>(first.size()));
      if (inserted) first.push_back(i);
      idx[i] = it->second;
    }
    if (output_type(1) == DT_INT32 && values.size() > INT32_MAX) {
      return ctx->InvalidArgument("unique: ", values.size(), " elements do not fit int32 idx");
    }
    Tensor* y = ctx->allocate_output(0, TensorShape({static_cast<int64_t>(first.size())}));
    for (size_t k = 0; k < first.size(); ++k) y->flat<T>()[k] = values[first[k]];
    Tensor* idx_out = ctx->allocate_output(1, x.shape());
    for (int64_t i = 0; i < values.size(); ++i) {
      if (output_type(1) == DT_INT32) {
        idx_out->flat<int32_t>()[i] = static_cast<int32_t>(idx[i]);
      } else {
        idx_out->flat<int64_t>()[i] = idx[i];
      }
    }
    return absl::OkStatus();
  }
};

absl::Status UniqueShape(InferenceContext* c) {
  PartialShape x;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &x));
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(1, x);
  return absl::OkStatus();
}

REGISTER_OP("Unique")
    .Input("x: T")
    .Output("y: T")
    .Output("idx: out_idx")
    .Attr("T: type")
    .Attr("out_idx: {int32, int64} = DT_INT32")
    .SetShapeFn(UniqueShape);
const CpuKernels<UniqueOp, float, double, int32_t, int64_t, uint8_t, bool, std::string>
    unique_kernels("Unique");

// --- gradients -----------------------------------------------------------------------

// d(data[m]) = the rows of dy that indices[m] wrote. As in TensorFlow, a
// row overwritten by a later index still passes its gradient to every input
// that named it.
absl::Status DynamicStitchGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const int n = g->num_inputs() / 2;
  for (int m = 0; m < n; ++m) {
    g->SetInputGrad(n + m, b->Op("GatherV2", {g->grad_output(0), g->input(m), grad::Int(b, 0)}));
  }
  return absl::OkStatus();
}

// Each output's gradient goes back to the positions its rows came from:
// partition the positions 0..n-1 the same way and stitch the gradients.
absl::Status DynamicPartitionGrad(GradContext* g) {
  int64_t num = 0;
  RETURN_IF_ERROR(g->GetAttr("num_partitions", &num));
  GradBuilder* b = g->b();
  const SymTensor partitions = g->input(1);
  const SymTensor size = b->Op("Size", {partitions}, {{"out_type", AttrType(DT_INT32)}});
  const SymTensor positions = b->Op(
      "Reshape",
      {b->Op("Range", {grad::Int(b, 0), size, grad::Int(b, 1)}), grad::ShapeOf(b, partitions)});
  std::vector<SymTensor> parts =
      b->OpN("DynamicPartition", {{positions}, {partitions}}, {{"num_partitions", AttrInt(num)}});
  if (static_cast<int64_t>(parts.size()) != num) return b->status();
  std::vector<SymTensor> grads;
  for (int p = 0; p < num; ++p) grads.push_back(g->grad_output(p));
  std::vector<SymTensor> stitched = b->OpN("DynamicStitch", {parts, grads}, {});
  if (stitched.empty()) return b->status();
  g->SetInputGrad(0, b->Op("Reshape", {stitched[0], grad::ShapeOf(b, g->input(0))}));
  return absl::OkStatus();
}

REGISTER_GRADIENT("DynamicStitch", DynamicStitchGrad);
REGISTER_GRADIENT("ParallelDynamicStitch", DynamicStitchGrad);
REGISTER_GRADIENT("DynamicPartition", DynamicPartitionGrad);

}  // namespace
}  // namespace dflow
