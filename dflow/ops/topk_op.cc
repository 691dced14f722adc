// TopKV2: the k largest entries of each last-axis row and their indices,
// largest first, equal values by increasing index (so sorted=false, whose
// order TensorFlow leaves unspecified, gives the same). NaN counts as larger
// than every number, which keeps the order total.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// a before b in TopK's order. A strict weak order even with NaN (std::sort
// may read out of bounds with one that is not).
template <typename T>
bool Before(const T* row, int64_t a, int64_t b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
    if (na || nb) return na && (!nb || a < b);
  }
  return row[a] > row[b] || (row[a] == row[b] && a < b);
}

absl::Status TopKShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    c->set_output(1, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (in.rank() == 0) {
    return c->Error(absl::StrCat("input must be >= 1-D, got shape ", in.DebugString()));
  }
  std::vector<int64_t> dims = in.dims();
  dims.back() = kUnknownDim;
  if (const Tensor* k = c->input_tensor(1); k != nullptr && k->NumElements() == 1) {
    absl::StatusOr<int64_t> kv = IndexScalar(*k, "k");
    if (kv.ok() && *kv >= 0) dims.back() = *kv;
  }
  c->set_output(0, PartialShape(dims));
  c->set_output(1, PartialShape(dims));
  return absl::OkStatus();
}

class TopKOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& k_t = ctx->input(1);
    if (k_t.dims() != 0) {
      return ctx->InvalidArgument("k must be scalar, got shape ", k_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(int64_t k, IndexScalar(k_t, "k"));
    if (k < 0) return ctx->InvalidArgument("Need k >= 0, got ", k);
    if (x.dims() < 1) {
      return ctx->InvalidArgument("input must be >= 1-D, got shape ", x.shape().DebugString());
    }
    const int64_t cols = x.dim_size(x.dims() - 1);
    if (cols < k) {
      return ctx->InvalidArgument("input must have at least k columns. Had ", cols, ", needed ", k);
    }
    const DataType index_type = ctx->op_kernel().output_type(1);
    if (index_type == DT_INT32 && cols > std::numeric_limits<int32_t>::max()) {
      return ctx->InvalidArgument("rows of ", cols, " entries overflow index_type int32");
    }
    TensorShape out_shape = x.shape();
    out_shape.set_dim(x.dims() - 1, k);
    Tensor* values = ctx->allocate_output_for_overwrite(0, out_shape);
    Tensor* indices = ctx->allocate_output_for_overwrite(1, out_shape);
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    const int64_t rows = x.NumElements() / cols;
    return SwitchNumeric(x.dtype(), "TopKV2", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<int64_t> order(cols);
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = x.flat<T>().data() + r * cols;
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [row](int64_t a, int64_t b) { return Before(row, a, b); });
        for (int64_t j = 0; j < k; ++j) {
          values->flat<T>()[r * k + j] = row[order[j]];
          if (index_type == DT_INT32) {
            indices->flat<int32_t>()[r * k + j] = static_cast<int32_t>(order[j]);
          } else {
            indices->flat<int64_t>()[r * k + j] = order[j];
          }
        }
      }
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("TopKV2")
    .Input("input: T")
    .Input("k: Tk")
    .Output("values: T")
    .Output("indices: index_type")
    .Attr("sorted: bool = true")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
        "uint64}")
    .Attr("Tk: {int16, int32, int64} = DT_INT32")
    .Attr("index_type: {int16, int32, int64} = DT_INT32")
    .SetShapeFn(TopKShape);
REGISTER_KERNEL(KernelDefBuilder("TopKV2")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8})
                    .TypeConstraint("Tk", IndexTypes())
                    .TypeConstraint("index_type", IndexTypes()),
                TopKOp);

}  // namespace
}  // namespace dflow
