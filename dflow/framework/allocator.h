// Allocator: where a tensor's bytes live when they are not in ordinary host
// memory (a GPU's memory, or pinned host memory for copies to and from it).
// Tensors made without one use the process's host allocation path
// (tensor.cc), so the CPU never goes through this interface.
#ifndef DFLOW_FRAMEWORK_ALLOCATOR_H_
#define DFLOW_FRAMEWORK_ALLOCATOR_H_

#include <cstddef>
#include <string>

namespace dflow {

// Host memory is readable by CPU code; device memory only by the device's
// kernels and copies.
enum class MemoryType { kHost, kDevice };

inline const char* MemoryTypeName(MemoryType t) {
  return t == MemoryType::kHost ? "host" : "device";
}

// Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string Name() const = 0;
  virtual MemoryType memory_type() const = 0;
  // At least `bytes` (> 0), aligned to 256; nullptr when out of memory.
  virtual void* Allocate(size_t bytes) = 0;
  // `bytes` as given to Allocate.
  virtual void Deallocate(void* p, size_t bytes) = 0;
};

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_ALLOCATOR_H_
