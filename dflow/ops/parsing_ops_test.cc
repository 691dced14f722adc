// DecodeRaw: the values and error texts tf.io.decode_raw gives in TensorFlow
// 2.21 for the same inputs.
#include <string>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

TEST(DecodeRawTest, BytesBecomeARowPerString) {
  OpTest op("DecodeRaw");
  op.Attr("out_type", DT_FLOAT)
      .Input(Tensor::FromVector<std::string>({std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8),
                                              std::string("\x00\x00\x80\x3f\x00\x00\x00\x00", 8)},
                                             TensorShape({2})));
  auto out = op.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {1.5f, -2.0f, 1.0f, 0.0f}, TensorShape({2, 2}));
}

TEST(DecodeRawTest, BigEndian) {
  OpTest op("DecodeRaw");
  op.Attr("out_type", DT_INT32)
      .Attr("little_endian", false)
      .Input(Tensor::Scalar<std::string>(std::string("\x00\x00\x01\x02", 4)));
  auto out = op.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {258}, TensorShape({1}));
}

TEST(DecodeRawTest, UnequalOrRaggedLengthsAreRefused) {
  OpTest unequal("DecodeRaw");
  unequal.Attr("out_type", DT_FLOAT).Input(Tensor::Vec<std::string>({"ab", "abc"}));
  EXPECT_THAT(unequal.Run().status().message(),
              HasSubstr("DecodeRaw requires input strings to all be the same size, but element "
                        "1 has size 2 != 3"));
  OpTest ragged("DecodeRaw");
  ragged.Attr("out_type", DT_FLOAT).Input(Tensor::Vec<std::string>({"abcde"}));
  EXPECT_THAT(ragged.Run().status().message(),
              HasSubstr("Input to DecodeRaw has length 5 that is not a multiple of 4, the size "
                        "of float"));
}

}  // namespace
}  // namespace dflow
