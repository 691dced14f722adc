// Parsing ops that turn records into numbers:
//
//   DecodeRaw   the bytes of each string as a vector of out_type elements
//               (what a pipeline reading raw TFRecords maps over its records)
//
// OpDefs are TensorFlow's; the error texts follow TensorFlow's kernels.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// Output: input.shape + [n], n = each string's bytes / the element size;
// every string must have the same length, a multiple of the element size.
class DecodeRawOp : public OpKernel {
 public:
  explicit DecodeRawOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("out_type", &out_type_).IgnoreError();
    c->GetAttr("little_endian", &little_endian_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    auto in = ctx->input(0).flat<std::string>();
    const size_t width = DataTypeSize(out_type_);
    const size_t bytes = in.empty() ? 0 : in[0].size();
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].size() != bytes) {
        return ctx->InvalidArgument(
            "DecodeRaw requires input strings to all be the same size, but element ", i,
            " has size ", bytes, " != ", in[i].size());
      }
    }
    if (bytes % width != 0) {
      return ctx->InvalidArgument("Input to DecodeRaw has length ", bytes,
                                  " that is not a multiple of ", width, ", the size of ",
                                  DataTypeString(out_type_));
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < ctx->input(0).dims(); ++d) dims.push_back(ctx->input(0).dim_size(d));
    dims.push_back(static_cast<int64_t>(bytes / width));
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, out_type_, "DecodeRaw"));
    char* out = static_cast<char*>(ctx->allocate_output_for_overwrite(0, shape)->raw_data());
    for (size_t i = 0; i < in.size(); ++i) {
      std::memcpy(out + i * bytes, in[i].data(), bytes);
      if (!little_endian_) {  // dflow runs on little-endian hosts only
        for (size_t e = 0; e < bytes; e += width)
          std::reverse(out + i * bytes + e, out + i * bytes + e + width);
      }
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType out_type_ = DT_FLOAT;
  bool little_endian_ = true;
};

REGISTER_OP("DecodeRaw")
    .Input("bytes: string")
    .Output("output: out_type")
    .Attr("out_type: {float, double, int32, uint8, int64}")
    .Attr("little_endian: bool = true")
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("DecodeRaw").Device(kDeviceCPU), DecodeRawOp);
REGISTER_NO_GRADIENT("DecodeRaw");

}  // namespace
}  // namespace dflow
