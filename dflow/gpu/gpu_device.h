// GpuDevice: one CUDA GPU as a dflow device ("/device:GPU:N").
//
// Execution model (TensorFlow's, simplified to one compute stream):
//  - every kernel of the device enqueues its work on stream() and returns;
//    kernels of one device therefore run in the order the executor ran them,
//    and device memory freed by a tensor is reused only by work queued later
//    on the same stream, which is safe without events;
//  - host -> device copies are queued on the compute stream too, from pinned
//    staging memory the bytes are first copied into: the host goes on at
//    once (it used to wait for every kernel queued so far), the copy runs
//    after the work that may still read the destination's recycled block and
//    before the work that reads it. Staging blocks are kept until Sync();
//  - device -> host copies run on their own stream after the compute work
//    queued so far, into pinned host memory, and are waited for: the host
//    tensor is readable when CopyTensor returns;
//  - a step ends with Sync(), which reports the first error the stream met.
//
// Kernels (.cc files, compiled by the host compiler) call launchers defined
// in .cu files with plain pointers and the stream:
//
//   absl::Status Compute(OpKernelContext* ctx) override {
//     GpuDevice* gpu = GpuOf(ctx);
//     Tensor* out = ctx->allocate_output_for_overwrite(0, in.shape());
//     LaunchRelu(gpu->stream(), in.flat<float>().data(), out->flat<float>().data(), n);
//     return LaunchStatus(ctx);
//   }
#ifndef DFLOW_GPU_GPU_DEVICE_H_
#define DFLOW_GPU_GPU_DEVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/allocator.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"

namespace dflow {
namespace gpu {

// OK, or INTERNAL "<what>: <CUDA's name and message>".
absl::Status CudaCheck(cudaError_t e, absl::string_view what);
absl::Status CublasCheck(cublasStatus_t s, absl::string_view what);
absl::Status CudnnCheck(cudnnStatus_t s, absl::string_view what);

// A caching pool of one GPU's memory: freed blocks are kept by size class
// (powers of two up to 64 MiB, then 2 MiB steps) and handed out again
// without cudaMalloc/cudaFree, which synchronise the whole device. When
// cudaMalloc fails, the cached blocks are released and it is tried again.
// `limit` bounds the bytes held (in use + cached).
class GpuAllocator : public Allocator {
 public:
  GpuAllocator(int cuda_ordinal, uint64_t limit);
  ~GpuAllocator() override;
  std::string Name() const override;
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  void* Allocate(size_t bytes) override;
  void Deallocate(void* p, size_t bytes) override;

  uint64_t bytes_in_use() const;
  uint64_t bytes_cached() const;

 private:
  static size_t RoundUp(size_t bytes);
  void ReleaseCached() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int ordinal_;
  const uint64_t limit_;
  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

// Pinned (page-locked) host memory, cached by size like GpuAllocator: the
// host side of device -> host copies, which then run at the bus's speed.
class PinnedHostAllocator : public Allocator {
 public:
  static PinnedHostAllocator* Get();  // One per process.
  std::string Name() const override { return "pinned host memory"; }
  MemoryType memory_type() const override { return MemoryType::kHost; }
  void* Allocate(size_t bytes) override;
  void Deallocate(void* p, size_t bytes) override;

 private:
  absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

class GpuDevice : public Device {
 public:
  // The device for CUDA device `cuda_ordinal`, named `name`; creates its
  // streams, cuBLAS handle and allocator (bounded by `memory_limit`).
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Create(const DeviceName& name,
                                                           int cuda_ordinal,
                                                           int64_t memory_limit);
  ~GpuDevice() override;

  int cuda_ordinal() const { return ordinal_; }
  // Where every kernel of this device queues its work.
  cudaStream_t stream() const { return compute_; }
  // cuBLAS, bound to stream().
  cublasHandle_t cublas() const { return cublas_; }
  // cuDNN, bound to stream(), made on first use.
  absl::StatusOr<cudnnHandle_t> cudnn();
  // A handle is not for concurrent use, and a device's kernels may run on
  // several threads: hold the device's mutex around each call with its
  // handle (and a convolution's autotuning). Per device, so towers on
  // different GPUs do not wait for each other.
  absl::Mutex* cublas_mutex() { return &cublas_call_mu_; }
  absl::Mutex* cudnn_mutex() { return &cudnn_call_mu_; }
  // Device scratch for one kernel (cuDNN workspaces, partial sums); freed
  // with the tensor, which is safe once the kernel's work is queued.
  absl::StatusOr<Tensor> AllocateTemp(DataType dtype, const TensorShape& shape);
  GpuAllocator* gpu_allocator() { return allocator_.get(); }

  Allocator* device_allocator() override { return allocator_.get(); }
  absl::StatusOr<Tensor> CopyTensor(const Tensor& t, MemoryType to) override;
  absl::Status ZeroFill(Tensor* t) override;
  absl::Status CopyStrided(const void* in, void* out, const StridedCopySpec& spec) override;
  absl::Status GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                          int64_t row_elems, int element_size) override;
  // A new device tensor holding `values` (a kernel's table), copied through
  // pinned staging memory and queued on the compute stream: later kernels
  // read it, the host does not wait.
  absl::StatusOr<Tensor> CopyInt64sToDevice(absl::Span<const int64_t> values);
  // Pieces of a MiB or more by the copy engine, the rest by one kernel (in
  // chunks of 64 KiB, one a block).
  absl::Status CopyPieces(absl::Span<const CopyPiece> pieces) override;
  // float, double and int64 (the gradients of a GPU's TensorArrays and
  // TensorLists); other dtypes: Unimplemented, so the caller adds on the host.
  absl::Status AddTensors(const Tensor& a, const Tensor& b, Tensor* out) override;
  // float, double and int64 (a GPU's variables): the updates grouped by
  // row on the host, one kernel over (row, element) applying each group in
  // order, so repeated indices give the host's values. Other dtypes:
  // Unimplemented.
  absl::Status ScatterRows(ScatterOp op, const Tensor& updates, absl::Span<const int64_t> indices,
                           Tensor* ref) override;
  // Waits for the work queued so far; then the staging blocks of the copies
  // queued before it go back to the pinned pool.
  absl::Status Sync() override;

 private:
  GpuDevice(const DeviceName& name, int ordinal, int64_t memory_limit);
  absl::StatusOr<Tensor> CopyToDevice(const Tensor& t);
  absl::StatusOr<Tensor> CopyToHost(const Tensor& t);

  const int ordinal_;
  std::unique_ptr<GpuAllocator> allocator_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t device_to_host_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  absl::Mutex cudnn_mu_;
  cudnnHandle_t cudnn_ ABSL_GUARDED_BY(cudnn_mu_) = nullptr;
  absl::Mutex cublas_call_mu_, cudnn_call_mu_;
  // The pinned sources of host -> device copies queued on the compute
  // stream, kept until a Sync() after them; bounded by kMaxStagedBytes.
  absl::Mutex staged_mu_;
  std::vector<Tensor> staged_ ABSL_GUARDED_BY(staged_mu_);
  uint64_t staged_bytes_ ABSL_GUARDED_BY(staged_mu_) = 0;
};

// The GPU a GPU kernel runs on, made the calling thread's current CUDA
// device (launches go to the current device). REQUIRES: the kernel is
// registered for GPU.
GpuDevice* GpuOf(OpKernelContext* ctx);

// After launching kernels: OK, or the launch error prefixed with the node.
absl::Status LaunchStatus(OpKernelContext* ctx);

// Output i for kernels that write all of it; null when device memory ran
// out (the executor then fails the node with RESOURCE_EXHAUSTED).
inline Tensor* OutputForOverwrite(OpKernelContext* ctx, int i, const TensorShape& shape) {
  Tensor* t = ctx->allocate_output_for_overwrite(i, shape);
  return ctx->allocation_status().ok() ? t : nullptr;
}

// C = op(A)·op(B) for row-major float matrices (MatMul's arithmetic), queued
// on the device's stream. op(A) is m×k, op(B) k×n; ld* are row lengths.
absl::Status RowMajorGemm(GpuDevice* gpu, bool transpose_a, bool transpose_b, int64_t m,
                          int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                          int64_t ldb, float* c, int64_t ldc);

// The same for `batches` products, matrix i of each operand at pointer +
// i * stride (a stride of 0 shares one matrix).
absl::Status RowMajorGemmBatched(GpuDevice* gpu, bool transpose_a, bool transpose_b, int64_t m,
                                 int64_t n, int64_t k, const float* a, int64_t lda,
                                 int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                                 float* c, int64_t ldc, int64_t stride_c, int64_t batches);

// The number of CUDA devices this process sees (CUDA_VISIBLE_DEVICES
// applies); 0 without a driver or a GPU.
int VisibleGpuCount();

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_GPU_DEVICE_H_
