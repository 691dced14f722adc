// Cumsum and Cumprod against TensorFlow 2.21's values for every
// exclusive/reverse combination, and their bad input.
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

OpTest Scan(const std::string& op, Tensor x, Tensor axis, bool exclusive = false,
            bool reverse = false) {
  OpTest t(op);
  t.Attr("T", x.dtype()).Attr("Tidx", axis.dtype());
  t.Attr("exclusive", exclusive).Attr("reverse", reverse);
  t.Input(std::move(x)).Input(std::move(axis));
  return t;
}

const Tensor kX = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));

struct ScanCase {
  bool exclusive, reverse;
  std::vector<float> cumsum_axis1, cumprod_axis0;  // TensorFlow 2.21's values on kX.
};

TEST(ScanTest, EveryModeMatchesTensorFlow) {
  const ScanCase cases[] = {
      {false, false, {1, 3, 6, 4, 9, 15}, {1, 2, 3, 4, 10, 18}},
      {false, true, {6, 5, 3, 15, 11, 6}, {4, 10, 18, 4, 5, 6}},
      {true, false, {0, 1, 3, 0, 4, 9}, {1, 1, 1, 1, 2, 3}},
      {true, true, {5, 3, 0, 11, 6, 0}, {4, 5, 6, 1, 1, 1}},
  };
  for (const ScanCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "exclusive " << c.exclusive << " reverse " << c.reverse);
    OpTest sum = Scan("Cumsum", kX, Tensor::Scalar<int32_t>(1), c.exclusive, c.reverse);
    ExpectTensorEq<float>(OutputsOf(sum).at(0), c.cumsum_axis1, TensorShape({2, 3}));
    OpTest prod = Scan("Cumprod", kX, Tensor::Scalar<int32_t>(0), c.exclusive, c.reverse);
    ExpectTensorEq<float>(OutputsOf(prod).at(0), c.cumprod_axis0, TensorShape({2, 3}));
  }
  OpTest ints = Scan("Cumsum", Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})),
                     Tensor::Scalar<int64_t>(-1));
  ExpectTensorEq<int64_t>(OutputsOf(ints).at(0), {1, 3, 6, 4, 9, 15}, TensorShape({2, 3}));
  OpTest empty =
      Scan("Cumprod", Tensor(DT_DOUBLE, TensorShape({0, 3})), Tensor::Scalar<int32_t>(0));
  EXPECT_EQ(OutputsOf(empty).at(0).shape(), TensorShape({0, 3}));
}

TEST(ScanTest, BadAxis) {
  OpTest range = Scan("Cumsum", kX, Tensor::Scalar<int32_t>(2));
  EXPECT_THAT(InvalidArgumentOf(range),
              HasSubstr("ScanOp: Expected scan axis in the range [-2, 2), but got 2"));
  OpTest vec = Scan("Cumprod", kX, Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(InvalidArgumentOf(vec), HasSubstr("ScanOp: axis must be a scalar, not [1]"));
  OpTest scalar = Scan("Cumsum", Tensor::Scalar<float>(1), Tensor::Scalar<int32_t>(0));
  EXPECT_THAT(InvalidArgumentOf(scalar), HasSubstr("in the range [0, 0), but got 0"));
}

}  // namespace
}  // namespace dflow
