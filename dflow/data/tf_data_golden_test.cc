// tf.data pipelines as TensorFlow 2.21 builds them in graph mode
// (tests/data/tf_data, made by tests/data/gen_tf_data_reference.py) run in a
// dflow session: every batch equals TensorFlow's, then OUT_OF_RANGE "End of
// sequence"; corrupt and missing TFRecord files fail as TensorFlow's do.
// Also padded_batch, zip, concatenate, interleave (over plain, GZIP and ZLIB
// TFRecord files), cache, shard, optionals, anonymous iterators and string
// handles, and cache files in TensorFlow's layout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/io/file.h"
#include "dflow/io/tensor_bundle.h"
#include "dflow/io/test_util.h"
#include "dflow/runtime/direct_session.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"

namespace dflow::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kDir = TestDataDir() + "/tf_data";
const std::string kTFRecord = TestDataDir() + "/tfrecord/plain.tfrecord";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TfDataGoldenTest : public ::testing::Test {
 protected:
  // Creates a session over `name`.pbtxt and loads `name`.json.
  void Load(const std::string& name) {
    tensorflow::GraphDef graph;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        ReadText(kDir + "/" + name + ".pbtxt"), &graph));
    expected_ = json::parse(ReadText(kDir + "/" + name + ".json"));
    auto s = DirectSession::New(SessionOptions());
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = *std::move(s);
    ASSERT_TRUE(session_->Create(graph).ok());
  }
  // Runs the pipeline's initializer, feeding the files TensorFlow was fed.
  absl::Status Init() {
    std::vector<std::string> files;
    if (expected_.contains("feed_files")) {
      for (const json& f : expected_["feed_files"]) {
        files.push_back(TestDataDir() + "/" + f.get<std::string>());
      }
    }
    return Init(files);
  }
  // Runs the pipeline's initializer, feeding `files` to its placeholder.
  absl::Status Init(const std::vector<std::string>& files) {
    if (expected_["init"].is_null()) return absl::OkStatus();
    std::vector<std::pair<std::string, Tensor>> feeds;
    if (!expected_["feed"].is_null()) feeds.push_back({expected_["feed"], Tensor::Vec(files)});
    return session_->Run(feeds, {}, {expected_["init"]}, nullptr);
  }
  absl::Status Next(std::vector<Tensor>* out) {
    std::vector<std::string> fetches = expected_["fetches"];
    return session_->Run({}, fetches, {}, out);
  }
  // Every batch equals TensorFlow's, then End of sequence (twice).
  void ExpectTensorFlowsBatches() {
    for (size_t b = 0; b < expected_["batches"].size(); ++b) {
      SCOPED_TRACE(absl::StrCat("batch ", b));
      std::vector<Tensor> out;
      absl::Status s = Next(&out);
      ASSERT_TRUE(s.ok()) << s;
      const json& want = expected_["batches"][b];
      ASSERT_EQ(out.size(), want.size());
      for (size_t i = 0; i < out.size(); ++i) ExpectValue(out[i], want[i]);
    }
    for (int i = 0; i < 2; ++i) {
      std::vector<Tensor> out;
      absl::Status s = Next(&out);
      EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
      EXPECT_THAT(s.message(), HasSubstr("End of sequence"));
    }
  }
  static void ExpectValue(const Tensor& t, const json& want) {
    std::vector<int64_t> dims;
    for (int d = 0; d < t.dims(); ++d) dims.push_back(t.dim_size(d));
    EXPECT_EQ(json(dims), want["shape"]);
    const json& v = want["values"];
    ASSERT_EQ(size_t(t.NumElements()), v.size());
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      switch (t.dtype()) {
        case DT_FLOAT:
          EXPECT_EQ(t.flat<float>()[i], v[i].get<float>());
          break;
        case DT_INT32:
          EXPECT_EQ(t.flat<int32_t>()[i], v[i].get<int32_t>());
          break;
        case DT_INT64:
          EXPECT_EQ(t.flat<int64_t>()[i], v[i].get<int64_t>());
          break;
        case DT_STRING:
          EXPECT_EQ(t.flat<std::string>()[i], absl::HexStringToBytes(v[i].get<std::string>()));
          break;
        case DT_BOOL:
          EXPECT_EQ(t.flat<bool>()[i], v[i].get<bool>());
          break;
        default:
          FAIL() << "unexpected dtype " << DataTypeString(t.dtype());
      }
    }
  }

  json expected_;
  std::unique_ptr<DirectSession> session_;
};

TEST_F(TfDataGoldenTest, OneShotMapBatchRepeat) {
  Load("map_batch_repeat");
  ASSERT_EQ(expected_["batches"].size(), 8u);  // 4 batches of 10 elements, twice
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, OneShotParallelMapFilter) {
  Load("parallel_map_filter");
  ASSERT_EQ(expected_["batches"].size(), 8u);  // 4, 6, ..., 18
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, InitializableRangeSkipTakeRestartsWhenReinitialized) {
  Load("range_skip_take");
  ASSERT_TRUE(Init({}).ok());
  ExpectTensorFlowsBatches();
  ASSERT_TRUE(Init({}).ok());
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, GetNextBeforeInitializationFails) {
  Load("range_skip_take");
  std::vector<Tensor> out;
  absl::Status s = Next(&out);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("has not been initialized"));
}

// Every element of every batch, in order.
std::vector<int64_t> Flatten(const std::vector<std::vector<Tensor>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) {
    for (int64_t v : b[0].flat<int64_t>()) out.push_back(v);
  }
  return out;
}

TEST_F(TfDataGoldenTest, ShufflePrefetchGivesTensorFlowsOrder) {
  Load("shuffle_prefetch");
  ASSERT_EQ(expected_["batches"].size(), 4u);
  // The seed fixes the order: re-running the initializer rebuilds the
  // dataset and gives TensorFlow's order again.
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(absl::StrCat("pass ", pass));
    ASSERT_TRUE(Init({}).ok());
    ExpectTensorFlowsBatches();
  }
  std::vector<int64_t> first;
  for (const json& v : expected_["batches"][0][0]["values"]) first.push_back(v.get<int64_t>());
  EXPECT_NE(first, std::vector<int64_t>({0, 1, 2, 3, 4}));  // shuffled
}

TEST_F(TfDataGoldenTest, ShuffleRepeatReshufflesEachPassAsTensorFlowDoes) {
  Load("shuffle_repeat");
  ASSERT_EQ(expected_["batches"].size(), 40u);
  ASSERT_NE(expected_["batches"][0], expected_["batches"][20]);
  ASSERT_TRUE(Init({}).ok());
  ExpectTensorFlowsBatches();
}

// reshuffle_each_iteration=False (graph seed only): every pass in one order.
TEST_F(TfDataGoldenTest, ShuffleWithoutReshuffleRepeatsTensorFlowsOrder) {
  Load("shuffle_fixed");
  ASSERT_EQ(expected_["batches"].size(), 30u);
  ASSERT_EQ(expected_["batches"][0], expected_["batches"][10]);
  ExpectTensorFlowsBatches();
}

// A buffer larger than the data, and UNKNOWN_CARDINALITY (the whole input).
TEST_F(TfDataGoldenTest, ShuffleBufferLargerThanTheDataGivesTensorFlowsOrder) {
  Load("shuffle_big_buffer");
  ASSERT_EQ(expected_["batches"].size(), 21u);
  ExpectTensorFlowsBatches();
}

// ShuffleAndRepeatDataset, with a buffer within one epoch and one spanning
// three, repeated forever (then taken), and over an empty input forever.
TEST_F(TfDataGoldenTest, ShuffleAndRepeatGivesTensorFlowsOrder) {
  Load("shuffle_and_repeat");
  ASSERT_EQ(expected_["batches"].size(), 74u);
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(Init({}).ok());
    ExpectTensorFlowsBatches();
  }
}

// Shuffles of shuffles: the inner dataset's iterators take their seeds in
// TensorFlow's order (including ShuffleAndRepeat's).
TEST_F(TfDataGoldenTest, NestedShufflesGiveTensorFlowsOrder) {
  Load("shuffle_nested");
  ASSERT_EQ(expected_["batches"].size(), 48u);
  ASSERT_TRUE(Init({}).ok());
  ExpectTensorFlowsBatches();
}

// Shuffles built inside interleave and flat_map functions: ShuffleDatasetV3
// with a DummySeedGenerator, each rebuilt dataset seeded afresh.
TEST_F(TfDataGoldenTest, ShufflesInDatasetFunctionsGiveTensorFlowsOrder) {
  Load("shuffle_in_function");
  ASSERT_EQ(expected_["batches"].size(), 20u);
  ExpectTensorFlowsBatches();
}

// The pipeline: from_tensor_slices -> map -> shuffle -> batch ->
// repeat -> prefetch.
TEST_F(TfDataGoldenTest, ShuffledTrainingPipelineGivesTensorFlowsBatches) {
  Load("shuffle_pipeline");
  ASSERT_EQ(expected_["batches"].size(), 6u);
  ExpectTensorFlowsBatches();
}

// .cache(filename): dflow writes TensorFlow's cache files (the same keys and
// tensors as tf_cache/c, which TensorFlow wrote), reads them on the second
// pass, and reads TensorFlow's.
TEST_F(TfDataGoldenTest, FileCacheIsTensorFlowsCache) {
  Load("file_cache");
  ASSERT_EQ(expected_["batches"].size(), 6u);
  io::TempDir dir;
  const std::string ours = dir.path() + "/c";
  const std::string theirs = kDir + "/tf_cache/c";
  const std::string cache_feed = expected_["cache_feed"];
  const std::string init = expected_["init"];
  for (const std::string& prefix : {ours, theirs}) {
    SCOPED_TRACE(prefix);
    absl::Status s =
        session_->Run({{cache_feed, Tensor::Scalar<std::string>(prefix)}}, {}, {init}, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    ExpectTensorFlowsBatches();
  }
  EXPECT_FALSE(io::FileExists(ours + "_0.lockfile"));
  EXPECT_FALSE(io::FileExists(io::BundleIndexFilename(ours + "_0")));
  auto mine = io::BundleReader::Open(ours);
  auto tfs = io::BundleReader::Open(theirs);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(tfs.ok()) << tfs.status();
  std::vector<std::string> keys, tf_keys;
  for (const auto& [key, entry] : (*mine)->Tensors()) keys.push_back(key);
  for (const auto& [key, entry] : (*tfs)->Tensors()) tf_keys.push_back(key);
  EXPECT_EQ(keys, tf_keys);  // "      0_0", "      0_1", ...
  for (const std::string& key : tf_keys) {
    auto a = (*mine)->Read(key);
    auto b = (*tfs)->Read(key);
    ASSERT_TRUE(a.ok() && b.ok()) << key;
    EXPECT_EQ(a->DebugString(), b->DebugString()) << key;
  }
}

// An iterator dropped before the input ends leaves no cache behind; a
// lockfile of another writer is ALREADY_EXISTS naming it.
TEST_F(TfDataGoldenTest, FileCacheOfAPartialPassIsDiscarded) {
  Load("file_cache");
  io::TempDir dir;
  const std::string prefix = dir.path() + "/c";
  const std::string cache_feed = expected_["cache_feed"];
  const std::string init = expected_["init"];
  const std::vector<std::pair<std::string, Tensor>> feed = {
      {cache_feed, Tensor::Scalar<std::string>(prefix)}};
  ASSERT_TRUE(session_->Run(feed, {}, {init}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());
  EXPECT_TRUE(io::FileExists(prefix + "_0.lockfile"));
  ASSERT_TRUE(session_->Run(feed, {}, {init}, nullptr).ok());  // drops the writer
  EXPECT_FALSE(io::FileExists(prefix + "_0.lockfile"));
  EXPECT_FALSE(io::FileExists(io::BundleIndexFilename(prefix)));

  {
    auto lock = io::WritableFile::Create(prefix + "_0.lockfile");
    ASSERT_TRUE(lock.ok());
    ASSERT_TRUE((*lock)->Append("Created at: 1").ok());
    ASSERT_TRUE((*lock)->Close().ok());
  }
  ASSERT_TRUE(session_->Run(feed, {}, {init}, nullptr).ok());
  absl::Status s = Next(&out);
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(prefix + "_0.lockfile"), HasSubstr("Created at: 1")));
}

TEST_F(TfDataGoldenTest, TFRecordFileTensorFlowWrote) {
  Load("tfrecord_batch");
  absl::Status init = Init({kTFRecord});
  ASSERT_TRUE(init.ok()) << init;
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, MissingTFRecordFileIsNotFoundNamingIt) {
  Load("tfrecord_batch");
  ASSERT_TRUE(Init({kDir + "/no_such_file.tfrecord"}).ok());
  std::vector<Tensor> out;
  absl::Status s = Next(&out);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("no_such_file.tfrecord"));
}

TEST_F(TfDataGoldenTest, CorruptTFRecordIsDataLossNamingFileAndOffset) {
  io::TempDir dir;
  std::string bytes = io::ReadFileOrDie(kTFRecord);
  bytes[16 + 17 + 12] ^= 1;  // the data of record 2, at offset 33
  const std::string path = dir.path() + "/bad.tfrecord";
  io::WriteFileOrDie(path, bytes);
  Load("tfrecord_batch");
  ASSERT_TRUE(Init({path}).ok());
  std::vector<Tensor> out;
  absl::Status s = Next(&out);  // records 1 and 2: record 2 is corrupt
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("offset 33")));
}

// Prefetching keeps the order and delivers a read error after the records
// before it.
TEST_F(TfDataGoldenTest, PrefetchDeliversRecordsThenTheReadError) {
  Load("tfrecord_prefetch");
  ASSERT_TRUE(Init({kTFRecord}).ok());
  ExpectTensorFlowsBatches();
  io::TempDir dir;
  std::string bytes = io::ReadFileOrDie(kTFRecord);
  bytes[16 + 17 + 12] ^= 1;  // record 2's data
  const std::string path = dir.path() + "/bad.tfrecord";
  io::WriteFileOrDie(path, bytes);
  ASSERT_TRUE(Init({path}).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());
  EXPECT_EQ(out[0].scalar<std::string>(), "");
  ASSERT_TRUE(Next(&out).ok());
  EXPECT_EQ(out[0].scalar<std::string>(), "a");
  absl::Status s = Next(&out);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("offset 33")));
}

// A session closed while a prefetch producer waits on its full buffer ends
// (the producer is stopped and joined).
TEST_F(TfDataGoldenTest, ClosingTheSessionStopsAFullPrefetchBuffer) {
  Load("tfrecord_prefetch");
  ASSERT_TRUE(Init({kTFRecord}).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());
  session_.reset();
}

// An error in the map function fails the step with the function's error,
// as TensorFlow's (its text after TensorFlow's own prefix).
TEST_F(TfDataGoldenTest, MapFunctionErrorIsTheStepsError) {
  Load("tfrecord_decode");
  ASSERT_TRUE(Init({kTFRecord}).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());  // record 0 is empty: no floats
  EXPECT_EQ(out[0].shape(), TensorShape({0}));
  absl::Status s = Next(&out);
  const std::string tf_message = expected_["error"]["message"];
  const std::string kernel_message = tf_message.substr(tf_message.find("Input to DecodeRaw"));
  EXPECT_EQ(static_cast<int>(s.code()), expected_["error"]["code"].get<int>()) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(kernel_message), HasSubstr("MapDataset")));
}

// --- padded_batch, zip, concatenate, interleave, cache, shard ----------------------------

TEST_F(TfDataGoldenTest, PaddedBatchPadsEachComponentAsTensorFlow) {
  Load("padded_batch");
  ASSERT_EQ(expected_["batches"].size(), 3u);  // 3, 3, 1 elements
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, PaddedBatchDropRemainder) {
  Load("padded_batch_drop");
  ASSERT_EQ(expected_["batches"].size(), 2u);
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, PaddedBatchElementLargerThanItsPaddedShapeFailsAsTensorFlow) {
  Load("padded_batch_small");
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());  // [1], [2] fit in [2]
  ExpectValue(out[0], expected_["batches"][0][0]);
  absl::Status s = Next(&out);  // [3, 3, 3] does not
  EXPECT_EQ(static_cast<int>(s.code()), expected_["error"]["code"].get<int>()) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(expected_["error"]["message"].get<std::string>()),
                                 HasSubstr("[3]"), HasSubstr("padded shape is [2]")));
}

TEST_F(TfDataGoldenTest, ZipThenConcatenate) {
  Load("zip_concatenate");
  ASSERT_EQ(expected_["batches"].size(), 7u);  // 3 zipped, then 4
  ASSERT_TRUE(Init().ok());
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, InterleavePlainGzipAndZlibTFRecordFiles) {
  Load("interleave_tfrecord");
  ASSERT_EQ(expected_["batches"].size(), 21u);  // 7 records in each of 3 files
  absl::Status init = Init();
  ASSERT_TRUE(init.ok()) << init;
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, ParallelInterleaveGivesTheDeterministicOrder) {
  Load("parallel_interleave_tfrecord");
  ASSERT_TRUE(Init().ok());
  ExpectTensorFlowsBatches();
}

// The parallel interleave reads ahead on a producer thread: closing the
// session while it waits on its full buffer stops it.
TEST_F(TfDataGoldenTest, ClosingTheSessionStopsAParallelInterleave) {
  Load("parallel_interleave_tfrecord");
  ASSERT_TRUE(Init().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(Next(&out).ok());
  session_.reset();
}

TEST_F(TfDataGoldenTest, InterleaveCycleAndBlockLengths) {
  Load("interleave_ranges");
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, CorruptGzipFileInAnInterleaveIsDataLossNamingIt) {
  Load("interleave_tfrecord");
  io::TempDir dir;
  std::string bytes = io::ReadFileOrDie(TestDataDir() + "/tfrecord/gzip.tfrecord");
  bytes.resize(bytes.size() / 2);  // truncated
  const std::string path = dir.path() + "/cut.tfrecord.gz";
  io::WriteFileOrDie(path, bytes);
  ASSERT_TRUE(Init({kTFRecord, path, TestDataDir() + "/tfrecord/zlib.tfrecord"}).ok());
  absl::Status s;
  std::vector<Tensor> out;
  for (int i = 0; i < 30 && s.ok(); ++i) s = Next(&out);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(path));
}

TEST_F(TfDataGoldenTest, CacheThenRepeat) {
  Load("cache_repeat");
  ASSERT_EQ(expected_["batches"].size(), 18u);
  ASSERT_TRUE(Init().ok());
  ExpectTensorFlowsBatches();
}

// An unseeded shuffle before cache(): the later passes read the cache, so
// they repeat the first pass's order.
TEST_F(TfDataGoldenTest, CacheKeepsTheFirstPassOfAShuffle) {
  Load("cache_shuffle");
  for (int init = 0; init < 2; ++init) {
    ASSERT_TRUE(Init().ok());
    std::vector<std::vector<Tensor>> elements;
    for (std::vector<Tensor> out; Next(&out).ok();) elements.push_back(out);
    ASSERT_EQ(elements.size(), 40u);
    std::vector<int64_t> all = Flatten(elements);
    std::vector<int64_t> first(all.begin(), all.begin() + 20), second(all.begin() + 20, all.end());
    EXPECT_EQ(first, second);
    std::sort(first.begin(), first.end());
    for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(first[i], i);
  }
}

TEST_F(TfDataGoldenTest, ShardTakesEveryNthElementFromIndex) {
  Load("shard");
  ASSERT_EQ(expected_["batches"].size(), 6u);  // 1, 4, 7, twice
  ASSERT_TRUE(Init().ok());
  ExpectTensorFlowsBatches();
}

TEST_F(TfDataGoldenTest, ShardIndexOutOfRangeIsInvalidArgumentNamingIt) {
  Load("shard");
  absl::Status s =
      session_->Run({{"index:0", Tensor::Scalar<int64_t>(3)}}, {}, {expected_["init"]}, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("Index must be between 0 and 2 (currently index = 3)"));
  s = session_->Run({{"num_shards:0", Tensor::Scalar<int64_t>(0)}}, {}, {expected_["init"]},
                    nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("num_shards = 0"));
}

TEST_F(TfDataGoldenTest, WithOptionsKeepsTheElements) {
  Load("options");
  ASSERT_EQ(expected_["batches"].size(), 3u);
  ASSERT_TRUE(Init().ok());
  ExpectTensorFlowsBatches();
}

// --- iterators: optional, anonymous, string handles ------------------------------------

TEST_F(TfDataGoldenTest, GetNextAsOptionalHasNoValueAtTheEnd) {
  Load("optional");
  ASSERT_TRUE(Init().ok());
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> out;
    ASSERT_TRUE(Next(&out).ok());
    ExpectValue(out[0], expected_["batches"][i][0]);
    ExpectValue(out[1], expected_["batches"][i][1]);
  }
  std::vector<Tensor> out;
  ASSERT_TRUE(session_->Run({}, {expected_["fetches"][0]}, {}, &out).ok());
  ExpectValue(out[0], expected_["batches"][2][0]);  // false
  absl::Status s = session_->Run({}, {expected_["fetches"][1]}, {}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("does not have a value"));
}

TEST_F(TfDataGoldenTest, AnonymousIteratorMadeUsedAndDeletedInOneRun) {
  Load("anonymous_iterator");
  for (const json& run : expected_["runs"]) {
    std::vector<Tensor> out;
    absl::Status s = session_->Run({}, expected_["fetches"], {expected_["target"]}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(out[0].scalar<int64_t>(), run[0].get<int64_t>());
    EXPECT_EQ(out[1].scalar<int64_t>(), run[1].get<int64_t>());
  }
}

// from_string_handle: one get_next reads the train or the test iterator,
// whichever handle is fed, each keeping its place.
TEST_F(TfDataGoldenTest, StringHandleSwitchesBetweenIterators) {
  Load("string_handle");
  std::vector<Tensor> handles;
  ASSERT_TRUE(
      session_->Run({}, {expected_["train_handle"], expected_["test_handle"]}, {}, &handles).ok());
  ASSERT_TRUE(session_->Run({}, {}, {expected_["test_init"]}, nullptr).ok());
  for (const json& step : expected_["sequence"]) {
    const Tensor& h = step[0] == "train" ? handles[0] : handles[1];
    std::vector<Tensor> out;
    absl::Status s = session_->Run({{expected_["handle"], h}}, {expected_["fetch"]}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(out[0].scalar<int64_t>(), step[1].get<int64_t>()) << step;
  }
  std::vector<Tensor> out;
  absl::Status s = session_->Run({{expected_["handle"], Tensor::Scalar<std::string>("junk")}},
                                 {expected_["fetch"]}, {}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("string_handle"));
}

}  // namespace
}  // namespace dflow::data
