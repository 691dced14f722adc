// Summary ops: each returns a serialized tensorflow.Summary (a string
// scalar) that TensorFlow's FileWriter stores in an event file as it is.
//
//   ScalarSummary     one simple_value per tag (tags and values of one shape)
//   HistogramSummary  a HistogramProto of every value, in TensorFlow's
//                     buckets (below)
//   MergeSummary      the values of several summaries in one; a tag twice
//                     is an error
//   TensorSummaryV2   the tensor itself, with the caller's SummaryMetadata
//
// ImageSummary is in image_summary_op.cc (it links libpng).
// OpDefs and error texts follow TensorFlow's.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/proto/summary.pb.h"

namespace dflow {
namespace {

void SetSummaryOutput(OpKernelContext* ctx, const tensorflow::Summary& summary) {
  summary.SerializeToString(&ctx->allocate_output(0, TensorShape({}))->scalar<std::string>());
}

// --- ScalarSummary -------------------------------------------------------------------

template <typename T>
class ScalarSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tags = ctx->input(0);
    const Tensor& values = ctx->input(1);
    if (tags.shape() != values.shape()) {
      return ctx->InvalidArgument(
          "tags and values are not the same shape: ", tags.shape().DebugString(),
          " != ", values.shape().DebugString(),
          tags.dims() == 0 ? absl::StrCat(" (tag '", tags.scalar<std::string>(), "')") : "");
    }
    tensorflow::Summary summary;
    for (int64_t i = 0; i < tags.NumElements(); ++i) {
      tensorflow::Summary::Value* v = summary.add_value();
      v->set_tag(tags.flat<std::string>()[i]);
      v->set_simple_value(static_cast<float>(values.flat<T>()[i]));
    }
    SetSummaryOutput(ctx, summary);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("ScalarSummary")
    .Input("tags: string")
    .Input("values: T")
    .Output("summary: string")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(ScalarShape);
CpuKernels<ScalarSummaryOp, float, double, int32_t, int64_t, uint8_t> scalar_summary_kernels(
    "ScalarSummary");

// --- HistogramSummary ----------------------------------------------------------------

// TensorFlow's default bucket limits: 0, then +-1e-12 growing by 10% up to
// 1e20, then +-DBL_MAX. A value v lands in the first bucket whose limit is
// greater than v.
const std::vector<double>& DefaultBucketLimits() {
  static const std::vector<double>* limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    auto* all = new std::vector<double>;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all->push_back(-*it);
    all->push_back(0.0);
    all->insert(all->end(), positive.begin(), positive.end());
    return all;
  }();
  return *limits;
}

// The histogram of `values` as TensorFlow encodes it: moments, then the
// buckets with each run of empty buckets merged into one (the run's last
// limit, count 0).
void EncodeHistogram(const std::vector<double>& values, tensorflow::HistogramProto* proto) {
  const std::vector<double>& limits = DefaultBucketLimits();
  std::vector<double> counts(limits.size(), 0.0);
  double min = DBL_MAX, max = -DBL_MAX, sum = 0, sum_squares = 0;
  for (double v : values) {
    // DBL_MAX itself goes to the last bucket (TensorFlow's would index past it).
    const size_t b = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[std::min(b, counts.size() - 1)] += 1;
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    sum_squares += v * v;
  }
  proto->set_min(min);
  proto->set_max(max);
  proto->set_num(static_cast<double>(values.size()));
  proto->set_sum(sum);
  proto->set_sum_squares(sum_squares);
  for (size_t i = 0; i < counts.size();) {
    size_t j = i + 1;
    if (counts[i] <= 0) {
      while (j < counts.size() && counts[j] <= 0) ++j;
    }
    proto->add_bucket_limit(limits[j - 1]);
    proto->add_bucket(counts[j - 1]);
    i = j;
  }
}

template <typename T>
class HistogramSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tag = ctx->input(0);
    if (tag.dims() != 0) return ctx->InvalidArgument("tags must be scalar");
    const Tensor& values = ctx->input(1);
    std::vector<double> doubles(values.NumElements());
    for (int64_t i = 0; i < values.NumElements(); ++i) {
      doubles[i] = static_cast<double>(values.flat<T>()[i]);
      if (std::isnan(doubles[i])) {
        return ctx->InvalidArgument("Nan in summary histogram for: ", name());
      }
      if (std::isinf(doubles[i])) {
        return ctx->InvalidArgument("Infinity in summary histogram for: ", name());
      }
    }
    tensorflow::Summary summary;
    tensorflow::Summary::Value* v = summary.add_value();
    v->set_tag(tag.scalar<std::string>());
    EncodeHistogram(doubles, v->mutable_histo());
    SetSummaryOutput(ctx, summary);
    return absl::OkStatus();
  }
};

REGISTER_OP("HistogramSummary")
    .Input("tag: string")
    .Input("values: T")
    .Output("summary: string")
    .Attr("T: {float, double, int32, int64, uint8} = DT_FLOAT")
    .SetShapeFn(ScalarShape);
CpuKernels<HistogramSummaryOp, float, double, int32_t, int64_t, uint8_t> histogram_summary_kernels(
    "HistogramSummary");

// --- MergeSummary --------------------------------------------------------------------

class MergeSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    tensorflow::Summary merged;
    std::set<std::string> tags;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      for (const std::string& serialized : ctx->input(i).flat<std::string>()) {
        tensorflow::Summary in;
        if (!in.ParseFromString(serialized)) {
          return ctx->InvalidArgument("Could not parse one of the summary inputs");
        }
        for (const tensorflow::Summary::Value& v : in.value()) {
          if (!v.tag().empty() && !tags.insert(v.tag()).second) {
            return ctx->InvalidArgument("Duplicate tag ", v.tag(), " found in summary inputs");
          }
          *merged.add_value() = v;
        }
      }
    }
    SetSummaryOutput(ctx, merged);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("MergeSummary")
    .Input("inputs: N * string")
    .Output("summary: string")
    .Attr("N: int >= 1")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("MergeSummary").Device(kDeviceCPU), MergeSummaryOp);

// --- TensorSummaryV2 -----------------------------------------------------------------

class TensorSummaryV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tag = ctx->input(0);
    const Tensor& tensor = ctx->input(1);
    const Tensor& metadata = ctx->input(2);
    if (tag.dims() != 0) return ctx->InvalidArgument("tag must be scalar");
    if (metadata.dims() != 0) {
      return ctx->InvalidArgument("serialized_summary_metadata must be scalar, got shape ",
                                  metadata.shape().DebugString());
    }
    tensorflow::Summary summary;
    tensorflow::Summary::Value* v = summary.add_value();
    v->set_tag(tag.scalar<std::string>());
    // Strings in string_val, the rest as raw bytes, as TensorFlow writes them.
    if (tensor.dtype() == DT_STRING) {
      tensor.AsProtoField(v->mutable_tensor());
    } else {
      tensor.AsProtoTensorContent(v->mutable_tensor());
    }
    // Metadata that does not parse is kept as far as it did, as TensorFlow does.
    v->mutable_metadata()->ParseFromString(metadata.scalar<std::string>());
    SetSummaryOutput(ctx, summary);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("TensorSummaryV2")
    .Input("tag: string")
    .Input("tensor: T")
    .Input("serialized_summary_metadata: string")
    .Output("summary: string")
    .Attr("T: type")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TensorSummaryV2")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8,
                                          DT_BOOL, DT_STRING}),
                TensorSummaryV2Op);

REGISTER_NO_GRADIENT("ScalarSummary");
REGISTER_NO_GRADIENT("HistogramSummary");
REGISTER_NO_GRADIENT("MergeSummary");
REGISTER_NO_GRADIENT("TensorSummaryV2");

}  // namespace
}  // namespace dflow
