// DenseToDenseSetOperation (tf.sets.difference / intersection / union of
// dense tensors): the sets are the last dimension of each input, one per
// index of the leading dimensions; the result is a SparseTensor (indices,
// values, dense shape) holding each result set sorted. The weights checks of
// tf.compat.v1.losses use it. OpDef and error texts are TensorFlow's.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

enum class SetOperation { kAMinusB, kBMinusA, kIntersection, kUnion };

template <typename T>
class DenseToDenseSetOperationOp : public OpKernel {
 public:
  explicit DenseToDenseSetOperationOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string op;
    if (!c->GetAttr("set_operation", &op).ok()) return;
    if (op == "a-b") {
      op_ = SetOperation::kAMinusB;
    } else if (op == "b-a") {
      op_ = SetOperation::kBMinusA;
    } else if (op == "intersection") {
      op_ = SetOperation::kIntersection;
    } else if (op == "union") {
      op_ = SetOperation::kUnion;
    } else {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat("Invalid set_operation ", op, ".")));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    for (const Tensor* t : {&a, &b}) {
      if (t->dims() < 2) {
        return ctx->InvalidArgument("Shape ", t->shape().DebugString(), " has rank ", t->dims(),
                                    " < 2");
      }
    }
    // The group (leading) dimensions must agree; the set sizes may differ.
    TensorShape groups = a.shape();
    groups.RemoveDim(groups.dims() - 1);
    TensorShape b_groups = b.shape();
    b_groups.RemoveDim(b_groups.dims() - 1);
    if (groups != b_groups) {
      return ctx->InvalidArgument("Mismatched shapes ", groups.DebugString(), " vs ",
                                  b_groups.DebugString());
    }
    const int64_t a_size = a.dim_size(a.dims() - 1), b_size = b.dim_size(b.dims() - 1);
    // Empty sets everywhere (any number of groups): an empty result, without
    // a vector per group.
    const int64_t num_groups = a_size == 0 && b_size == 0 ? 0 : groups.num_elements();
    std::vector<std::vector<T>> results(num_groups);
    size_t max_size = 0, total = 0;
    for (int64_t g = 0; g < num_groups; ++g) {
      const T* a_row = a.flat<T>().data() + g * a_size;
      const T* b_row = b.flat<T>().data() + g * b_size;
      const std::set<T> sa(a_row, a_row + a_size), sb(b_row, b_row + b_size);
      results[g] = Apply(sa, sb);
      max_size = std::max(max_size, results[g].size());
      total += results[g].size();
    }
    const int rank = a.dims();
    auto indices =
        ctx->allocate_output(0, TensorShape({static_cast<int64_t>(total), rank}))->flat<int64_t>();
    auto values = ctx->allocate_output(1, TensorShape({static_cast<int64_t>(total)}))->flat<T>();
    auto shape = ctx->allocate_output(2, TensorShape({rank}))->flat<int64_t>();
    for (int d = 0; d < rank - 1; ++d) shape[d] = groups.dim_size(d);
    shape[rank - 1] = static_cast<int64_t>(max_size);
    int64_t k = 0;
    for (int64_t g = 0; g < num_groups; ++g) {
      for (size_t j = 0; j < results[g].size(); ++j, ++k) {
        // The group's row-major coordinates, then the position in its set.
        int64_t rest = g;
        for (int d = rank - 2; d >= 0; --d) {
          indices[k * rank + d] = rest % groups.dim_size(d);
          rest /= groups.dim_size(d);
        }
        indices[k * rank + rank - 1] = static_cast<int64_t>(j);
        values[k] = results[g][j];
      }
    }
    return absl::OkStatus();
  }

 private:
  // The sorted result of the operation on sets `a` and `b`.
  std::vector<T> Apply(const std::set<T>& a, const std::set<T>& b) const {
    std::vector<T> out;
    auto into = std::back_inserter(out);
    switch (op_) {
      case SetOperation::kAMinusB:
        std::set_difference(a.begin(), a.end(), b.begin(), b.end(), into);
        break;
      case SetOperation::kBMinusA:
        std::set_difference(b.begin(), b.end(), a.begin(), a.end(), into);
        break;
      case SetOperation::kIntersection:
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), into);
        break;
      case SetOperation::kUnion:
        std::set_union(a.begin(), a.end(), b.begin(), b.end(), into);
        break;
    }
    return out;
  }

  SetOperation op_ = SetOperation::kAMinusB;
};

REGISTER_OP("DenseToDenseSetOperation")
    .Input("set1: T")
    .Input("set2: T")
    .Output("result_indices: int64")
    .Output("result_values: T")
    .Output("result_shape: int64")
    .Attr("set_operation: string")
    .Attr("validate_indices: bool = true")
    .Attr("T: {int32, int64, uint8, string}")
    .SetShapeFn(UnknownShape);
CpuKernels<DenseToDenseSetOperationOp, int32_t, int64_t, uint8_t, std::string> set_op_kernels(
    "DenseToDenseSetOperation");
REGISTER_NO_GRADIENT("DenseToDenseSetOperation");

}  // namespace
}  // namespace dflow
