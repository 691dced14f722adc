// String ops that split text into tokens, as a SparseTensor of
// [batch, max tokens] (indices, values, dense shape):
//
//   StringSplit    splits at any of the delimiter's characters (every byte
//                  when the delimiter is empty), dropping empty tokens when
//                  skip_empty (tf.compat.v1.string_split)
//   StringSplitV2  Python's str.split: at the whole separator, or at runs of
//                  whitespace when it is empty; at most maxsplit splits
//                  (tf.strings.split)
//
// OpDefs are TensorFlow's; the error texts follow TensorFlow's kernels.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"

namespace dflow {
namespace {

// Writes the tokens of every input string as a 2-D SparseTensor.
absl::Status EmitTokens(OpKernelContext* ctx,
                        const std::vector<std::vector<absl::string_view>>& rows) {
  int64_t total = 0, longest = 0;
  for (const auto& r : rows) {
    total += static_cast<int64_t>(r.size());
    longest = std::max<int64_t>(longest, r.size());
  }
  Tensor* indices = ctx->allocate_output_for_overwrite(0, TensorShape({total, 2}));
  Tensor* values = ctx->allocate_output(1, TensorShape({total}));
  Tensor* shape = ctx->allocate_output_for_overwrite(2, TensorShape({2}));
  int64_t* idx = indices->flat<int64_t>().data();
  auto out = values->flat<std::string>();
  int64_t k = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    for (size_t t = 0; t < rows[b].size(); ++t, ++k) {
      *idx++ = static_cast<int64_t>(b);
      *idx++ = static_cast<int64_t>(t);
      out[k].assign(rows[b][t].data(), rows[b][t].size());
    }
  }
  shape->flat<int64_t>()[0] = static_cast<int64_t>(rows.size());
  shape->flat<int64_t>()[1] = longest;
  return absl::OkStatus();
}

absl::Status CheckInputs(OpKernelContext* ctx, absl::string_view sep_name) {
  if (ctx->input(0).dims() != 1) {
    return ctx->InvalidArgument("input must be a vector, got shape: ",
                                ctx->input(0).shape().DebugString());
  }
  if (ctx->input(1).dims() != 0) {
    return ctx->InvalidArgument(
        sep_name, " must be a scalar, got shape: ", ctx->input(1).shape().DebugString());
  }
  return absl::OkStatus();
}

// Tokens of `s` split at any byte of `delims` (at every byte when empty).
std::vector<absl::string_view> SplitAtAnyOf(absl::string_view s, absl::string_view delims,
                                            bool skip_empty) {
  std::vector<absl::string_view> tokens;
  if (s.empty()) return tokens;  // no tokens, even with skip_empty false
  if (delims.empty()) {
    for (size_t i = 0; i < s.size(); ++i) tokens.push_back(s.substr(i, 1));
    return tokens;
  }
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && delims.find(s[i]) == absl::string_view::npos) continue;
    if (!skip_empty || i > start) tokens.push_back(s.substr(start, i - start));
    start = i + 1;
  }
  return tokens;
}

class StringSplitOp : public OpKernel {
 public:
  explicit StringSplitOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("skip_empty", &skip_empty_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckInputs(ctx, "delimiter"));
    auto in = ctx->input(0).flat<std::string>();
    const std::string& delims = ctx->input(1).scalar<std::string>();
    std::vector<std::vector<absl::string_view>> rows;
    rows.reserve(in.size());
    for (const std::string& s : in) rows.push_back(SplitAtAnyOf(s, delims, skip_empty_));
    return EmitTokens(ctx, rows);
  }

 private:
  bool skip_empty_ = true;
};

// Python's s.split(sep, maxsplit): sep non-empty.
std::vector<absl::string_view> SplitAtSeparator(absl::string_view s, absl::string_view sep,
                                                int64_t maxsplit) {
  std::vector<absl::string_view> tokens;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(tokens.size()) < maxsplit) {
    const size_t at = s.find(sep, start);
    if (at == absl::string_view::npos) break;
    tokens.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  tokens.push_back(s.substr(start));
  return tokens;
}

// Python's s.split(None, maxsplit): runs of whitespace, none at either end
// (the remainder after maxsplit splits keeps its trailing whitespace).
std::vector<absl::string_view> SplitAtWhitespace(absl::string_view s, int64_t maxsplit) {
  std::vector<absl::string_view> tokens;
  size_t i = 0;
  while (true) {
    while (i < s.size() && absl::ascii_isspace(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(tokens.size()) == maxsplit) {
      tokens.push_back(s.substr(i));
      break;
    }
    const size_t start = i;
    while (i < s.size() && !absl::ascii_isspace(s[i])) ++i;
    tokens.push_back(s.substr(start, i - start));
  }
  return tokens;
}

class StringSplitV2Op : public OpKernel {
 public:
  explicit StringSplitV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("maxsplit", &maxsplit_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckInputs(ctx, "sep"));
    auto in = ctx->input(0).flat<std::string>();
    const std::string& sep = ctx->input(1).scalar<std::string>();
    std::vector<std::vector<absl::string_view>> rows;
    rows.reserve(in.size());
    for (const std::string& s : in) {
      rows.push_back(sep.empty() ? SplitAtWhitespace(s, maxsplit_)
                                 : SplitAtSeparator(s, sep, maxsplit_));
    }
    return EmitTokens(ctx, rows);
  }

 private:
  int64_t maxsplit_ = -1;
};

// indices [?, 2], values [?], shape [2]; input a vector, the separator a scalar.
absl::Status StringSplitShape(InferenceContext* c) {
  PartialShape unused;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &unused));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
  c->set_output(0, PartialShape({kUnknownDim, 2}));
  c->set_output(1, PartialShape({kUnknownDim}));
  c->set_output(2, PartialShape({2}));
  return absl::OkStatus();
}

REGISTER_OP("StringSplit")
    .Input("input: string")
    .Input("delimiter: string")
    .Output("indices: int64")
    .Output("values: string")
    .Output("shape: int64")
    .Attr("skip_empty: bool = true")
    .SetShapeFn(StringSplitShape);
REGISTER_KERNEL(KernelDefBuilder("StringSplit").Device(kDeviceCPU), StringSplitOp);
REGISTER_NO_GRADIENT("StringSplit");

REGISTER_OP("StringSplitV2")
    .Input("input: string")
    .Input("sep: string")
    .Output("indices: int64")
    .Output("values: string")
    .Output("shape: int64")
    .Attr("maxsplit: int = -1")
    .SetShapeFn(StringSplitShape);
REGISTER_KERNEL(KernelDefBuilder("StringSplitV2").Device(kDeviceCPU), StringSplitV2Op);
REGISTER_NO_GRADIENT("StringSplitV2");

}  // namespace
}  // namespace dflow
