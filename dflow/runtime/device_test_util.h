// HostMemoryGpu: a GPU-typed device for tests without a GPU. Its "device
// memory" is host memory from an allocator that says kDevice (bounded by a
// byte limit), so kernels registered for GPU get their memory types, the
// executor moves tensors between host and "device" memory, and placement
// prefers it as it would a GPU.
//
//   testing_util::HostMemoryGpu gpu(*DeviceName::Parse("/job:a/replica:0/task:0/device:GPU:0"));
//   Executor::Create(std::move(graph), &gpu);
#ifndef DFLOW_RUNTIME_DEVICE_TEST_UTIL_H_
#define DFLOW_RUNTIME_DEVICE_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dflow/framework/allocator.h"
#include "dflow/framework/device.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"

namespace dflow {
namespace testing_util {

class HostMemoryGpu : public Device {
 public:
  explicit HostMemoryGpu(const DeviceName& name, uint64_t limit = uint64_t{1} << 30,
                         uint64_t incarnation = 77)
      : Device(name, incarnation, static_cast<int64_t>(limit)), memory_(limit) {}

  Allocator* device_allocator() override { return &memory_; }
  absl::StatusOr<Tensor> CopyTensor(const Tensor& t, MemoryType to) override {
    Tensor out;
    if (to == MemoryType::kDevice) {
      ASSIGN_OR_RETURN(out, Tensor::Allocate(&memory_, t.dtype(), t.shape()));
    } else {
      out = Tensor::ForOverwrite(t.dtype(), t.shape());
    }
    std::memcpy(out.raw_data(), t.raw_data(), t.TotalBytes());
    return out;
  }
  absl::Status ZeroFill(Tensor* t) override {
    std::memset(t->raw_data(), 0, t->TotalBytes());
    return absl::OkStatus();
  }
  absl::Status CopyStrided(const void* in, void* out, const StridedCopySpec& spec) override {
    CopyStridedOnHost(in, out, spec);
    return absl::OkStatus();
  }
  absl::Status GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                          int64_t row_elems, int element_size) override {
    GatherRowsOnHost(in, out, from.data(), static_cast<int64_t>(from.size()), row_elems,
                     element_size);
    return absl::OkStatus();
  }
  absl::Status CopyPieces(absl::Span<const CopyPiece> pieces) override {
    CopyPiecesOnHost(pieces);
    return absl::OkStatus();
  }
  absl::Status AddTensors(const Tensor& a, const Tensor& b, Tensor* out) override {
    return AddTensorsOnHost(a, b, out);
  }
  absl::Status ScatterRows(ScatterOp op, const Tensor& updates, absl::Span<const int64_t> indices,
                           Tensor* ref) override {
    return ScatterRowsOnHost(op, updates, indices, ref);
  }

 private:
  // Host bytes that claim to be device memory, at most `limit` at once.
  class Memory : public Allocator {
   public:
    explicit Memory(uint64_t limit) : limit_(limit) {}
    std::string Name() const override { return "FakeGPU memory"; }
    MemoryType memory_type() const override { return MemoryType::kDevice; }
    void* Allocate(size_t bytes) override {
      if (in_use_ + bytes > limit_) return nullptr;
      in_use_ += bytes;
      return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    }
    void Deallocate(void* p, size_t bytes) override {
      in_use_ -= bytes;
      std::free(p);
    }

   private:
    const uint64_t limit_;
    std::atomic<uint64_t> in_use_{0};
  } memory_;
};

}  // namespace testing_util
}  // namespace dflow

#endif  // DFLOW_RUNTIME_DEVICE_TEST_UTIL_H_
