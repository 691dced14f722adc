// MatMul on a GPU: cuBLAS's SGEMM on the device's stream.
//
// cuBLAS is column-major and dflow's tensors row-major; a row-major M×N
// matrix is the column-major N×M of its transpose, so C = op(A)·op(B) is
// computed as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped.
#include <limits>

#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/gpu/gpu_device.h"

namespace dflow {
namespace gpu {

absl::Status RowMajorGemm(GpuDevice* gpu, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float* c, int64_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  static absl::Mutex* mu = new absl::Mutex;  // A cuBLAS handle is not for concurrent use.
  absl::MutexLock l(mu);
  return CublasCheck(cublasSgemm(gpu->cublas(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(m), static_cast<int>(k), &one, b,
                                 static_cast<int>(ldb), a, static_cast<int>(lda), &zero, c,
                                 static_cast<int>(ldc)),
                     "cublasSgemm");
}

namespace {

class MatMulGpuOp : public OpKernel {
 public:
  explicit MatMulGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("transpose_a", &transpose_a_).IgnoreError();  // Recorded on c.
    c->GetAttr("transpose_b", &transpose_b_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (a.dims() != 2 || b.dims() != 2) {
      return ctx->InvalidArgument("inputs must be matrices: a=", a.shape().DebugString(),
                                  " b=", b.shape().DebugString());
    }
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0), k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0), n = b.dim_size(transpose_b_ ? 0 : 1);
    if (k != kb) {
      return ctx->InvalidArgument("inner dimensions differ: a=", a.shape().DebugString(),
                                  " b=", b.shape().DebugString());
    }
    constexpr int64_t kMaxDim = std::numeric_limits<int>::max();
    if (m > kMaxDim || n > kMaxDim || k > kMaxDim) {
      return ctx->InvalidArgument("dimensions exceed cuBLAS's int range: a=",
                                  a.shape().DebugString(), " b=", b.shape().DebugString());
    }
    if (k == 0) {  // An empty sum: zeros (allocate_output fills).
      ctx->allocate_output(0, TensorShape({m, n}));
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, TensorShape({m, n}));
    if (m == 0 || n == 0 || !out->IsInitialized()) return absl::OkStatus();
    GpuDevice* gpu = GpuOf(ctx);
    absl::Status s = RowMajorGemm(gpu, transpose_a_, transpose_b_, m, n, k,
                                  static_cast<const float*>(a.raw_data()), a.dim_size(1),
                                  static_cast<const float*>(b.raw_data()), b.dim_size(1),
                                  static_cast<float*>(out->raw_data()), n);
    if (!s.ok()) return absl::InternalError(absl::StrCat(ctx->Prefix(), s.message()));
    return absl::OkStatus();
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

REGISTER_KERNEL(KernelDefBuilder("MatMul").Device(kDeviceGPU).TypeConstraint<float>("T"),
                MatMulGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
