// DataFormatVecPermute: a shape-like vector (or rows of a [4, 2] paddings
// matrix) given in one data format (src_format, "NHWC") reordered into
// another (dst_format, "NCHW"): y[i] = x[src_format.find(dst_format[i])].
// A vector of 2 holds the spatial dimensions only, which keep their order.
// The layout rewrite (runtime/layout_rewrite.h) permutes Conv2DBackpropInput's
// input_sizes and AvgPoolGrad's orig_input_shape with it.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// For each position of `dst`, where that dimension is in `src`; InvalidArgument
// unless both are 4-letter permutations of each other.
absl::StatusOr<std::vector<int>> FormatPermutation(const std::string& src,
                                                   const std::string& dst) {
  if (src.size() != 4 || dst.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "src_format and dst_format must be 4 characters long, got ", src, " and ", dst));
  }
  std::vector<int> perm;
  for (char c : dst) {
    const size_t at = src.find(c);
    if (at == std::string::npos || src.find(c, at + 1) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Destination and source format must determine a permutation, got ", src, " and ",
          dst));
    }
    perm.push_back(static_cast<int>(at));
  }
  return perm;
}

class DataFormatVecPermuteOp : public OpKernel {
 public:
  explicit DataFormatVecPermuteOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string src = "NHWC", dst = "NCHW";
    c->GetAttr("src_format", &src).IgnoreError();
    c->GetAttr("dst_format", &dst).IgnoreError();
    absl::StatusOr<std::vector<int>> perm = FormatPermutation(src, dst);
    if (!perm.ok()) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[DataFormatVecPermute '", name(), "'] ", perm.status().message())));
      return;
    }
    perm_ = *std::move(perm);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const TensorShape& s = x.shape();
    if (s.dims() != 1 && s.dims() != 2) {
      return ctx->InvalidArgument("input must be a vector or 2D tensor, but got shape ",
                                  s.DebugString());
    }
    if (s.dim_size(0) != 2 && s.dim_size(0) != 4) {
      return ctx->InvalidArgument(s.dims() == 1 ? "1D" : "First dimension of 2D",
                                  " input must be of size 2 or 4, but got shape ",
                                  s.DebugString());
    }
    if (s.dims() == 2 && s.dim_size(1) != 2) {
      return ctx->InvalidArgument("Second dimension of 2D input must be of size 2, but got shape ",
                                  s.DebugString());
    }
    Tensor* y = ctx->allocate_output(0, s);
    const int64_t width = s.dims() == 2 ? 2 : 1;
    if (s.dim_size(0) == 2) {  // Spatial dimensions only: their order is kept.
      std::memcpy(y->raw_data(), x.raw_data(), x.TotalBytes());
      return absl::OkStatus();
    }
    if (x.dtype() == DT_INT32) {
      Permute(x.flat<int32_t>().data(), width, y->flat<int32_t>().data());
    } else {
      Permute(x.flat<int64_t>().data(), width, y->flat<int64_t>().data());
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  void Permute(const T* x, int64_t width, T* y) const {
    for (int i = 0; i < 4; ++i) {
      for (int64_t k = 0; k < width; ++k) y[i * width + k] = x[perm_[i] * width + k];
    }
  }

  std::vector<int> perm_;
};

REGISTER_OP("DataFormatVecPermute")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {int32, int64} = DT_INT32")
    .Attr("src_format: string = 'NHWC'")
    .Attr("dst_format: string = 'NCHW'")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("DataFormatVecPermute")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_INT32, DT_INT64}),
                DataFormatVecPermuteOp);
// On a GPU, as TensorFlow's: a shape in host memory.
REGISTER_KERNEL(KernelDefBuilder("DataFormatVecPermute")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", {DT_INT32, DT_INT64})
                    .HostMemory("x")
                    .HostMemory("y"),
                DataFormatVecPermuteOp);

}  // namespace
}  // namespace dflow
