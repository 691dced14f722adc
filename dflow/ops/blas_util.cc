#include "dflow/ops/blas_util.h"

#include <cblas.h>

namespace dflow {

void EnsureBlasSingleThreaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

namespace {
// Also at load time (dflow_ops links whole), for code that calls cblas_*
// before any kernel ran, as MatMul's setup always did.
[[maybe_unused]] const bool kSingleThreadedAtLoad = (EnsureBlasSingleThreaded(), true);
}  // namespace

}  // namespace dflow
