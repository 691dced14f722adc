// MatMul: float and double through OpenBLAS, int32 and int64 through Eigen.
//
// dflow has one intra-op budget per process (DESIGN.md §4): OpenBLAS runs
// single-threaded, and large products are split here into blocks of output
// rows (or columns, when the output is wide and short) over the intra-op
// pool, one BLAS call per block.
#include <cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/batch_matmul.h"
#include "dflow/ops/blas_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/eigen_util.h"

namespace dflow {
namespace {


// Below this many multiply-adds one call on the caller's thread is fastest.
constexpr int64_t kMinParallelMacs = 128 * 128 * 128;
// No block is narrower than this many rows or columns.
constexpr int64_t kMinBlock = 64;

// One row-major product C[m,n] = op(A) op(B), where op(A) is [m,k] and
// op(B) is [k,n]; lda/ldb/ldc are the row strides of the stored matrices.
template <typename T>
struct Gemm {
  bool transpose_a, transpose_b;
  int64_t m, n, k;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T* c;
  int64_t ldc;

  // The product restricted to output rows [r0, r1).
  Gemm Rows(int64_t r0, int64_t r1) const {
    Gemm g = *this;
    g.m = r1 - r0;
    g.a = transpose_a ? a + r0 : a + r0 * lda;
    g.c = c + r0 * ldc;
    return g;
  }
  // The product restricted to output columns [c0, c1).
  Gemm Cols(int64_t c0, int64_t c1) const {
    Gemm g = *this;
    g.n = c1 - c0;
    g.b = transpose_b ? b + c0 * ldb : b + c0;
    g.c = c + c0;
    return g;
  }
};

void RunBlock(const Gemm<float>& g) {
  cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans,
              g.transpose_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b,
              g.ldb, 0.0f, g.c, g.ldc);
}

void RunBlock(const Gemm<double>& g) {
  cblas_dgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans,
              g.transpose_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0, g.a, g.lda, g.b, g.ldb,
              0.0, g.c, g.ldc);
}

// Integers have no BLAS: Eigen's own GEMM, single-threaded per block.
template <typename T>
void RunBlock(const Gemm<T>& g) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  using ConstMap = Eigen::Map<const Matrix, Eigen::Unaligned, Stride>;
  ConstMap a(g.a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, Stride(g.lda));
  ConstMap b(g.b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, Stride(g.ldb));
  Eigen::Map<Matrix, Eigen::Unaligned, Stride> c(g.c, g.m, g.n, Stride(g.ldc));
  if (g.transpose_a && g.transpose_b) {
    c.noalias() = a.transpose() * b.transpose();
  } else if (g.transpose_a) {
    c.noalias() = a.transpose() * b;
  } else if (g.transpose_b) {
    c.noalias() = a * b.transpose();
  } else {
    c.noalias() = a * b;
  }
}

// Splits the product along its longer output side into at most one block per
// pool thread; small products run as a single call.
template <typename T>
void RunGemm(ThreadPool* pool, const Gemm<T>& g) {
  const int64_t threads = pool == nullptr ? 1 : pool->NumThreads();
  const bool by_rows = g.m >= g.n;
  const int64_t extent = by_rows ? g.m : g.n;
  const int64_t blocks = std::min(threads, extent / kMinBlock);
  if (blocks <= 1 || g.m * g.n * g.k < kMinParallelMacs) {
    RunBlock(g);
    return;
  }
  // Block edges on multiples of 16 keep every block's vector loads aligned.
  const int64_t per_block = ((extent + blocks - 1) / blocks + 15) / 16 * 16;
  const int64_t num_blocks = (extent + per_block - 1) / per_block;
  const int64_t cost = per_block * (by_rows ? g.n : g.m) * g.k;
  pool->ParallelFor(num_blocks, cost, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t begin = blk * per_block, end = std::min(extent, begin + per_block);
      RunBlock(by_rows ? g.Rows(begin, end) : g.Cols(begin, end));
    }
  });
}

template <typename T>
class MatMulOp : public OpKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("transpose_a", &transpose_a_).IgnoreError();  // Recorded on c.
    c->GetAttr("transpose_b", &transpose_b_).IgnoreError();
    EnsureBlasSingleThreaded();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    absl::StatusOr<MatMulSizes> sizes =
        MakeMatMulSizes(a.shape(), b.shape(), transpose_a_, transpose_b_);
    if (!sizes.ok()) return WithPrefix(sizes.status(), ctx->Prefix());
    const int64_t m = sizes->m, n = sizes->n, k = sizes->k;
    if (k == 0) {  // An empty sum: zeros.
      ctx->allocate_output(0, TensorShape({m, n}));
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, TensorShape({m, n}));
    if (m == 0 || n == 0) return absl::OkStatus();
    const Gemm<T> g{.transpose_a = transpose_a_,
                    .transpose_b = transpose_b_,
                    .m = m,
                    .n = n,
                    .k = k,
                    .a = a.flat<T>().data(),
                    .lda = a.dim_size(1),
                    .b = b.flat<T>().data(),
                    .ldb = b.dim_size(1),
                    .c = out->flat<T>().data(),
                    .ldc = n};
    RunGemm(ctx->intra_op_pool(), g);
    return absl::OkStatus();
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

absl::Status MatMulShape(InferenceContext* c) {
  PartialShape a, b;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
  bool transpose_a = false, transpose_b = false;
  RETURN_IF_ERROR(c->GetAttr("transpose_a", &transpose_a));
  RETURN_IF_ERROR(c->GetAttr("transpose_b", &transpose_b));
  const int64_t ka = a.dim(transpose_a ? 0 : 1), kb = b.dim(transpose_b ? 1 : 0);
  if (ka != kUnknownDim && kb != kUnknownDim && ka != kb) {
    return c->Error(absl::StrCat("inner dimensions differ: a=", a.DebugString(),
                                 " b=", b.DebugString(), TransposeNote(transpose_a, transpose_b)));
  }
  c->set_output(0, PartialShape({a.dim(transpose_a ? 1 : 0), b.dim(transpose_b ? 0 : 1)}));
  return absl::OkStatus();
}

// BatchMatMul (equal batch dimensions) and BatchMatMulV2 (numpy-broadcast
// batch dimensions): one product per output matrix.
template <typename T>
class BatchMatMulOp : public OpKernel {
 public:
  explicit BatchMatMulOp(OpKernelConstruction* c)
      : OpKernel(c), broadcast_(c->def().op() != "BatchMatMul") {
    c->GetAttr("adj_x", &adj_x_).IgnoreError();  // Recorded on c.
    c->GetAttr("adj_y", &adj_y_).IgnoreError();
    EnsureBlasSingleThreaded();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    absl::StatusOr<BatchMatMulPlan> plan =
        BatchMatMulPlan::Make(x.shape(), y.shape(), adj_x_, adj_y_, broadcast_);
    if (!plan.ok()) return ctx->InvalidArgument(plan.status().message());
    const BatchMatMulPlan& p = *plan;
    if (p.k == 0) {  // Empty sums: zeros.
      ctx->allocate_output(0, p.output_shape);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, p.output_shape);
    if (p.m == 0 || p.n == 0) return absl::OkStatus();
    const T* xs = x.flat<T>().data();
    const T* ys = y.flat<T>().data();
    T* zs = out->flat<T>().data();
    for (int64_t b = 0; b < p.batches(); ++b) {
      RunGemm(ctx->intra_op_pool(),
              Gemm<T>{.transpose_a = adj_x_,
                      .transpose_b = adj_y_,
                      .m = p.m,
                      .n = p.n,
                      .k = p.k,
                      .a = xs + p.x_batch[b] * p.m * p.k,
                      .lda = p.x_row_length,
                      .b = ys + p.y_batch[b] * p.k * p.n,
                      .ldb = p.y_row_length,
                      .c = zs + b * p.m * p.n,
                      .ldc = p.n});
    }
    return absl::OkStatus();
  }

 private:
  const bool broadcast_;
  bool adj_x_ = false;
  bool adj_y_ = false;
};

absl::Status BatchMatMulShape(InferenceContext* c) {
  PartialShape x, y;
  RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 2, &x));
  RETURN_IF_ERROR(c->WithRankAtLeast(c->input(1), 2, &y));
  if (!x.rank_known() || !y.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  bool adj_x = false, adj_y = false;
  RETURN_IF_ERROR(c->GetAttr("adj_x", &adj_x));
  RETURN_IF_ERROR(c->GetAttr("adj_y", &adj_y));
  const int xr = x.rank(), yr = y.rank();
  const int64_t kx = x.dim(adj_x ? xr - 2 : xr - 1), ky = y.dim(adj_y ? yr - 1 : yr - 2);
  if (kx != kUnknownDim && ky != kUnknownDim && kx != ky) {
    return c->Error(absl::StrCat("inner dimensions differ: x=", x.DebugString(),
                                 " y=", y.DebugString()));
  }
  ASSIGN_OR_RETURN(PartialShape batch,
                   BroadcastShapes(PartialShape(std::vector<int64_t>(x.dims().begin(),
                                                                     x.dims().end() - 2)),
                                   PartialShape(std::vector<int64_t>(y.dims().begin(),
                                                                     y.dims().end() - 2))));
  std::vector<int64_t> out = batch.dims();
  out.push_back(x.dim(adj_x ? xr - 1 : xr - 2));
  out.push_back(y.dim(adj_y ? yr - 2 : yr - 1));
  c->set_output(0, PartialShape(std::move(out)));
  return absl::OkStatus();
}

REGISTER_OP("BatchMatMul")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: {float, double, int32, int64}")
    .Attr("adj_x: bool = false")
    .Attr("adj_y: bool = false")
    .SetShapeFn(BatchMatMulShape);
CpuKernels<BatchMatMulOp, float, double, int32_t, int64_t> batch_mat_mul_kernels("BatchMatMul");

REGISTER_OP("BatchMatMulV2")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: {float, double, int32, int64}")
    .Attr("adj_x: bool = false")
    .Attr("adj_y: bool = false")
    .SetShapeFn(BatchMatMulShape);
CpuKernels<BatchMatMulOp, float, double, int32_t, int64_t> batch_mat_mul_v2_kernels(
    "BatchMatMulV2");

REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {float, double, int32, int64}")
    .Attr("grad_a: bool = false")
    .Attr("grad_b: bool = false")
    .SetShapeFn(MatMulShape);
CpuKernels<MatMulOp, float, double, int32_t, int64_t> mat_mul_kernels("MatMul");

}  // namespace
}  // namespace dflow
