// The checkpoint ops of TensorFlow's Saver, over TensorFlow's tensor-bundle
// format (dflow/io/tensor_bundle.h):
//
//   SaveV2              writes tensors (whole, or slices of partitioned ones)
//                       to one bundle at `prefix`
//   RestoreV2           reads tensors (or slices of them) back
//   MergeV2Checkpoints  merges the bundles each device of a sharded save wrote
//
// A `shape_and_slices` entry is "" for a whole tensor, or "<full dims>
// <slice>" ("10 4 0,5:-": rows 0-4 of a [10,4] tensor). OpDefs and error
// texts follow TensorFlow's.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/io/tensor_bundle.h"

namespace dflow {
namespace {

// `s` with the kernel's "[Op 'node']" in front.
absl::Status InKernel(OpKernelContext* ctx, const absl::Status& s) {
  std::string prefix = ctx->Prefix();
  while (!prefix.empty() && prefix.back() == ' ') prefix.pop_back();
  return WithContext(s, prefix);
}

// Checks that input `i` is a scalar or a vector of `n` elements (n < 0: any).
absl::Status CheckStrings(OpKernelContext* ctx, int i, const char* name, int64_t n) {
  const Tensor& t = ctx->input(i);
  const bool ok = n < 0 ? t.dims() == 1 : (n == 0 ? t.dims() == 0 : t.dims() == 1 && t.dim_size(0) == n);
  if (!ok) {
    return ctx->InvalidArgument("Input ", name, " must be ",
                                n == 0 ? "a scalar" : absl::StrCat("a vector of ", n, " names"),
                                ", got shape ", t.shape().DebugString());
  }
  return absl::OkStatus();
}

// The inputs SaveV2 and RestoreV2 share: the checkpoint's prefix, then a
// name and a shape_and_slice for each of `n` tensors.
struct BundleArgs {
  std::string prefix;
  absl::Span<const std::string> names;
  absl::Span<const std::string> slices;
};

absl::StatusOr<BundleArgs> GetBundleArgs(OpKernelContext* ctx, int n) {
  RETURN_IF_ERROR(CheckStrings(ctx, 0, "prefix", 0));
  RETURN_IF_ERROR(CheckStrings(ctx, 1, "tensor_names", n));
  RETURN_IF_ERROR(CheckStrings(ctx, 2, "shape_and_slices", n));
  return BundleArgs{ctx->input(0).scalar<std::string>(), ctx->input(1).flat<std::string>(),
                    ctx->input(2).flat<std::string>()};
}

class SaveV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() - 3;
    ASSIGN_OR_RETURN(BundleArgs args, GetBundleArgs(ctx, n));
    const auto& [prefix, names, slices] = args;
    absl::StatusOr<std::unique_ptr<io::BundleWriter>> writer = io::BundleWriter::Create(prefix);
    if (!writer.ok()) return InKernel(ctx, writer.status());
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(3 + i);
      absl::StatusOr<std::optional<io::ShapeAndSlice>> spec = io::ParseShapeAndSlice(slices[i]);
      absl::Status s = spec.status();
      if (s.ok() && !spec->has_value()) s = (*writer)->Add(names[i], t);
      if (s.ok() && spec->has_value()) {
        s = (*writer)->AddSlice(names[i], (**spec).full_shape, (**spec).slice, t);
      }
      if (!s.ok()) return InKernel(ctx, WithContext(s, absl::StrCat("tensor '", names[i], "'")));
    }
    return InKernel(ctx, (*writer)->Finish());
  }
};

class RestoreV2Op : public OpKernel {
 public:
  explicit RestoreV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtypes", &dtypes_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = static_cast<int>(dtypes_.size());
    ASSIGN_OR_RETURN(BundleArgs args, GetBundleArgs(ctx, n));
    const auto& [prefix, names, slices] = args;
    absl::StatusOr<std::unique_ptr<io::BundleReader>> reader = io::BundleReader::Open(prefix);
    if (!reader.ok()) {
      return InKernel(ctx, WithContext(reader.status(),
                                       absl::StrCat("cannot open checkpoint ", prefix)));
    }
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<Tensor> t = Restore(reader->get(), names[i], slices[i], dtypes_[i]);
      if (!t.ok()) return InKernel(ctx, t.status());
      ctx->set_output(i, *std::move(t));
    }
    return absl::OkStatus();
  }

 private:
  static absl::StatusOr<Tensor> Restore(io::BundleReader* reader, const std::string& name,
                                        const std::string& slice_text, DataType dtype) {
    ASSIGN_OR_RETURN(tensorflow::BundleEntryProto entry, reader->Entry(name));
    if (entry.dtype() != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor_name = ", name, "; expected dtype ", DataTypeString(dtype),
          " does not equal original dtype ", DataTypeString(entry.dtype())));
    }
    ASSIGN_OR_RETURN(std::optional<io::ShapeAndSlice> spec, io::ParseShapeAndSlice(slice_text));
    if (!spec) return reader->Read(name);
    const absl::StatusOr<TensorShape> stored = TensorShape::FromProto(entry.shape());
    if (!stored.ok() || *stored != spec->full_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor_name = ", name, "; shape in shape_and_slice spec ",
          spec->full_shape.DebugString(), " does not match the shape stored in checkpoint: ",
          stored.ok() ? stored->DebugString() : "(invalid)"));
    }
    if (spec->slice.Covers(spec->full_shape)) return reader->Read(name);  // No copy.
    return reader->ReadSlice(name, spec->slice);
  }

  std::vector<DataType> dtypes_;
};

class MergeV2CheckpointsOp : public OpKernel {
 public:
  explicit MergeV2CheckpointsOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("delete_old_dirs", &delete_old_dirs_).IgnoreError();
    c->GetAttr("allow_missing_files", &allow_missing_files_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckStrings(ctx, 0, "checkpoint_prefixes", -1));
    RETURN_IF_ERROR(CheckStrings(ctx, 1, "destination_prefix", 0));
    auto in = ctx->input(0).flat<std::string>();
    const std::vector<std::string> prefixes(in.begin(), in.end());
    return InKernel(ctx, io::MergeBundles(prefixes, ctx->input(1).scalar<std::string>(),
                                          delete_old_dirs_, allow_missing_files_));
  }

 private:
  bool delete_old_dirs_ = true;
  bool allow_missing_files_ = false;
};

absl::Status NoOutputs(InferenceContext*) { return absl::OkStatus(); }

absl::Status RestoreV2Shape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape::Unknown());
  return absl::OkStatus();
}

REGISTER_OP("SaveV2")
    .Input("prefix: string")
    .Input("tensor_names: string")
    .Input("shape_and_slices: string")
    .Input("tensors: dtypes")
    .Attr("dtypes: list(type) >= 1")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("SaveV2").Device(kDeviceCPU), SaveV2Op);
REGISTER_NO_GRADIENT("SaveV2");

REGISTER_OP("RestoreV2")
    .Input("prefix: string")
    .Input("tensor_names: string")
    .Input("shape_and_slices: string")
    .Output("tensors: dtypes")
    .Attr("dtypes: list(type) >= 1")
    .SetIsStateful()
    .SetShapeFn(RestoreV2Shape);
REGISTER_KERNEL(KernelDefBuilder("RestoreV2").Device(kDeviceCPU), RestoreV2Op);
REGISTER_NO_GRADIENT("RestoreV2");

REGISTER_OP("MergeV2Checkpoints")
    .Input("checkpoint_prefixes: string")
    .Input("destination_prefix: string")
    .Attr("delete_old_dirs: bool = true")
    .Attr("allow_missing_files: bool = false")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("MergeV2Checkpoints").Device(kDeviceCPU),
                MergeV2CheckpointsOp);
REGISTER_NO_GRADIENT("MergeV2Checkpoints");

}  // namespace
}  // namespace dflow
