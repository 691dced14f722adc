// Sliding-window geometry shared by the convolution and pooling ops:
// TensorFlow's SAME / VALID / EXPLICIT padding rules and the attrs that
// Conv2D-like and MaxPool-like ops carry.
//
//   ASSIGN_OR_RETURN(Conv2DAttrs attrs, ReadConv2DAttrs(node));
//   ASSIGN_OR_RETURN(WindowDim rows,
//                    ComputeWindow(in_rows, filter_rows, attrs.dilation_h,
//                                  attrs.stride_h, attrs.padding,
//                                  attrs.explicit_pad_before_h(), attrs.explicit_pad_after_h()));
//
// Errors carry no op prefix: callers add it (kernels with ctx->Prefix(),
// shape functions through InferenceContext::Error).
#ifndef DFLOW_OPS_CONV_UTIL_H_
#define DFLOW_OPS_CONV_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor_shape.h"
#include "dflow/proto/node_def.pb.h"

namespace dflow {

enum class Padding { kValid, kSame, kExplicit };

// "SAME", "VALID" or "EXPLICIT"; InvalidArgument naming the value otherwise.
absl::StatusOr<Padding> ParsePadding(const std::string& s);

// One spatial dimension of a sliding window.
struct WindowDim {
  int64_t out = 0;         // output size
  int64_t pad_before = 0;  // implicit zeros before the first input element
  int64_t pad_after = 0;
};

// TensorFlow's windowed output size. With SAME, out = ceil(in / stride) and
// the padding is split with the smaller half before; with VALID, out =
// ceil((in - effective_k + 1) / stride); EXPLICIT uses the given pads.
// InvalidArgument when the output size would be negative or a parameter is
// not positive.
absl::StatusOr<WindowDim> ComputeWindow(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                                        Padding padding, int64_t explicit_before = 0,
                                        int64_t explicit_after = 0);

// The attrs of Conv2D (and its gradients), validated as TensorFlow does.
struct Conv2DAttrs {
  bool nchw = false;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  Padding padding = Padding::kValid;
  // Per spatial dimension: {before, after}; zeros unless padding is EXPLICIT.
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Reads strides, dilations, padding, explicit_paddings and data_format from
// `node` (defaults applied where absent). Fails with InvalidArgument on
// malformed values and Unimplemented on strides or dilations in the batch or
// depth dimension.
absl::StatusOr<Conv2DAttrs> ReadConv2DAttrs(const tensorflow::NodeDef& node);

// The attrs of MaxPool-like and AvgPool-like ops.
struct Pool2DAttrs {
  bool nchw = false;
  // Window and stride per dimension in NHWC order (converted from NCHW).
  int64_t ksize[4] = {1, 1, 1, 1};
  int64_t stride[4] = {1, 1, 1, 1};
  Padding padding = Padding::kValid;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // True when pooling runs over depth (ksize[3] > 1) instead of space.
  bool depth_pooling() const { return ksize[3] > 1; }
};

// Reads ksize, strides, padding, explicit_paddings and data_format from
// `node`. Fails on malformed values, and with Unimplemented on pooling over
// the batch dimension or over both depth and space.
absl::StatusOr<Pool2DAttrs> ReadPool2DAttrs(const tensorflow::NodeDef& node);

// The sizes of one Conv2D (or its gradients): input [batch, in_rows,
// in_cols, in_depth], filter [filter_rows, filter_cols, filter_depth,
// out_depth], output [batch, out_rows, out_cols, out_depth]; in_depth /
// filter_depth groups.
struct ConvGeometry {
  int64_t batch, in_rows, in_cols, in_depth;
  int64_t filter_rows, filter_cols, filter_depth, out_depth;
  int64_t out_rows, out_cols;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
  int64_t pad_top, pad_left;
  int64_t groups;

  int64_t image_pixels() const { return out_rows * out_cols; }
  int64_t out_pixels() const { return batch * image_pixels(); }
  // Columns of one group's patch matrix.
  int64_t patch_size() const { return filter_rows * filter_cols * filter_depth; }
  int64_t group_out_depth() const { return out_depth / groups; }
  // A 1x1 filter over every pixel: the input already is the patch matrix.
  bool is_pointwise() const {
    return filter_rows == 1 && filter_cols == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 &&
           pad_left == 0 && groups == 1 && out_rows == in_rows && out_cols == in_cols;
  }
};

// The geometry of convolving an `input`-shaped NHWC image with a
// `filter`-shaped HWIO filter. InvalidArgument when the filter is empty, the
// depths do not divide into groups, the filter is too large for one BLAS
// product (a patch or out_depth over INT_MAX), or a window does not fit.
// REQUIRES: input and filter of rank 4.
absl::StatusOr<ConvGeometry> MakeConvGeometry(const Conv2DAttrs& attrs, const TensorShape& input,
                                              const TensorShape& filter);

// The kernel checks of Conv2D's gradients, one text on every device (with
// the op prefix), reading the op's three inputs. Conv2DBackpropInput: a 4-D
// filter and out_backprop, input_sizes (4 values, or 2 spatial ones) naming
// `*input_shape`; Conv2DBackpropFilter: filter_sizes (4 values) naming
// `*filter_shape`. Both: out_backprop has the shape of the forward output,
// whose geometry is returned.
absl::StatusOr<ConvGeometry> BackpropInputGeometry(const OpKernelContext& ctx,
                                                   const Conv2DAttrs& attrs,
                                                   TensorShape* input_shape);
absl::StatusOr<ConvGeometry> BackpropFilterGeometry(const OpKernelContext& ctx,
                                                    const Conv2DAttrs& attrs,
                                                    TensorShape* filter_shape);

// The sizes of one MaxPool or AvgPool (or its gradient) over NHWC images.
struct PoolGeometry {
  int64_t batch, in_rows, in_cols, depth;
  int64_t window_rows, window_cols, stride_h, stride_w;
  int64_t out_rows, out_cols;
  int64_t pad_top, pad_left;
};

// The spatial pooling geometry of an `input`-shaped NHWC image.
// InvalidArgument when a window does not fit. REQUIRES: input of rank 4.
absl::StatusOr<PoolGeometry> MakePoolGeometry(const Pool2DAttrs& attrs, const TensorShape& input);

// MaxPool's kernel checks, one text on every device (with the op prefix):
// a 4-D input, checked first; the geometry of its spatial window. A 4-D
// input under a depth window goes to DepthMaxPoolShape instead.
absl::StatusOr<PoolGeometry> MaxPoolGeometry(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                             const Tensor& input);
// MaxPool over depth: the output's shape, Unimplemented when the depth
// window does not divide the input's depth. REQUIRES: a 4-D input.
absl::StatusOr<TensorShape> DepthMaxPoolShape(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                              const Tensor& input);
// AvgPool's kernel checks on every device: a spatial window only
// (Unimplemented otherwise, as TensorFlow), then MaxPoolGeometry's.
absl::StatusOr<PoolGeometry> AvgPoolGeometry(const OpKernelContext& ctx, const Pool2DAttrs& attrs,
                                             const Tensor& input);
// AvgPoolGrad's kernel checks on every device: a spatial window;
// orig_input_shape (input 0) 4 non-negative sizes, returned in
// `*input_shape`; a 4-D grad (input 1) of the pooled shape, which TensorFlow
// does not check.
absl::StatusOr<PoolGeometry> AvgPoolGradGeometry(const OpKernelContext& ctx,
                                                 const Pool2DAttrs& attrs,
                                                 TensorShape* input_shape);
// MaxPoolGrad's kernel checks on every device: no depth window; 4-D
// orig_input `x`, orig_output `y` and `grad`, the last two of the pooled
// shape; the geometry.
absl::StatusOr<PoolGeometry> MaxPoolGradGeometry(const OpKernelContext& ctx,
                                                 const Pool2DAttrs& attrs, const Tensor& x,
                                                 const Tensor& y, const Tensor& grad);

// BiasAdd's and BiasAddGrad's data_format: true for "NCHW", false for "NHWC"
// (the default); InvalidArgument naming any other value.
absl::StatusOr<bool> ReadBiasNchw(const tensorflow::NodeDef& node);

// The dimension of a rank-`rank` value that the bias runs along: 1 for NCHW
// values of rank >= 3, else the last.
int BiasChannelDim(bool nchw, int rank);

// BiasAdd's kernel check, one text on every device (with the op prefix):
// `value` of rank >= 2 and a 1-D `bias` as long as its channel dimension,
// which is returned.
absl::StatusOr<int> CheckBiasAddShapes(const OpKernelContext& ctx, bool nchw,
                                       const TensorShape& value, const TensorShape& bias);

// For kernel constructors: the value of `attrs`, or A() after recording its
// error on `c` with the "[Op 'node'] " prefix.
template <typename A>
A AttrsOrRecordError(OpKernelConstruction* c, absl::StatusOr<A> attrs) {
  if (attrs.ok()) return *std::move(attrs);
  c->SetStatus(absl::Status(
      attrs.status().code(),
      absl::StrCat("[", c->def().op(), " '", c->def().name(), "'] ", attrs.status().message())));
  return A();
}

// "[1,2,3]" for error messages.
std::string DimsString(const std::vector<int64_t>& dims);

}  // namespace dflow

#endif  // DFLOW_OPS_CONV_UTIL_H_
