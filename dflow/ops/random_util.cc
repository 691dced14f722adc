#include "dflow/ops/random_util.h"

#include <vector>

#include "absl/random/random.h"

namespace dflow {
namespace {

Philox4x32 Seeded(OpKernelConstruction* c) {
  int64_t seed = 0, seed2 = 0;
  c->GetAttr("seed", &seed).IgnoreError();  // Failures are recorded on c.
  c->GetAttr("seed2", &seed2).IgnoreError();
  if (seed == 0 && seed2 == 0) {
    absl::BitGen bits;
    seed = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
    seed2 = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
  }
  return Philox4x32(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
}

}  // namespace

PhiloxStream::PhiloxStream(OpKernelConstruction* c) : generator_(Seeded(c)) {}

Philox4x32 PhiloxStream::Reserve(int64_t n) {
  absl::MutexLock l(&mu_);
  Philox4x32 base = generator_;
  generator_.Skip(static_cast<uint64_t>(n) * 256);
  return base;
}

absl::StatusOr<TensorShape> RandomOutputShape(const OpKernelContext& ctx) {
  const Tensor& t = ctx.input(0);
  if (t.dims() != 1) {
    return ctx.InvalidArgument("shape must be a vector, got a tensor of shape ",
                               t.shape().DebugString());
  }
  std::vector<int64_t> dims(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    dims[i] = t.dtype() == DT_INT32 ? t.flat<int32_t>()[i] : t.flat<int64_t>()[i];
  }
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok()) {
    return ctx.InvalidArgument("invalid shape ", t.DebugString(), ": ", shape.status().message());
  }
  return shape;
}

}  // namespace dflow
