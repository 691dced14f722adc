// MatMul on a GPU: cuBLAS's SGEMM on the device's stream.
//
// cuBLAS is column-major and dflow's tensors row-major; a row-major M×N
// matrix is the column-major N×M of its transpose, so C = op(A)·op(B) is
// computed as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/batch_matmul.h"

namespace dflow {
namespace gpu {

absl::Status RowMajorGemmBatched(GpuDevice* gpu, bool transpose_a, bool transpose_b, int64_t m,
                                 int64_t n, int64_t k, const float* a, int64_t lda,
                                 int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                                 float* c, int64_t ldc, int64_t stride_c, int64_t batches) {
  const float one = 1.0f, zero = 0.0f;
  absl::MutexLock l(gpu->cublas_mutex());
  return CublasCheck(
      cublasSgemmStridedBatched(gpu->cublas(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                static_cast<int>(m), static_cast<int>(k), &one, b,
                                static_cast<int>(ldb), stride_b, a, static_cast<int>(lda),
                                stride_a, &zero, c, static_cast<int>(ldc), stride_c,
                                static_cast<int>(batches)),
      "cublasSgemmStridedBatched");
}

absl::Status RowMajorGemm(GpuDevice* gpu, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float* c, int64_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  absl::MutexLock l(gpu->cublas_mutex());
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
    absl::StatusOr<MatMulSizes> sizes =
        MakeMatMulSizes(a.shape(), b.shape(), transpose_a_, transpose_b_);
    if (!sizes.ok()) return WithPrefix(sizes.status(), ctx->Prefix());
    const int64_t m = sizes->m, n = sizes->n, k = sizes->k;
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

// True when operand matrix b serves output matrix b for every b (the stride
// stays one matrix), or one matrix serves them all (stride 0).
bool Strided(const std::vector<int64_t>& batch, int64_t* stride) {
  if (std::all_of(batch.begin(), batch.end(), [](int64_t v) { return v == 0; })) {
    if (batch.size() > 1) *stride = 0;
    return true;
  }
  for (size_t b = 0; b < batch.size(); ++b) {
    if (batch[b] != static_cast<int64_t>(b)) return false;
  }
  return true;
}

// BatchMatMul(V2): one strided-batched SGEMM when every output matrix takes
// the next x and y matrices (or one side is a single shared matrix), else one
// SGEMM per output matrix.
class BatchMatMulGpuOp : public OpKernel {
 public:
  explicit BatchMatMulGpuOp(OpKernelConstruction* c)
      : OpKernel(c), broadcast_(c->def().op() != "BatchMatMul") {
    c->GetAttr("adj_x", &adj_x_).IgnoreError();  // Recorded on c.
    c->GetAttr("adj_y", &adj_y_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    absl::StatusOr<BatchMatMulPlan> plan =
        BatchMatMulPlan::Make(x.shape(), y.shape(), adj_x_, adj_y_, broadcast_);
    if (!plan.ok()) return ctx->InvalidArgument(plan.status().message());
    const BatchMatMulPlan& p = *plan;
    constexpr int64_t kMaxDim = std::numeric_limits<int>::max();
    if (p.m > kMaxDim || p.n > kMaxDim || p.k > kMaxDim || p.batches() > kMaxDim) {
      return ctx->InvalidArgument("dimensions exceed cuBLAS's int range: x=",
                                  x.shape().DebugString(), " y=", y.shape().DebugString());
    }
    if (p.k == 0) {
      ctx->allocate_output(0, p.output_shape);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, p.output_shape);
    if (p.m == 0 || p.n == 0 || p.batches() == 0 || !out->IsInitialized()) {
      return absl::OkStatus();
    }
    GpuDevice* gpu = GpuOf(ctx);
    const auto* xs = static_cast<const float*>(x.raw_data());
    const auto* ys = static_cast<const float*>(y.raw_data());
    auto* zs = static_cast<float*>(out->raw_data());
    int64_t sx = p.m * p.k, sy = p.k * p.n;
    const bool uniform = Strided(p.x_batch, &sx) && Strided(p.y_batch, &sy);
    absl::Status s;
    if (uniform) {
      s = RowMajorGemmBatched(gpu, adj_x_, adj_y_, p.m, p.n, p.k, xs, p.x_row_length, sx, ys,
                              p.y_row_length, sy, zs, p.n, p.m * p.n, p.batches());
    } else {
      for (int64_t b = 0; b < p.batches() && s.ok(); ++b) {
        s = RowMajorGemm(gpu, adj_x_, adj_y_, p.m, p.n, p.k, xs + p.x_batch[b] * p.m * p.k,
                         p.x_row_length, ys + p.y_batch[b] * p.k * p.n, p.y_row_length,
                         zs + b * p.m * p.n, p.n);
      }
    }
    if (!s.ok()) return absl::InternalError(absl::StrCat(ctx->Prefix(), s.message()));
    return absl::OkStatus();
  }

 private:
  const bool broadcast_;
  bool adj_x_ = false;
  bool adj_y_ = false;
};

REGISTER_KERNEL(KernelDefBuilder("BatchMatMul").Device(kDeviceGPU).TypeConstraint<float>("T"),
                BatchMatMulGpuOp);
REGISTER_KERNEL(KernelDefBuilder("BatchMatMulV2").Device(kDeviceGPU).TypeConstraint<float>("T"),
                BatchMatMulGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
