// glibc malloc policy for a dflow process: what it keeps of freed host
// memory. Tensors of 64 KiB and more are recycled by their own cache
// (tensor.cc); these calls govern everything else (gRPC's receive buffers,
// a parsed request's tensor bytes, protobuf strings). Both are no-ops where
// the C library is not glibc.
#ifndef DFLOW_FRAMEWORK_HOST_MEMORY_H_
#define DFLOW_FRAMEWORK_HOST_MEMORY_H_

#include <cstdint>

namespace dflow {

// Keeps freed memory for reuse instead of handing it back to the OS after
// every large free. glibc otherwise maps each allocation from 128 KiB anew,
// or trims it off a thread's arena once a few hundred KiB are free, and every
// page of the next request's buffer faults again: a RunStep feeding a 401 KB
// batch took ~60 page faults and 15% of its latency. From here allocations
// under 32 MiB come from the arenas, and an arena returns memory only when
// more than 64 MiB is free at its top (or on ReleaseFreedHostMemory). Call
// once, first thing in a program that serves or trains; later calls are
// harmless.
void RetainFreedHostMemory();

// After graphs of `freed_nodes` nodes in all were freed: glibc keeps freed
// memory in its arenas (one per thread that allocated), so a server that
// ran one large graph would keep its peak RSS, and the next large graph,
// built on other threads, would add to it. Gives the free pages back, at the
// cost of a walk of the heap, only after a large graph (10,000+ nodes, ~1 KB
// a node).
void ReleaseFreedHostMemory(int64_t freed_nodes);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_HOST_MEMORY_H_
