#include "dflow/ops/conv_util.h"

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// Reads an optional attr, leaving `value` at its default when absent.
template <typename T>
absl::Status GetOptionalAttr(const tensorflow::NodeDef& node, const std::string& name, T* value) {
  if (!HasNodeAttr(node, name)) return absl::OkStatus();
  return GetNodeAttr(node, name, value);
}

absl::StatusOr<bool> ReadIsNchw(const tensorflow::NodeDef& node) {
  std::string format = "NHWC";
  RETURN_IF_ERROR(GetOptionalAttr(node, "data_format", &format));
  if (format == "NHWC") return false;
  if (format == "NCHW") return true;
  return absl::InvalidArgumentError(absl::StrCat("unsupported data_format '", format, "'"));
}

// Permutes a 4-vector given in the node's data format into NHWC order.
void ToNhwc(bool nchw, const std::vector<int64_t>& v, int64_t out[4]) {
  if (nchw) {
    out[0] = v[0], out[1] = v[2], out[2] = v[3], out[3] = v[1];
  } else {
    for (int i = 0; i < 4; ++i) out[i] = v[i];
  }
}

// Reads padding and explicit_paddings; the pads land in NHWC order in `pads`
// (4 pairs: batch, rows, cols, depth).
absl::Status ReadPadding(const tensorflow::NodeDef& node, bool nchw, Padding* padding,
                         int64_t pads[8]) {
  std::string padding_str;
  RETURN_IF_ERROR(GetNodeAttr(node, "padding", &padding_str));
  ASSIGN_OR_RETURN(*padding, ParsePadding(padding_str));
  std::vector<int64_t> explicit_paddings;
  RETURN_IF_ERROR(GetOptionalAttr(node, "explicit_paddings", &explicit_paddings));
  for (int i = 0; i < 8; ++i) pads[i] = 0;
  if (*padding != Padding::kExplicit) {
    if (!explicit_paddings.empty()) {
      return absl::InvalidArgumentError(
          "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT");
    }
    return absl::OkStatus();
  }
  if (explicit_paddings.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "explicit_paddings attribute must contain 8 values, but got: ", explicit_paddings.size()));
  }
  for (int64_t p : explicit_paddings) {
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("All elements of explicit_paddings must be nonnegative, got ",
                       DimsString(explicit_paddings)));
    }
  }
  // Pairs in data-format order -> NHWC order.
  const int src_dim[4] = {0, nchw ? 2 : 1, nchw ? 3 : 2, nchw ? 1 : 3};
  for (int d = 0; d < 4; ++d) {
    pads[2 * d] = explicit_paddings[2 * src_dim[d]];
    pads[2 * d + 1] = explicit_paddings[2 * src_dim[d] + 1];
  }
  if (pads[0] != 0 || pads[1] != 0 || pads[6] != 0 || pads[7] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Nonzero explicit padding in the batch or depth dimensions is not supported: ",
                     DimsString(explicit_paddings)));
  }
  return absl::OkStatus();
}

absl::Status ReadFourInts(const tensorflow::NodeDef& node, const std::string& name,
                          const std::string& what, std::vector<int64_t>* v) {
  RETURN_IF_ERROR(GetNodeAttr(node, name, v));
  if (v->size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " field must specify 4 dimensions, got ", name, "=", DimsString(*v)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<Padding> ParsePadding(const std::string& s) {
  if (s == "VALID") return Padding::kValid;
  if (s == "SAME") return Padding::kSame;
  if (s == "EXPLICIT") return Padding::kExplicit;
  return absl::InvalidArgumentError(
      absl::StrCat("padding must be SAME, VALID or EXPLICIT, got '", s, "'"));
}

absl::StatusOr<ConvGeometry> MakeConvGeometry(const Conv2DAttrs& attrs, const TensorShape& input,
                                              const TensorShape& filter) {
  if (filter.num_elements() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter must not have zero elements, got filter ", filter.DebugString()));
  }
  ConvGeometry g;
  g.batch = input.dim_size(0), g.in_rows = input.dim_size(1);
  g.in_cols = input.dim_size(2), g.in_depth = input.dim_size(3);
  g.filter_rows = filter.dim_size(0), g.filter_cols = filter.dim_size(1);
  g.filter_depth = filter.dim_size(2), g.out_depth = filter.dim_size(3);
  if (g.in_depth % g.filter_depth != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input depth must be evenly divisible by filter depth: ", g.in_depth, " vs ",
        g.filter_depth, " (input ", input.DebugString(), ", filter ", filter.DebugString(), ")"));
  }
  g.groups = g.in_depth / g.filter_depth;
  if (g.out_depth % g.groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("output depth must be evenly divisible by number of groups: ", g.out_depth,
                     " vs ", g.groups));
  }
  // cblas_?gemm takes each dimension and leading dimension as an int; the
  // patch size and out_depth reach it only as such (OpenBLAS computes the
  // offsets in 64 bits), so INT_MAX is the bound.
  if (g.patch_size() > INT_MAX || g.out_depth > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter too large for one matrix product: ", filter.DebugString()));
  }
  g.stride_h = attrs.stride_h, g.stride_w = attrs.stride_w;
  g.dilation_h = attrs.dilation_h, g.dilation_w = attrs.dilation_w;
  absl::StatusOr<WindowDim> rows = ComputeWindow(g.in_rows, g.filter_rows, g.dilation_h, g.stride_h,
                                                 attrs.padding, attrs.pad_top, attrs.pad_bottom);
  if (!rows.ok()) return absl::InvalidArgumentError(rows.status().message());
  absl::StatusOr<WindowDim> cols = ComputeWindow(g.in_cols, g.filter_cols, g.dilation_w, g.stride_w,
                                                 attrs.padding, attrs.pad_left, attrs.pad_right);
  if (!cols.ok()) return absl::InvalidArgumentError(cols.status().message());
  g.out_rows = rows->out, g.pad_top = rows->pad_before;
  g.out_cols = cols->out, g.pad_left = cols->pad_before;
  return g;
}

absl::StatusOr<PoolGeometry> MakePoolGeometry(const Pool2DAttrs& attrs, const TensorShape& input) {
  PoolGeometry g;
  g.batch = input.dim_size(0), g.in_rows = input.dim_size(1);
  g.in_cols = input.dim_size(2), g.depth = input.dim_size(3);
  g.window_rows = attrs.ksize[1], g.window_cols = attrs.ksize[2];
  g.stride_h = attrs.stride[1], g.stride_w = attrs.stride[2];
  absl::StatusOr<WindowDim> rows = ComputeWindow(g.in_rows, g.window_rows, 1, g.stride_h,
                                                 attrs.padding, attrs.pad_top, attrs.pad_bottom);
  if (!rows.ok()) return absl::InvalidArgumentError(rows.status().message());
  absl::StatusOr<WindowDim> cols = ComputeWindow(g.in_cols, g.window_cols, 1, g.stride_w,
                                                 attrs.padding, attrs.pad_left, attrs.pad_right);
  if (!cols.ok()) return absl::InvalidArgumentError(cols.status().message());
  g.out_rows = rows->out, g.pad_top = rows->pad_before;
  g.out_cols = cols->out, g.pad_left = cols->pad_before;
  return g;
}

namespace {

// The pooling geometry of an `input`-shaped image (named `input_name` in
// errors) whose pooled tensors `pooled` ({name, tensor}) must have the
// pooled shape: InvalidArgument naming the first that has not.
absl::StatusOr<PoolGeometry> PooledGeometry(
    const OpKernelContext& ctx, const Pool2DAttrs& attrs, const char* input_name,
    const TensorShape& input, std::initializer_list<std::pair<const char*, const Tensor*>> pooled) {
  absl::StatusOr<PoolGeometry> g = MakePoolGeometry(attrs, input);
  if (!g.ok()) return WithPrefix(g.status(), ctx.Prefix());
  const TensorShape expected({g->batch, g->out_rows, g->out_cols, g->depth});
  for (auto [what, t] : pooled) {
    if (t->shape() != expected) {
      return ctx.InvalidArgument("Expected ", what, " shape to be ", expected.DebugString(),
                                 ", but got ", t->shape().DebugString(), " (", input_name, " ",
                                 input.DebugString(), ")");
    }
  }
  return g;
}

}  // namespace

absl::StatusOr<PoolGeometry> MaxPoolGeometry(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                             const Tensor& input) {
  if (input.dims() != 4) {
    return ctx.InvalidArgument("input must be 4-dimensional (NHWC), got ",
                               input.shape().DebugString());
  }
  absl::StatusOr<PoolGeometry> g = MakePoolGeometry(attrs, input.shape());
  if (!g.ok()) return WithPrefix(g.status(), ctx.Prefix());
  return g;
}

absl::StatusOr<TensorShape> DepthMaxPoolShape(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                              const Tensor& input) {
  const int64_t k = attrs.ksize[3], depth = input.dim_size(3);
  if (depth % k != 0) {
    return absl::UnimplementedError(
        absl::StrCat(ctx.Prefix(),
                     "Depthwise max pooling requires the depth window to evenly divide the "
                     "input depth: window ",
                     k, ", input ", input.shape().DebugString()));
  }
  TensorShape shape = input.shape();
  shape.set_dim(3, depth / k);
  return shape;
}

absl::StatusOr<PoolGeometry> MaxPoolGradGeometry(const OpKernelContext& ctx,
                                                 const Pool2DAttrs& attrs, const Tensor& x,
                                                 const Tensor& y, const Tensor& grad) {
  if (attrs.depth_pooling()) {
    return absl::UnimplementedError(
        absl::StrCat(ctx.Prefix(), "MaxPoolingGrad is not yet supported on the depth dimension."));
  }
  for (auto [what, t] : {std::pair<const char*, const Tensor*>{"orig_input", &x},
                         {"orig_output", &y},
                         {"grad", &grad}}) {
    if (t->dims() != 4) {
      return ctx.InvalidArgument(what, " must be 4-dimensional, got ", t->shape().DebugString());
    }
  }
  return PooledGeometry(ctx, attrs, "orig_input", x.shape(),
                        {{"orig_output", &y}, {"grad", &grad}});
}

absl::StatusOr<WindowDim> ComputeWindow(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                                        Padding padding, int64_t explicit_before,
                                        int64_t explicit_after) {
  if (stride <= 0 || dilation <= 0 || k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("window size, stride and dilation must be positive, got window=", k,
                     " stride=", stride, " dilation=", dilation));
  }
  const int64_t effective_k = (k - 1) * dilation + 1;
  WindowDim w;
  switch (padding) {
    case Padding::kValid:
      w.out = (in - effective_k + stride) / stride;
      break;
    case Padding::kSame: {
      w.out = (in + stride - 1) / stride;
      const int64_t needed = std::max<int64_t>(0, (w.out - 1) * stride + effective_k - in);
      w.pad_before = needed / 2;
      w.pad_after = needed - w.pad_before;
      break;
    }
    case Padding::kExplicit:
      w.out = (in + explicit_before + explicit_after - effective_k + stride) / stride;
      w.pad_before = explicit_before;
      w.pad_after = explicit_after;
      break;
  }
  if (w.out < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Computed output size would be negative: ", w.out, " [input_size: ", in,
                     ", effective_filter_size: ", effective_k, ", stride: ", stride, "]"));
  }
  return w;
}

absl::StatusOr<Conv2DAttrs> ReadConv2DAttrs(const tensorflow::NodeDef& node) {
  Conv2DAttrs a;
  ASSIGN_OR_RETURN(a.nchw, ReadIsNchw(node));
  std::vector<int64_t> strides, dilations = {1, 1, 1, 1};
  RETURN_IF_ERROR(ReadFourInts(node, "strides", "Sliding window strides", &strides));
  if (HasNodeAttr(node, "dilations")) {
    RETURN_IF_ERROR(ReadFourInts(node, "dilations", "Sliding window dilations", &dilations));
  }
  int64_t s[4], d[4];
  ToNhwc(a.nchw, strides, s);
  ToNhwc(a.nchw, dilations, d);
  if (s[0] != 1 || s[3] != 1) {
    return absl::UnimplementedError(
        absl::StrCat("Current implementation does not yet support strides in the batch and depth "
                     "dimensions, got strides=",
                     DimsString(strides)));
  }
  if (d[0] != 1 || d[3] != 1) {
    return absl::UnimplementedError(
        absl::StrCat("Current implementation does not yet support dilations in the batch and depth "
                     "dimensions, got dilations=",
                     DimsString(dilations)));
  }
  if (s[1] <= 0 || s[2] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Row and column strides should be larger than 0, got strides=", DimsString(strides)));
  }
  if (d[1] <= 0 || d[2] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dilated rates should be larger than 0, got dilations=", DimsString(dilations)));
  }
  a.stride_h = s[1], a.stride_w = s[2], a.dilation_h = d[1], a.dilation_w = d[2];
  int64_t pads[8];
  RETURN_IF_ERROR(ReadPadding(node, a.nchw, &a.padding, pads));
  a.pad_top = pads[2], a.pad_bottom = pads[3], a.pad_left = pads[4], a.pad_right = pads[5];
  return a;
}

absl::StatusOr<Pool2DAttrs> ReadPool2DAttrs(const tensorflow::NodeDef& node) {
  Pool2DAttrs a;
  ASSIGN_OR_RETURN(a.nchw, ReadIsNchw(node));
  std::vector<int64_t> ksize, strides;
  RETURN_IF_ERROR(ReadFourInts(node, "ksize", "Sliding window ksize", &ksize));
  RETURN_IF_ERROR(ReadFourInts(node, "strides", "Sliding window stride", &strides));
  ToNhwc(a.nchw, ksize, a.ksize);
  ToNhwc(a.nchw, strides, a.stride);
  for (int i = 0; i < 4; ++i) {
    if (a.ksize[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sliding window ksize must be positive, got ksize=", DimsString(ksize)));
    }
    if (a.stride[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Stride must be > 0, got strides=", DimsString(strides)));
    }
  }
  if (a.ksize[0] != 1 || a.stride[0] != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "Pooling is not yet supported on the batch dimension, got ksize=", DimsString(ksize),
        " strides=", DimsString(strides)));
  }
  if (a.depth_pooling() && (a.ksize[1] != 1 || a.ksize[2] != 1)) {
    return absl::UnimplementedError(
        absl::StrCat("MaxPooling supports exactly one of pooling across depth or pooling across "
                     "width/height, got ksize=",
                     DimsString(ksize)));
  }
  if (a.depth_pooling() && a.ksize[3] != a.stride[3]) {
    return absl::UnimplementedError(absl::StrCat(
        "Depthwise max pooling requires the depth window to equal the depth stride, got ksize=",
        DimsString(ksize), " strides=", DimsString(strides)));
  }
  if (a.depth_pooling() ? (a.stride[1] != 1 || a.stride[2] != 1) : a.stride[3] != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "MaxPooling strides must follow the window: across depth or across width/height, got "
        "ksize=",
        DimsString(ksize), " strides=", DimsString(strides)));
  }
  int64_t pads[8];
  RETURN_IF_ERROR(ReadPadding(node, a.nchw, &a.padding, pads));
  a.pad_top = pads[2], a.pad_bottom = pads[3], a.pad_left = pads[4], a.pad_right = pads[5];
  return a;
}

absl::StatusOr<bool> ReadBiasNchw(const tensorflow::NodeDef& node) {
  std::string format = "NHWC";
  RETURN_IF_ERROR(GetOptionalAttr(node, "data_format", &format));
  if (format != "NHWC" && format != "NCHW") {
    return absl::InvalidArgumentError(absl::StrCat("invalid data_format '", format, "'"));
  }
  return format == "NCHW";
}

int BiasChannelDim(bool nchw, int rank) { return nchw && rank >= 3 ? 1 : rank - 1; }

absl::StatusOr<int> CheckBiasAddShapes(const OpKernelContext& ctx, bool nchw,
                                       const TensorShape& value, const TensorShape& bias) {
  if (value.dims() < 2) {
    return ctx.InvalidArgument("Input tensor must be at least 2D: ", value.DebugString());
  }
  if (bias.dims() != 1) return ctx.InvalidArgument("Biases must be 1D: ", bias.DebugString());
  const int cd = BiasChannelDim(nchw, value.dims());
  if (bias.dim_size(0) != value.dim_size(cd)) {
    return ctx.InvalidArgument("Must provide as many biases as dimension ", cd,
                               " of the input tensor (", nchw ? "NCHW" : "NHWC", "): bias ",
                               bias.DebugString(), " vs. value ", value.DebugString());
  }
  return cd;
}

namespace {

// InvalidArgument unless `s` has rank 4.
absl::Status CheckRank4(const OpKernelContext& ctx, const char* what, const TensorShape& s) {
  if (s.dims() == 4) return absl::OkStatus();
  return ctx.InvalidArgument(what, " must be 4-dimensional, got ", s.DebugString());
}

absl::StatusOr<ConvGeometry> MakeBackpropGeometry(const OpKernelContext& ctx,
                                                  const Conv2DAttrs& attrs,
                                                  const TensorShape& input,
                                                  const TensorShape& filter,
                                                  const TensorShape& out_backprop) {
  RETURN_IF_ERROR(CheckRank4(ctx, "input", input));
  RETURN_IF_ERROR(CheckRank4(ctx, "filter", filter));
  RETURN_IF_ERROR(CheckRank4(ctx, "out_backprop", out_backprop));
  absl::StatusOr<ConvGeometry> made = MakeConvGeometry(attrs, input, filter);
  if (!made.ok()) return WithPrefix(made.status(), ctx.Prefix());
  const ConvGeometry& g = *made;
  const TensorShape expected({g.batch, g.out_rows, g.out_cols, g.out_depth});
  if (out_backprop != expected) {
    return ctx.InvalidArgument("out_backprop shape ", out_backprop.DebugString(),
                               " does not match the convolution's output shape ",
                               expected.DebugString(), " (input ", input.DebugString(), ", filter ",
                               filter.DebugString(), ")");
  }
  return g;
}

absl::StatusOr<TensorShape> ShapeFromSizes(const OpKernelContext& ctx, const char* what,
                                           const Tensor& sizes, bool allow_two, int64_t batch,
                                           int64_t depth) {
  const int64_t n = sizes.dims() == 1 ? sizes.dim_size(0) : -1;
  if (n != 4 && !(allow_two && n == 2)) {
    return ctx.InvalidArgument(what, " must be a 1-D tensor of 4", allow_two ? " or 2" : "",
                               " values, got shape ", sizes.shape().DebugString());
  }
  auto v = sizes.flat<int32_t>();
  std::vector<int64_t> dims(v.begin(), v.end());
  if (n == 2) dims = {batch, dims[0], dims[1], depth};
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok() || std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
    return ctx.InvalidArgument(what, " must hold non-negative sizes, got ", DimsString(dims));
  }
  return *shape;
}

// Unimplemented, as TensorFlow, for an AvgPool window over depth.
absl::Status RequireSpatialWindow(const OpKernelContext& ctx, const Pool2DAttrs& attrs) {
  if (!attrs.depth_pooling()) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(ctx.Prefix(), "Non-spatial pooling is not yet supported: ksize [1,",
                   attrs.ksize[1], ",", attrs.ksize[2], ",", attrs.ksize[3], "] (NHWC)"));
}
}  // namespace

absl::StatusOr<ConvGeometry> BackpropInputGeometry(const OpKernelContext& ctx,
                                                   const Conv2DAttrs& attrs,
                                                   TensorShape* input_shape) {
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  RETURN_IF_ERROR(CheckRank4(ctx, "filter", filter.shape()));
  RETURN_IF_ERROR(CheckRank4(ctx, "out_backprop", dy.shape()));
  ASSIGN_OR_RETURN(*input_shape, ShapeFromSizes(ctx, "input_sizes", ctx.input(0),
                                                /*allow_two=*/true, dy.dim_size(0),
                                                filter.dim_size(2)));
  return MakeBackpropGeometry(ctx, attrs, *input_shape, filter.shape(), dy.shape());
}

absl::StatusOr<ConvGeometry> BackpropFilterGeometry(const OpKernelContext& ctx,
                                                    const Conv2DAttrs& attrs,
                                                    TensorShape* filter_shape) {
  ASSIGN_OR_RETURN(*filter_shape, ShapeFromSizes(ctx, "filter_sizes", ctx.input(1),
                                                 /*allow_two=*/false, 0, 0));
  return MakeBackpropGeometry(ctx, attrs, ctx.input(0).shape(), *filter_shape,
                              ctx.input(2).shape());
}

absl::StatusOr<PoolGeometry> AvgPoolGeometry(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                             const Tensor& input) {
  RETURN_IF_ERROR(RequireSpatialWindow(ctx, attrs));
  return MaxPoolGeometry(ctx, attrs, input);
}

absl::StatusOr<PoolGeometry> AvgPoolGradGeometry(const OpKernelContext& ctx,
                                                 const Pool2DAttrs& attrs,
                                                 TensorShape* input_shape) {
  RETURN_IF_ERROR(RequireSpatialWindow(ctx, attrs));
  const Tensor& grad = ctx.input(1);
  ASSIGN_OR_RETURN(*input_shape, ShapeFromSizes(ctx, "orig_input_shape", ctx.input(0),
                                                /*allow_two=*/false, 0, 0));
  RETURN_IF_ERROR(CheckRank4(ctx, "grad", grad.shape()));
  return PooledGeometry(ctx, attrs, "orig_input_shape", *input_shape, {{"grad", &grad}});
}

}  // namespace dflow
