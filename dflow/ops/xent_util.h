// The shape rules of the softmax cross-entropy ops, one text for the kernels
// of every device, so that a bad shape reads the same on CPU and GPU.
#ifndef DFLOW_OPS_XENT_UTIL_H_
#define DFLOW_OPS_XENT_UTIL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

// How a rank <= 2 input is read once broadcast to [rows, cols]: element
// (r, c) is at r * row_stride + c * col_stride.
struct Broadcast2D {
  int64_t row_stride = 0, col_stride = 0;
};

// SoftmaxCrossEntropyWithLogits: the broadcast [rows, cols] of logits `a`
// and labels `b` and how each is read, or InvalidArgument naming both.
absl::Status BroadcastTo2D(const OpKernelContext& ctx, const TensorShape& a, const TensorShape& b,
                           int64_t* rows, int64_t* cols, Broadcast2D* ba, Broadcast2D* bb);

// SparseSoftmaxCrossEntropyWithLogits: logits [batch, classes] with at least
// one class, labels [batch]; else InvalidArgument naming the shapes.
absl::Status CheckSparseXentShapes(const OpKernelContext& ctx, const TensorShape& logits,
                                   const TensorShape& labels);

}  // namespace dflow

#endif  // DFLOW_OPS_XENT_UTIL_H_
