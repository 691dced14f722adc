#include "dflow/gpu/gpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dflow/framework/status.h"
#include "dflow/gpu/cwise_launch.h"
#include "dflow/gpu/scatter_rows.h"
#include "dflow/runtime/device_mgr.h"

namespace dflow {
namespace gpu {

absl::Status CudaCheck(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": CUDA error ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status CublasCheck(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": cuBLAS error ", cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

absl::Status CudnnCheck(cudnnStatus_t s, absl::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuDNN error ", cudnnGetErrorString(s)));
}

absl::Status LaunchStatus(OpKernelContext* ctx) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(ctx->Prefix(), "kernel launch on ",
                                          ctx->device()->name(), ": ", cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e)));
}

GpuDevice* GpuOf(OpKernelContext* ctx) {
  // Set every time (a thread-local store in CUDA's runtime): the copies,
  // allocations and syncs of other GPUs on this thread set theirs, so a
  // remembered "current" device would go stale with two GPUs.
  auto* gpu = static_cast<GpuDevice*>(ctx->device());
  (void)cudaSetDevice(gpu->cuda_ordinal());
  return gpu;
}

int VisibleGpuCount() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // No driver or no device: clear the sticky error.
      return 0;
    }
    return n;
  }();
  return count;
}

// --- GpuAllocator -----------------------------------------------------------------------

namespace {

// Sets the calling thread's current device (CUDA's state is per thread).
absl::Status UseDevice(int ordinal) {
  return CudaCheck(cudaSetDevice(ordinal), absl::StrCat("cudaSetDevice(", ordinal, ")"));
}

}  // namespace

GpuAllocator::GpuAllocator(int cuda_ordinal, uint64_t limit)
    : ordinal_(cuda_ordinal), limit_(limit) {}

GpuAllocator::~GpuAllocator() {
  absl::MutexLock l(&mu_);
  ReleaseCached();
}

std::string GpuAllocator::Name() const { return absl::StrCat("GPU:", ordinal_, " memory"); }

size_t GpuAllocator::RoundUp(size_t bytes) {
  constexpr size_t kSmall = size_t{64} << 20, kStep = size_t{2} << 20;
  if (bytes <= 256) return 256;
  if (bytes <= kSmall) {
    size_t p = 256;
    while (p < bytes) p <<= 1;
    return p;
  }
  return (bytes + kStep - 1) / kStep * kStep;
}

void GpuAllocator::ReleaseCached() {
  if (free_.empty()) return;
  (void)cudaSetDevice(ordinal_);
  // The blocks are free in stream order: work queued before may still read
  // them until the device is idle.
  (void)cudaDeviceSynchronize();
  for (auto& [size, p] : free_) (void)cudaFree(p);
  free_.clear();
  cached_ = 0;
}

void* GpuAllocator::Allocate(size_t bytes) {
  const size_t size = RoundUp(bytes);
  absl::MutexLock l(&mu_);
  auto it = free_.find(size);
  if (it != free_.end()) {
    void* p = it->second;
    free_.erase(it);
    cached_ -= size;
    in_use_ += size;
    return p;
  }
  if (in_use_ + size > limit_) return nullptr;
  if (in_use_ + cached_ + size > limit_) ReleaseCached();
  if (!UseDevice(ordinal_).ok()) return nullptr;
  void* p = nullptr;
  if (cudaMalloc(&p, size) != cudaSuccess) {
    (void)cudaGetLastError();
    ReleaseCached();
    if (cudaMalloc(&p, size) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
  }
  in_use_ += size;
  return p;
}

void GpuAllocator::Deallocate(void* p, size_t bytes) {
  const size_t size = RoundUp(bytes);
  absl::MutexLock l(&mu_);
  in_use_ -= size;
  free_.emplace(size, p);
  cached_ += size;
}

uint64_t GpuAllocator::bytes_in_use() const {
  absl::MutexLock l(&mu_);
  return in_use_;
}

uint64_t GpuAllocator::bytes_cached() const {
  absl::MutexLock l(&mu_);
  return cached_;
}

// --- PinnedHostAllocator ------------------------------------------------------------------

PinnedHostAllocator* PinnedHostAllocator::Get() {
  static PinnedHostAllocator* a = new PinnedHostAllocator;  // Never destroyed.
  return a;
}

void* PinnedHostAllocator::Allocate(size_t bytes) {
  {
    absl::MutexLock l(&mu_);
    auto it = free_.find(bytes);
    if (it != free_.end()) {
      void* p = it->second;
      free_.erase(it);
      cached_ -= bytes;
      return p;
    }
  }
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void PinnedHostAllocator::Deallocate(void* p, size_t bytes) {
  constexpr uint64_t kMaxCached = uint64_t{1} << 30;
  {
    absl::MutexLock l(&mu_);
    if (cached_ + bytes <= kMaxCached) {
      free_.emplace(bytes, p);
      cached_ += bytes;
      return;
    }
  }
  (void)cudaFreeHost(p);
}

// --- GpuDevice -------------------------------------------------------------------------------

namespace {

uint64_t NewIncarnation() {
  absl::BitGen gen;
  uint64_t i = 0;
  while (i == 0) i = absl::Uniform<uint64_t>(gen);
  return i;
}

}  // namespace

GpuDevice::GpuDevice(const DeviceName& name, int ordinal, int64_t memory_limit)
    : Device(name, NewIncarnation(), memory_limit),
      ordinal_(ordinal),
      allocator_(std::make_unique<GpuAllocator>(ordinal, static_cast<uint64_t>(memory_limit))) {}

absl::StatusOr<std::unique_ptr<GpuDevice>> GpuDevice::Create(const DeviceName& name,
                                                             int cuda_ordinal,
                                                             int64_t memory_limit) {
  RETURN_IF_ERROR(UseDevice(cuda_ordinal));
  std::unique_ptr<GpuDevice> d(new GpuDevice(name, cuda_ordinal, memory_limit));
  const std::string what = absl::StrCat("creating ", name.ToString());
  RETURN_IF_ERROR(CudaCheck(cudaStreamCreateWithFlags(&d->compute_, cudaStreamNonBlocking), what));
  RETURN_IF_ERROR(
      CudaCheck(cudaStreamCreateWithFlags(&d->device_to_host_, cudaStreamNonBlocking), what));
  RETURN_IF_ERROR(CublasCheck(cublasCreate(&d->cublas_), what));
  RETURN_IF_ERROR(CublasCheck(cublasSetStream(d->cublas_, d->compute_), what));
  return d;
}

GpuDevice::~GpuDevice() {
  (void)cudaSetDevice(ordinal_);
  if (compute_ != nullptr) (void)cudaStreamSynchronize(compute_);
  {
    absl::MutexLock l(&staged_mu_);
    staged_.clear();
  }
  resource_manager()->CleanupAll();  // Variables give their memory back first.
  {
    absl::MutexLock l(&cudnn_mu_);
    if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  }
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  allocator_.reset();
  for (cudaStream_t s : {compute_, device_to_host_}) {
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }
}

absl::StatusOr<cudnnHandle_t> GpuDevice::cudnn() {
  absl::MutexLock l(&cudnn_mu_);
  if (cudnn_ == nullptr) {
    RETURN_IF_ERROR(UseDevice(ordinal_));
    cudnnHandle_t h = nullptr;
    RETURN_IF_ERROR(CudnnCheck(cudnnCreate(&h), "cudnnCreate"));
    RETURN_IF_ERROR(CudnnCheck(cudnnSetStream(h, compute_), "cudnnSetStream"));
    cudnn_ = h;
  }
  return cudnn_;
}

absl::StatusOr<Tensor> GpuDevice::AllocateTemp(DataType dtype, const TensorShape& shape) {
  return Tensor::Allocate(allocator_.get(), dtype, shape);
}

absl::StatusOr<Tensor> GpuDevice::CopyTensor(const Tensor& t, MemoryType to) {
  if (t.memory_type() == to) return t;
  if (t.TotalBytes() == 0) {  // Nothing to copy; the result must not hold the other memory.
    if (to == MemoryType::kHost) return Tensor(t.dtype(), t.shape());
    return Tensor::Allocate(allocator_.get(), t.dtype(), t.shape());
  }
  RETURN_IF_ERROR(UseDevice(ordinal_));
  return to == MemoryType::kDevice ? CopyToDevice(t) : CopyToHost(t);
}

absl::StatusOr<Tensor> GpuDevice::CopyToDevice(const Tensor& t) {
  // Bytes staged and not yet released before a copy waits for the stream.
  constexpr uint64_t kMaxStagedBytes = uint64_t{256} << 20;
  const size_t bytes = t.TotalBytes();
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(allocator_.get(), t.dtype(), t.shape()));
  // The source may be pageable memory its owner frees or overwrites as soon
  // as we return: its bytes go into pinned staging memory first. Without
  // staging memory the copy is waited for.
  absl::StatusOr<Tensor> staging =
      Tensor::Allocate(PinnedHostAllocator::Get(), t.dtype(), t.shape());
  const void* src = t.raw_data();
  if (staging.ok()) {
    std::memcpy(staging->raw_data(), src, bytes);
    src = staging->raw_data();
  }
  // On the compute stream: after the work that may still read `out`'s
  // recycled block, before the work that reads `out`.
  RETURN_IF_ERROR(CudaCheck(
      cudaMemcpyAsync(out.raw_data(), src, bytes, cudaMemcpyHostToDevice, compute_),
      absl::StrCat("copying ", bytes, " bytes to ", name())));
  if (!staging.ok()) {
    RETURN_IF_ERROR(CudaCheck(cudaStreamSynchronize(compute_), "host to device copy"));
    return out;
  }
  bool drain = false;
  {
    absl::MutexLock l(&staged_mu_);
    staged_.push_back(*std::move(staging));  // After the copy was queued: see Sync().
    staged_bytes_ += bytes;
    drain = staged_bytes_ > kMaxStagedBytes;
  }
  if (drain) RETURN_IF_ERROR(Sync());
  return out;
}

absl::StatusOr<Tensor> GpuDevice::CopyToHost(const Tensor& t) {
  // After the compute work queued so far (which produces `t`), into pinned
  // memory, waited for: the host tensor is readable when we return.
  const size_t bytes = t.TotalBytes();
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(PinnedHostAllocator::Get(), t.dtype(), t.shape()));
  cudaEvent_t queued = nullptr;
  RETURN_IF_ERROR(CudaCheck(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming),
                            "cudaEventCreate"));
  absl::Status s = CudaCheck(cudaEventRecord(queued, compute_), "cudaEventRecord");
  if (s.ok()) s = CudaCheck(cudaStreamWaitEvent(device_to_host_, queued, 0), "cudaStreamWaitEvent");
  if (s.ok()) {
    s = CudaCheck(cudaMemcpyAsync(out.raw_data(), t.raw_data(), bytes, cudaMemcpyDeviceToHost,
                                  device_to_host_),
                  absl::StrCat("copying ", bytes, " bytes from ", name()));
  }
  if (s.ok()) s = CudaCheck(cudaStreamSynchronize(device_to_host_), "device to host copy");
  (void)cudaEventDestroy(queued);
  RETURN_IF_ERROR(s);
  return out;
}

absl::Status GpuDevice::ZeroFill(Tensor* t) {
  if (t->TotalBytes() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(UseDevice(ordinal_));
  return CudaCheck(cudaMemsetAsync(t->raw_data(), 0, t->TotalBytes(), compute_), "cudaMemsetAsync");
}

absl::Status GpuDevice::CopyStrided(const void* in, void* out, const StridedCopySpec& spec) {
  const int64_t n = spec.NumElements();
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(UseDevice(ordinal_));
  const int r = spec.rank;
  const int64_t size = spec.element_size;
  // Contiguous rows (concat, split, slices of whole rows): the copy engine.
  if (r <= 2 && (r == 0 || (spec.in_strides[r - 1] == 1 && spec.out_strides[r - 1] == 1))) {
    const int64_t width = (r == 0 ? 1 : spec.dims[r - 1]) * size;
    const int64_t rows = r == 2 ? spec.dims[0] : 1;
    const int64_t in_pitch = r == 2 ? spec.in_strides[0] * size : 0;
    const int64_t out_pitch = r == 2 ? spec.out_strides[0] * size : 0;
    if (rows == 1) {
      return CudaCheck(cudaMemcpyAsync(out, in, width, cudaMemcpyDeviceToDevice, compute_),
                       absl::StrCat("copying ", width, " bytes within ", name()));
    }
    // CUDA refuses pitches past cudaDevAttrMaxPitch (2^31 - 1 bytes on
    // current GPUs); longer rows take the kernel.
    constexpr int64_t kMaxPitch = (int64_t{1} << 31) - 1;
    if (in_pitch >= width && out_pitch >= width && in_pitch <= kMaxPitch &&
        out_pitch <= kMaxPitch) {
      return CudaCheck(cudaMemcpy2DAsync(out, out_pitch, in, in_pitch, width, rows,
                                         cudaMemcpyDeviceToDevice, compute_),
                       absl::StrCat("copying ", rows, " rows of ", width, " bytes within ",
                                    name()));
    }
  }
  LaunchStridedCopy(compute_, in, out, n, spec);
  return CudaCheck(cudaGetLastError(), absl::StrCat("strided copy on ", name()));
}

absl::Status GpuDevice::GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                                   int64_t row_elems, int element_size) {
  const int64_t n = static_cast<int64_t>(from.size()) * row_elems;
  if (n == 0) return absl::OkStatus();
  // The row starts go to the device as a staged copy queued before the kernel.
  ASSIGN_OR_RETURN(Tensor on_device, CopyInt64sToDevice(from));
  LaunchGatherRows(compute_, in, out, static_cast<const int64_t*>(on_device.raw_data()), n,
                   row_elems, element_size);
  return CudaCheck(cudaGetLastError(), absl::StrCat("gathering rows on ", name()));
}

absl::Status GpuDevice::CopyPieces(absl::Span<const CopyPiece> pieces) {
  // Past this, a piece's copy outweighs a call of its own.
  constexpr int64_t kOwnCopyBytes = int64_t{1} << 20;
  // The kernel copies one piece a block: longer pieces are cut into chunks
  // of this (a multiple of 16, so each chunk keeps its piece's alignment),
  // that many blocks share them.
  constexpr int64_t kChunkBytes = int64_t{64} << 10;
  RETURN_IF_ERROR(UseDevice(ordinal_));
  std::vector<int64_t> table;
  for (const CopyPiece& p : pieces) {
    if (p.bytes == 0) continue;
    if (p.bytes >= kOwnCopyBytes || pieces.size() == 1) {
      RETURN_IF_ERROR(CudaCheck(
          cudaMemcpyAsync(p.to, p.from, p.bytes, cudaMemcpyDeviceToDevice, compute_),
          absl::StrCat("copying ", p.bytes, " bytes within ", name())));
      continue;
    }
    const auto from = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.from));
    const auto to = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.to));
    for (int64_t at = 0; at < p.bytes; at += kChunkBytes) {
      table.insert(table.end(), {from + at, to + at, std::min(kChunkBytes, p.bytes - at)});
    }
  }
  if (table.empty()) return absl::OkStatus();
  // The table goes to the device as a staged copy queued before the kernel.
  const int64_t n = static_cast<int64_t>(table.size() / 3);
  ASSIGN_OR_RETURN(Tensor on_device, CopyInt64sToDevice(table));
  LaunchCopyPieces(compute_, static_cast<const int64_t*>(on_device.raw_data()), n);
  return CudaCheck(cudaGetLastError(), absl::StrCat("copying ", n, " pieces within ", name()));
}

namespace {

template <typename T>
void LaunchAdd(cudaStream_t s, const Tensor& a, const Tensor& b, Tensor* out) {
  LaunchBinary(s, Binary::kAdd, static_cast<const T*>(a.raw_data()),
               static_cast<const T*>(b.raw_data()), out->raw_data(), out->NumElements(),
               BroadcastIndex());
}

}  // namespace

absl::Status GpuDevice::AddTensors(const Tensor& a, const Tensor& b, Tensor* out) {
  const DataType t = a.dtype();
  if (t != DT_FLOAT && t != DT_DOUBLE && t != DT_INT64) return Device::AddTensors(a, b, out);
  if (out->NumElements() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(UseDevice(ordinal_));
  if (t == DT_FLOAT) LaunchAdd<float>(compute_, a, b, out);
  if (t == DT_DOUBLE) LaunchAdd<double>(compute_, a, b, out);
  if (t == DT_INT64) LaunchAdd<int64_t>(compute_, a, b, out);
  return CudaCheck(cudaGetLastError(), absl::StrCat("adding on ", name()));
}

absl::StatusOr<Tensor> GpuDevice::CopyInt64sToDevice(absl::Span<const int64_t> values) {
  Tensor listed =
      Tensor::ForOverwrite(DT_INT64, TensorShape({static_cast<int64_t>(values.size())}));
  std::copy(values.begin(), values.end(), listed.flat<int64_t>().data());
  return CopyTensor(listed, MemoryType::kDevice);
}

absl::Status GpuDevice::ScatterRows(ScatterOp op, const Tensor& updates,
                                    absl::Span<const int64_t> indices, Tensor* ref) {
  Elem type;
  switch (ref->dtype()) {
    case DT_FLOAT: type = Elem::kFloat; break;
    case DT_DOUBLE: type = Elem::kDouble; break;
    case DT_INT64: type = Elem::kInt64; break;
    default: return Device::ScatterRows(op, updates, indices, ref);
  }
  const int64_t rows = ref->dim_size(0);
  const int64_t row_elems = rows == 0 ? 0 : ref->NumElements() / rows;
  if (row_elems == 0) return absl::OkStatus();
  const ScatterRowsTable plan = MakeScatterRowsTable(indices);
  if (plan.num_dest == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Tensor table, CopyInt64sToDevice(plan.table));
  RETURN_IF_ERROR(UseDevice(ordinal_));
  LaunchScatterRows(compute_, op, type, updates.raw_data(), updates.dims() == 0, ref->raw_data(),
                    static_cast<const int64_t*>(table.raw_data()), plan.num_dest, row_elems);
  return CudaCheck(cudaGetLastError(), absl::StrCat("scattering rows on ", name()));
}

absl::Status GpuDevice::Sync() {
  RETURN_IF_ERROR(UseDevice(ordinal_));
  // Taken before waiting: a block is listed only once its copy is queued, so
  // every copy of these is done when the stream is. Copies queued meanwhile
  // keep their blocks until the next Sync().
  std::vector<Tensor> staged;
  {
    absl::MutexLock l(&staged_mu_);
    staged.swap(staged_);
    staged_bytes_ = 0;
  }
  absl::Status s =
      CudaCheck(cudaStreamSynchronize(compute_), absl::StrCat("running kernels on ", name()));
  staged.clear();  // Back to the pinned pool, now that their copies are done.
  return s;
}

// --- the device factory ------------------------------------------------------------------

namespace {

// CUDA ordinals a session may use: gpu_options.visible_device_list ("1,0"),
// else all; then at most device_count["GPU"].
absl::StatusOr<std::vector<int>> ChosenOrdinals(const tensorflow::ConfigProto& config) {
  const int visible = VisibleGpuCount();
  std::vector<int> ordinals;
  const std::string& list = config.gpu_options().visible_device_list();
  if (list.empty()) {
    for (int i = 0; i < visible; ++i) ordinals.push_back(i);
  } else {
    for (absl::string_view piece : absl::StrSplit(list, ',')) {
      int ordinal = -1;
      if (!absl::SimpleAtoi(piece, &ordinal) || ordinal < 0 || ordinal >= visible ||
          std::count(ordinals.begin(), ordinals.end(), ordinal) > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "gpu_options.visible_device_list '", list, "': '", piece,
            "' is not a distinct GPU of the ", visible, " this process sees"));
      }
      ordinals.push_back(ordinal);
    }
  }
  auto count = config.device_count().find(kDeviceGPU);
  if (count != config.device_count().end() && count->second < static_cast<int>(ordinals.size())) {
    ordinals.resize(std::max(0, count->second));
  }
  return ordinals;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateGpuDevices(
    const tensorflow::ConfigProto& config, const std::string& name_prefix) {
  ASSIGN_OR_RETURN(std::vector<int> ordinals, ChosenOrdinals(config));
  std::vector<std::unique_ptr<Device>> devices;
  for (size_t i = 0; i < ordinals.size(); ++i) {
    RETURN_IF_ERROR(UseDevice(ordinals[i]));
    size_t free = 0, total = 0;
    RETURN_IF_ERROR(CudaCheck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"));
    const double fraction = config.gpu_options().per_process_gpu_memory_fraction();
    // TensorFlow's defaults: a fraction of the total when asked, else what
    // is free less a reserve for CUDA's own use.
    const int64_t limit =
        fraction > 0 ? static_cast<int64_t>(static_cast<double>(total) * std::min(fraction, 1.0))
                     : static_cast<int64_t>(free) - std::min<int64_t>(free / 20, int64_t{1} << 30);
    ASSIGN_OR_RETURN(DeviceName name,
                     DeviceName::Parse(absl::StrCat(name_prefix, "/device:GPU:", i)));
    ASSIGN_OR_RETURN(std::unique_ptr<GpuDevice> d, GpuDevice::Create(name, ordinals[i], limit));
    devices.push_back(std::move(d));
  }
  return devices;
}

const bool kRegistered = [] {
  RegisterDeviceFactory(kDeviceGPU, CreateGpuDevices);
  return true;
}();

}  // namespace

}  // namespace gpu
}  // namespace dflow
