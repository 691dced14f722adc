#include "dflow/ops/xent_util.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace dflow {

absl::Status BroadcastTo2D(const OpKernelContext& ctx, const TensorShape& a, const TensorShape& b,
                           int64_t* rows, int64_t* cols, Broadcast2D* ba, Broadcast2D* bb) {
  const std::string sizes =
      absl::StrCat("logits_size=", a.DebugString(), " labels_size=", b.DebugString());
  if (std::max(a.dims(), b.dims()) != 2) {
    return ctx.InvalidArgument(
        "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional: ",
        sizes);
  }
  auto dim = [](const TensorShape& s, int d) {  // d in {0, 1}, counted in rank 2
    const int i = s.dims() - 2 + d;
    return i >= 0 ? s.dim_size(i) : int64_t{1};
  };
  int64_t out[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t da = dim(a, d), db = dim(b, d);
    if (da != db && da != 1 && db != 1) {
      return ctx.InvalidArgument("logits and labels must be broadcastable: ", sizes);
    }
    out[d] = da == 1 ? db : da;
  }
  *rows = out[0], *cols = out[1];
  *ba = {dim(a, 0) == 1 ? 0 : dim(a, 1), dim(a, 1) == 1 ? 0 : 1};
  *bb = {dim(b, 0) == 1 ? 0 : dim(b, 1), dim(b, 1) == 1 ? 0 : 1};
  return absl::OkStatus();
}

absl::Status CheckSparseXentShapes(const OpKernelContext& ctx, const TensorShape& logits,
                                   const TensorShape& labels) {
  if (logits.dims() != 2) {
    return ctx.InvalidArgument("logits must be 2-D, but got shape ", logits.DebugString());
  }
  if (labels.dims() != 1) {
    return ctx.InvalidArgument("labels must be 1-D, but got shape ", labels.DebugString());
  }
  if (logits.dim_size(0) != labels.dim_size(0)) {
    return ctx.InvalidArgument(
        "logits and labels must have the same first dimension, got logits shape ",
        logits.DebugString(), " and labels shape ", labels.DebugString());
  }
  if (logits.dim_size(1) == 0) {
    return ctx.InvalidArgument("Must have at least one class, but got logits shape ",
                               logits.DebugString());
  }
  return absl::OkStatus();
}

}  // namespace dflow
