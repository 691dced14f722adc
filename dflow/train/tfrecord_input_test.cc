// TFRecord training input: examples dflow writes read back through the graph
// pipeline (TFRecordDataset, Shard, Shuffle, Skip, Batch, ParseExampleV2).
#include "dflow/train/tfrecord_input.h"

#include <filesystem>
#include <fstream>
#include <numeric>
#include <map>
#include <set>
#include <sstream>

#include "dflow/client/client_session.h"
#include "dflow/train/trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// `n` examples whose first pixel is i/255 and label i % 10 (n <= 256).
Dataset Numbered(int64_t n) {
  Tensor features(DT_FLOAT, TensorShape({n, 4}));
  Tensor labels(DT_INT32, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < 4; ++d) features.flat<float>()[i * 4 + d] = (d == 0 ? i : 7) / 255.0f;
    labels.flat<int32_t>()[i] = static_cast<int32_t>(i % 10);
  }
  return *Dataset::Create(features, labels, 10);
}

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/dflow_tfrecord_input_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The example numbers (first pixel x 255) of `batches` batches, checking
// every label and the other pixels on the way.
std::vector<int> ReadNumbers(const TFRecordInputOptions& o, int batches, int64_t skip = 0) {
  Scope root = Scope::NewRootScope();
  absl::StatusOr<GraphBatches> in = TFRecordBatches(root, o);
  EXPECT_TRUE(in.ok()) << in.status();
  ClientSession session(root);
  EXPECT_TRUE(session.Run({{in->skip_batches, Tensor::Scalar(skip)}}, {}, {in->init}, nullptr).ok());
  std::vector<int> numbers;
  for (int b = 0; b < batches; ++b) {
    std::vector<Tensor> out;
    absl::Status s = session.Run({}, {in->features, in->labels}, {}, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    EXPECT_EQ(out[0].shape(), TensorShape({o.batch_size, o.input_dim}));
    for (int64_t r = 0; r < o.batch_size; ++r) {
      const int number = static_cast<int>(std::lround(out[0].flat<float>()[r * 4] * 255));
      EXPECT_EQ(out[1].flat<int32_t>()[r], number % 10);
      EXPECT_FLOAT_EQ(out[0].flat<float>()[r * 4 + 3], 7 / 255.0f);
      numbers.push_back(number);
    }
  }
  return numbers;
}

TEST(TFRecordInput, AnEpochIsEveryExampleOnceShuffled) {
  const std::string dir = Dir("epoch");
  ASSERT_TRUE(WriteTFRecordShards(Numbered(48), dir + "/train", 3).ok());
  absl::StatusOr<std::vector<std::string>> files = MatchFiles(dir + "/train-*");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->size(), 3);
  EXPECT_EQ(files->front(), dir + "/train-00000-of-00003");
  EXPECT_EQ(*CountRecords(*files), 48);
  const TFRecordInputOptions o{.files = *files, .batch_size = 8, .input_dim = 4};
  std::vector<int> epoch = ReadNumbers(o, 6);
  std::vector<int> sorted = epoch;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(48);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(epoch, all) << "not shuffled";
  // Seeded: the same order again; skipping 2 batches starts at the third.
  EXPECT_EQ(ReadNumbers(o, 6), epoch);
  std::vector<int> skipped = ReadNumbers(o, 1, /*skip=*/2);
  EXPECT_EQ(skipped, std::vector<int>(epoch.begin() + 16, epoch.begin() + 24));
}

TEST(TFRecordInput, ShardsSplitTheExamples) {
  const std::string dir = Dir("shards");
  ASSERT_TRUE(WriteTFRecordShards(Numbered(40), dir + "/train", 2).ok());
  std::vector<std::string> files = *MatchFiles(dir + "/train-*");
  std::set<int> seen;
  for (int64_t shard = 0; shard < 2; ++shard) {
    for (int n : ReadNumbers({.files = files, .batch_size = 4, .input_dim = 4, .num_shards = 2,
                              .shard_index = shard},
                             5)) {
      EXPECT_TRUE(seen.insert(n).second) << n << " in both shards";
    }
  }
  EXPECT_EQ(seen.size(), 40);
}

TEST(TFRecordInput, BadInputNamesWhatIsWrong) {
  EXPECT_THAT(MatchFiles("/nonexistent/dflow-*").status().message(),
              HasSubstr("no file matches '/nonexistent/dflow-*'"));
  EXPECT_EQ(WriteTFRecordShards(Numbered(4), Dir("bad") + "/x", 0).code(),
            absl::StatusCode::kInvalidArgument);
  const std::string dir = Dir("corrupt");
  ASSERT_TRUE(WriteTFRecordShards(Numbered(8), dir + "/train", 1).ok());
  const std::string file = dir + "/train-00000-of-00001";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x55');
  }
  absl::Status s = CountRecords({file}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(file));
  EXPECT_EQ(TFRecordBatches(Scope::NewRootScope(), {.files = {file}, .num_shards = 2,
                                                    .shard_index = 2})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TFRecordInput, TrainerLearnsFromTFRecordFiles) {
  absl::StatusOr<Dataset> fashion = LoadFashionMnist(kFashionMnistDir, "train");
  if (!fashion.ok()) GTEST_SKIP() << fashion.status();
  // The first 4096 training examples.
  std::vector<int64_t> rows(4096);
  std::iota(rows.begin(), rows.end(), 0);
  Tensor features, labels;
  fashion->Gather(rows, &features, &labels);
  const std::string dir = Dir("train");
  ASSERT_TRUE(WriteTFRecordShards(*Dataset::Create(features, labels, 10), dir + "/train", 2).ok());
  TrainOptions o;
  o.data = "tfrecord:" + dir + "/train-*";
  o.epochs = 2;
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps, 64);  // 2 epochs of 32 whole batches of 128.
  EXPECT_GT(m->test_accuracy, 0.7);
}

}  // namespace
}  // namespace dflow
