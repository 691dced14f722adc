#include "dflow/train/train_mode.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

TEST(TrainModeTest, EveryFlagValueParsesToItsModeAndBack) {
  ASSERT_EQ(TrainModes().size(), 4u);
  for (const std::string& name : TrainModes()) {
    absl::StatusOr<TrainMode> mode = ParseTrainMode(name);
    ASSERT_TRUE(mode.ok()) << mode.status();
    EXPECT_EQ(TrainModeName(*mode), name);
  }
  EXPECT_EQ(*ParseTrainMode("between-sync"), TrainMode::kBetweenSync);
  EXPECT_EQ(*ParseTrainMode("in-graph-async"), TrainMode::kInGraphAsync);
}

TEST(TrainModeTest, KindsOfMode) {
  EXPECT_TRUE(IsInGraph(TrainMode::kInGraphAsync));
  EXPECT_TRUE(IsInGraph(TrainMode::kInGraphSync));
  EXPECT_FALSE(IsInGraph(TrainMode::kBetweenSync));
  EXPECT_TRUE(IsSync(TrainMode::kBetweenSync));
  EXPECT_TRUE(IsSync(TrainMode::kInGraphSync));
  EXPECT_FALSE(IsSync(TrainMode::kBetweenAsync));
  EXPECT_FALSE(IsSync(TrainMode::kInGraphAsync));
}

TEST(TrainModeTest, UnknownModeNamesItAndTheValidOnes) {
  for (const char* bad : {"ring-allreduce", "", "in-graph", "Between-Sync"}) {
    absl::StatusOr<TrainMode> mode = ParseTrainMode(bad);
    ASSERT_FALSE(mode.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(mode.status()));
    EXPECT_EQ(mode.status().message(),
              absl::StrCat("[train] --mode '", bad,
                           "' is not one of: between-async, between-sync, in-graph-async, "
                           "in-graph-sync"));
  }
}

}  // namespace
}  // namespace dflow
