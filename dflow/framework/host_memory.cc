#include "dflow/framework/host_memory.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace dflow {

void RetainFreedHostMemory() {
#ifdef __GLIBC__
  // Setting either fixes both: glibc stops adjusting them itself.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

void ReleaseFreedHostMemory(int64_t freed_nodes) {
  constexpr int64_t kTrimAfterNodes = 10000;
  if (freed_nodes < kTrimAfterNodes) return;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace dflow
