// The state and shape rule of the stateful random ops (RandomUniform,
// RandomStandardNormal, TruncatedNormal), one text for the kernels of every
// device, so that a seeded op draws TensorFlow's values on CPU and GPU.
#ifndef DFLOW_OPS_RANDOM_UTIL_H_
#define DFLOW_OPS_RANDOM_UTIL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/ops/philox.h"

namespace dflow {

// A kernel's Philox4x32-10 generator, keyed by its `seed` with counter
// `seed2` (both 0: fresh random seeds, as TensorFlow draws them). Each
// Compute reserves its blocks, so successive runs give new values.
class PhiloxStream {
 public:
  explicit PhiloxStream(OpKernelConstruction* c);

  // The generator at its current state, for an output of `n` values; the
  // state then moves past the n * 256 blocks TensorFlow reserves for it.
  Philox4x32 Reserve(int64_t n);

 private:
  absl::Mutex mu_;
  Philox4x32 generator_ ABSL_GUARDED_BY(mu_);
};

// The output shape held by input 0, a 1-D int32/int64 shape tensor; else
// InvalidArgument.
absl::StatusOr<TensorShape> RandomOutputShape(const OpKernelContext& ctx);

}  // namespace dflow

#endif  // DFLOW_OPS_RANDOM_UTIL_H_
