// tf.data graphs built here with fed values, run in a DirectSession: bad
// inputs fail the step with INVALID_ARGUMENT (or TensorFlow's code where it
// has another) naming what was wrong, and CacheDatasetV2 with its cache
// resources (which TensorFlow's graph mode does not emit).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/direct_session.h"

namespace dflow::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A GraphDef of dataset ops; every dataset's elements have `types` and
// unknown shapes.
class DataGraph {
 public:
  tensorflow::NodeDef* Node(const std::string& name, const std::string& op,
                            std::vector<std::string> inputs = {}) {
    tensorflow::NodeDef* n = def_.add_node();
    n->set_name(name);
    n->set_op(op);
    for (const std::string& in : inputs) n->add_input(in);
    return n;
  }
  tensorflow::NodeDef* Placeholder(const std::string& name, DataType dtype) {
    tensorflow::NodeDef* n = Node(name, "Placeholder");
    (*n->mutable_attr())["dtype"].set_type(dtype);
    return n;
  }
  // A dataset op whose elements are `types`, under the attr name `types_attr`.
  tensorflow::NodeDef* Dataset(const std::string& name, const std::string& op,
                               std::vector<std::string> inputs, const DataTypeVector& types,
                               const std::string& types_attr = "output_types") {
    tensorflow::NodeDef* n = Node(name, op, std::move(inputs));
    SetTypes(n, types_attr, types);
    auto* shapes = (*n->mutable_attr())["output_shapes"].mutable_list();
    for (size_t i = 0; i < types.size(); ++i) shapes->add_shape()->set_unknown_rank(true);
    return n;
  }
  // IteratorV2 "it" over `dataset`, "init" (MakeIterator) and "next" (IteratorGetNext).
  void Iterator(const std::string& dataset, const DataTypeVector& types) {
    tensorflow::NodeDef* it = Dataset("it", "IteratorV2", {}, types);
    (*it->mutable_attr())["shared_name"].set_s("");
    (*it->mutable_attr())["container"].set_s("");
    Node("init", "MakeIterator", {dataset, "it"});
    Dataset("next", "IteratorGetNext", {"it"}, types);
  }
  static void SetTypes(tensorflow::NodeDef* n, const std::string& attr,
                       const DataTypeVector& types) {
    auto* list = (*n->mutable_attr())[attr].mutable_list();
    for (DataType t : types) list->add_type(t);
  }

  // A session over the graph.
  std::unique_ptr<DirectSession> Session() {
    auto s = DirectSession::New(SessionOptions());
    EXPECT_TRUE(s.ok()) << s.status();
    absl::Status created = (*s)->Create(def_);
    EXPECT_TRUE(created.ok()) << created;
    return *std::move(s);
  }

 private:
  tensorflow::GraphDef def_;
};

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// --- PaddedBatchDatasetV2 ------------------------------------------------------------

// TensorDataset(element).padded_batch(2, padded_shape, -1): one batch.
class PaddedBatchErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DataGraph g;
    g.Placeholder("element", DT_INT64);
    g.Placeholder("padded_shape", DT_INT64);
    g.Placeholder("size", DT_INT64);
    g.Placeholder("padding", DT_INT64);
    g.Placeholder("drop", DT_BOOL);
    g.Dataset("elements", "TensorDataset", {"element"}, {DT_INT64}, "Toutput_types");
    tensorflow::NodeDef* pb = g.Dataset("padded", "PaddedBatchDatasetV2",
                                        {"elements", "size", "padded_shape", "padding", "drop"},
                                        {DT_INT64}, "Toutput_types");
    (*pb->mutable_attr())["N"].set_i(1);
    g.Iterator("padded", {DT_INT64});
    session_ = g.Session();
  }
  // Initializes over `element` padded to `shape`, then gets the batch.
  absl::Status Batch(const Tensor& element, const std::vector<int64_t>& shape,
                     std::vector<Tensor>* out, int64_t size = 2,
                     Tensor padding = Tensor::Scalar<int64_t>(-1)) {
    Feeds feeds = {{"element", element},
                   {"padded_shape", Tensor::Vec<int64_t>(shape)},
                   {"size", Tensor::Scalar<int64_t>(size)},
                   {"padding", padding},
                   {"drop", Tensor::Scalar<bool>(false)}};
    RETURN_IF_ERROR(session_->Run(feeds, {}, {"init"}, nullptr));
    return session_->Run({}, {"next"}, {}, out);
  }
  std::unique_ptr<DirectSession> session_;
};

TEST_F(PaddedBatchErrorsTest, PadsToTheShapeWithThePaddingValue) {
  std::vector<Tensor> out;
  ASSERT_TRUE(Batch(Tensor::Vec<int64_t>({7, 8}), {4}, &out).ok());
  EXPECT_EQ(out[0].shape(), TensorShape({1, 4}));
  EXPECT_EQ(out[0].flat<int64_t>()[1], 8);
  EXPECT_EQ(out[0].flat<int64_t>()[2], -1);
}

TEST_F(PaddedBatchErrorsTest, ElementLargerThanItsPaddedShapeIsDataLossAsTensorFlow) {
  std::vector<Tensor> out;
  absl::Status s = Batch(Tensor::Vec<int64_t>({7, 8, 9}), {2}, &out);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("Attempted to pad to a smaller size"), HasSubstr("[3]"),
                                 HasSubstr("[2]")));
}

TEST_F(PaddedBatchErrorsTest, RankOtherThanThePaddedShapesIsInvalidArgument) {
  std::vector<Tensor> out;
  absl::Status s = Batch(Tensor::Vec<int64_t>({7, 8}), {4, 4}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("component 0"), HasSubstr("rank 1"), HasSubstr("[4,4]"),
                                 HasSubstr("rank 2")));
}

TEST_F(PaddedBatchErrorsTest, BadSizesAndPaddingValuesAreInvalidArgument) {
  std::vector<Tensor> out;
  absl::Status s = Batch(Tensor::Vec<int64_t>({7}), {4}, &out, /*size=*/0);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("Batch size must be greater than zero"));
  s = Batch(Tensor::Vec<int64_t>({7}), {-2}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("padded_shapes[0]"));
  s = Batch(Tensor::Vec<int64_t>({7}), {4}, &out, 2, Tensor::Vec<int64_t>({1, 2}));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("padding values must be scalars"));
}

// --- ShardDataset --------------------------------------------------------------------

TEST(ShardErrorsTest, RequireNonEmptyFailsForAnEmptyShard) {
  DataGraph g;
  g.Placeholder("stop", DT_INT64);
  g.Placeholder("num_shards", DT_INT64);
  g.Placeholder("index", DT_INT64);
  g.Placeholder("zero", DT_INT64);
  g.Placeholder("one", DT_INT64);
  g.Dataset("range", "RangeDataset", {"zero", "stop", "one"}, {DT_INT64});
  tensorflow::NodeDef* shard =
      g.Dataset("shard", "ShardDataset", {"range", "num_shards", "index"}, {DT_INT64});
  (*shard->mutable_attr())["require_non_empty"].set_b(true);
  g.Iterator("shard", {DT_INT64});
  auto session = g.Session();
  Feeds feeds = {{"stop", Tensor::Scalar<int64_t>(2)},
                 {"num_shards", Tensor::Scalar<int64_t>(3)},
                 {"index", Tensor::Scalar<int64_t>(2)},
                 {"zero", Tensor::Scalar<int64_t>(0)},
                 {"one", Tensor::Scalar<int64_t>(1)}};
  ASSERT_TRUE(session->Run(feeds, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"next"}, {}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("require_non_empty"), HasSubstr("shard 2 of 3"),
                                 HasSubstr("only 2 element(s)")));
  feeds[0].second = Tensor::Scalar<int64_t>(3);  // now shard 2 holds element 2
  ASSERT_TRUE(session->Run(feeds, {}, {"init"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"next"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 2);
  s = session->Run({}, {"next"}, {}, &out);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
}

// --- ConcatenateDataset, IteratorFromStringHandleV2 ---------------------------------

TEST(ConcatenateErrorsTest, DifferentElementTypesAreInvalidArgument) {
  DataGraph g;
  g.Placeholder("a", DT_INT64);
  g.Placeholder("b", DT_FLOAT);
  g.Dataset("da", "TensorDataset", {"a"}, {DT_INT64}, "Toutput_types");
  g.Dataset("db", "TensorDataset", {"b"}, {DT_FLOAT}, "Toutput_types");
  g.Dataset("both", "ConcatenateDataset", {"da", "db"}, {DT_INT64});
  g.Iterator("both", {DT_INT64});
  auto session = g.Session();
  absl::Status s = session->Run(
      {{"a", Tensor::Scalar<int64_t>(1)}, {"b", Tensor::Scalar<float>(2)}}, {}, {"init"}, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("different types"), HasSubstr("int64"), HasSubstr("float")));
}

TEST(StringHandleErrorsTest, HandleOfAnIteratorWithOtherTypesIsInvalidArgument) {
  DataGraph g;
  g.Placeholder("x", DT_INT64);
  g.Dataset("d", "TensorDataset", {"x"}, {DT_INT64}, "Toutput_types");
  g.Iterator("d", {DT_INT64});
  g.Node("to_string", "IteratorToStringHandle", {"it"});
  g.Placeholder("h", DT_STRING);
  tensorflow::NodeDef* from = g.Dataset("from", "IteratorFromStringHandleV2", {"h"}, {DT_FLOAT});
  tensorflow::NodeDef* next = g.Dataset("from_next", "IteratorGetNext", {"from"}, {DT_INT64});
  (void)from;
  (void)next;
  auto session = g.Session();
  std::vector<Tensor> handle;
  ASSERT_TRUE(
      session->Run({{"x", Tensor::Scalar<int64_t>(5)}}, {"to_string"}, {"init"}, &handle).ok());
  std::vector<Tensor> out;
  absl::Status s = session->Run({{"h", handle[0]}}, {"from"}, {}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("[int64]"), HasSubstr("expected [float]")));
}

// --- what tf.function graphs put before an iterator ----------------------------------

// range(3) through OptimizeDatasetV2 and ModelDataset, iterated by an
// AnonymousIteratorV3 made, initialized and read in one step, as a
// tf.function's `for x in dataset` does.
TEST(TfFunctionIteratorTest, OptimizeAndModelPassElementsThrough) {
  DataGraph g;
  for (const char* name : {"zero", "stop", "one"}) g.Placeholder(name, DT_INT64);
  g.Placeholder("opts", DT_STRING);
  g.Dataset("range", "RangeDataset", {"zero", "stop", "one"}, {DT_INT64});
  g.Dataset("optimized", "OptimizeDatasetV2", {"range", "opts", "opts", "opts"}, {DT_INT64});
  g.Dataset("model", "ModelDataset", {"optimized"}, {DT_INT64});
  g.Dataset("anon", "AnonymousIteratorV3", {}, {DT_INT64});
  g.Node("init", "MakeIterator", {"model", "anon"});
  g.Dataset("a", "IteratorGetNext", {"anon", "^init"}, {DT_INT64});
  g.Dataset("b", "IteratorGetNext", {"anon", "^a"}, {DT_INT64});
  g.Dataset("c", "IteratorGetNext", {"anon", "^b"}, {DT_INT64});
  g.Dataset("d", "IteratorGetNext", {"anon", "^c"}, {DT_INT64});
  auto session = g.Session();
  Feeds feeds = {{"zero", Tensor::Scalar<int64_t>(0)},
                 {"stop", Tensor::Scalar<int64_t>(3)},
                 {"one", Tensor::Scalar<int64_t>(1)},
                 {"opts", Tensor::Vec<std::string>({"map_fusion"})}};
  std::vector<Tensor> out;
  absl::Status s = session->Run(feeds, {"a", "b", "c"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].scalar<int64_t>(), 0);
  EXPECT_EQ(out[1].scalar<int64_t>(), 1);
  EXPECT_EQ(out[2].scalar<int64_t>(), 2);
  s = session->Run(feeds, {"d"}, {}, &out);  // a fresh iterator: a, b, c, then the end
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
}

// --- ShuffleDatasetV2 / V3, ShuffleAndRepeatDatasetV2, seed generators --------------

// range(12) shuffled (buffer 5, seeds 7 and 3) by `op` and repeated 3 times
// (by count for ShuffleAndRepeat, by RepeatDataset otherwise); `generator`:
// "" (ShuffleDataset, ShuffleAndRepeatDataset), "AnonymousSeedGenerator"
// or "DummySeedGenerator". Every element in order.
std::vector<int64_t> ShuffledElements(const std::string& op, const std::string& generator,
                                      bool reshuffle) {
  DataGraph g;
  for (const char* name : {"zero", "stop", "one", "buffer", "seed", "seed2", "count"}) {
    g.Placeholder(name, DT_INT64);
  }
  g.Placeholder("reshuffle", DT_BOOL);
  g.Dataset("range", "RangeDataset", {"zero", "stop", "one"}, {DT_INT64});
  std::vector<std::string> inputs = {"range", "buffer"};
  if (op != "ShuffleDatasetV2") inputs.insert(inputs.end(), {"seed", "seed2"});
  const bool repeats = absl::StartsWith(op, "ShuffleAndRepeat");
  if (repeats) inputs.push_back("count");
  if (generator == "AnonymousSeedGenerator") {
    g.Node("generator", generator, {"seed", "seed2", "reshuffle"});
    inputs.push_back("generator");
  } else if (!generator.empty()) {
    g.Node("generator", generator);
    inputs.push_back("generator");
  }
  tensorflow::NodeDef* shuffled = g.Dataset("shuffled", op, inputs, {DT_INT64});
  if (op != "ShuffleDatasetV2") {
    (*shuffled->mutable_attr())["reshuffle_each_iteration"].set_b(reshuffle);
  }
  if (repeats) {
    g.Iterator("shuffled", {DT_INT64});
  } else {
    g.Dataset("repeated", "RepeatDataset", {"shuffled", "count"}, {DT_INT64});
    g.Iterator("repeated", {DT_INT64});
  }
  auto session = g.Session();
  Feeds feeds = {{"zero", Tensor::Scalar<int64_t>(0)},  {"stop", Tensor::Scalar<int64_t>(12)},
                 {"one", Tensor::Scalar<int64_t>(1)},   {"buffer", Tensor::Scalar<int64_t>(5)},
                 {"seed", Tensor::Scalar<int64_t>(7)},  {"seed2", Tensor::Scalar<int64_t>(3)},
                 {"count", Tensor::Scalar<int64_t>(3)}, {"reshuffle", Tensor::Scalar(reshuffle)}};
  absl::Status init = session->Run(feeds, {}, {"init"}, nullptr);
  EXPECT_TRUE(init.ok()) << init;
  std::vector<int64_t> all;
  std::vector<Tensor> out;
  absl::Status s;
  while ((s = session->Run({}, {"next"}, {}, &out)).ok()) all.push_back(out[0].scalar<int64_t>());
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(all.size(), 36u);
  return all;
}

// TensorFlow 2's shuffle ops take their seeds from a generator resource; with
// the same seeds they give ShuffleDataset's order (each pass reshuffled, or
// not), as TensorFlow's do.
TEST(ShuffleDatasetV2Test, SeedGeneratorsGiveShuffleDatasetsOrder) {
  for (bool reshuffle : {true, false}) {
    SCOPED_TRACE(reshuffle ? "reshuffle_each_iteration" : "fixed");
    const std::vector<int64_t> want = ShuffledElements("ShuffleDataset", "", reshuffle);
    EXPECT_EQ(std::vector<int64_t>(want.begin(), want.begin() + 12) ==
                  std::vector<int64_t>(want.begin() + 12, want.begin() + 24),
              !reshuffle);
    EXPECT_EQ(ShuffledElements("ShuffleDatasetV3", "DummySeedGenerator", reshuffle), want);
    EXPECT_EQ(ShuffledElements("ShuffleDatasetV3", "AnonymousSeedGenerator", reshuffle), want);
    EXPECT_EQ(ShuffledElements("ShuffleDatasetV2", "AnonymousSeedGenerator", reshuffle), want);
    EXPECT_EQ(ShuffledElements("ShuffleAndRepeatDataset", "", reshuffle), want);
    EXPECT_EQ(ShuffledElements("ShuffleAndRepeatDatasetV2", "DummySeedGenerator", reshuffle), want);
  }
}

// AnonymousSeedGenerator makes a fresh resource each step, which
// DeleteSeedGenerator frees; a DummySeedGenerator handle deletes as a no-op.
TEST(SeedGeneratorTest, AnonymousGeneratorsAreMadeAndDeleted) {
  DataGraph g;
  for (const char* name : {"seed", "seed2"}) g.Placeholder(name, DT_INT64);
  g.Placeholder("reshuffle", DT_BOOL);
  g.Node("generator", "AnonymousSeedGenerator", {"seed", "seed2", "reshuffle"});
  g.Node("dummy", "DummySeedGenerator");
  g.Node("delete_dummy", "DeleteSeedGenerator", {"dummy", "generator:1"});
  g.Node("delete", "DeleteSeedGenerator", {"generator", "generator:1"});
  auto session = g.Session();
  const Feeds feeds = {{"seed", Tensor::Scalar<int64_t>(1)},
                       {"seed2", Tensor::Scalar<int64_t>(2)},
                       {"reshuffle", Tensor::Scalar(true)}};
  std::vector<Tensor> out;
  std::vector<std::string> names;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(session->Run(feeds, {"generator", "dummy"}, {}, &out).ok());
    ASSERT_EQ(out.size(), 2u);
    const ResourceHandle& handle = out[0].scalar<ResourceHandle>();
    EXPECT_EQ(handle.maybe_type_name, "SeedGenerator");
    EXPECT_TRUE(absl::StartsWith(handle.name, "_AnonymousSeedGenerator")) << handle.name;
    names.push_back(handle.name);
    EXPECT_EQ(out[1].scalar<ResourceHandle>().name, "_DummySeedGenerator");
  }
  EXPECT_NE(names[0], names[1]);
  for (const char* target : {"delete", "delete_dummy"}) {
    absl::Status s = session->Run(feeds, {}, {target}, nullptr);
    EXPECT_TRUE(s.ok()) << target << ": " << s;
  }
}

// --- CacheDatasetV2 ------------------------------------------------------------------

// range(20).shuffle(20) (unseeded) cached in `cache_op`'s cache, repeated
// twice: the second pass reads the cache, so it repeats the first.
void ExpectCachedShuffle(const std::string& cache_op) {
  DataGraph g;
  for (const char* name : {"zero", "stop", "one", "seed", "count"}) g.Placeholder(name, DT_INT64);
  g.Placeholder("filename", DT_STRING);
  g.Dataset("range", "RangeDataset", {"zero", "stop", "one"}, {DT_INT64});
  g.Dataset("shuffled", "ShuffleDataset", {"range", "stop", "seed", "seed"}, {DT_INT64});
  g.Node("cache", cache_op);
  g.Dataset("cached", "CacheDatasetV2", {"shuffled", "filename", "cache"}, {DT_INT64});
  g.Dataset("repeated", "RepeatDataset", {"cached", "count"}, {DT_INT64});
  g.Iterator("repeated", {DT_INT64});
  if (cache_op == "AnonymousMemoryCache")
    g.Node("delete", "DeleteMemoryCache", {"cache", "cache:1"});
  auto session = g.Session();
  Feeds feeds = {
      {"zero", Tensor::Scalar<int64_t>(0)},  {"stop", Tensor::Scalar<int64_t>(20)},
      {"one", Tensor::Scalar<int64_t>(1)},   {"seed", Tensor::Scalar<int64_t>(0)},
      {"count", Tensor::Scalar<int64_t>(2)}, {"filename", Tensor::Scalar<std::string>("")}};
  ASSERT_TRUE(session->Run(feeds, {}, {"init"}, nullptr).ok());
  std::vector<int64_t> all;
  std::vector<Tensor> out;
  absl::Status s;
  while ((s = session->Run({}, {"next"}, {}, &out)).ok()) all.push_back(out[0].scalar<int64_t>());
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  ASSERT_EQ(all.size(), 40u);
  std::vector<int64_t> first(all.begin(), all.begin() + 20), second(all.begin() + 20, all.end());
  EXPECT_EQ(first, second);
  std::sort(first.begin(), first.end());
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(first[i], i);
  if (cache_op == "AnonymousMemoryCache") {
    // The cache resource is made again in the step that deletes it.
    absl::Status d = session->Run(feeds, {}, {"delete"}, nullptr);
    EXPECT_TRUE(d.ok()) << d;
  }
  // A cache file (tf_data_golden_test checks them) that cannot be written
  // fails the first step, naming it.
  feeds.back().second = Tensor::Scalar<std::string>("/proc/dflow_no_such_dir/cache");
  ASSERT_TRUE(session->Run(feeds, {}, {"init"}, nullptr).ok());
  s = session->Run({}, {"next"}, {}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/proc/dflow_no_such_dir/cache"));
}

TEST(CacheDatasetV2Test, AnonymousMemoryCacheKeepsTheFirstPass) {
  ExpectCachedShuffle("AnonymousMemoryCache");
}

TEST(CacheDatasetV2Test, DummyMemoryCacheKeepsTheFirstPass) {
  ExpectCachedShuffle("DummyMemoryCache");
}

TEST(CacheDatasetV2Test, HandleOfAnotherResourceIsInvalidArgument) {
  DataGraph g;
  for (const char* name : {"zero", "stop", "one"}) g.Placeholder(name, DT_INT64);
  g.Placeholder("filename", DT_STRING);
  g.Dataset("range", "RangeDataset", {"zero", "stop", "one"}, {DT_INT64});
  tensorflow::NodeDef* other = g.Dataset("other", "IteratorV2", {}, {DT_INT64});
  (*other->mutable_attr())["shared_name"].set_s("");
  (*other->mutable_attr())["container"].set_s("");
  g.Dataset("cached", "CacheDatasetV2", {"range", "filename", "other"}, {DT_INT64});
  g.Iterator("cached", {DT_INT64});
  auto session = g.Session();
  absl::Status s = session->Run({{"zero", Tensor::Scalar<int64_t>(0)},
                                 {"stop", Tensor::Scalar<int64_t>(3)},
                                 {"one", Tensor::Scalar<int64_t>(1)},
                                 {"filename", Tensor::Scalar<std::string>("")}},
                                {}, {"init"}, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a memory cache"));
}

}  // namespace
}  // namespace dflow::data
