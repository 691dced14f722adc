// Image decoding ops: encoded bytes into a uint8 tensor [height, width, channels].
//
//   DecodePng   PNG through libpng (8- and 16-bit, palette, grey, alpha,
//               interlaced), scaled to uint8
//   DecodeJpeg  JPEG through libjpeg(-turbo): ratio, fancy_upscaling,
//               dct_method, try_recover_truncated (acceptable_fraction is
//               accepted; as in TensorFlow it never refuses, see below)
//
// As in TensorFlow, each op looks at the bytes' signature, so DecodePng also
// decodes a JPEG and DecodeJpeg a PNG. `channels` 0 keeps the image's own
// channels; 1, 3 and 4 convert (grey = 0.299 R + 0.587 G + 0.114 B, as
// libpng and libjpeg compute it; a missing alpha is opaque, see SetPngTransforms).
//
// libpng and libjpeg report errors by longjmp: every decoder below keeps its
// C++ objects outside the setjmp frame and turns an error into INVALID_ARGUMENT.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// clang-format off
#include <png.h>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

enum class Format { kPng, kJpeg, kGif, kBmp, kWebp, kUnknown };

Format Sniff(const std::string& b) {
  if (b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return Format::kPng;
  if (b.size() >= 3 && std::memcmp(b.data(), "\xff\xd8\xff", 3) == 0) return Format::kJpeg;
  if (b.size() >= 4 && std::memcmp(b.data(), "GIF8", 4) == 0) return Format::kGif;
  if (b.size() >= 2 && std::memcmp(b.data(), "BM", 2) == 0) return Format::kBmp;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
      std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return Format::kWebp;
  }
  return Format::kUnknown;
}

// Decoding options common to both ops.
struct DecodeOptions {
  int channels = 0;
  int ratio = 1;
  bool fancy_upscaling = true;
  bool try_recover_truncated = false;
  float acceptable_fraction = 1.0f;
  J_DCT_METHOD dct_method = JDCT_IFAST;  // TensorFlow's default ("")
};

// --- PNG ---------------------------------------------------------------------

struct PngSource {
  const std::string* bytes;
  size_t pos = 0;
  std::string error;
};

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->bytes->size() - src->pos < n) png_error(png, "unexpected end of data");
  std::memcpy(out, src->bytes->data() + src->pos, n);
  src->pos += n;
}

void PngError(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  src->error = msg;
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

// Sets libpng's transformations so rows come out with `channels` 8-bit
// samples; returns the channel count (the image's own when `channels` is 0).
int SetPngTransforms(png_structp png, png_infop info, int channels) {
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (has_trns) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_strip_16(png);
  const bool is_color = (color & PNG_COLOR_MASK_COLOR) != 0;
  const bool has_alpha = (color & PNG_COLOR_MASK_ALPHA) != 0 || has_trns;
  if (channels == 0) return (is_color ? 3 : 1) + (has_alpha ? 1 : 0);
  const bool want_color = channels >= 3, want_alpha = channels == 2 || channels == 4;
  if (is_color && !want_color) png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);
  if (!is_color && want_color) png_set_gray_to_rgb(png);
  if (has_alpha && !want_alpha) png_set_strip_alpha(png);
  // An added alpha is the largest value at the image's own bit depth, as in
  // TensorFlow (so 3, not 255, for a 2-bit grey image).
  if (!has_alpha && want_alpha) png_set_add_alpha(png, (1u << depth) - 1, PNG_FILLER_AFTER);
  return channels;
}

// The setjmp frames below hold only trivially destructible locals, so a
// longjmp from libpng or libjpeg skips no destructor.

// Reads the header and sets the transformations; false on a libpng error.
bool PngStart(png_structp png, png_infop info, PngSource* src, int want_channels, int* channels,
              png_uint_32* height, png_uint_32* width) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, src, PngRead);
  png_read_info(png, info);
  *channels = SetPngTransforms(png, info, want_channels);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *height = png_get_image_height(png, info);
  *width = png_get_image_width(png, info);
  if (png_get_channels(png, info) != *channels || png_get_bit_depth(png, info) != 8) {
    png_error(png, "unexpected channel layout after conversion");
  }
  return true;
}

bool PngReadRows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

// REQUIRES: the bytes start with PNG's signature.
absl::Status DecodePngImage(OpKernelContext* ctx, const std::string& bytes,
                            const DecodeOptions& opt) {
  PngSource src{&bytes};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, PngError, PngWarning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  int channels = 0;
  png_uint_32 height = 0, width = 0;
  if (info == nullptr || !PngStart(png, info, &src, opt.channels, &channels, &height, &width)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return ctx->InvalidArgument("Invalid PNG. Failed to initialize decoder.",
                                src.error.empty() ? "" : " ", src.error);
  }
  absl::StatusOr<TensorShape> shape = OutputShape(
      {static_cast<int64_t>(height), static_cast<int64_t>(width), channels}, DT_UINT8, "DecodePng");
  if (!shape.ok()) {
    png_destroy_read_struct(&png, &info, nullptr);
    return shape.status();
  }
  Tensor* out = ctx->allocate_output_for_overwrite(0, *shape);
  uint8_t* data = out->flat<uint8_t>().data();
  std::vector<png_bytep> rows(height);
  for (size_t y = 0; y < height; ++y) rows[y] = data + y * width * channels;
  const bool ok = PngReadRows(png, rows.data());
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) return ctx->InvalidArgument("Invalid PNG data, size ", bytes.size(), ": ", src.error);
  return absl::OkStatus();
}

// --- JPEG --------------------------------------------------------------------

struct JpegErrors {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
  bool truncated = false;
  JDIMENSION truncated_at = 0;  // scanlines complete when the data ran out
  const jpeg_decompress_struct* cinfo = nullptr;
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are not fatal, but running out of data is how truncation shows.
void JpegEmitMessage(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF && !err->truncated) {
    err->truncated = true;
    err->truncated_at = err->cinfo->output_scanline;
  }
}

// Reads the header and starts decompression to `*channels` (the image's own
// when opt.channels is 0); false on a libjpeg error.
bool JpegStart(jpeg_decompress_struct* cinfo, JpegErrors* err, const std::string& bytes,
               const DecodeOptions& opt, int* channels) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    std::snprintf(err->message, sizeof(err->message), "CMYK JPEGs are not supported");
    return false;
  }
  *channels = opt.channels != 0 ? opt.channels : (cinfo->num_components == 1 ? 1 : 3);
  cinfo->out_color_space = *channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo->scale_num = 1;
  cinfo->scale_denom = opt.ratio;
  cinfo->do_fancy_upsampling = opt.fancy_upscaling;
  cinfo->dct_method = opt.dct_method;
  jpeg_start_decompress(cinfo);
  return true;
}

bool JpegReadRows(jpeg_decompress_struct* cinfo, JpegErrors* err, uint8_t* data, size_t row_bytes) {
  if (setjmp(err->jump)) return false;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = data + cinfo->output_scanline * row_bytes;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  if (err->truncated) {
    jpeg_abort_decompress(cinfo);
  } else {
    jpeg_finish_decompress(cinfo);
  }
  return true;
}

// REQUIRES: the bytes start with JPEG's signature.
absl::Status DecodeJpegImage(OpKernelContext* ctx, const std::string& bytes,
                             const DecodeOptions& opt) {
  if (opt.channels != 0 && opt.channels != 1 && opt.channels != 3) {
    return ctx->InvalidArgument("JPEG does not support ", opt.channels, " channels");
  }
  jpeg_decompress_struct cinfo;
  JpegErrors err;
  err.cinfo = &cinfo;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegEmitMessage;
  jpeg_create_decompress(&cinfo);
  int channels = 0;
  if (!JpegStart(&cinfo, &err, bytes, opt, &channels)) {
    jpeg_destroy_decompress(&cinfo);
    return ctx->InvalidArgument("jpeg::Uncompress failed. Invalid JPEG data or crop window: ",
                                err.message);
  }
  const int64_t height = cinfo.output_height, width = cinfo.output_width;
  absl::StatusOr<TensorShape> shape =
      OutputShape({height, width, channels}, DT_UINT8, "DecodeJpeg");
  if (!shape.ok()) {
    jpeg_destroy_decompress(&cinfo);
    return shape.status();
  }
  Tensor* out = ctx->allocate_output(0, *shape);
  uint8_t* data = out->flat<uint8_t>().data();
  const bool ok = JpegReadRows(&cinfo, &err, data, width * channels);
  jpeg_destroy_decompress(&cinfo);
  if (!ok) {
    return ctx->InvalidArgument("jpeg::Uncompress failed. Invalid JPEG data or crop window: ",
                                err.message);
  }
  if (!err.truncated) return absl::OkStatus();
  if (!opt.try_recover_truncated) {
    return ctx->InvalidArgument(
        "jpeg::Uncompress failed. Invalid JPEG data or crop window: the data ends early (",
        bytes.size(), " bytes, at line ", err.truncated_at, " of ", height, ")");
  }
  // Recovering: libjpeg has completed the scan past the end of the data
  // (grey rows), which is TensorFlow's result too. acceptable_fraction counts
  // the rows libjpeg returned, so it never refuses such an image.
  return absl::OkStatus();
}

// --- the ops -----------------------------------------------------------------

absl::Status DecodeAny(OpKernelContext* ctx, const DecodeOptions& opt) {
  const Tensor& in = ctx->input(0);
  if (in.dims() != 0) {
    return ctx->InvalidArgument("`contents` must be scalar but got shape",
                                in.shape().DebugString());
  }
  const std::string& bytes = in.scalar<std::string>();
  switch (Sniff(bytes)) {
    case Format::kPng:
      return DecodePngImage(ctx, bytes, opt);
    case Format::kJpeg:
      return DecodeJpegImage(ctx, bytes, opt);
    case Format::kGif:
    case Format::kBmp:
    case Format::kWebp:
      return ctx->InvalidArgument("Only JPEG and PNG images can be decoded in dflow; this is ",
                                  "a GIF, BMP or WebP image");
    case Format::kUnknown:
      break;
  }
  return ctx->InvalidArgument(
      "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.");
}

absl::Status CheckChannels(OpKernelConstruction* c, const DecodeOptions& opt) {
  if (opt.channels == 0 || opt.channels == 1 || opt.channels == 3 || opt.channels == 4) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("[", c->def().op(), "] `channels` must be 0, 1, 3 or 4 but got ", opt.channels));
}

class DecodePngOp : public OpKernel {
 public:
  explicit DecodePngOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t channels = 0;
    DataType dtype = DT_UINT8;
    c->GetAttr("channels", &channels).IgnoreError();
    c->GetAttr("dtype", &dtype).IgnoreError();
    opt_.channels = static_cast<int>(channels);
    absl::Status s = CheckChannels(c, opt_);
    if (s.ok() && dtype != DT_UINT8) {  // uint16: no dflow tensor holds it yet
      s = absl::UnimplementedError(absl::StrCat("[DecodePng] dtype ", DataTypeString(dtype),
                                                " is not supported (uint8 is)"));
    }
    c->SetStatus(s);
  }
  absl::Status Compute(OpKernelContext* ctx) override { return DecodeAny(ctx, opt_); }

 private:
  DecodeOptions opt_;
};

class DecodeJpegOp : public OpKernel {
 public:
  explicit DecodeJpegOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t channels = 0, ratio = 1;
    std::string dct;
    c->GetAttr("channels", &channels).IgnoreError();
    c->GetAttr("ratio", &ratio).IgnoreError();
    c->GetAttr("fancy_upscaling", &opt_.fancy_upscaling).IgnoreError();
    c->GetAttr("try_recover_truncated", &opt_.try_recover_truncated).IgnoreError();
    c->GetAttr("acceptable_fraction", &opt_.acceptable_fraction).IgnoreError();
    c->GetAttr("dct_method", &dct).IgnoreError();
    opt_.channels = static_cast<int>(channels);
    opt_.ratio = static_cast<int>(ratio);
    absl::Status s = CheckChannels(c, opt_);
    if (s.ok() && ratio != 1 && ratio != 2 && ratio != 4 && ratio != 8) {
      s = absl::InvalidArgumentError(
          absl::StrCat("[DecodeJpeg] ratio must be 1, 2, 4, or 8, got ", ratio));
    }
    if (dct == "INTEGER_ACCURATE") opt_.dct_method = JDCT_ISLOW;
    c->SetStatus(s);
  }
  absl::Status Compute(OpKernelContext* ctx) override { return DecodeAny(ctx, opt_); }

 private:
  DecodeOptions opt_;
};

// [height, width, channels]: the channels known when the attr is not 0.
absl::Status DecodeImageShape(InferenceContext* c) {
  PartialShape unused;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
  int64_t channels = 0;
  RETURN_IF_ERROR(c->GetAttr("channels", &channels));
  c->set_output(0, PartialShape({kUnknownDim, kUnknownDim, channels ? channels : kUnknownDim}));
  return absl::OkStatus();
}

REGISTER_OP("DecodePng")
    .Input("contents: string")
    .Output("image: dtype")
    .Attr("channels: int = 0")
    .Attr("dtype: {uint8, uint16} = DT_UINT8")
    .SetShapeFn(DecodeImageShape);
REGISTER_KERNEL(KernelDefBuilder("DecodePng").Device(kDeviceCPU), DecodePngOp);
REGISTER_NO_GRADIENT("DecodePng");

REGISTER_OP("DecodeJpeg")
    .Input("contents: string")
    .Output("image: uint8")
    .Attr("channels: int = 0")
    .Attr("ratio: int = 1")
    .Attr("fancy_upscaling: bool = true")
    .Attr("try_recover_truncated: bool = false")
    .Attr("acceptable_fraction: float = 1.0")
    .Attr("dct_method: string = ''")
    .SetShapeFn(DecodeImageShape);
REGISTER_KERNEL(KernelDefBuilder("DecodeJpeg").Device(kDeviceCPU), DecodeJpegOp);
REGISTER_NO_GRADIENT("DecodeJpeg");

}  // namespace
}  // namespace dflow
