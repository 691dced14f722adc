// OpenBLAS inside dflow's kernels: the intra-op pool is the process's only
// parallelism, so OpenBLAS must not start threads of its own. Every kernel
// that calls cblas_* calls EnsureBlasSingleThreaded() first (cheap after the
// first call). dflow_ops also does it when loaded.
#ifndef DFLOW_OPS_BLAS_UTIL_H_
#define DFLOW_OPS_BLAS_UTIL_H_

namespace dflow {

// Sets OpenBLAS to one thread, once per process. Thread-safe.
void EnsureBlasSingleThreaded();

}  // namespace dflow

#endif  // DFLOW_OPS_BLAS_UTIL_H_
