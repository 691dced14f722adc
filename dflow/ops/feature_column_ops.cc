// Ops TensorFlow 1.x's feature columns build (wide & deep's categorical,
// bucketized and crossed columns):
//
//   StringToHashBucketFast(input)   Fingerprint64(s) % num_buckets per string,
//       Fingerprint64 being FarmHash's 64-bit fingerprint (farmhashna), so the
//       buckets equal TensorFlow's
//   Bucketize(input)   the index of the first boundary greater than each value
//       (len(boundaries) when none is; NaN goes last)
//   SparseCross(indices, values, shapes, dense_inputs)   per row of a batch, the
//       cartesian product of the features each input column has there (sparse
//       columns first, the last column varying fastest) as a [batch, max
//       crosses] SparseTensor. out_type int64 (whatever hashed_output says):
//       FingerprintCat64 folded over the features from hash_key (a string's
//       feature is its Fingerprint64, an int64's its value) % num_buckets (or
//       % INT64_MAX when 0); out_type string: the features joined by "_X_"
//
// OpDefs and error texts follow TensorFlow's.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

// --- Fingerprint64 (FarmHash's farmhashna::Hash64) ------------------------------

constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL;
constexpr uint64_t k1 = 0xb492b66fbe98f273ULL;
constexpr uint64_t k2 = 0x9ae16a3b2f90404fULL;

uint64_t Fetch64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // Little-endian hosts only, as dflow's wire format.
  return v;
}
uint32_t Fetch32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint64_t Rotate(uint64_t v, int shift) {
  return shift == 0 ? v : (v >> shift) | (v << (64 - shift));
}
uint64_t ShiftMix(uint64_t v) { return v ^ (v >> 47); }

uint64_t HashLen16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

uint64_t HashLen0to16(const char* s, size_t len) {
  if (len >= 8) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = Fetch64(s) + k2;
    const uint64_t b = Fetch64(s + len - 8);
    const uint64_t c = Rotate(b, 37) * mul + a;
    const uint64_t d = (Rotate(a, 25) + b) * mul;
    return HashLen16(c, d, mul);
  }
  if (len >= 4) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = Fetch32(s);
    return HashLen16(len + (a << 3), Fetch32(s + len - 4), mul);
  }
  if (len > 0) {
    const uint8_t a = static_cast<uint8_t>(s[0]);
    const uint8_t b = static_cast<uint8_t>(s[len >> 1]);
    const uint8_t c = static_cast<uint8_t>(s[len - 1]);
    const uint32_t y = static_cast<uint32_t>(a) + (static_cast<uint32_t>(b) << 8);
    const uint32_t z = static_cast<uint32_t>(len) + (static_cast<uint32_t>(c) << 2);
    return ShiftMix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

uint64_t HashLen17to32(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = Fetch64(s) * k1;
  const uint64_t b = Fetch64(s + 8);
  const uint64_t c = Fetch64(s + len - 8) * mul;
  const uint64_t d = Fetch64(s + len - 16) * k2;
  return HashLen16(Rotate(a + b, 43) + Rotate(c, 30) + d, a + Rotate(b + k2, 18) + c, mul);
}

uint64_t HashLen33to64(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = Fetch64(s) * k2;
  const uint64_t b = Fetch64(s + 8);
  const uint64_t c = Fetch64(s + len - 8) * mul;
  const uint64_t d = Fetch64(s + len - 16) * k2;
  const uint64_t y = Rotate(a + b, 43) + Rotate(c, 30) + d;
  const uint64_t z = HashLen16(y, a + Rotate(b + k2, 18) + c, mul);
  const uint64_t e = Fetch64(s + 16) * mul;
  const uint64_t f = Fetch64(s + 24);
  const uint64_t g = (y + Fetch64(s + len - 32)) * mul;
  const uint64_t h = (z + Fetch64(s + len - 24)) * mul;
  return HashLen16(Rotate(e + f, 43) + Rotate(g, 30) + h, e + Rotate(f + a, 18) + g, mul);
}

// 16 bytes of state from 32 bytes of input and two seeds.
std::pair<uint64_t, uint64_t> WeakHashLen32WithSeeds(const char* s, uint64_t a, uint64_t b) {
  const uint64_t w = Fetch64(s), x = Fetch64(s + 8), y = Fetch64(s + 16), z = Fetch64(s + 24);
  a += w;
  b = Rotate(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += Rotate(a, 44);
  return {a + z, b + c};
}

uint64_t Fingerprint64(const char* s, size_t len) {
  if (len <= 16) return HashLen0to16(s, len);
  if (len <= 32) return HashLen17to32(s, len);
  if (len <= 64) return HashLen33to64(s, len);
  // 64 bytes at a time, then the last 64 (overlapping) bytes.
  constexpr uint64_t seed = 81;
  uint64_t x = seed;
  uint64_t y = seed * k1 + 113;
  uint64_t z = ShiftMix(y * k2 + 113) * k2;
  std::pair<uint64_t, uint64_t> v = {0, 0}, w = {0, 0};
  x = x * k2 + Fetch64(s);
  const char* end = s + ((len - 1) / 64) * 64;
  const char* last64 = end + ((len - 1) & 63) - 63;
  do {
    x = Rotate(x + y + v.first + Fetch64(s + 8), 37) * k1;
    y = Rotate(y + v.second + Fetch64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + Fetch64(s + 40);
    z = Rotate(z + w.first, 33) * k1;
    v = WeakHashLen32WithSeeds(s, v.second * k1, x + w.first);
    w = WeakHashLen32WithSeeds(s + 32, z + w.second, y + Fetch64(s + 16));
    std::swap(z, x);
    s += 64;
  } while (s != end);
  const uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += ((len - 1) & 63);
  v.first += w.first;
  w.first += v.first;
  x = Rotate(x + y + v.first + Fetch64(s + 8), 37) * mul;
  y = Rotate(y + v.second + Fetch64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + Fetch64(s + 40);
  z = Rotate(z + w.first, 33) * mul;
  v = WeakHashLen32WithSeeds(s, v.second * mul, x + w.first);
  w = WeakHashLen32WithSeeds(s + 32, z + w.second, y + Fetch64(s + 16));
  std::swap(z, x);
  return HashLen16(HashLen16(v.first, w.first, mul) + ShiftMix(y) * k0 + z,
                   HashLen16(v.second, w.second, mul) + x, mul);
}

// --- StringToHashBucketFast --------------------------------------------------------

class StringToHashBucketFastOp : public OpKernel {
 public:
  explicit StringToHashBucketFastOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("num_buckets", &num_buckets_).IgnoreError();
    if (num_buckets_ < 1) {  // The OpDef's minimum; checked again before dividing by it.
      c->SetStatus(absl::InvalidArgumentError("StringToHashBucketFast: num_buckets must be >= 1"));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, input.shape());
    auto in = input.flat<std::string>();
    auto o = out->flat<int64_t>();
    const uint64_t buckets = static_cast<uint64_t>(num_buckets_);
    for (int64_t i = 0; i < in.size(); ++i) {
      o[i] = static_cast<int64_t>(Fingerprint64(in[i].data(), in[i].size()) % buckets);
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_buckets_ = 1;
};

REGISTER_OP("StringToHashBucketFast")
    .Input("input: string")
    .Output("output: int64")
    .Attr("num_buckets: int >= 1")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("StringToHashBucketFast").Device(kDeviceCPU),
                StringToHashBucketFastOp);

// --- Bucketize ---------------------------------------------------------------------

template <typename T>
class BucketizeOp : public OpKernel {
 public:
  explicit BucketizeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("boundaries", &boundaries_).IgnoreError();
    if (!std::is_sorted(boundaries_.begin(), boundaries_.end())) {
      c->SetStatus(absl::InvalidArgumentError("Bucketize: Expected sorted boundaries"));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, input.shape());
    auto in = input.flat<T>();
    auto o = out->flat<int32_t>();
    for (int64_t i = 0; i < in.size(); ++i) {  // Compared as C++ compares T with float.
      o[i] = static_cast<int32_t>(std::upper_bound(boundaries_.begin(), boundaries_.end(), in[i]) -
                                  boundaries_.begin());
    }
    return absl::OkStatus();
  }

 private:
  std::vector<float> boundaries_;
};

REGISTER_OP("Bucketize")
    .Input("input: T")
    .Output("output: int32")
    .Attr("T: {int32, int64, float, double}")
    .Attr("boundaries: list(float)")
    .SetShapeFn(UnchangedShape);
const CpuKernels<BucketizeOp, int32_t, int64_t, float, double> bucketize_kernels("Bucketize");

// --- SparseCross ---------------------------------------------------------------------

// TensorFlow's FingerprintCat64: a fingerprint of two fingerprints.
uint64_t FingerprintCat64(uint64_t fp1, uint64_t fp2) {
  constexpr uint64_t kMul = 0xc6a4a7935bd1e995ULL;
  uint64_t result = fp1 ^ kMul;
  result ^= ShiftMix(fp2 * kMul) * kMul;
  result *= kMul;
  result = ShiftMix(result) * kMul;
  return ShiftMix(result);
}

// a * b and a + b, saturating at INT64_MAX (for non-negative operands).
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// One input column of a cross. A dense [batch, n] matrix has n features in
// every row. A sparse tensor's features are read as TensorFlow reads them:
// runs of entries with the same row (indices[:, 0]), each run taken when its
// row comes after the previous run's and lies inside the batch; the column
// ends at the first run that does not (its column index is never read).
class CrossColumn {
 public:
  CrossColumn(const Tensor* indices, const Tensor* values, int64_t batch)
      : values_(values),
        sparse_(true),
        rows_(indices->flat<int64_t>().data()),
        size_(values->NumElements()),
        batch_(batch) {}
  explicit CrossColumn(const Tensor* dense) : values_(dense), width_(dense->dim_size(1)) {}

  bool sparse() const { return sparse_; }
  // Sparse only: moves to the next run of features; false when none is left.
  bool NextRun() {
    begin_ = end_;
    if (begin_ >= size_) return false;
    const int64_t row = rows_[2 * begin_];
    if (row < next_row_ || row >= batch_) return false;
    for (end_ = begin_; end_ < size_ && rows_[2 * end_] == row; ++end_) {
    }
    row_ = row;
    next_row_ = row + 1;
    return true;
  }
  // The sparse run's row.
  int64_t row() const { return row_; }
  // How many features the column has in `row` (a sparse column: its current run's row).
  int64_t count() const { return sparse() ? end_ - begin_ : width_; }
  // The position in values of feature n of `row`.
  int64_t at(int64_t row, int64_t n) const { return sparse() ? begin_ + n : row * width_ + n; }
  const Tensor& values() const { return *values_; }

 private:
  const Tensor* values_;  // not owned
  bool sparse_ = false;
  const int64_t* rows_ = nullptr;  // Sparse: the indices, two per entry; not owned.
  int64_t size_ = 0, batch_ = 0, width_ = 0;
  int64_t begin_ = 0, end_ = 0, row_ = 0, next_row_ = 0;
};

// Calls fn(row) for each row of the batch where every column has a feature,
// in increasing order, with each sparse column moved to that row's run.
template <typename Fn>
void ForEachCrossRow(std::vector<CrossColumn>& columns, int64_t batch, Fn fn) {
  std::vector<CrossColumn*> sparse;
  for (CrossColumn& c : columns) {
    if (!c.sparse() && c.count() == 0) return;
    if (c.sparse()) sparse.push_back(&c);
  }
  if (sparse.empty()) {
    for (int64_t row = 0; row < batch; ++row) fn(row);
    return;
  }
  for (CrossColumn* c : sparse) {
    if (!c->NextRun()) return;
  }
  // A merge of the columns' runs: only a row every one reaches has crosses.
  for (;;) {
    int64_t target = 0;
    for (CrossColumn* c : sparse) target = std::max(target, c->row());
    bool aligned = true;
    for (CrossColumn* c : sparse) {
      while (c->row() < target) {
        if (!c->NextRun()) return;
        aligned = false;
      }
    }
    if (!aligned) continue;  // Some column moved past the target.
    fn(target);
    for (CrossColumn* c : sparse) {
      if (!c->NextRun()) return;
    }
  }
}

class SparseCrossOp : public OpKernel {
 public:
  explicit SparseCrossOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("N", &n_).IgnoreError();
    c->GetAttr("sparse_types", &sparse_types_).IgnoreError();
    c->GetAttr("dense_types", &dense_types_).IgnoreError();
    c->GetAttr("num_buckets", &num_buckets_).IgnoreError();
    c->GetAttr("hash_key", &hash_key_).IgnoreError();
    c->GetAttr("out_type", &out_type_).IgnoreError();
    c->GetAttr("internal_type", &internal_type_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const int64_t batch, Validate(ctx));
    std::vector<CrossColumn> columns = Columns(ctx, batch);

    // Pass 1: sizes, checked before allocating.
    int64_t total = 0, widest = 0, string_bytes = 0;
    ForEachCrossRow(columns, batch, [&](int64_t row) {
      const int64_t crosses = Crosses(columns);
      total = SatAdd(total, crosses);
      widest = std::max(widest, crosses);
      if (out_type_ == DT_STRING) string_bytes = SatAdd(string_bytes, StringBytes(columns, row));
    });
    RETURN_IF_ERROR(CheckTensorBytes(DT_INT64, TensorShape({total, 2})));
    RETURN_IF_ERROR(
        CheckTensorBytes(out_type_, TensorShape({total}), static_cast<uint64_t>(string_bytes)));

    // Pass 2: the crosses, row by row (the columns read afresh).
    columns = Columns(ctx, batch);
    Tensor* indices = ctx->allocate_output_for_overwrite(0, TensorShape({total, 2}));
    Tensor* values = ctx->allocate_output_for_overwrite(1, TensorShape({total}));
    int64_t* out_index = indices->flat<int64_t>().data();
    int64_t k = 0;
    ForEachCrossRow(columns, batch, [&](int64_t row) {
      std::vector<int64_t> pick(columns.size(), 0);
      for (int64_t j = 0, crosses = Crosses(columns); j < crosses; ++j, ++k) {
        out_index[2 * k] = row;
        out_index[2 * k + 1] = j;
        if (out_type_ == DT_STRING) {
          values->flat<std::string>()[k] = JoinCross(columns, row, pick);
        } else {
          values->flat<int64_t>()[k] = HashCross(columns, row, pick);
        }
        NextPick(columns, &pick);
      }
    });
    Tensor* shape = ctx->allocate_output_for_overwrite(2, TensorShape({2}));
    shape->flat<int64_t>()[0] = batch;
    shape->flat<int64_t>()[1] = widest;
    return absl::OkStatus();
  }

 private:
  // The sparse columns, then the dense ones.
  std::vector<CrossColumn> Columns(OpKernelContext* ctx, int64_t batch) const {
    std::vector<CrossColumn> columns;
    for (int64_t i = 0; i < n_; ++i) {
      columns.emplace_back(&ctx->input(i), &ctx->input(n_ + i), batch);
    }
    for (size_t i = 0; i < dense_types_.size(); ++i) columns.emplace_back(&ctx->input(3 * n_ + i));
    return columns;
  }

  // TensorFlow's checks, in its order and words; returns the batch size.
  absl::StatusOr<int64_t> Validate(OpKernelContext* ctx) const {
    for (int64_t i = 0; i < n_; ++i) {
      const Tensor& indices = ctx->input(i);
      if (indices.dims() != 2) {
        return ctx->InvalidArgument("Input indices should be a matrix but received shape ",
                                    indices.shape().DebugString(), " at position ", i);
      }
      if (indices.dim_size(1) != 2) {
        return ctx->InvalidArgument("Expected D2 of index to be 2 got ", indices.dim_size(1),
                                    " at position ", i);
      }
    }
    if (static_cast<int64_t>(sparse_types_.size()) != n_) {
      return ctx->InvalidArgument("Expected ", n_, " input values, got ", sparse_types_.size());
    }
    for (int64_t i = 0; i < n_; ++i) {
      const Tensor& values = ctx->input(n_ + i);
      if (internal_type_ == DT_STRING && values.dtype() == DT_INT64) {
        return ctx->InvalidArgument("Input values should be of internal type string but received ",
                                    DataTypeString(values.dtype()));
      }
      if (values.dims() != 1) {
        return ctx->InvalidArgument("Input values should be a vector but received shape ",
                                    values.shape().DebugString(), " at position ", i);
      }
      if (ctx->input(i).dim_size(0) != values.dim_size(0)) {
        return ctx->InvalidArgument("Expected size of values to be ", ctx->input(i).dim_size(0),
                                    " got ", values.dim_size(0), " at position ", i);
      }
    }
    for (int64_t i = 0; i < n_; ++i) {
      const Tensor& shape = ctx->input(2 * n_ + i);
      if (shape.dims() != 1) {
        return ctx->InvalidArgument("Input shapes should be a vector but received shape ",
                                    shape.shape().DebugString(), " at position ", i);
      }
      if (shape.NumElements() != 2) {
        return ctx->InvalidArgument("shape should imply a 2D tensor, but got ",
                                    shape.shape().DebugString(), " at position ", i);
      }
    }
    for (size_t i = 0; i < dense_types_.size(); ++i) {
      const Tensor& dense = ctx->input(3 * n_ + i);
      if (internal_type_ == DT_STRING && dense.dtype() == DT_INT64) {
        return ctx->InvalidArgument("Dense inputs should be of internal type string but received ",
                                    DataTypeString(dense.dtype()));
      }
      if (dense.dims() != 2) {
        return ctx->InvalidArgument("Dense inputs should be a matrix but received shape ",
                                    dense.shape().DebugString(), " at position ", i);
      }
    }
    return BatchSize(ctx);
  }

  // The batch: the first sparse input's dense shape[0], else the first dense
  // input's rows; every input must agree.
  absl::StatusOr<int64_t> BatchSize(OpKernelContext* ctx) const {
    int64_t batch = 0;
    if (n_ > 0) {
      batch = ctx->input(2 * n_).flat<int64_t>()[0];
    } else if (!dense_types_.empty()) {
      batch = ctx->input(3 * n_).dim_size(0);
    }
    if (batch < 0) {  // TensorFlow crashes here.
      return ctx->InvalidArgument("Expected a batch size >= 0, got shapes[0] = [", batch, ",",
                                  ctx->input(2 * n_).flat<int64_t>()[1], "]");
    }
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t rows = ctx->input(2 * n_ + i).flat<int64_t>()[0];
      if (rows != batch) {
        return ctx->InvalidArgument("Expected batch size ", batch, " got ", rows, " at position ",
                                    i);
      }
    }
    for (size_t i = 0; i < dense_types_.size(); ++i) {
      const int64_t rows = ctx->input(3 * n_ + i).dim_size(0);
      if (rows != batch) {
        return ctx->InvalidArgument("Expected batch size ", batch, " got ", rows,
                                    " at dense tensor ", i);
      }
    }
    return batch;
  }

  // The number of crosses in the current row (saturating).
  static int64_t Crosses(const std::vector<CrossColumn>& columns) {
    int64_t crosses = 1;
    for (const CrossColumn& c : columns) crosses = SatMul(crosses, c.count());
    return crosses;
  }

  // The bytes of the row's joined crosses: each feature appears in
  // crosses / count(its column) of them, plus the separators.
  static int64_t StringBytes(const std::vector<CrossColumn>& columns, int64_t row) {
    const int64_t crosses = Crosses(columns);
    int64_t bytes = SatMul(crosses, 3 * (static_cast<int64_t>(columns.size()) - 1));
    for (const CrossColumn& c : columns) {
      int64_t column_bytes = 0;
      for (int64_t n = 0; n < c.count(); ++n) {
        column_bytes = SatAdd(column_bytes, FeatureBytes(c, row, n));
      }
      bytes = SatAdd(bytes, SatMul(column_bytes, crosses / c.count()));
    }
    return bytes;
  }

  static int64_t FeatureBytes(const CrossColumn& c, int64_t row, int64_t n) {
    if (c.values().dtype() == DT_STRING) {
      return static_cast<int64_t>(c.values().flat<std::string>()[c.at(row, n)].size());
    }
    return static_cast<int64_t>(std::to_string(c.values().flat<int64_t>()[c.at(row, n)]).size());
  }

  // Feature n of `row` in column c, as a string (an int64 in decimal).
  static std::string Feature(const CrossColumn& c, int64_t row, int64_t n) {
    if (c.values().dtype() == DT_STRING) return c.values().flat<std::string>()[c.at(row, n)];
    return std::to_string(c.values().flat<int64_t>()[c.at(row, n)]);
  }

  static std::string JoinCross(const std::vector<CrossColumn>& columns, int64_t row,
                               const std::vector<int64_t>& pick) {
    std::string out;
    for (size_t i = 0; i < columns.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : "_X_", Feature(columns[i], row, pick[i]));
    }
    return out;
  }

  int64_t HashCross(const std::vector<CrossColumn>& columns, int64_t row,
                    const std::vector<int64_t>& pick) const {
    uint64_t hash = static_cast<uint64_t>(hash_key_);
    for (size_t i = 0; i < columns.size(); ++i) {
      const Tensor& v = columns[i].values();
      const int64_t at = columns[i].at(row, pick[i]);
      const uint64_t feature =
          v.dtype() == DT_STRING
              ? Fingerprint64(v.flat<std::string>()[at].data(), v.flat<std::string>()[at].size())
              : static_cast<uint64_t>(v.flat<int64_t>()[at]);
      hash = FingerprintCat64(hash, feature);
    }
    const uint64_t modulus = num_buckets_ > 0 ? static_cast<uint64_t>(num_buckets_)
                                              : std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(hash % modulus);
  }

  // The next combination of features, the last column fastest.
  static void NextPick(const std::vector<CrossColumn>& columns, std::vector<int64_t>* pick) {
    for (size_t i = columns.size(); i-- > 0;) {
      if (++(*pick)[i] < columns[i].count()) return;
      (*pick)[i] = 0;
    }
  }

  int64_t n_ = 0;
  DataTypeVector sparse_types_, dense_types_;
  int64_t num_buckets_ = 0, hash_key_ = 0;
  DataType out_type_ = DT_INT64, internal_type_ = DT_INT64;
};

absl::Status SparseCrossShape(InferenceContext* c) {
  c->set_output(0, PartialShape({kUnknownDim, 2}));
  c->set_output(1, PartialShape({kUnknownDim}));
  c->set_output(2, PartialShape({2}));
  return absl::OkStatus();
}

REGISTER_OP("SparseCross")
    .Input("indices: N * int64")
    .Input("values: sparse_types")
    .Input("shapes: N * int64")
    .Input("dense_inputs: dense_types")
    .Output("output_indices: int64")
    .Output("output_values: out_type")
    .Output("output_shape: int64")
    .Attr("N: int >= 0")
    .Attr("hashed_output: bool")
    .Attr("num_buckets: int >= 0")
    .Attr("hash_key: int")
    .Attr("sparse_types: list({int64, string}) >= 0")
    .Attr("dense_types: list({int64, string}) >= 0")
    .Attr("out_type: {int64, string}")
    .Attr("internal_type: {int64, string}")
    .SetShapeFn(SparseCrossShape);
REGISTER_KERNEL(KernelDefBuilder("SparseCross").Device(kDeviceCPU), SparseCrossOp);

REGISTER_NO_GRADIENT("StringToHashBucketFast");
REGISTER_NO_GRADIENT("Bucketize");
REGISTER_NO_GRADIENT("SparseCross");

}  // namespace
}  // namespace dflow
