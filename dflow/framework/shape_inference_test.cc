#include "dflow/framework/shape_inference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t U = kUnknownDim;

TEST(PartialShapeTest, Basics) {
  PartialShape unknown;
  EXPECT_FALSE(unknown.rank_known());
  EXPECT_FALSE(unknown.IsFullyDefined());
  EXPECT_EQ(unknown.NumElements(), kUnknownDim);
  EXPECT_EQ(unknown.DebugString(), "<unknown>");

  PartialShape s({2, U, 3});
  EXPECT_TRUE(s.rank_known());
  EXPECT_EQ(s.rank(), 3);
  EXPECT_FALSE(s.IsFullyDefined());
  EXPECT_EQ(s.DebugString(), "[2,?,3]");
  EXPECT_EQ(s.NumElements(), kUnknownDim);

  PartialShape full({2, 3});
  EXPECT_TRUE(full.IsFullyDefined());
  EXPECT_EQ(full.NumElements(), 6);
  EXPECT_EQ(PartialShape::Scalar().NumElements(), 1);
  EXPECT_EQ(PartialShape::Scalar().DebugString(), "[]");
  EXPECT_EQ(PartialShape::UnknownDims(2), PartialShape({U, U}));
  EXPECT_EQ(PartialShape(TensorShape({4, 5})), PartialShape({4, 5}));
}

TEST(PartialShapeTest, Compatibility) {
  EXPECT_TRUE(PartialShape({2, U}).IsCompatibleWith(PartialShape({2, 7})));
  EXPECT_TRUE(PartialShape({2, U}).IsCompatibleWith(PartialShape::Unknown()));
  EXPECT_TRUE(PartialShape::Unknown().IsCompatibleWith(TensorShape({1, 2, 3})));
  EXPECT_FALSE(PartialShape({2, U}).IsCompatibleWith(PartialShape({3, 7})));
  EXPECT_FALSE(PartialShape({2, U}).IsCompatibleWith(PartialShape({2})));
  EXPECT_TRUE(PartialShape({2, 3}).IsCompatibleWith(TensorShape({2, 3})));
}

TEST(PartialShapeTest, Merge) {
  auto m = PartialShape::Merge(PartialShape({2, U}), PartialShape({U, 5}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, PartialShape({2, 5}));
  m = PartialShape::Merge(PartialShape::Unknown(), PartialShape({U, 5}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, PartialShape({U, 5}));
  m = PartialShape::Merge(PartialShape({2, 3}), PartialShape({2, 4}));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("[2,3] and [2,4]"));
}

TEST(PartialShapeTest, ProtoRoundTrip) {
  tensorflow::TensorShapeProto p;
  PartialShape({3, U}).AsProto(&p);
  ASSERT_EQ(p.dim_size(), 2);
  EXPECT_EQ(p.dim(1).size(), -1);
  EXPECT_EQ(PartialShape::FromProto(p), PartialShape({3, U}));
  PartialShape::Unknown().AsProto(&p);
  EXPECT_TRUE(p.unknown_rank());
  EXPECT_EQ(PartialShape::FromProto(p), PartialShape::Unknown());
}

TEST(PartialShapeTest, ToTensorShape) {
  auto t = PartialShape({2, 3}).ToTensorShape();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, TensorShape({2, 3}));
  EXPECT_FALSE(PartialShape({2, U}).ToTensorShape().ok());
  EXPECT_FALSE(PartialShape::Unknown().ToTensorShape().ok());
}

// numpy broadcasting, including unknown dimensions and ranks (TensorFlow's
// BroadcastBinaryOpShape rules).
TEST(BroadcastShapesTest, Table) {
  struct Case {
    PartialShape a, b, want;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},
      {{2, 3}, {3}, {2, 3}},
      {{2, 1}, {1, 3}, {2, 3}},
      {PartialShape::Scalar(), {4, 5}, {4, 5}},
      {{5, 1, 4}, {3, 1}, {5, 3, 4}},
      {{0}, {1}, {0}},
      {{1}, {0}, {0}},
      {{U, 3}, {3}, {U, 3}},
      {{U}, {4}, {4}},
      {{U}, {1}, {U}},
      {{U}, {U}, {U}},
      {{U}, {0}, {U}},
      {{2, U}, {U, 1}, {2, U}},
      {PartialShape::Unknown(), {2, 3}, PartialShape::Unknown()},
      {{2, 3}, PartialShape::Unknown(), PartialShape::Unknown()},
  };
  for (const Case& c : cases) {
    auto got = BroadcastShapes(c.a, c.b);
    ASSERT_TRUE(got.ok()) << c.a.DebugString() << " vs " << c.b.DebugString();
    EXPECT_EQ(*got, c.want) << c.a.DebugString() << " vs " << c.b.DebugString() << " gave "
                            << got->DebugString();
  }
}

TEST(BroadcastShapesTest, IncompatibleShapesFail) {
  auto got = BroadcastShapes(PartialShape({2, 3}), PartialShape({4}));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("[2,3] and [4]"));
  EXPECT_FALSE(BroadcastShapes(PartialShape({0}), PartialShape({2})).ok());
}

class InferenceTest : public ::testing::Test {
 protected:
  InferenceTest() {
    node_.set_name("n");
    node_.set_op("TestShapeOp");
    op_.name = "TestShapeOp";
  }
  tensorflow::NodeDef node_;
  OpDef op_;
};

TEST_F(InferenceTest, CommonShapeFns) {
  InferenceContext c(node_, op_, {PartialShape({2, U}), PartialShape({3, 1, 1})}, {}, {}, 2);
  ASSERT_TRUE(UnknownShape(&c).ok());
  EXPECT_FALSE(c.output(0).rank_known());
  EXPECT_FALSE(c.output(1).rank_known());
  ASSERT_TRUE(UnchangedShape(&c).ok());
  EXPECT_EQ(c.output(0), PartialShape({2, U}));
  ASSERT_TRUE(ScalarShape(&c).ok());
  EXPECT_EQ(c.output(0), PartialShape::Scalar());
  ASSERT_TRUE(BroadcastBinaryOpShape(&c).ok());
  EXPECT_EQ(c.output(0), PartialShape({3, 2, U}));
  EXPECT_TRUE(NoOutputs(&c).ok());
  EXPECT_EQ(c.input_tensor(0), nullptr);
}

TEST_F(InferenceTest, BroadcastErrorNamesOpAndShapes) {
  InferenceContext c(node_, op_, {PartialShape({2, 3}), PartialShape({4})}, {}, {}, 1);
  absl::Status s = BroadcastBinaryOpShape(&c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[TestShapeOp]"));
  EXPECT_THAT(s.message(), HasSubstr("[2,3] and [4]"));
  EXPECT_THAT(s.message(), HasSubstr("'n'"));
}

TEST_F(InferenceTest, RankChecks) {
  InferenceContext c(node_, op_, {}, {}, {}, 0);
  PartialShape out;
  ASSERT_TRUE(c.WithRank(PartialShape::Unknown(), 2, &out).ok());
  EXPECT_EQ(out, PartialShape({U, U}));
  ASSERT_TRUE(c.WithRank(PartialShape({1, 2}), 2, &out).ok());
  EXPECT_EQ(out, PartialShape({1, 2}));
  absl::Status s = c.WithRank(PartialShape({1, 2, 3}), 2, &out);
  EXPECT_THAT(s.message(), HasSubstr("rank 2"));
  EXPECT_THAT(s.message(), HasSubstr("[1,2,3]"));
  EXPECT_TRUE(c.WithRankAtLeast(PartialShape({1, 2, 3}), 2, &out).ok());
  EXPECT_TRUE(c.WithRankAtLeast(PartialShape::Unknown(), 2, &out).ok());
  EXPECT_FALSE(c.WithRankAtLeast(PartialShape({1}), 2, &out).ok());

  int64_t d = 0;
  ASSERT_TRUE(c.MergeDim(U, 4, &d).ok());
  EXPECT_EQ(d, 4);
  ASSERT_TRUE(c.MergeDim(4, 4, &d).ok());
  EXPECT_EQ(d, 4);
  ASSERT_TRUE(c.MergeDim(U, U, &d).ok());
  EXPECT_EQ(d, U);
  EXPECT_THAT(c.MergeDim(3, 4, &d).message(), HasSubstr("3 and 4"));
}

TEST_F(InferenceTest, ShapeFromShapeTensor) {
  Tensor known = Tensor::Vec<int32_t>({2, -1, 5});
  Tensor known64 = Tensor::Vec<int64_t>({7});
  Tensor bad = Tensor::Vec<int32_t>({2, -3});
  Tensor matrix = Tensor::FromVector<int32_t>({1, 2}, TensorShape({1, 2}));
  InferenceContext c(node_, op_,
                     {PartialShape({3}), PartialShape({1}), PartialShape({U}), PartialShape({2}),
                      PartialShape({1, 2})},
                     {&known, &known64, nullptr, &bad, &matrix}, {}, 0);
  PartialShape out;
  ASSERT_TRUE(c.MakeShapeFromShapeTensor(0, &out).ok());
  EXPECT_EQ(out, PartialShape({2, U, 5}));
  ASSERT_TRUE(c.MakeShapeFromShapeTensor(1, &out).ok());
  EXPECT_EQ(out, PartialShape({7}));
  ASSERT_TRUE(c.MakeShapeFromShapeTensor(2, &out).ok());
  EXPECT_FALSE(out.rank_known());
  EXPECT_THAT(c.MakeShapeFromShapeTensor(3, &out).message(), HasSubstr("-3"));
  EXPECT_THAT(c.MakeShapeFromShapeTensor(4, &out).message(), HasSubstr("1-D"));

  InferenceContext c2(node_, op_, {PartialShape({4})}, {nullptr}, {}, 0);
  ASSERT_TRUE(c2.MakeShapeFromShapeTensor(0, &out).ok());
  EXPECT_EQ(out, PartialShape({U, U, U, U}));
}

TEST_F(InferenceTest, InferShapesRunsShapeFn) {
  auto none = InferShapes(node_, op_, {PartialShape({2})}, {}, {DT_FLOAT}, 2);
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->size(), 2u);
  EXPECT_FALSE((*none)[0].rank_known());

  op_.shape_fn = [](InferenceContext* c) -> absl::Status {
    int64_t n = 0;
    RETURN_IF_ERROR(c->GetAttr("n", &n));
    c->set_output(0, PartialShape({c->input(0).dim(0), n}));
    return absl::OkStatus();
  };
  auto missing = InferShapes(node_, op_, {PartialShape({2})}, {}, {DT_FLOAT}, 1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  SetAttr(&node_, "n", 9);
  auto got = InferShapes(node_, op_, {PartialShape({2})}, {}, {DT_FLOAT}, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, ElementsAre(PartialShape({2, 9})));
}

}  // namespace
}  // namespace dflow
