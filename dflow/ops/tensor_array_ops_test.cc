// Stacks and TensorArrays, kernel by kernel: TensorFlow 2.21's rules and
// messages (checked with its Python client), and bad input. Their use inside
// loops, against TensorFlow's values, is in dflow/runtime/function_test.cc.
#include <string>
#include <vector>

#include "dflow/framework/resource_mgr.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

class StepOpsTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::vector<Tensor>> Run(OpTest& t) { return t.StepResources(&step_).Run(); }

  Tensor NewStack(int32_t max_size) {
    OpTest t("StackV2");
    t.Attr("elem_type", DT_FLOAT).Attr("stack_name", std::string("s")).Input(Tensor::Scalar(max_size));
    auto out = Run(t);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  }
  absl::Status Push(const Tensor& h, Tensor v) {
    OpTest t("StackPushV2");
    t.Attr("T", v.dtype()).Input(h).Input(std::move(v));
    return Run(t).status();
  }
  absl::StatusOr<Tensor> Pop(const Tensor& h, DataType dtype = DT_FLOAT) {
    OpTest t("StackPopV2");
    t.Attr("elem_type", dtype).Input(h);
    ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(t));
    return out[0];
  }

  // A TensorArray of floats; returns its handle.
  Tensor NewArray(int32_t size, bool dynamic = false, bool clear = true,
                  std::vector<int64_t> element_shape = {}, bool shape_known = false) {
    OpTest t("TensorArrayV3");
    tensorflow::TensorShapeProto shape;
    if (shape_known) {
      for (int64_t d : element_shape) shape.add_dim()->set_size(d);
    } else {
      shape.set_unknown_rank(true);
    }
    t.Attr("dtype", DT_FLOAT).Attr("dynamic_size", dynamic).Attr("clear_after_read", clear);
    t.Attr("element_shape", shape).Input(Tensor::Scalar(size));
    auto out = Run(t);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  }
  absl::Status Write(const Tensor& h, int32_t index, Tensor v) {
    OpTest t("TensorArrayWriteV3");
    t.Attr("T", v.dtype()).Input(h).Input(Tensor::Scalar(index)).Input(std::move(v));
    t.Input(Tensor::Scalar(0.0f));
    return Run(t).status();
  }
  absl::StatusOr<Tensor> Read(const Tensor& h, int32_t index) {
    OpTest t("TensorArrayReadV3");
    t.Attr("dtype", DT_FLOAT).Input(h).Input(Tensor::Scalar(index)).Input(Tensor::Scalar(0.0f));
    ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(t));
    return out[0];
  }
  absl::StatusOr<Tensor> Gather(const Tensor& h, std::vector<int32_t> indices) {
    OpTest t("TensorArrayGatherV3");
    t.Attr("dtype", DT_FLOAT).Input(h).Input(Tensor::Vec<int32_t>(indices));
    t.Input(Tensor::Scalar(0.0f));
    ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(t));
    return out[0];
  }
  int32_t Size(const Tensor& h) {
    OpTest t("TensorArraySizeV3");
    t.Input(h).Input(Tensor::Scalar(0.0f));
    auto out = Run(t);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].scalar<int32_t>() : -1;
  }
  Tensor Grad(const Tensor& h) {
    OpTest t("TensorArrayGradV3");
    t.Attr("source", std::string("gradients")).Input(h).Input(Tensor::Scalar(0.0f));
    auto out = Run(t);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  }

  ResourceMgr step_{"step"};
};

TEST_F(StepOpsTest, StackPopsNewestFirstAndRefusesMisuse) {
  Tensor h = NewStack(2);
  ASSERT_TRUE(Push(h, Tensor::Vec<float>({1, 2})).ok());
  ASSERT_TRUE(Push(h, Tensor::Scalar(3.0f)).ok());
  absl::Status st = Push(h, Tensor::Scalar(4.0f));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("overflowed its max_size (2)"));
  st = Push(h, Tensor::Scalar<int32_t>(4));
  EXPECT_THAT(st.message(), HasSubstr("holds float, not int32"));
  EXPECT_EQ(Pop(h)->scalar<float>(), 3.0f);
  ExpectTensorEq<float>(*Pop(h), {1, 2}, TensorShape({2}));
  st = Pop(h).status();
  EXPECT_THAT(st.message(), HasSubstr("is empty."));
  EXPECT_THAT(Pop(NewStack(-1), DT_INT32).status().message(), HasSubstr("not int32"));

  // A handle of another kind, or from another step, finds nothing.
  EXPECT_THAT(Pop(NewArray(1)).status().message(), HasSubstr("not a Stack"));
  ResourceMgr other_step("step");
  OpTest t("StackPopV2");
  t.Attr("elem_type", DT_FLOAT).Input(h);
  EXPECT_THAT(t.StepResources(&other_step).Run().status().message(),
              HasSubstr("does not exist in this step"));
  OpTest outside("StackV2");
  outside.Attr("elem_type", DT_FLOAT).Input(Tensor::Scalar<int32_t>(-1));
  EXPECT_EQ(outside.Run().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StepOpsTest, StackCloseEndsIt) {
  Tensor h = NewStack(-1);
  ASSERT_TRUE(Push(h, Tensor::Scalar(1.0f)).ok());
  OpTest close("StackCloseV2");
  close.Input(h);
  ASSERT_TRUE(Run(close).ok());
  EXPECT_THAT(Pop(h).status().message(), HasSubstr("has already been closed."));
}

TEST_F(StepOpsTest, TensorArrayWritesOnceReadsOnce) {
  Tensor h = NewArray(3);
  ASSERT_TRUE(Write(h, 0, Tensor::Vec<float>({1, 2})).ok());
  absl::Status st = Write(h, 0, Tensor::Vec<float>({1, 2}));
  EXPECT_THAT(st.message(), HasSubstr("because it has already been written to."));
  // Elements may differ in shape unless the array says otherwise.
  ASSERT_TRUE(Write(h, 1, Tensor::Vec<float>({1, 2, 3})).ok());
  ExpectTensorEq<float>(*Read(h, 0), {1, 2}, TensorShape({2}));
  EXPECT_THAT(Read(h, 0).status().message(),
              HasSubstr("Could not read index 0 twice because it was cleared"));
  EXPECT_THAT(Read(h, 2).status().message(),
              HasSubstr("the element shape is not fully defined"));
  EXPECT_THAT(Read(h, 5).status().message(), HasSubstr("Tried to read from index 5 but array "
                                                       "size is: 3"));
  EXPECT_THAT(Write(h, 3, Tensor::Scalar(1.0f)).message(),
              HasSubstr("Tried to write to index 3 but array is not resizeable and size is: 3"));
  EXPECT_THAT(Write(h, -1, Tensor::Scalar(1.0f)).message(), HasSubstr("negative"));
  EXPECT_THAT(Write(h, 2, Tensor::Scalar<int32_t>(1)).message(),
              HasSubstr("TensorArray dtype is float but Op is trying to write dtype int32."));
}

TEST_F(StepOpsTest, KnownElementShapeReadsUnwrittenAsZeros) {
  Tensor h = NewArray(3, false, true, {2}, true);
  ExpectTensorEq<float>(*Read(h, 1), {0, 0}, TensorShape({2}));
  EXPECT_THAT(Write(h, 0, Tensor::Vec<float>({1, 2, 3})).message(),
              HasSubstr("incompatible with the TensorArray's inferred element shape: [2]"));
  // An empty gather needs the element shape, which this array has.
  auto empty = Gather(h, {});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), TensorShape({0, 2}));
  EXPECT_EQ(Gather(NewArray(3), {}).status().code(), absl::StatusCode::kUnimplemented);
  // A huge element shape is refused, not allocated.
  Tensor big = NewArray(1, false, true, {1 << 30, 1 << 30}, true);
  EXPECT_EQ(Read(big, 0).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(StepOpsTest, DynamicArrayGrowsAndGatherScatterConcatSplitMoveRows) {
  Tensor h = NewArray(0, /*dynamic=*/true, /*clear=*/false);
  ASSERT_TRUE(Write(h, 2, Tensor::Vec<float>({5, 6})).ok());
  EXPECT_EQ(Size(h), 3);
  ASSERT_TRUE(Write(h, 0, Tensor::Vec<float>({1, 2})).ok());
  ASSERT_TRUE(Write(h, 1, Tensor::Vec<float>({3, 4})).ok());
  ExpectTensorEq<float>(*Gather(h, {2, 0, 2}), {5, 6, 1, 2, 5, 6}, TensorShape({3, 2}));

  Tensor s = NewArray(3);
  OpTest scatter("TensorArrayScatterV3");
  scatter.Attr("T", DT_FLOAT).Input(s).Input(Tensor::Vec<int32_t>({2, 0}));
  scatter.Input(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  scatter.Input(Tensor::Scalar(0.0f));
  ASSERT_TRUE(Run(scatter).ok());
  ExpectTensorEq<float>(*Read(s, 2), {1, 2}, TensorShape({2}));
  ExpectTensorEq<float>(*Read(s, 0), {3, 4}, TensorShape({2}));
  OpTest bad_scatter("TensorArrayScatterV3");
  bad_scatter.Attr("T", DT_FLOAT).Input(s).Input(Tensor::Vec<int32_t>({2, 3}));
  bad_scatter.Input(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  bad_scatter.Input(Tensor::Scalar(0.0f));
  EXPECT_THAT(Run(bad_scatter).status().message(),
              HasSubstr("Max scatter index must be < array size (3 vs. 3)"));

  Tensor c = NewArray(2, false, false);
  OpTest split("TensorArraySplitV3");
  split.Attr("T", DT_FLOAT).Input(c);
  split.Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})));
  split.Input(Tensor::Vec<int64_t>({1, 2})).Input(Tensor::Scalar(0.0f));
  ASSERT_TRUE(Run(split).ok());
  ExpectTensorEq<float>(*Read(c, 1), {3, 4, 5, 6}, TensorShape({2, 2}));
  OpTest concat("TensorArrayConcatV3");
  concat.Attr("dtype", DT_FLOAT).Input(c).Input(Tensor::Scalar(0.0f));
  auto joined = Run(concat);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ExpectTensorEq<float>((*joined)[0], {1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  ExpectTensorEq<int64_t>((*joined)[1], {1, 2}, TensorShape({2}));
  OpTest bad_split("TensorArraySplitV3");
  bad_split.Attr("T", DT_FLOAT).Input(NewArray(2));
  bad_split.Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})));
  bad_split.Input(Tensor::Vec<int64_t>({1, 1})).Input(Tensor::Scalar(0.0f));
  EXPECT_THAT(Run(bad_split).status().message(),
              HasSubstr("sum of lengths is 2 and value's shape is: [3,2]"));
}

TEST_F(StepOpsTest, GradientArrayAddsWritesAndIsShared) {
  Tensor h = NewArray(3);
  ASSERT_TRUE(Write(h, 0, Tensor::Vec<float>({1, 2})).ok());
  Tensor g = Grad(h);
  ASSERT_TRUE(Write(g, 1, Tensor::Vec<float>({1, 2})).ok());
  ASSERT_TRUE(Write(Grad(h), 1, Tensor::Vec<float>({10, 20})).ok());  // The same array.
  EXPECT_EQ(Size(g), 3);
  ExpectTensorEq<float>(*Read(g, 1), {11, 22}, TensorShape({2}));
  // Its element shape came from the first write: unwritten elements are zeros.
  ExpectTensorEq<float>(*Read(g, 0), {0, 0}, TensorShape({2}));
  EXPECT_THAT(Write(g, 1, Tensor::Vec<float>({1})).message(),
              HasSubstr("Could not aggregate to TensorArray index 1 because the existing shape "
                        "is [2] but the new input shape is [1]."));
}

TEST_F(StepOpsTest, BadSizesAreRefused) {
  OpTest neg("TensorArrayV3");
  neg.Attr("dtype", DT_FLOAT).Input(Tensor::Scalar<int32_t>(-1));
  EXPECT_THAT(Run(neg).status().message(), HasSubstr("Size should be >= 0."));
  // A huge size costs nothing until elements are written.
  Tensor h = NewArray(INT32_MAX);
  ASSERT_TRUE(Write(h, INT32_MAX - 1, Tensor::Scalar(1.0f)).ok());
  EXPECT_EQ(Size(h), INT32_MAX);
  OpTest read("TensorArrayReadV3");
  read.Attr("dtype", DT_INT32).Input(h).Input(Tensor::Scalar<int32_t>(0));
  read.Input(Tensor::Scalar(0.0f));
  EXPECT_THAT(Run(read).status().message(),
              HasSubstr("TensorArray dtype is float but Op requested dtype int32."));
  OpTest close("TensorArrayCloseV3");
  close.Input(h);
  ASSERT_TRUE(Run(close).ok());
  EXPECT_THAT(Read(h, 0).status().message(), HasSubstr("has already been closed."));
}

}  // namespace
}  // namespace dflow
