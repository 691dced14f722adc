// Stateful random ops: RandomUniform, RandomStandardNormal, TruncatedNormal.
//
// Bit-compatible with TensorFlow's CPU kernels: a Philox4x32-10 generator
// keyed by `seed` with counter `seed2` (both 0: fresh random seeds per kernel),
// the output split into groups of 4 floats / 2 doubles, group g drawn from the
// generator skipped ahead by g blocks (g * 256 / g * 128 for TruncatedNormal,
// whose rejection loop needs a variable number of words). Each Compute
// reserves output_size * 256 blocks, so successive runs give new values.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/philox.h"
#include "dflow/ops/random_util.h"

namespace dflow {
namespace {

// --- distributions: each fills one group from a generator at its start -----

// Box-Muller on two uniforms, computed in T as TensorFlow does.
template <typename T>
void BoxMuller(T u1, T u2, T* z0, T* z1) {
  const T epsilon = static_cast<T>(1e-7);
  if (u1 < epsilon) u1 = epsilon;
  const T angle = static_cast<T>(2.0 * std::numbers::pi * u2);
  const T radius = std::sqrt(static_cast<T>(-2.0) * std::log(u1));
  *z0 = std::sin(angle) * radius;
  *z1 = std::cos(angle) * radius;
}

// Draws 2 floats or 1 double uniform from `words`.
template <typename T, typename Words>
T UniformFrom(Words& words) {
  if constexpr (std::is_same_v<T, float>) {
    return Uint32ToFloat(words());
  } else {
    const uint32_t hi = words();
    return Uint64ToDouble(hi, words());
  }
}

struct Uniform {
  template <typename T>
  static constexpr int kGroupSize = std::is_same_v<T, float> ? 4 : 2;
  template <typename T>
  static constexpr uint64_t kBlocksPerGroup = 1;
  static constexpr int64_t kCost = 10;

  template <typename T>
  static void Group(Philox4x32* gen, T* out) {
    Philox4x32::Block b = gen->Next();
    int i = 0;
    auto words = [&] { return b[i++]; };
    for (int j = 0; j < kGroupSize<T>; ++j) out[j] = UniformFrom<T>(words);
  }
};

struct Normal {
  template <typename T>
  static constexpr int kGroupSize = std::is_same_v<T, float> ? 4 : 2;
  template <typename T>
  static constexpr uint64_t kBlocksPerGroup = 1;
  static constexpr int64_t kCost = 80;

  template <typename T>
  static void Group(Philox4x32* gen, T* out) {
    Philox4x32::Block b = gen->Next();
    int i = 0;
    auto words = [&] { return b[i++]; };
    for (int j = 0; j < kGroupSize<T>; j += 2) {
      const T u1 = UniformFrom<T>(words);
      const T u2 = UniformFrom<T>(words);
      BoxMuller(u1, u2, &out[j], &out[j + 1]);
    }
  }
};

// Normal samples with |x| >= 2 rejected and redrawn.
struct Truncated {
  template <typename T>
  static constexpr int kGroupSize = std::is_same_v<T, float> ? 4 : 2;
  // TensorFlow reserves 256 words per output value.
  template <typename T>
  static constexpr uint64_t kBlocksPerGroup = kGroupSize<T> * 256 / 4;
  static constexpr int64_t kCost = 120;

  template <typename T>
  static void Group(Philox4x32* gen, T* out) {
    PhiloxWords words(gen);
    int n = 0;
    while (true) {
      const T u1 = UniformFrom<T>(words);
      const T u2 = UniformFrom<T>(words);
      T z[2];
      BoxMuller(u1, u2, &z[0], &z[1]);
      for (T v : z) {
        if (std::abs(v) < static_cast<T>(2)) {
          out[n++] = v;
          if (n == kGroupSize<T>) return;
        }
      }
    }
  }
};

// Fills `out` group by group; the values do not depend on the sharding.
template <typename Dist, typename T>
void Fill(const Philox4x32& base, absl::Span<T> out, ThreadPool* pool) {
  constexpr int kGroup = Dist::template kGroupSize<T>;
  const int64_t size = static_cast<int64_t>(out.size());
  const int64_t groups = (size + kGroup - 1) / kGroup;
  pool->ParallelFor(groups, Dist::kCost * kGroup, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      Philox4x32 gen = base;
      gen.Skip(static_cast<uint64_t>(g) * Dist::template kBlocksPerGroup<T>);
      T values[kGroup];
      Dist::Group(&gen, values);
      const int64_t n = std::min<int64_t>(kGroup, size - g * kGroup);
      std::copy(values, values + n, out.data() + g * kGroup);
    }
  });
}

// --- kernel ------------------------------------------------------------------

template <typename Dist>
class PhiloxRandomOp : public OpKernel {
 public:
  explicit PhiloxRandomOp(OpKernelConstruction* c) : OpKernel(c), stream_(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(TensorShape shape, RandomOutputShape(*ctx));
    Tensor* out = ctx->allocate_output(0, shape);
    const Philox4x32 base = stream_.Reserve(shape.num_elements());
    if (dtype_ == DT_FLOAT) {
      Fill<Dist>(base, out->flat<float>(), ctx->intra_op_pool());
    } else if (dtype_ == DT_DOUBLE) {
      Fill<Dist>(base, out->flat<double>(), ctx->intra_op_pool());
    } else {
      return ctx->InvalidArgument("unsupported dtype ", DataTypeString(dtype_));
    }
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_FLOAT;
  PhiloxStream stream_;
};

absl::Status RandomShape(InferenceContext* c) {
  PartialShape out;
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &out));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

#define DFLOW_REGISTER_RANDOM_OP(NAME, DIST)                          \
  REGISTER_OP(NAME)                                                   \
      .Input("shape: T")                                              \
      .Output("output: dtype")                                        \
      .Attr("seed: int = 0")                                          \
      .Attr("seed2: int = 0")                                         \
      .Attr("dtype: {half, bfloat16, float, double}")                 \
      .Attr("T: {int32, int64}")                                      \
      .SetIsStateful()                                                \
      .SetShapeFn(RandomShape);                                       \
  REGISTER_KERNEL(KernelDefBuilder(NAME)                              \
                      .Device(kDeviceCPU)                             \
                      .TypeConstraint("dtype", {DT_FLOAT, DT_DOUBLE}) \
                      .TypeConstraint("T", {DT_INT32, DT_INT64})      \
                      .HostMemory("shape"),                           \
                  PhiloxRandomOp<DIST>)

// On a GPU the normal distributions are drawn by the same kernel into host
// memory (the executor copies them on): the GPU's transcendental functions
// would round differently, and a variable's initializer then does not keep
// its colocation group off the GPU. RandomUniform draws on the GPU itself
// (gpu/random_ops.cc), the same values.
#define DFLOW_REGISTER_HOST_RANDOM_OP_FOR_GPU(NAME, DIST)             \
  REGISTER_KERNEL(KernelDefBuilder(NAME)                              \
                      .Device(kDeviceGPU)                             \
                      .TypeConstraint("dtype", {DT_FLOAT, DT_DOUBLE}) \
                      .TypeConstraint("T", {DT_INT32, DT_INT64})      \
                      .HostMemory("shape")                            \
                      .HostMemory("output"),                          \
                  PhiloxRandomOp<DIST>)

DFLOW_REGISTER_RANDOM_OP("RandomUniform", Uniform);
DFLOW_REGISTER_RANDOM_OP("RandomStandardNormal", Normal);
DFLOW_REGISTER_RANDOM_OP("TruncatedNormal", Truncated);
DFLOW_REGISTER_HOST_RANDOM_OP_FOR_GPU("RandomStandardNormal", Normal);
DFLOW_REGISTER_HOST_RANDOM_OP_FOR_GPU("TruncatedNormal", Truncated);

#undef DFLOW_REGISTER_HOST_RANDOM_OP_FOR_GPU
#undef DFLOW_REGISTER_RANDOM_OP

}  // namespace
}  // namespace dflow
