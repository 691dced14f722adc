// Launchers of the element-wise GPU kernels (cwise_kernels.cu): plain
// pointers to device memory and the stream; each queues its work and
// returns (no synchronisation). Shapes are checked by the callers
// (cwise_ops.cc, shape_ops.cc); n == 0 launches nothing.
#ifndef DFLOW_GPU_CWISE_LAUNCH_H_
#define DFLOW_GPU_CWISE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dflow/framework/scatter_op.h"
#include "dflow/framework/strided_copy.h"

namespace dflow {
namespace gpu {

// The element types of the kernels here (dflow's DataType is not visible to nvcc).
enum class Elem { kFloat, kDouble, kInt32, kInt64, kBool };

inline constexpr int kMaxBroadcastDims = 8;
inline constexpr int kMaxBroadcastInputs = 3;

// How each input is read for output element i (row-major over `dims`):
//  rank == 0: input k reads element i * step[k] (step 1: same shape as the
//             output; step 0: a scalar);
//  rank >= 1: input k reads the sum over d of coordinate d times strides[k][d]
//             (0 along dimensions it is broadcast over).
struct BroadcastIndex {
  int rank = 0;
  int64_t step[kMaxBroadcastInputs] = {1, 1, 1};
  int64_t dims[kMaxBroadcastDims] = {};
  int64_t strides[kMaxBroadcastInputs][kMaxBroadcastDims] = {};
};

// z = f(x, y). The comparisons write bool, the rest the inputs' type.
// The *Grad ops take (y, dy) / (gradients, features) as TensorFlow's do.
enum class Binary {
  kAdd, kSub, kMul, kDiv, kDivNoNan, kPow, kFloorDiv, kFloorMod, kMaximum, kMinimum,
  kEqual, kNotEqual, kGreater, kLess, kGreaterEqual, kLessEqual,
  kReluGrad, kSoftplusGrad, kSqrtGrad, kRsqrtGrad, kTanhGrad, kSigmoidGrad, kReciprocalGrad,
};
inline constexpr bool WritesBool(Binary op) {
  return op >= Binary::kEqual && op <= Binary::kLessEqual;
}
void LaunchBinary(cudaStream_t s, Binary op, const float* x, const float* y, void* z, int64_t n,
                  const BroadcastIndex& index);

// The ops of Binary that also run on double and int64 (TensorFlow's
// int64 and double GPU kernels that TF1 metrics, summaries and float64
// models use): the arithmetic, Maximum/Minimum and the comparisons; RealDiv
// on double only.
inline constexpr bool RunsOnDouble(Binary op) {
  return op <= Binary::kDiv || op == Binary::kMaximum || op == Binary::kMinimum || WritesBool(op);
}
inline constexpr bool RunsOnInt64(Binary op) { return RunsOnDouble(op) && op != Binary::kDiv; }
// REQUIRES: RunsOnDouble(op) / RunsOnInt64(op); otherwise nothing is queued.
void LaunchBinary(cudaStream_t s, Binary op, const double* x, const double* y, void* z, int64_t n,
                  const BroadcastIndex& index);
void LaunchBinary(cudaStream_t s, Binary op, const int64_t* x, const int64_t* y, void* z,
                  int64_t n, const BroadcastIndex& index);

// y = f(x), float.
enum class Unary {
  kNeg, kAbs, kSquare, kSqrt, kRsqrt, kExp, kLog, kLog1p, kExpm1, kTanh, kSigmoid, kReciprocal,
  kFloor, kCeil, kRound, kSin, kCos, kRelu, kSoftplus,
};
void LaunchUnary(cudaStream_t s, Unary op, const float* x, float* y, int64_t n);

// out = cond ? t : e with three-way broadcasting; elements of `elem_bytes`
// (1, 4 or 8) bytes.
void LaunchSelect(cudaStream_t s, const bool* cond, const void* t, const void* e, void* out,
                  int elem_bytes, int64_t n, const BroadcastIndex& index);

// out[i] = CastValue(in[i]) with TensorFlow's results (see cast_op.cc).
// REQUIRES: src != dst.
void LaunchCast(cudaStream_t s, Elem src, Elem dst, const void* in, void* out, int64_t n);

// out[i] = *value, `value` in device memory.
void LaunchFillFromDevice(cudaStream_t s, Elem type, const void* value, void* out, int64_t n);
// out[i] = 1 of `type`.
void LaunchFillOnes(cudaStream_t s, Elem type, void* out, int64_t n);
// out[i] = value.
void LaunchFillFloat(cudaStream_t s, float value, float* out, int64_t n);

// y[i] = x[i] + b[(i / inner) % channels]: x viewed as [outer, channels, inner].
void LaunchBiasAdd(cudaStream_t s, const float* x, const float* b, float* y, int64_t n,
                   int64_t channels, int64_t inner);

// Output element i (row-major over out_dims) = in[sum_d (c_d % in_dims[d]) * in_strides[d]]:
// Tile (in_dims the input's) and BroadcastTo (in_dims 1 where broadcast).
struct TileIndex {
  int rank = 0;
  int64_t out_dims[kMaxBroadcastDims] = {};
  int64_t in_dims[kMaxBroadcastDims] = {};
  int64_t in_strides[kMaxBroadcastDims] = {};
};
void LaunchTile(cudaStream_t s, const void* in, void* out, int elem_bytes, int64_t n,
                const TileIndex& index);

// Device::GatherRows: out[i] = in[from[i / row_elems] + i % row_elems] for
// i < n, elements of elem_bytes (1, 2, 4 or 8) bytes; `from` in device memory.
void LaunchGatherRows(cudaStream_t s, const void* in, void* out, const int64_t* from, int64_t n,
                      int64_t row_elems, int elem_bytes);

// Device::CopyPieces for `n` pieces listed in device memory as (from, to,
// bytes) triples of int64: one block a piece at a time, 16-, 4- or 1-byte
// words as the piece's alignment allows.
void LaunchCopyPieces(cudaStream_t s, const int64_t* table, int64_t n);

// Device::ScatterRows. `table` (device memory, int64): the `num_dest`
// destination rows, then num_dest + 1 starts into the update rows that
// follow, grouped by destination, each group in the updates' order. Output
// element (u, j) for j < row_elems: ref[dest[u], j] combined with each of
// its group's updates[k, j] in turn (updates[0] for every one when
// `scalar`) by CombineScattered, the host's own function, so repeated rows
// give the host's values. `type`: float, double or int64.
void LaunchScatterRows(cudaStream_t s, ScatterOp op, Elem type, const void* updates, bool scalar,
                       void* ref, const int64_t* table, int64_t num_dest, int64_t row_elems);

// The n elements of `spec` (Device::CopyStrided), one thread each.
void LaunchStridedCopy(cudaStream_t s, const void* in, void* out, int64_t n,
                       const StridedCopySpec& spec);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_CWISE_LAUNCH_H_
