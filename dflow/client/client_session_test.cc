#include "dflow/client/client_session.h"

#include "dflow/client/ops.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

TEST(ClientSessionTest, RunsFeedsAndFetches) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output w = ops::Const(root, {{1.f, 2.f}, {3.f, 4.f}});
  Output y = ops::MatMul(root.WithOpName("y"), x, w);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))}}, {y}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), TensorShape({1, 2}));
  EXPECT_FLOAT_EQ(out[0].flat<float>()[0], 4);
  EXPECT_FLOAT_EQ(out[0].flat<float>()[1], 6);
}

TEST(ClientSessionTest, ExtendsWithNodesAddedAfterTheFirstRun) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, 3.0f);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({a}, &out).ok());
  Output b = ops::Square(root, a);
  absl::Status s = session.Run({b}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FLOAT_EQ(out[0].scalar<float>(), 9);
}

TEST(ClientSessionTest, VariablesPersistAcrossRuns) {
  Scope root = Scope::NewRootScope();
  Output v = ops::VarHandleOp(root.WithOpName("v"), DT_FLOAT, PartialShape({2}));
  Operation init = ops::AssignVariableOp(root, v, {1.f, 2.f});
  Operation inc = ops::AssignAddVariableOp(root, v, {10.f, 10.f});
  Output read = ops::ReadVariableOp(root.WithControlDependencies({inc}), v, DT_FLOAT);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {init}, &out).ok());
  ASSERT_TRUE(session.Run({read}, &out).ok());
  ASSERT_TRUE(session.Run({read}, &out).ok());
  EXPECT_FLOAT_EQ(out[0].flat<float>()[0], 21);
  EXPECT_FLOAT_EQ(out[0].flat<float>()[1], 22);
}

TEST(ClientSessionTest, ConstructionErrorsSurfaceOnRun) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, {1.f, 2.f});
  ops::Reshape(root, a, {3});
  ClientSession session(root);
  std::vector<Tensor> out;
  absl::Status s = session.Run({a}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Reshape"), std::string::npos) << s;
}

TEST(ClientSessionTest, UnknownTargetIsAnError) {
  Scope root = Scope::NewRootScope();
  ops::Const(root, 1.f);
  ClientSession session(root, "nosuch://x");
  std::vector<Tensor> out;
  absl::Status s = session.Run({}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace dflow
