// ImageSummary against TensorFlow 2.21: the same tags, sizes and colorspaces,
// and PNGs that decode (here with libpng, and with tf.io.decode_png: each
// run records its serialized summary as a gtest property "summary_hex_<n>")
// to TensorFlow's pixels.
#include <png.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/proto/summary.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

OpTest ImageSummary(Tensor images, int64_t max_images = 3) {
  OpTest t("ImageSummary");
  t.Attr("T", images.dtype()).Attr("max_images", max_images);
  t.Input(Tensor::Scalar<std::string>("im")).Input(std::move(images));
  return t;
}

tensorflow::Summary RunImageSummary(OpTest& t) {
  std::vector<Tensor> out = OutputsOf(t);
  tensorflow::Summary summary;
  if (out.empty()) return summary;
  const std::string& bytes = out[0].scalar<std::string>();
  static int run = 0;  // One property per run: "summary_hex_0", "summary_hex_1", ...
  ::testing::Test::RecordProperty("summary_hex_" + std::to_string(run++),
                                  absl::BytesToHexString(bytes));
  EXPECT_TRUE(summary.ParseFromString(bytes));
  return summary;
}

// The pixels of a PNG, in its own format (channels as stored).
std::vector<int> DecodePng(const std::string& png, int channels) {
  png_image image = {};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png.data(), png.size())) return {};
  static const png_uint_32 kFormats[] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                         PNG_FORMAT_RGBA};
  image.format = kFormats[channels];
  std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) return {};
  return std::vector<int>(pixels.begin(), pixels.end());
}

Tensor Floats(std::vector<float> v, const TensorShape& shape) {
  return Tensor::FromVector<float>(v, shape);
}

TEST(ImageSummaryTest, Uint8RgbIsStoredAsIs) {
  OpTest t = ImageSummary(Tensor::FromVector<uint8_t>({0, 0, 0, 10, 20, 30, 255, 128, 1, 5, 6, 7},
                                                      TensorShape({1, 2, 2, 3})));
  tensorflow::Summary s = RunImageSummary(t);
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).tag(), "im/image/0");
  const tensorflow::Summary::Image& image = s.value(0).image();
  EXPECT_EQ(image.height(), 2);
  EXPECT_EQ(image.width(), 2);
  EXPECT_EQ(image.colorspace(), 3);
  EXPECT_THAT(DecodePng(image.encoded_image_string(), 3),
              ElementsAreArray({0, 0, 0, 10, 20, 30, 255, 128, 1, 5, 6, 7}));
}

TEST(ImageSummaryTest, FloatImagesAreScaledPerImageAndCapped) {
  // Three grayscale 2x2 images, max_images 2: TensorFlow 2.21 writes two.
  OpTest t = ImageSummary(
      Floats({0.5f, 1, 0.25f, kNaN, -1, 0.5f, 2, -0.3f, 0, 0, 0, 0}, TensorShape({3, 2, 2, 1})), 2);
  tensorflow::Summary s = RunImageSummary(t);
  ASSERT_EQ(s.value_size(), 2);
  EXPECT_EQ(s.value(1).tag(), "im/image/1");
  EXPECT_EQ(s.value(0).image().colorspace(), 1);
  // Non-negative: x 255 / max; NaN takes bad_color's first channel (255).
  EXPECT_THAT(DecodePng(s.value(0).image().encoded_image_string(), 1),
              ElementsAreArray({127, 255, 63, 255}));
  // Mixed signs: 128 + x * 127 / max|x|.
  EXPECT_THAT(DecodePng(s.value(1).image().encoded_image_string(), 1),
              ElementsAreArray({64, 159, 255, 108}));
  // max_images 1 names the image without an index; an all-zero image stays 0.
  OpTest one = ImageSummary(Floats({0, 0, 0, 0}, TensorShape({1, 2, 2, 1})), 1);
  s = RunImageSummary(one);
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).tag(), "im/image");
  EXPECT_THAT(DecodePng(s.value(0).image().encoded_image_string(), 1),
              ElementsAreArray({0, 0, 0, 0}));
}

TEST(ImageSummaryTest, DoubleRgbaWithItsBadColor) {
  OpTest t = ImageSummary(Tensor::FromVector<double>(
      {0.1, -0.2, INFINITY, 1.0, 0.3, 0.4, 0.5, -0.6}, TensorShape({1, 1, 2, 4})));
  t.Attr("bad_color", Tensor::Vec<uint8_t>({1, 2, 3, 4}));
  tensorflow::Summary s = RunImageSummary(t);
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).image().colorspace(), 4);
  // TensorFlow 2.21's pixels: the infinite pixel is bad_color.
  EXPECT_THAT(DecodePng(s.value(0).image().encoded_image_string(), 4),
              ElementsAreArray({1, 2, 3, 4, 191, 212, 233, 1}));
}

TEST(ImageSummaryTest, EmptyBatchGivesAnEmptySummary) {
  OpTest t = ImageSummary(Tensor(DT_FLOAT, TensorShape({0, 2, 2, 1})));
  EXPECT_EQ(RunImageSummary(t).value_size(), 0);
}

TEST(ImageSummaryTest, BadInput) {
  OpTest rank3 = ImageSummary(Tensor(DT_FLOAT, TensorShape({2, 2, 3})));
  EXPECT_THAT(InvalidArgumentOf(rank3),
              HasSubstr("Tensor must be 4-D with last dim 1, 3, or 4, not [2,2,3]"));
  OpTest two = ImageSummary(Tensor(DT_FLOAT, TensorShape({1, 2, 2, 2})));
  EXPECT_THAT(InvalidArgumentOf(two), HasSubstr("not [1,2,2,2]"));
  OpTest zero = ImageSummary(Tensor(DT_FLOAT, TensorShape({1, 0, 2, 1})));
  EXPECT_THAT(InvalidArgumentOf(zero),
              HasSubstr("input tensor must have non-zero dims. Found: [1, 0, 2, 1]."));
  OpTest tags("ImageSummary");
  tags.Attr("T", DT_FLOAT).Input(Tensor::Vec<std::string>({"a"}));
  tags.Input(Tensor(DT_FLOAT, TensorShape({1, 1, 1, 1})));
  EXPECT_THAT(InvalidArgumentOf(tags), HasSubstr("Tags must be a scalar"));
  // Width x height past 2^31 is refused before any pixel is touched.
  OpTest huge = ImageSummary(Tensor(DT_UINT8, TensorShape({0, 1 << 16, 1 << 16, 1})));
  EXPECT_THAT(InvalidArgumentOf(huge), HasSubstr("Tensor too large for summary"));
  OpTest short_color = ImageSummary(Floats({kNaN, 0, 0}, TensorShape({1, 1, 1, 3})));
  short_color.Attr("bad_color", Tensor::Vec<uint8_t>({1}));
  EXPECT_THAT(InvalidArgumentOf(short_color),
              HasSubstr("expected depth <= bad_color.size, got depth = 3, bad_color.size = 1"));
  OpTest matrix_color = ImageSummary(Floats({0, 0, 0}, TensorShape({1, 1, 1, 3})));
  matrix_color.Attr("bad_color", Tensor::FromVector<uint8_t>({1, 2, 3}, TensorShape({1, 3})));
  EXPECT_THAT(InvalidArgumentOf(matrix_color),
              HasSubstr("bad_color must be a vector, got shape [1,3]"));
}

}  // namespace
}  // namespace dflow
