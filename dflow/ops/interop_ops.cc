// Ops TensorFlow 1.x's Python client puts in every training graph, so a
// graph built by tf.compat.v1 (MonitoredTrainingSession, Saver,
// report_uninitialized_variables, SyncReplicasOptimizer) can be created on a
// dflow master:
//
//   Where                 coordinates of the true (non-zero) elements
//   Select                v1 select (condition scalar, same shape, or a
//                         vector over the first dimension)
//   StringJoin            element-wise string concatenation
//   StringLength          bytes (or UTF-8 characters) of each string
//   ShardedFilename       "<basename>-%05d-of-%05d"
//   StaticRegexFullMatch  full match of each string against a pattern attr
//
// The Saver's checkpoint ops are in io_ops.cc.
//
// OpDefs are TensorFlow's (tf.compat.v1 op_def_registry); the error texts
// follow TensorFlow's kernels.
#include <cstdint>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

// --- Where -----------------------------------------------------------------------

// Output: int64 [num_true, rank], the row-major coordinates of each element
// of the input that is true (non-zero). Rank 1 to 8, as TensorFlow's kernel.
template <typename T>
class WhereOp : public OpKernel {
 public:
  explicit WhereOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const TensorShape& shape = input.shape();
    const int rank = shape.dims();
    if (rank < 1 || rank > 8) {  // TensorFlow's CPU kernel handles ranks 1 to 8.
      return ctx->InvalidArgument("WhereOp : Unhandled input dimensions: ", rank);
    }
    auto in = input.flat<T>();
    const int64_t n = static_cast<int64_t>(in.size());
    int64_t num_true = 0;
    for (int64_t i = 0; i < n; ++i) num_true += in[i] != T() ? 1 : 0;
    Tensor* out = ctx->allocate_output_for_overwrite(0, TensorShape({num_true, rank}));
    int64_t* o = out->flat<int64_t>().data();
    std::vector<int64_t> strides(rank, 1);
    for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape.dim_size(d + 1);
    for (int64_t i = 0; i < n; ++i) {
      if (in[i] == T()) continue;
      int64_t rest = i;
      for (int d = 0; d < rank; ++d) {
        *o++ = rest / strides[d];
        rest %= strides[d];
      }
    }
    return absl::OkStatus();
  }
};

absl::Status WhereShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  c->set_output(0, in.rank_known() ? PartialShape({kUnknownDim, in.rank()})
                                   : PartialShape::UnknownDims(2));
  return absl::OkStatus();
}

REGISTER_OP("Where")
    .Input("input: T")
    .Output("index: int64")
    .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
          "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, "
          "bool} = DT_BOOL")
    .SetShapeFn(WhereShape);
CpuKernels<WhereOp, float, double, int32_t, int64_t, uint8_t, bool> where_kernels("Where");
REGISTER_NO_GRADIENT("Where");

// --- Select (v1) -------------------------------------------------------------------

template <typename T>
class SelectOp : public OpKernel {
 public:
  explicit SelectOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const int64_t inner, SelectElementsPerCondition(*ctx));
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    const bool* c = ctx->input(0).flat<bool>().data();
    if (ctx->input(0).dims() == 0) {
      ctx->set_output(0, c[0] ? t : e);
      return absl::OkStatus();
    }
    const T* tv = t.flat<T>().data();
    const T* ev = e.flat<T>().data();
    const int64_t n = t.shape().num_elements();
    Tensor* out = ctx->allocate_output_for_overwrite(0, t.shape());
    T* o = out->flat<T>().data();
    for (int64_t i = 0; i < n; ++i) o[i] = c[inner == 0 ? 0 : i / inner] ? tv[i] : ev[i];
    return absl::OkStatus();
  }
};

absl::Status SelectShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> te = PartialShape::Merge(c->input(1), c->input(2));
  if (!te.ok()) {
    return c->Error(absl::StrCat("'then' ", c->input(1).DebugString(), " and 'else' ",
                                 c->input(2).DebugString(), " must have the same shape"));
  }
  const PartialShape& cond = c->input(0);
  if (cond.rank_known() && te->rank_known() && cond.rank() != 0 &&
      !(cond.rank() == 1 && te->rank() > 1)) {
    absl::StatusOr<PartialShape> all = PartialShape::Merge(cond, *te);
    if (!all.ok()) {
      return c->Error(absl::StrCat("'condition' ", cond.DebugString(), " and 'then' ",
                                   te->DebugString(), " must have the same shape"));
    }
    te = all;
  }
  c->set_output(0, *te);
  return absl::OkStatus();
}

REGISTER_OP("Select")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectShape);
CpuKernels<SelectOp, float, double, int32_t, int64_t, uint8_t, bool, std::string> select_kernels(
    "Select");

// --- StringJoin ----------------------------------------------------------------------

class StringJoinOp : public OpKernel {
 public:
  explicit StringJoinOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("separator", &separator_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    TensorShape shape;
    bool have_shape = false;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      const Tensor& in = ctx->input(i);
      if (in.shape().dims() == 0) continue;
      if (!have_shape) {
        shape = in.shape();
        have_shape = true;
      } else if (in.shape() != shape) {
        return ctx->InvalidArgument("Input shapes do not match: ", shape.DebugString(), " vs. ",
                                    in.shape().DebugString());
      }
    }
    Tensor* out = ctx->allocate_output(0, shape);
    auto o = out->flat<std::string>();
    for (int64_t j = 0; j < static_cast<int64_t>(o.size()); ++j) {
      std::string s;
      for (int i = 0; i < ctx->num_inputs(); ++i) {
        const Tensor& in = ctx->input(i);
        if (i > 0) s += separator_;
        s += in.shape().dims() == 0 ? in.scalar<std::string>() : in.flat<std::string>()[j];
      }
      o[j] = std::move(s);
    }
    return absl::OkStatus();
  }

 private:
  std::string separator_;
};

absl::Status StringJoinShape(InferenceContext* c) {
  PartialShape out = PartialShape::Scalar();
  bool all_scalar = true;
  for (int i = 0; i < c->num_inputs(); ++i) {
    const PartialShape& s = c->input(i);
    if (s.rank_known() && s.rank() == 0) continue;
    if (!s.rank_known()) {
      out = all_scalar ? PartialShape::Unknown() : out;
      all_scalar = false;
      continue;
    }
    if (all_scalar || !out.rank_known()) {
      out = s;
    } else {
      absl::StatusOr<PartialShape> m = PartialShape::Merge(out, s);
      if (!m.ok()) {
        return c->Error(absl::StrCat("Input shapes do not match: ", out.DebugString(), " vs. ",
                                     s.DebugString()));
      }
      out = *m;
    }
    all_scalar = false;
  }
  c->set_output(0, out);
  return absl::OkStatus();
}

REGISTER_OP("StringJoin")
    .Input("inputs: N * string")
    .Output("output: string")
    .Attr("N: int >= 0")
    .Attr("separator: string = ''")
    .SetShapeFn(StringJoinShape);
REGISTER_KERNEL(KernelDefBuilder("StringJoin").Device(kDeviceCPU), StringJoinOp);
REGISTER_NO_GRADIENT("StringJoin");

// --- StringLength -----------------------------------------------------------------

// The length of each string in bytes, or with unit "UTF8_CHAR" in UTF-8
// characters (bytes that do not continue a multi-byte sequence).
class StringLengthOp : public OpKernel {
 public:
  explicit StringLengthOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string unit = "BYTE";
    c->GetAttr("unit", &unit).IgnoreError();
    if (unit != "BYTE" && unit != "UTF8_CHAR") {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("StringLength: unit must be BYTE or UTF8_CHAR, got '", unit, "'")));
    }
    utf8_ = unit == "UTF8_CHAR";
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    auto in = ctx->input(0).flat<std::string>();
    auto out = ctx->allocate_output_for_overwrite(0, ctx->input(0).shape())->flat<int32_t>();
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t n = static_cast<int64_t>(in[i].size());
      if (utf8_) {
        n = 0;
        for (char c : in[i]) n += (static_cast<uint8_t>(c) & 0xc0) != 0x80;
      }
      out[i] = static_cast<int32_t>(n);
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  bool utf8_ = false;
};

REGISTER_OP("StringLength")
    .Input("input: string")
    .Output("output: int32")
    .Attr("unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });
REGISTER_KERNEL(KernelDefBuilder("StringLength").Device(kDeviceCPU), StringLengthOp);
REGISTER_NO_GRADIENT("StringLength");

// --- ShardedFilename ----------------------------------------------------------------

class ShardedFilenameOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < 3; ++i) {
      if (ctx->input(i).shape().dims() != 0) {
        return ctx->InvalidArgument("Input ", i, " must be a scalar, got shape ",
                                    ctx->input(i).shape().DebugString());
      }
    }
    char suffix[64];
    std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d", ctx->input(1).scalar<int32_t>(),
                  ctx->input(2).scalar<int32_t>());
    Tensor* out = ctx->allocate_output(0, TensorShape());
    out->scalar<std::string>() = absl::StrCat(ctx->input(0).scalar<std::string>(), suffix);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

absl::Status ScalarShape(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

REGISTER_OP("ShardedFilename")
    .Input("basename: string")
    .Input("shard: int32")
    .Input("num_shards: int32")
    .Output("filename: string")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShardedFilename").Device(kDeviceCPU), ShardedFilenameOp);
REGISTER_NO_GRADIENT("ShardedFilename");

// --- StaticRegexFullMatch -------------------------------------------------------------

// The pattern is RE2 syntax in TensorFlow; std::regex (ECMAScript) agrees on
// the patterns tf.compat.v1 emits (e.g. the Saver's "^s3://.*").
class StaticRegexFullMatchOp : public OpKernel {
 public:
  explicit StaticRegexFullMatchOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("pattern", &pattern_).IgnoreError();
    try {
      regex_ = std::regex(pattern_, std::regex::ECMAScript);
      valid_ = true;
    } catch (const std::regex_error& e) {
      error_ = e.what();
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (!valid_) {
      return ctx->InvalidArgument("Invalid pattern: ", pattern_, ", error: ", error_);
    }
    const Tensor& in = ctx->input(0);
    Tensor* out = ctx->allocate_output(0, in.shape());
    auto s = in.flat<std::string>();
    auto o = out->flat<bool>();
    for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
      o[i] = std::regex_match(s[i], regex_);
    }
    return absl::OkStatus();
  }

 private:
  std::string pattern_;
  std::regex regex_;
  bool valid_ = false;
  std::string error_;
};

absl::Status SameShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

REGISTER_OP("StaticRegexFullMatch")
    .Input("input: string")
    .Output("output: bool")
    .Attr("pattern: string")
    .SetShapeFn(SameShape);
REGISTER_KERNEL(KernelDefBuilder("StaticRegexFullMatch").Device(kDeviceCPU),
                StaticRegexFullMatchOp);
REGISTER_NO_GRADIENT("StaticRegexFullMatch");

}  // namespace
}  // namespace dflow
