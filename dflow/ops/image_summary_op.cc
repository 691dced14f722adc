// ImageSummary: the first max_images images of a [batch, height, width,
// channels] tensor (1 grayscale, 3 RGB, 4 RGBA), each PNG-encoded (libpng)
// into a Summary.Image tagged "<tag>/image" when max_images is 1, else
// "<tag>/image/<i>", as TensorFlow's FileWriter and TensorBoard expect.
//
// uint8 pixels are stored as they are. Floating-point images are mapped to
// [0, 255] one image at a time, from the range of their finite pixels:
// non-negative images by 255 / max, others by 127 / max|v| around 128
// (truncated toward zero, as TensorFlow's cast); a pixel with a non-finite
// channel becomes `bad_color`.
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/proto/summary.pb.h"

namespace dflow {
namespace {

// --- PNG encoding --------------------------------------------------------------

// Writes `pixels` (rows of width * channels bytes) as an 8-bit PNG to *out,
// through libpng's simplified API (no longjmp). False on a libpng error.
bool WritePng(const uint8_t* pixels, int height, int width, int channels, std::string* out) {
  static const png_uint_32 kFormats[] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                         PNG_FORMAT_RGBA};
  png_image image = {};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = kFormats[channels];
  png_alloc_size_t size = 0;  // First the size, then the bytes.
  bool ok = png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr) != 0;
  if (ok) {
    out->resize(size);
    ok = png_image_write_to_memory(&image, out->data(), &size, 0, pixels, 0, nullptr) != 0;
    out->resize(size);
  }
  png_image_free(&image);
  return ok;
}

// --- pixel conversion ------------------------------------------------------------

// One image's `pixels` pixels of `channels` values, as bytes (see the top).
// Floating-point images are scaled in float, doubles too (TensorFlow's
// rounding: -0.6 in [-0.6, 0.5] maps to 1, not to 0 as in double).
template <typename T>
void ToBytes(const T* v, int64_t pixels, int channels, const uint8_t* bad_color, uint8_t* out) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    std::copy_n(v, pixels * channels, out);
  } else {
    const auto finite = [&](int64_t p) {
      return std::all_of(v + p * channels, v + (p + 1) * channels,
                         [](T x) { return std::isfinite(static_cast<float>(x)); });
    };
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t p = 0; p < pixels; ++p) {
      if (!finite(p)) continue;
      for (int c = 0; c < channels; ++c) {
        lo = std::min(lo, static_cast<float>(v[p * channels + c]));
        hi = std::max(hi, static_cast<float>(v[p * channels + c]));
      }
    }
    const float kTiny = 1e-6f;
    float scale = 0, offset = 0;
    if (lo < 0) {
      const float m = std::max(std::abs(lo), std::abs(hi));
      scale = m < kTiny ? 0.0f : 127.0f / m;
      offset = 128.0f;
    } else {
      scale = hi < kTiny ? 0.0f : 255.0f / hi;
    }
    for (int64_t p = 0; p < pixels; ++p) {
      const bool ok = finite(p);
      for (int c = 0; c < channels; ++c) {
        const float x = static_cast<float>(v[p * channels + c]) * scale + offset;
        out[p * channels + c] =
            ok ? static_cast<uint8_t>(std::clamp(x, 0.0f, 255.0f)) : bad_color[c];
      }
    }
  }
}

// --- the kernel --------------------------------------------------------------------

class ImageSummaryOp : public OpKernel {
 public:
  explicit ImageSummaryOp(OpKernelConstruction* c) : OpKernel(c) {
    if (!c->GetAttr("max_images", &max_images_).ok() ||
        !c->GetAttr("bad_color", &bad_color_).ok()) {
      return;
    }
    if (bad_color_.dtype() != DT_UINT8) {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat("[ImageSummary '", name(),
                                                           "'] bad_color must be uint8, got ",
                                                           DataTypeString(bad_color_.dtype()))));
    } else if (bad_color_.dims() != 1) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[ImageSummary '", name(), "'] bad_color must be a vector, got shape ",
                       bad_color_.shape().DebugString())));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tag = ctx->input(0);
    const Tensor& images = ctx->input(1);
    if (tag.dims() != 0) return ctx->InvalidArgument("Tags must be a scalar");
    const int64_t depth = images.dims() == 4 ? images.dim_size(3) : 0;
    if (depth != 1 && depth != 3 && depth != 4) {
      return ctx->InvalidArgument("Tensor must be 4-D with last dim 1, 3, or 4, not ",
                                  images.shape().DebugString());
    }
    const auto& dims = images.shape().dim_sizes();
    if (dims[1] == 0 || dims[2] == 0) {
      return ctx->InvalidArgument("input tensor must have non-zero dims. Found: [",
                                  absl::StrJoin(dims, ", "), "].");
    }
    // PNG rows and sizes are 32-bit: TensorFlow's bound on one image.
    if (dims[1] * dims[2] * depth >= (int64_t{1} << 31) || dims[1] >= (int64_t{1} << 31) ||
        dims[2] >= (int64_t{1} << 31)) {
      return ctx->InvalidArgument("Tensor too large for summary ", images.shape().DebugString());
    }
    if (images.dtype() != DT_UINT8 && bad_color_.NumElements() < depth) {
      return ctx->InvalidArgument("expected depth <= bad_color.size, got depth = ", depth,
                                  ", bad_color.size = ", bad_color_.NumElements());
    }
    const int64_t pixels = dims[1] * dims[2];
    const int64_t count = std::min<int64_t>(dims[0], max_images_);
    const std::string& base = tag.scalar<std::string>();
    tensorflow::Summary summary;
    std::vector<uint8_t> bytes(pixels * depth);
    for (int64_t i = 0; i < count; ++i) {
      RETURN_IF_ERROR(SwitchNumeric(images.dtype(), "ImageSummary", [&](auto t) -> absl::Status {
        using T = typename decltype(t)::type;
        if constexpr (std::is_same_v<T, uint8_t> || std::is_floating_point_v<T>) {
          ToBytes(images.flat<T>().data() + i * pixels * depth, pixels, static_cast<int>(depth),
                  bad_color_.flat<uint8_t>().data(), bytes.data());
          return absl::OkStatus();
        } else {
          return ctx->InvalidArgument("unsupported dtype ", DataTypeString(images.dtype()));
        }
      }));
      tensorflow::Summary::Value* v = summary.add_value();
      v->set_tag(max_images_ == 1 ? absl::StrCat(base, "/image")
                                  : absl::StrCat(base, "/image/", i));
      tensorflow::Summary::Image* image = v->mutable_image();
      image->set_height(static_cast<int32_t>(dims[1]));
      image->set_width(static_cast<int32_t>(dims[2]));
      image->set_colorspace(static_cast<int32_t>(depth));
      if (!WritePng(bytes.data(), static_cast<int>(dims[1]), static_cast<int>(dims[2]),
                    static_cast<int>(depth), image->mutable_encoded_image_string())) {
        return absl::InternalError(absl::StrCat(ctx->Prefix(), "PNG encoding failed"));
      }
    }
    summary.SerializeToString(&ctx->allocate_output(0, TensorShape({}))->scalar<std::string>());
    return absl::OkStatus();
  }

 private:
  int64_t max_images_ = 3;
  Tensor bad_color_;
};

REGISTER_OP("ImageSummary")
    .Input("tag: string")
    .Input("tensor: T")
    .Output("summary: string")
    .Attr("max_images: int >= 1 = 3")
    .Attr("T: {uint8, float, half, double} = DT_FLOAT")
    .Attr(
        "bad_color: tensor = { dtype: DT_UINT8 tensor_shape { dim { size: 4 } } int_val: 255 "
        "int_val: 0 int_val: 0 int_val: 255 }")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ImageSummary")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_UINT8, DT_FLOAT, DT_DOUBLE}),
                ImageSummaryOp);

REGISTER_NO_GRADIENT("ImageSummary");

}  // namespace
}  // namespace dflow
