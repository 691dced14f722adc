// The Saver: TensorFlow-format checkpoints of a graph's variables, sharded by
// device, the state file, max_to_keep, and failures that keep the old ones.
#include "dflow/train/saver.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dflow/client/ops.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/io/checkpoint_state.h"
#include "dflow/io/file.h"
#include "dflow/io/tensor_bundle.h"
#include "dflow/io/test_util.h"
#include "dflow/train/variables.h"

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Model {
  Scope root = Scope::NewRootScope();
  Variable w, r, step;
  std::unique_ptr<ClientSession> session;
};

// w (resource, on CPU:0), r (reference, on CPU:1), the global step.
std::unique_ptr<Model> MakeModel() {
  auto m = std::make_unique<Model>();
  m->w = *MakeVariable(m->root.WithDevice("/device:CPU:0"), "w",
                       Tensor::Vec<float>({1, 2, 3}));
  m->r = *MakeVariable(m->root.WithDevice("/device:CPU:1"), "r",
                       Tensor::Vec<std::string>({"a", ""}), {.use_resource = false});
  m->step = *CreateGlobalStep(m->root.WithDevice("/device:CPU:1"));
  SessionOptions options;
  (*options.config.mutable_device_count())["CPU"] = 2;
  Operation init = GlobalVariablesInitializer(m->root);
  m->session = std::make_unique<ClientSession>(m->root, options);
  EXPECT_TRUE(m->session->Run({}, {}, {init}, nullptr).ok());
  return m;
}

std::vector<float> W(const Model& m) {
  std::vector<Tensor> out;
  EXPECT_TRUE(m.session->Run({m.w.value()}, &out).ok());
  auto f = out[0].flat<float>();
  return {f.begin(), f.end()};
}

TEST(SaverTest, SavesEveryDeviceShardAndRestores) {
  io::TempDir dir;
  auto m = MakeModel();
  absl::StatusOr<Saver> saver = Saver::Create(m->root, *GlobalVariables(m->root));
  ASSERT_TRUE(saver.ok()) << saver.status();
  absl::StatusOr<std::string> path = saver->Save(*m->session, dir.path() + "/model.ckpt", 10);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir.path() + "/model.ckpt-10");
  // One data file per device holding variables, merged under one index.
  EXPECT_TRUE(io::FileExists(*path + ".data-00000-of-00002"));
  EXPECT_TRUE(io::FileExists(*path + ".data-00001-of-00002"));
  EXPECT_FALSE(io::FileExists(*path + "_temp"));
  auto reader = io::BundleReader::Open(*path);
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> names;
  for (const auto& [name, entry] : (*reader)->Tensors()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("global_step", "r", "w"));
  EXPECT_EQ((*reader)->Read("global_step")->scalar<int64_t>(), 0);
  EXPECT_EQ(*io::LatestCheckpoint(dir.path()), std::optional<std::string>(*path));

  ASSERT_TRUE(m->session->Run({}, {}, {m->w.Assign(m->root, Tensor::Vec<float>({7, 8, 9}))},
                              nullptr).ok());
  EXPECT_THAT(W(*m), ElementsAre(7, 8, 9));
  ASSERT_TRUE(saver->Restore(*m->session, *path).ok());
  EXPECT_THAT(W(*m), ElementsAre(1, 2, 3));
}

TEST(SaverTest, KeepsTheNewestAndWritesTensorFlowsStateFile) {
  io::TempDir dir;
  auto m = MakeModel();
  absl::StatusOr<Saver> saver =
      Saver::Create(m->root, *GlobalVariables(m->root), {.max_to_keep = 2});
  ASSERT_TRUE(saver.ok());
  for (int step : {1, 2, 3}) ASSERT_TRUE(saver->Save(*m->session, dir.path() + "/ckpt", step).ok());
  EXPECT_FALSE(io::FileExists(dir.path() + "/ckpt-1.index"));
  EXPECT_FALSE(io::FileExists(dir.path() + "/ckpt-1.data-00000-of-00002"));
  EXPECT_TRUE(io::FileExists(dir.path() + "/ckpt-2.index"));
  EXPECT_EQ(io::ReadFileOrDie(dir.path() + "/checkpoint"),
            "model_checkpoint_path: \"ckpt-3\"\n"
            "all_model_checkpoint_paths: \"ckpt-2\"\n"
            "all_model_checkpoint_paths: \"ckpt-3\"\n");
}

TEST(SaverTest, AFailedSaveKeepsThePreviousCheckpoint) {
  io::TempDir dir;
  auto m = MakeModel();
  absl::StatusOr<Saver> saver = Saver::Create(m->root, *GlobalVariables(m->root));
  ASSERT_TRUE(saver.ok());
  ASSERT_TRUE(saver->Save(*m->session, dir.path() + "/ckpt", 1).ok());
  io::WriteFileOrDie(dir.path() + "/file", "x");
  absl::Status s = saver->Save(*m->session, dir.path() + "/file/ckpt", 2).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir.path() + "/file"));
  EXPECT_EQ(*io::LatestCheckpoint(dir.path()), std::optional<std::string>(dir.path() + "/ckpt-1"));
  EXPECT_TRUE(saver->Restore(*m->session, dir.path() + "/ckpt-1").ok());
  s = saver->Restore(*m->session, dir.path() + "/nothing");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("nothing.index"));
}

// A checkpoint of another model: a variable of another shape or dtype is
// refused naming it and both, and nothing is assigned.
TEST(SaverTest, RestoringAnotherShapeOrDtypeNamesTheVariable) {
  io::TempDir dir;
  {
    Scope root = Scope::NewRootScope();
    Variable w = *MakeVariable(root, "w", Tensor::Vec<float>({1, 2, 3, 4}));
    Operation init = GlobalVariablesInitializer(root);
    ClientSession session(root);
    ASSERT_TRUE(session.Run({}, {}, {init}, nullptr).ok());
    auto saver = Saver::Create(root, {w});
    ASSERT_TRUE(saver->Save(session, dir.path() + "/other", 1).ok());
  }
  auto m = MakeModel();  // Its w holds 3 floats.
  absl::StatusOr<Saver> saver = Saver::Create(m->root, {m->w});
  absl::Status s = saver->Restore(*m->session, dir.path() + "/other-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("tensor_name = w; shape in shape_and_slice spec [3] does "
                                     "not match the shape stored in checkpoint: [4]"));
  EXPECT_THAT(W(*m), ElementsAre(1, 2, 3));

  Scope root = Scope::NewRootScope();
  Variable w = *MakeVariable(root, "w", Tensor::Vec<int32_t>({1, 2, 3, 4}));
  ClientSession session(root);
  s = Saver::Create(root, {w})->Restore(session, dir.path() + "/other-1");
  EXPECT_THAT(s.message(), HasSubstr("tensor_name = w; expected dtype int32 does not equal "
                                     "original dtype float"));
}

// TensorFlow's golden checkpoint directories carry its own state files.
TEST(SaverTest, ReadsTensorFlowsStateFile) {
  const std::string dir = TestDataDir() + "/checkpoints/sharded";
  EXPECT_EQ(*io::LatestCheckpoint(dir), std::optional<std::string>(dir + "/model"));
  io::TempDir empty;
  EXPECT_EQ(*io::LatestCheckpoint(empty.path()), std::nullopt);
  io::WriteFileOrDie(empty.path() + "/checkpoint", "not { a state");
  absl::Status s = io::LatestCheckpoint(empty.path()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("line 1: Message type \"tensorflow.CheckpointState\" has no "
                                     "field named \"not\""));
}

}  // namespace
}  // namespace dflow
