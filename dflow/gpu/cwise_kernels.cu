// Element-wise GPU kernels: one thread per output element in grid-stride
// loops. The functors follow the CPU kernels' formulas (cwise_ops.cc,
// cwise_unary_ops.cc, math_grad_ops.cc, nn_ops.cc, nn_grad_ops.cc, cast_op.cc).
#include <cstdint>
#include <type_traits>

#include "dflow/gpu/cwise_launch.h"
#include "dflow/gpu/launch_util.h"
#include "dflow/gpu/nan_math.h"

namespace dflow {
namespace gpu {
namespace {

// --- functors ------------------------------------------------------------------

template <Binary kOp>
struct BinaryFn;
#define DFLOW_BINARY(OP, OUT, EXPR)                                   \
  template <>                                                         \
  struct BinaryFn<Binary::OP> {                                       \
    using Out = OUT;                                                  \
    __device__ Out operator()(float x, float y) const { return EXPR; } \
  }
DFLOW_BINARY(kAdd, float, x + y);
DFLOW_BINARY(kSub, float, x - y);
DFLOW_BINARY(kMul, float, x * y);
DFLOW_BINARY(kDiv, float, x / y);
DFLOW_BINARY(kDivNoNan, float, y == 0.0f ? 0.0f : x / y);
DFLOW_BINARY(kPow, float, powf(x, y));
DFLOW_BINARY(kFloorDiv, float, floorf(x / y));
DFLOW_BINARY(kFloorMod, float,
             (fmodf(x, y) != 0.0f && ((fmodf(x, y) < 0.0f) != (y < 0.0f))) ? fmodf(x, y) + y
                                                                          : fmodf(x, y));
DFLOW_BINARY(kMaximum, float, MaxNaN(x, y));
DFLOW_BINARY(kMinimum, float, MinNaN(x, y));
DFLOW_BINARY(kEqual, bool, x == y);
DFLOW_BINARY(kNotEqual, bool, x != y);
DFLOW_BINARY(kGreater, bool, x > y);
DFLOW_BINARY(kLess, bool, x < y);
DFLOW_BINARY(kGreaterEqual, bool, x >= y);
DFLOW_BINARY(kLessEqual, bool, x <= y);
// (gradients, features): NaN features pass no gradient.
DFLOW_BINARY(kReluGrad, float, y > 0.0f ? x : 0.0f);
DFLOW_BINARY(kSoftplusGrad, float, x / (expf(-y) + 1.0f));
// (y, dy), the forward output and its gradient.
DFLOW_BINARY(kSqrtGrad, float, y * 0.5f / x);
DFLOW_BINARY(kRsqrtGrad, float, y * -0.5f * x * x * x);
DFLOW_BINARY(kTanhGrad, float, y * (1.0f - x * x));
DFLOW_BINARY(kSigmoidGrad, float, y * x * (1.0f - x));
DFLOW_BINARY(kReciprocalGrad, float, -y * x * x);
#undef DFLOW_BINARY

// The ops of RunsOnDouble / RunsOnInt64 for either type (float has the
// functors above).
template <Binary kOp>
struct TypedBinaryFn {
  template <typename T>
  __device__ auto operator()(T x, T y) const {
    if constexpr (kOp == Binary::kAdd) return T(x + y);
    if constexpr (kOp == Binary::kSub) return T(x - y);
    if constexpr (kOp == Binary::kMul) return T(x * y);
    if constexpr (kOp == Binary::kDiv) return T(x / y);
    if constexpr (kOp == Binary::kMaximum) return MaxNaN(x, y);
    if constexpr (kOp == Binary::kMinimum) return MinNaN(x, y);
    if constexpr (kOp == Binary::kEqual) return x == y;
    if constexpr (kOp == Binary::kNotEqual) return x != y;
    if constexpr (kOp == Binary::kGreater) return x > y;
    if constexpr (kOp == Binary::kLess) return x < y;
    if constexpr (kOp == Binary::kGreaterEqual) return x >= y;
    if constexpr (kOp == Binary::kLessEqual) return x <= y;
  }
};

// Softplus as TensorFlow computes it (nn_ops.cc): x above -threshold,
// exp(x) below threshold, log(exp(x) + 1) between; threshold = log(eps) + 2.
__device__ inline float Softplus(float x) {
  const float threshold = logf(1.1920928955078125e-07f) + 2.0f;
  if (x > -threshold) return x;
  if (x < threshold) return expf(x);
  return logf(expf(x) + 1.0f);
}

template <Unary kOp>
struct UnaryFn;
#define DFLOW_UNARY(OP, EXPR)                                    \
  template <>                                                    \
  struct UnaryFn<Unary::OP> {                                    \
    __device__ float operator()(float x) const { return EXPR; } \
  }
DFLOW_UNARY(kNeg, -x);
DFLOW_UNARY(kAbs, fabsf(x));
DFLOW_UNARY(kSquare, x * x);
DFLOW_UNARY(kSqrt, sqrtf(x));
DFLOW_UNARY(kRsqrt, 1.0f / sqrtf(x));
DFLOW_UNARY(kExp, expf(x));
DFLOW_UNARY(kLog, logf(x));
DFLOW_UNARY(kLog1p, log1pf(x));
DFLOW_UNARY(kExpm1, expm1f(x));
DFLOW_UNARY(kTanh, tanhf(x));
DFLOW_UNARY(kSigmoid, 1.0f / (1.0f + expf(-x)));
DFLOW_UNARY(kReciprocal, 1.0f / x);
DFLOW_UNARY(kFloor, floorf(x));
DFLOW_UNARY(kCeil, ceilf(x));
DFLOW_UNARY(kRound, rintf(x));  // Halves to even.
DFLOW_UNARY(kSin, sinf(x));
DFLOW_UNARY(kCos, cosf(x));
DFLOW_UNARY(kRelu, x < 0.0f ? 0.0f : x);  // Keeps NaN, as max(x, 0) with x first.
DFLOW_UNARY(kSoftplus, Softplus(x));
#undef DFLOW_UNARY

// Offset into input k of output element i.
__device__ inline int64_t InputOffset(const BroadcastIndex& b, int k, int64_t i) {
  if (b.rank == 0) return i * b.step[k];
  int64_t offset = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    const int64_t c = i % b.dims[d];
    i /= b.dims[d];
    offset += c * b.strides[k][d];
  }
  return offset;
}

// --- kernels -----------------------------------------------------------------------

template <typename F, typename T, typename Out>
__global__ void BinaryKernel(const T* x, const T* y, Out* z, int64_t n, BroadcastIndex b) {
  const F f;
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    z[i] = f(x[InputOffset(b, 0, i)], y[InputOffset(b, 1, i)]);
  }
}

template <typename F>
__global__ void UnaryKernel(const float* x, float* y, int64_t n) {
  const F f;
  for (int64_t i = GridStart(); i < n; i += GridStride()) y[i] = f(x[i]);
}

template <typename T>
__global__ void SelectKernel(const bool* cond, const T* t, const T* e, T* out, int64_t n,
                             BroadcastIndex b) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    out[i] = cond[InputOffset(b, 0, i)] ? t[InputOffset(b, 1, i)] : e[InputOffset(b, 2, i)];
  }
}

// float/double -> integer as TensorFlow on x86: truncation; NaN and values
// out of range give the type's minimum.
template <typename I>
__device__ inline I FloatToInt(double v) {
  const double limit = sizeof(I) == 8 ? 9223372036854775808.0 : 2147483648.0;
  const I min = sizeof(I) == 8 ? static_cast<I>(INT64_MIN) : static_cast<I>(INT32_MIN);
  if (v > -limit - 1.0 && v < limit) return static_cast<I>(v);
  return min;
}

template <typename Dst, typename Src>
__device__ inline Dst CastValue(Src v) {
  if constexpr (std::is_same_v<Dst, bool>) {
    return v != Src(0);
  } else if constexpr (std::is_floating_point_v<Src> && std::is_integral_v<Dst>) {
    return FloatToInt<Dst>(static_cast<double>(v));
  } else {
    return static_cast<Dst>(v);
  }
}

template <typename Src, typename Dst>
__global__ void CastKernel(const Src* in, Dst* out, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) out[i] = CastValue<Dst>(in[i]);
}

template <typename T>
__global__ void FillFromDeviceKernel(const T* value, T* out, int64_t n) {
  const T v = *value;
  for (int64_t i = GridStart(); i < n; i += GridStride()) out[i] = v;
}

template <typename T>
__global__ void FillKernel(T value, T* out, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) out[i] = value;
}

__global__ void BiasAddKernel(const float* x, const float* b, float* y, int64_t n,
                              int64_t channels, int64_t inner) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    y[i] = x[i] + b[(i / inner) % channels];
  }
}

template <typename T>
__global__ void TileKernel(const T* in, T* out, int64_t n, TileIndex t) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    int64_t rest = i, offset = 0;
    for (int d = t.rank - 1; d >= 0; --d) {
      const int64_t c = rest % t.out_dims[d];
      rest /= t.out_dims[d];
      offset += (c % t.in_dims[d]) * t.in_strides[d];
    }
    out[i] = in[offset];
  }
}

template <typename T>
__global__ void StridedCopyKernel(const T* in, T* out, int64_t n, StridedCopySpec s) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    int64_t rest = i, from = 0, to = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = rest % s.dims[d];
      rest /= s.dims[d];
      from += c * s.in_strides[d];
      to += c * s.out_strides[d];
    }
    out[to] = in[from];
  }
}

template <typename T>
__global__ void GatherRowsKernel(const T* in, T* out, const int64_t* from, int64_t n,
                                 int64_t row_elems) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    out[i] = in[from[i / row_elems] + i % row_elems];
  }
}

// Copies `bytes` bytes as words of T (bytes a multiple of sizeof(T), both
// pointers aligned to it), the block's threads striding over them.
template <typename T>
__device__ void CopyWords(const char* from, char* to, int64_t bytes) {
  const T* f = reinterpret_cast<const T*>(from);
  T* t = reinterpret_cast<T*>(to);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(T));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) t[i] = f[i];
}

__global__ void CopyPiecesKernel(const int64_t* table, int64_t n) {
  for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const char* from = reinterpret_cast<const char*>(table[3 * p]);
    char* to = reinterpret_cast<char*>(table[3 * p + 1]);
    const int64_t bytes = table[3 * p + 2];
    const uint64_t alignment = static_cast<uint64_t>(table[3 * p]) |
                               static_cast<uint64_t>(table[3 * p + 1]) |
                               static_cast<uint64_t>(bytes);
    if (alignment % 16 == 0) {
      CopyWords<uint4>(from, to, bytes);
    } else if (alignment % 4 == 0) {
      CopyWords<uint32_t>(from, to, bytes);
    } else {
      CopyWords<uint8_t>(from, to, bytes);
    }
  }
}

// Device::ScatterRows: see LaunchScatterRows.
template <ScatterOp kOp, typename T>
__global__ void ScatterRowsKernel(const T* updates, bool scalar, T* ref, const int64_t* table,
                                  int64_t num_dest, int64_t row) {
  const int64_t* dest = table;
  const int64_t* starts = table + num_dest;
  const int64_t* sources = starts + num_dest + 1;
  for (int64_t i = GridStart(); i < num_dest * row; i += GridStride()) {
    const int64_t u = i / row, j = i % row;
    T* element = ref + dest[u] * row + j;
    T acc = *element;
    for (int64_t k = starts[u]; k < starts[u + 1]; ++k) {
      acc = CombineScattered<kOp>(acc, scalar ? updates[0] : updates[sources[k] * row + j]);
    }
    *element = acc;
  }
}

// --- dispatch ------------------------------------------------------------------------

template <typename F, typename T>
void RunBinary(cudaStream_t s, const T* x, const T* y, void* z, int64_t n,
               const BroadcastIndex& b) {
  using Out = decltype(F()(T(), T()));
  BinaryKernel<F, T, Out>
      <<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(x, y, static_cast<Out*>(z), n, b);
}

// LaunchBinary of double or int64 (`kDiv`: RealDiv, double only).
template <typename T>
void LaunchTypedBinary(cudaStream_t s, Binary op, const T* x, const T* y, void* z, int64_t n,
                       const BroadcastIndex& b) {
  if (n == 0) return;
  switch (op) {
#define DFLOW_CASE(OP) \
  case Binary::OP: return RunBinary<TypedBinaryFn<Binary::OP>>(s, x, y, z, n, b);
    DFLOW_CASE(kAdd) DFLOW_CASE(kSub) DFLOW_CASE(kMul) DFLOW_CASE(kMaximum) DFLOW_CASE(kMinimum)
    DFLOW_CASE(kEqual) DFLOW_CASE(kNotEqual) DFLOW_CASE(kGreater) DFLOW_CASE(kLess)
    DFLOW_CASE(kGreaterEqual) DFLOW_CASE(kLessEqual)
#undef DFLOW_CASE
    case Binary::kDiv:
      if constexpr (std::is_floating_point_v<T>) {
        RunBinary<TypedBinaryFn<Binary::kDiv>>(s, x, y, z, n, b);
      }
      return;
    default: return;  // Not RunsOnDouble / RunsOnInt64.
  }
}

template <Unary kOp>
void RunUnary(cudaStream_t s, const float* x, float* y, int64_t n) {
  UnaryKernel<UnaryFn<kOp>><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(x, y, n);
}

// fn(T{}) with the C++ type of `e`.
template <typename Fn>
void WithElem(Elem e, Fn&& fn) {
  switch (e) {
    case Elem::kFloat: fn(float{}); break;
    case Elem::kDouble: fn(double{}); break;
    case Elem::kInt32: fn(int32_t{}); break;
    case Elem::kInt64: fn(int64_t{}); break;
    case Elem::kBool: fn(bool{}); break;
  }
}

// fn(T{}) with an unsigned type of `bytes` bytes (1, 2, 4 or 8).
template <typename Fn>
void WithBytes(int bytes, Fn&& fn) {
  if (bytes == 1) fn(uint8_t{});
  if (bytes == 2) fn(uint16_t{});
  if (bytes == 4) fn(uint32_t{});
  if (bytes == 8) fn(uint64_t{});
}

}  // namespace

void LaunchBinary(cudaStream_t s, Binary op, const float* x, const float* y, void* z, int64_t n,
                  const BroadcastIndex& b) {
  if (n == 0) return;
  switch (op) {
#define DFLOW_CASE(OP) \
  case Binary::OP: return RunBinary<BinaryFn<Binary::OP>>(s, x, y, z, n, b);
    DFLOW_CASE(kAdd) DFLOW_CASE(kSub) DFLOW_CASE(kMul) DFLOW_CASE(kDiv) DFLOW_CASE(kDivNoNan)
    DFLOW_CASE(kPow) DFLOW_CASE(kFloorDiv) DFLOW_CASE(kFloorMod) DFLOW_CASE(kMaximum)
    DFLOW_CASE(kMinimum) DFLOW_CASE(kEqual) DFLOW_CASE(kNotEqual) DFLOW_CASE(kGreater)
    DFLOW_CASE(kLess) DFLOW_CASE(kGreaterEqual) DFLOW_CASE(kLessEqual) DFLOW_CASE(kReluGrad)
    DFLOW_CASE(kSoftplusGrad) DFLOW_CASE(kSqrtGrad) DFLOW_CASE(kRsqrtGrad) DFLOW_CASE(kTanhGrad)
    DFLOW_CASE(kSigmoidGrad) DFLOW_CASE(kReciprocalGrad)
#undef DFLOW_CASE
  }
}

void LaunchBinary(cudaStream_t s, Binary op, const double* x, const double* y, void* z, int64_t n,
                  const BroadcastIndex& b) {
  LaunchTypedBinary(s, op, x, y, z, n, b);
}

void LaunchBinary(cudaStream_t s, Binary op, const int64_t* x, const int64_t* y, void* z,
                  int64_t n, const BroadcastIndex& b) {
  LaunchTypedBinary(s, op, x, y, z, n, b);
}

void LaunchUnary(cudaStream_t s, Unary op, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  switch (op) {
#define DFLOW_CASE(OP) \
  case Unary::OP: return RunUnary<Unary::OP>(s, x, y, n);
    DFLOW_CASE(kNeg) DFLOW_CASE(kAbs) DFLOW_CASE(kSquare) DFLOW_CASE(kSqrt) DFLOW_CASE(kRsqrt)
    DFLOW_CASE(kExp) DFLOW_CASE(kLog) DFLOW_CASE(kLog1p) DFLOW_CASE(kExpm1) DFLOW_CASE(kTanh)
    DFLOW_CASE(kSigmoid) DFLOW_CASE(kReciprocal) DFLOW_CASE(kFloor) DFLOW_CASE(kCeil)
    DFLOW_CASE(kRound) DFLOW_CASE(kSin) DFLOW_CASE(kCos) DFLOW_CASE(kRelu) DFLOW_CASE(kSoftplus)
#undef DFLOW_CASE
  }
}

void LaunchSelect(cudaStream_t s, const bool* cond, const void* t, const void* e, void* out,
                  int elem_bytes, int64_t n, const BroadcastIndex& b) {
  if (n == 0) return;
  WithBytes(elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    SelectKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
        cond, static_cast<const T*>(t), static_cast<const T*>(e), static_cast<T*>(out), n, b);
  });
}

void LaunchCast(cudaStream_t s, Elem src, Elem dst, const void* in, void* out, int64_t n) {
  if (n == 0) return;
  WithElem(src, [&](auto src_tag) {
    using Src = decltype(src_tag);
    WithElem(dst, [&](auto dst_tag) {
      using Dst = decltype(dst_tag);
      CastKernel<Src, Dst><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
          static_cast<const Src*>(in), static_cast<Dst*>(out), n);
    });
  });
}

void LaunchFillFromDevice(cudaStream_t s, Elem type, const void* value, void* out, int64_t n) {
  if (n == 0) return;
  WithElem(type, [&](auto tag) {
    using T = decltype(tag);
    FillFromDeviceKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
        static_cast<const T*>(value), static_cast<T*>(out), n);
  });
}

void LaunchFillOnes(cudaStream_t s, Elem type, void* out, int64_t n) {
  if (n == 0) return;
  WithElem(type, [&](auto tag) {
    using T = decltype(tag);
    FillKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(T(1), static_cast<T*>(out), n);
  });
}

void LaunchFillFloat(cudaStream_t s, float value, float* out, int64_t n) {
  if (n == 0) return;
  FillKernel<float><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(value, out, n);
}

void LaunchBiasAdd(cudaStream_t s, const float* x, const float* b, float* y, int64_t n,
                   int64_t channels, int64_t inner) {
  if (n == 0) return;
  BiasAddKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(x, b, y, n, channels, inner);
}

void LaunchStridedCopy(cudaStream_t s, const void* in, void* out, int64_t n,
                       const StridedCopySpec& spec) {
  if (n == 0) return;
  WithBytes(spec.element_size, [&](auto tag) {
    using T = decltype(tag);
    StridedCopyKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, spec);
  });
}

void LaunchGatherRows(cudaStream_t s, const void* in, void* out, const int64_t* from, int64_t n,
                      int64_t row_elems, int elem_bytes) {
  if (n == 0) return;
  WithBytes(elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    GatherRowsKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
        static_cast<const T*>(in), static_cast<T*>(out), from, n, row_elems);
  });
}

void LaunchScatterRows(cudaStream_t s, ScatterOp op, Elem type, const void* updates, bool scalar,
                       void* ref, const int64_t* table, int64_t num_dest, int64_t row_elems) {
  const int64_t n = num_dest * row_elems;
  if (n == 0) return;
  auto launch = [&](auto op_tag, auto type_tag) {
    constexpr ScatterOp kOp = decltype(op_tag)::value;
    using T = decltype(type_tag);
    ScatterRowsKernel<kOp, T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
        static_cast<const T*>(updates), scalar, static_cast<T*>(ref), table, num_dest, row_elems);
  };
  auto with_type = [&](auto op_tag) {
    if (type == Elem::kFloat) launch(op_tag, float{});
    if (type == Elem::kDouble) launch(op_tag, double{});
    if (type == Elem::kInt64) launch(op_tag, int64_t{});
  };
  using O = ScatterOp;
  switch (op) {
    case O::kAdd: return with_type(std::integral_constant<O, O::kAdd>());
    case O::kSub: return with_type(std::integral_constant<O, O::kSub>());
    case O::kMul: return with_type(std::integral_constant<O, O::kMul>());
    case O::kDiv: return with_type(std::integral_constant<O, O::kDiv>());
    case O::kMin: return with_type(std::integral_constant<O, O::kMin>());
    case O::kMax: return with_type(std::integral_constant<O, O::kMax>());
    case O::kUpdate: return with_type(std::integral_constant<O, O::kUpdate>());
  }
}

void LaunchCopyPieces(cudaStream_t s, const int64_t* table, int64_t n) {
  if (n == 0) return;
  CopyPiecesKernel<<<static_cast<int>(n < kMaxBlocks ? n : kMaxBlocks), kThreadsPerBlock, 0, s>>>(
      table, n);
}

void LaunchTile(cudaStream_t s, const void* in, void* out, int elem_bytes, int64_t n,
                const TileIndex& index) {
  if (n == 0) return;
  WithBytes(elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    TileKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(static_cast<const T*>(in),
                                                            static_cast<T*>(out), n, index);
  });
}

}  // namespace gpu
}  // namespace dflow
