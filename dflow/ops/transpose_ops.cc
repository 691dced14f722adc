// Ops that reorder or repeat a tensor's elements: Transpose and Tile.
#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------
// Transpose

// Canonical permutation (negative entries count from the end), or
// TensorFlow's error naming what is wrong.
absl::StatusOr<std::vector<int64_t>> CanonicalPerm(const std::vector<int64_t>& perm, int rank) {
  if (static_cast<int>(perm.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("transpose expects a vector of size ", rank,
                                                   ". But input(1) is a vector of size ",
                                                   perm.size()));
  }
  std::vector<int64_t> out(rank);
  std::vector<bool> seen(rank, false);
  for (int i = 0; i < rank; ++i) {
    if (!CanonicalAxis(perm[i], rank, &out[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(perm[i], " is out of range [0 .. ", rank, ")"));
    }
    seen[out[i]] = true;
  }
  for (int d = 0; d < rank; ++d) {
    if (!seen[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(d, " is missing from {", absl::StrJoin(perm, ","), "}."));
    }
  }
  return out;
}

absl::Status TransposeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  int rank = in.rank_known() ? in.rank() : static_cast<int>(VectorLength(c->input(1)));
  ASSIGN_OR_RETURN(auto perm, ConstIndexInput(c, 1, "perm"));
  if (perm.has_value() && rank < 0) rank = static_cast<int>(perm->size());
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (!perm.has_value()) {
    c->set_output(0, PartialShape::UnknownDims(rank));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> p = CanonicalPerm(*perm, rank);
  if (!p.ok()) return c->Error(std::string(p.status().message()));
  std::vector<int64_t> dims(rank, kUnknownDim);
  if (in.rank_known()) {
    for (int i = 0; i < rank; ++i) dims[i] = in.dim((*p)[i]);
  }
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

// A transpose reduced to its essentials: size-1 dims dropped, and input dims
// that stay adjacent and in order merged into one.
struct TransposePlan {
  std::vector<int64_t> in_dims;
  std::vector<int64_t> perm;
  bool IsIdentity() const {
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] != static_cast<int64_t>(i)) return false;
    }
    return true;
  }
};

TransposePlan SimplifyTranspose(absl::Span<const int64_t> in_dims,
                                const std::vector<int64_t>& perm) {
  // Drop size-1 dims, renumbering the rest.
  std::vector<int64_t> renumber(in_dims.size(), -1), dims;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    if (in_dims[d] != 1)
      renumber[d] = static_cast<int64_t>(dims.size()), dims.push_back(in_dims[d]);
  }
  std::vector<int64_t> p;
  for (int64_t v : perm) {
    if (renumber[v] >= 0) p.push_back(renumber[v]);
  }
  // Group runs v, v+1, ... of `p`; each group is one merged input dim.
  std::vector<std::pair<int64_t, int64_t>> groups;  // [first, last] input dims, output order
  for (int64_t v : p) {
    if (!groups.empty() && groups.back().second + 1 == v) {
      groups.back().second = v;
    } else {
      groups.push_back({v, v});
    }
  }
  std::vector<size_t> by_input(groups.size());
  std::iota(by_input.begin(), by_input.end(), 0);
  std::sort(by_input.begin(), by_input.end(),
            [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  TransposePlan plan;
  plan.perm.assign(groups.size(), 0);
  for (size_t rank = 0; rank < by_input.size(); ++rank) {
    const auto& g = groups[by_input[rank]];
    plan.in_dims.push_back(
        DimProduct(dims, static_cast<int>(g.first), static_cast<int>(g.second) + 1));
    plan.perm[by_input[rank]] = static_cast<int64_t>(rank);
  }
  return plan;
}

// Input offset of the first element of output matrix `m`, where a matrix is
// the innermost two output dims and `steps[d]` is how far the input moves per
// step of output dim d.
int64_t MatrixBase(int64_t m, const std::vector<int64_t>& out_dims,
                   const std::vector<int64_t>& steps) {
  int64_t base = 0;
  for (int d = static_cast<int>(out_dims.size()) - 3; d >= 0; --d) {
    base += (m % out_dims[d]) * steps[d];
    m /= out_dims[d];
  }
  return base;
}

// Writes output rows [row_begin, row_end) of a transpose whose innermost
// output dim is contiguous in the input: whole rows are block copies.
template <typename T>
void TransposeRows(const T* in, T* out, const std::vector<int64_t>& out_dims,
                   const std::vector<int64_t>& steps, int64_t row_begin, int64_t row_end) {
  const int r = static_cast<int>(out_dims.size());
  const int64_t len = out_dims[r - 1], rows_per_matrix = out_dims[r - 2];
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t m = row / rows_per_matrix, a = row % rows_per_matrix;
    std::copy_n(in + MatrixBase(m, out_dims, steps) + a * steps[r - 2], len, out + row * len);
  }
}

// Output matrices are cut into bands of kTile rows; a band is written
// kTile x kTile at a time so that both the reads and the writes stay within
// a few cache lines and pages.
constexpr int64_t kTile = 32;

// Writes bands [band_begin, band_end) of a transpose whose innermost output
// dim is strided in the input.
template <typename T>
void TransposeBands(const T* in, T* out, const std::vector<int64_t>& out_dims,
                    const std::vector<int64_t>& steps, int64_t band_begin, int64_t band_end) {
  const int r = static_cast<int>(out_dims.size());
  const int64_t rows = out_dims[r - 2], len = out_dims[r - 1];
  const int64_t row_step = steps[r - 2], col_step = steps[r - 1];
  const int64_t bands_per_matrix = (rows + kTile - 1) / kTile;
  for (int64_t band = band_begin; band < band_end; ++band) {
    const int64_t m = band / bands_per_matrix;
    const int64_t a0 = (band % bands_per_matrix) * kTile, a1 = std::min(rows, a0 + kTile);
    const T* src = in + MatrixBase(m, out_dims, steps);
    T* dst = out + m * rows * len;
    for (int64_t l0 = 0; l0 < len; l0 += kTile) {
      const int64_t l1 = std::min(len, l0 + kTile);
      for (int64_t a = a0; a < a1; ++a) {
        const T* s = src + a * row_step;
        T* o = dst + a * len;
        for (int64_t l = l0; l < l1; ++l) o[l] = s[l * col_step];
      }
    }
  }
}

class TransposeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& perm_t = ctx->input(1);
    if (perm_t.dims() != 1) {
      return ctx->InvalidArgument("perm must be a vector, not ", perm_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> raw_perm, IndexValues(perm_t, "perm"));
    absl::StatusOr<std::vector<int64_t>> perm = CanonicalPerm(raw_perm, x.dims());
    if (!perm.ok()) return ctx->InvalidArgument(perm.status().message());
    TensorShape out_shape;
    for (int64_t p : *perm) out_shape.AddDim(x.dim_size(static_cast<int>(p)));
    TransposePlan plan = SimplifyTranspose(x.shape().dim_sizes(), *perm);
    if (plan.IsIdentity() || x.NumElements() == 0) {
      if (x.NumElements() == 0) {
        ctx->allocate_output(0, out_shape);
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(Tensor y, x.Reshaped(out_shape));  // Same element order: no copy.
      ctx->set_output(0, std::move(y));
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    return Permute(ctx, x, plan, out);
  }

 private:
  static absl::Status Permute(OpKernelContext* ctx, const Tensor& x, const TransposePlan& plan,
                              Tensor* out) {
    const int r = static_cast<int>(plan.in_dims.size());
    std::vector<int64_t> in_strides(r, 1), out_dims(r), steps(r);
    for (int d = r - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * plan.in_dims[d + 1];
    for (int i = 0; i < r; ++i) {
      out_dims[i] = plan.in_dims[plan.perm[i]];
      steps[i] = in_strides[plan.perm[i]];
    }
    if (out->memory_type() == MemoryType::kDevice) {
      std::vector<int64_t> out_strides(r, 1);
      for (int d = r - 2; d >= 0; --d) out_strides[d] = out_strides[d + 1] * out_dims[d + 1];
      return CopyOnDevice(ctx, x, 0, out, 0, out_dims, steps, out_strides);
    }
    const int64_t len = out_dims[r - 1];
    const int64_t rows = x.NumElements() / len;
    const int64_t matrices = rows / out_dims[r - 2];
    const int64_t bands = matrices * ((out_dims[r - 2] + kTile - 1) / kTile);
    return SwitchByElementSize(x.dtype(), "Transpose", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const T* in = ElementsOf<T>(x);
      T* o = MutableElementsOf<T>(out);
      const int64_t bytes = static_cast<int64_t>(sizeof(T));
      if (steps[r - 1] == 1) {
        ctx->intra_op_pool()->ParallelFor(rows, len * bytes, [&](int64_t b, int64_t e) {
          TransposeRows(in, o, out_dims, steps, b, e);
        });
      } else {
        ctx->intra_op_pool()->ParallelFor(
            bands, kTile * len * bytes * 2,
            [&](int64_t b, int64_t e) { TransposeBands(in, o, out_dims, steps, b, e); });
      }
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("Transpose")
    .Input("x: T")
    .Input("perm: Tperm")
    .Output("y: T")
    .Attr("T: type")
    .Attr("Tperm: {int32, int64} = DT_INT32")
    .SetShapeFn(TransposeShape);
REGISTER_KERNEL(KernelDefBuilder("Transpose")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tperm", IndexTypes()),
                TransposeOp);
// On a GPU: one strided copy in device memory (Device::CopyStrided).
REGISTER_KERNEL(KernelDefBuilder("Transpose")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Tperm", IndexTypes())
                    .HostMemory("perm"),
                TransposeOp);

// ---------------------------------------------------------------------------
// Tile

absl::Status TileShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(auto multiples, ConstIndexInput(c, 1, "multiples"));
  int rank = in.rank_known() ? in.rank() : static_cast<int>(VectorLength(c->input(1)));
  if (multiples.has_value()) {
    if (rank >= 0 && static_cast<int>(multiples->size()) != rank) {
      return c->Error(absl::StrCat("Expected multiples argument to be a vector of length ", rank,
                                   " but got length ", multiples->size()));
    }
    std::vector<int64_t> dims;
    for (size_t i = 0; i < multiples->size(); ++i) {
      const int64_t m = (*multiples)[i];
      const int64_t d = in.rank_known() ? in.dim(static_cast<int>(i)) : kUnknownDim;
      if (m < 0) {
        return c->Error(absl::StrCat("Expected multiples[", i, "] >= 0, but got ", m));
      }
      const bool known = d != kUnknownDim && (d == 0 || m <= kInt64Max / d);
      dims.push_back(m == 0 ? 0 : (known ? d * m : kUnknownDim));
    }
    c->set_output(0, PartialShape(std::move(dims)));
    return absl::OkStatus();
  }
  c->set_output(0, rank < 0 ? PartialShape::Unknown() : PartialShape::UnknownDims(rank));
  return absl::OkStatus();
}

// Fills `out` (dims in_dims[d..] * multiples[d..]) from `in`: tile 0 of dim d
// is built recursively, then copied out to the other multiples[d] - 1 tiles.
template <typename T>
void TileDim(const T* in, T* out, int d, const std::vector<int64_t>& in_dims,
             const std::vector<int64_t>& in_strides, const std::vector<int64_t>& out_strides,
             const std::vector<int64_t>& multiples) {
  const int64_t n = in_dims[d];
  if (d + 1 == static_cast<int>(in_dims.size())) {
    std::copy_n(in, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      TileDim(in + i * in_strides[d], out + i * out_strides[d], d + 1, in_dims, in_strides,
              out_strides, multiples);
    }
  }
  const int64_t block = n * out_strides[d];
  for (int64_t t = 1; t < multiples[d]; ++t) std::copy_n(out, block, out + t * block);
}

class TileOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    std::vector<int64_t> multiples;
    ASSIGN_OR_RETURN(const TensorShape out_shape, TileShape(*ctx, &multiples));
    if (out_shape == x.shape()) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output(0, out_shape);
    if (out->NumElements() == 0) return absl::OkStatus();
    const int r = x.dims();
    const absl::Span<const int64_t> out_dims = out_shape.dim_sizes();
    std::vector<int64_t> in_dims(x.shape().dim_sizes().begin(), x.shape().dim_sizes().end());
    std::vector<int64_t> in_strides(r, 1), out_strides(r, 1);
    for (int d = r - 2; d >= 0; --d) {
      in_strides[d] = in_strides[d + 1] * in_dims[d + 1];
      out_strides[d] = out_strides[d + 1] * out_dims[d + 1];
    }
    return SwitchByElementSize(x.dtype(), "Tile", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      TileDim(ElementsOf<T>(x), MutableElementsOf<T>(out), 0, in_dims, in_strides, out_strides,
              multiples);
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("Tile")
    .Input("input: T")
    .Input("multiples: Tmultiples")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tmultiples: {int32, int64} = DT_INT32")
    .SetShapeFn(TileShape);
REGISTER_KERNEL(KernelDefBuilder("Tile")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tmultiples", IndexTypes()),
                TileOp);

}  // namespace
}  // namespace dflow
