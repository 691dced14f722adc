// Readers on a fresh CPU device per test: file names go into a FIFOQueueV2
// as QueueRunner's string_input_producer puts them, ReaderReadV2 /
// ReaderReadUpToV2 return TensorFlow's keys and values (checked with
// tf.compat.v1.TextLineReader and friends), waits for file names end on
// close and on step cancellation. Also MatchingFiles, RandomShuffle (in
// TensorFlow's order: tests/data/shuffle_golden.json, written by
// tests/data/gen_shuffle_reference.py) and ResourceCountUpTo.
#include <algorithm>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/io/test_util.h"
#include "dflow/io/tfrecord.h"
#include "dflow/ops/data_flow_ops.h"
#include "dflow/ops/kernel_fixture.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::HasSubstr;

class ReaderOpsTest : public KernelTest {
 protected:
  // Starts `kernel` on `inputs` (kept alive by the fixture).
  std::unique_ptr<KernelRun> Start(OpKernel* kernel, std::vector<Tensor> inputs,
                                   CancellationManager* cm = nullptr) {
    std::vector<TensorValue> values;
    for (Tensor& t : inputs) values.push_back(In(std::move(t)));
    return KernelTest::Start(kernel, std::move(values), cm);
  }
  Tensor RunOk(OpKernel* kernel, std::vector<Tensor> inputs, int output = 0) {
    std::unique_ptr<KernelRun> r = Start(kernel, std::move(inputs));
    absl::Status s = r->Wait();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() && r->ctx->num_outputs() > output ? r->output(output) : Tensor();
  }

  // A string queue holding `files`, closed when `close`.
  Tensor FileQueue(const std::vector<std::string>& files, bool close = true) {
    NodeDef n = Node("FIFOQueueV2", absl::StrCat("files", queues_++), 0);
    SetAttr(&n, "component_types", std::vector<DataType>{DT_STRING});
    Tensor q = RunOk(Kernel(n), {});
    if (!files.empty()) {
      NodeDef e = Node("QueueEnqueueManyV2", "enqueue", 2);
      SetAttr(&e, "Tcomponents", std::vector<DataType>{DT_STRING});
      RunOk(Kernel(e), {q, Tensor::Vec<std::string>(files)});
    }
    if (close) RunOk(Kernel(Node("QueueCloseV2", "close", 1)), {q});
    return q;
  }
  Tensor Reader(NodeDef n) { return RunOk(Kernel(n), {}); }
  // Every (key, value) ReaderReadV2 gives until it fails; the failure in *end.
  std::vector<std::pair<std::string, std::string>> ReadAll(const Tensor& reader, const Tensor& q,
                                                           absl::Status* end) {
    OpKernel* read = Kernel(Node("ReaderReadV2", "read", 2));
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < 100; ++i) {
      std::unique_ptr<KernelRun> r = Start(read, {reader, q});
      *end = r->Wait();
      if (!end->ok()) break;
      out.emplace_back(r->output(0).scalar<std::string>(), r->output(1).scalar<std::string>());
    }
    return out;
  }
  std::string File(const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    io::WriteFileOrDie(path, bytes);
    return path;
  }
  int64_t Counter(const char* op, const Tensor& reader) {
    Tensor t = RunOk(Kernel(Node(op, "count", 1)), {reader});
    return t.IsInitialized() ? t.scalar<int64_t>() : -1;
  }

  io::TempDir dir_;
  int queues_ = 0;
};

using KV = std::vector<std::pair<std::string, std::string>>;

TEST_F(ReaderOpsTest, TextLineReaderKeysAreFileAndLineNumberAfterTheHeader) {
  const std::string a = File("a.csv", "header\r\nl1\n\nl3");
  const std::string b = File("b.csv", "h\nm1\n");
  const std::string empty = File("empty.csv", "");
  NodeDef n = Node("TextLineReaderV2", "reader", 0);
  SetAttr(&n, "skip_header_lines", int64_t{1});
  Tensor reader = Reader(n);
  absl::Status end;
  KV got = ReadAll(reader, FileQueue({a, empty, b}), &end);
  EXPECT_EQ(got, (KV{{a + ":2", "l1"}, {a + ":3", ""}, {a + ":4", "l3"}, {b + ":2", "m1"}}));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;
  EXPECT_THAT(end.message(), HasSubstr("[ReaderReadV2 'read'] FIFOQueue 'files0' is closed"));
  EXPECT_EQ(Counter("ReaderNumRecordsProducedV2", reader), 4);
  EXPECT_EQ(Counter("ReaderNumWorkUnitsCompletedV2", reader), 3);
  RunOk(Kernel(Node("ReaderResetV2", "reset", 1)), {reader});
  EXPECT_EQ(Counter("ReaderNumRecordsProducedV2", reader), 0);
}

TEST_F(ReaderOpsTest, MissingFileIsNotFoundNamingItAndTheNextFileStillReads) {
  const std::string missing = dir_.path() + "/missing.txt";
  const std::string b = File("b.txt", "x\n");
  Tensor reader = Reader(Node("TextLineReaderV2", "reader", 0));
  absl::Status end;
  KV got = ReadAll(reader, FileQueue({missing, b}), &end);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(end.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(end.message(), HasSubstr(missing));
  got = ReadAll(reader, FileQueue({b}), &end);
  EXPECT_EQ(got, (KV{{b + ":1", "x"}}));
}

TEST_F(ReaderOpsTest, FixedLengthRecordsWithHeaderFooterAndHop) {
  const std::string f = File("f.bin", "HHabcdefFF");
  NodeDef n = Node("FixedLengthRecordReaderV2", "fixed", 0);
  SetAttr(&n, "header_bytes", int64_t{2});
  SetAttr(&n, "record_bytes", int64_t{2});
  SetAttr(&n, "footer_bytes", int64_t{2});
  absl::Status end;
  EXPECT_EQ(ReadAll(Reader(n), FileQueue({f}), &end),
            (KV{{f + ":0", "ab"}, {f + ":1", "cd"}, {f + ":2", "ef"}}));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange);

  NodeDef hop = Node("FixedLengthRecordReaderV2", "hop", 0);
  SetAttr(&hop, "header_bytes", int64_t{2});
  SetAttr(&hop, "record_bytes", int64_t{3});
  SetAttr(&hop, "footer_bytes", int64_t{2});
  SetAttr(&hop, "hop_bytes", int64_t{1});
  EXPECT_EQ(ReadAll(Reader(hop), FileQueue({f}), &end),
            (KV{{f + ":0", "abc"}, {f + ":1", "bcd"}, {f + ":2", "cde"}, {f + ":3", "def"}}));
}

TEST_F(ReaderOpsTest, TruncatedFixedLengthFileIsNamed) {
  const std::string f = File("short.bin", "abcde");
  NodeDef n = Node("FixedLengthRecordReaderV2", "fixed", 0);
  SetAttr(&n, "record_bytes", int64_t{2});
  absl::Status end;
  EXPECT_TRUE(ReadAll(Reader(n), FileQueue({f}), &end).empty());
  EXPECT_EQ(end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(end.message(), HasSubstr("input file \"" + f + "\" has body length 5 bytes"));
}

TEST_F(ReaderOpsTest, TFRecordReaderKeysAreFileAndRecordOffset) {
  const std::string path = dir_.path() + "/r.tfrecord";
  {
    absl::StatusOr<std::unique_ptr<io::TFRecordWriter>> w = io::TFRecordWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const char* r : {"one", "", "three"}) ASSERT_TRUE((*w)->Write(r).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  absl::Status end;
  // Each record is framed by 16 bytes: offsets 0, 16 + 3, 19 + 16 + 0.
  EXPECT_EQ(ReadAll(Reader(Node("TFRecordReaderV2", "records", 0)), FileQueue({path}), &end),
            (KV{{path + ":0", "one"}, {path + ":19", ""}, {path + ":35", "three"}}));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange);

  NodeDef bad = Node("TFRecordReaderV2", "bad", 0);
  SetAttr(&bad, "compression_type", std::string("LZ4"));
  absl::StatusOr<std::unique_ptr<OpKernel>> k = MakeKernel(bad, device_.get());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k.status().message(), HasSubstr("compression_type: 'LZ4'"));
}

// compression_type GZIP and ZLIB: the keys count uncompressed bytes, as
// TensorFlow's (checked with tf.compat.v1.TFRecordReader: offsets 0, 17, 233).
TEST_F(ReaderOpsTest, TFRecordReaderReadsGzipAndZlibFiles) {
  for (const char* type : {"GZIP", "ZLIB"}) {
    SCOPED_TRACE(type);
    const std::string path = dir_.path() + "/r." + type;
    const std::string long_record(200, 'b');
    {
      auto w = io::TFRecordWriter::Create(path, *io::ParseTFRecordCompression(type));
      ASSERT_TRUE(w.ok()) << w.status();
      for (const std::string& r : {std::string("a"), long_record, std::string("ccc")}) {
        ASSERT_TRUE((*w)->Write(r).ok());
      }
      ASSERT_TRUE((*w)->Close().ok());
    }
    NodeDef n = Node("TFRecordReaderV2", absl::StrCat("records_", type), 0);
    SetAttr(&n, "compression_type", std::string(type));
    absl::Status end;
    EXPECT_EQ(ReadAll(Reader(n), FileQueue({path}), &end),
              (KV{{path + ":0", "a"}, {path + ":17", long_record}, {path + ":233", "ccc"}}));
    EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;
    // A plain reader of the compressed file finds no valid record.
    absl::Status plain;
    EXPECT_TRUE(ReadAll(Reader(Node("TFRecordReaderV2", absl::StrCat("plain_", type), 0)),
                        FileQueue({path}), &plain)
                    .empty());
    EXPECT_EQ(plain.code(), absl::StatusCode::kDataLoss) << plain;
  }
}

// IdentityReader's state is TensorFlow's ReaderBaseState message, byte for
// byte (checked with tf.compat.v1.IdentityReader); restoring checks it as
// TensorFlow does. The other readers cannot save their state, as in
// TensorFlow.
TEST_F(ReaderOpsTest, IdentityReaderSerializesAndRestoresTensorFlowsState) {
  Tensor reader = Reader(Node("IdentityReaderV2", "idr", 0));
  OpKernel* save = Kernel(Node("ReaderSerializeStateV2", "save", 1));
  OpKernel* restore = Kernel(Node("ReaderRestoreStateV2", "restore", 2));
  EXPECT_EQ(RunOk(save, {reader}).scalar<std::string>(), "");
  Tensor q = FileQueue({"work2", "work3", "work4"});
  OpKernel* read = Kernel(Node("ReaderReadV2", "read", 2));
  ASSERT_TRUE(Start(read, {reader, q})->Wait().ok());
  const std::string after_one = RunOk(save, {reader}).scalar<std::string>();
  EXPECT_EQ(after_one, std::string("\x08\x01\x10\x01\x18\x01\"\x05work2", 13));
  ASSERT_TRUE(Start(read, {reader, q})->Wait().ok());
  EXPECT_EQ(Counter("ReaderNumRecordsProducedV2", reader), 2);

  RunOk(restore, {reader, Tensor::Scalar<std::string>(after_one)});
  EXPECT_EQ(Counter("ReaderNumRecordsProducedV2", reader), 1);
  EXPECT_EQ(Counter("ReaderNumWorkUnitsCompletedV2", reader), 1);
  EXPECT_EQ(RunOk(save, {reader}).scalar<std::string>(), after_one);
  std::unique_ptr<KernelRun> next = Start(read, {reader, q});  // the queue goes on
  ASSERT_TRUE(next->Wait().ok());
  EXPECT_EQ(next->output(0).scalar<std::string>(), "work4");

  const std::pair<std::string, std::string> bad[] = {
      {"garbage\xff", "Could not parse state for IdentityReader 'idr': garbage\\377"},
      {std::string("\x08\x02\x10\x01\x18\x05", 6),
       "Inconsistent work started vs. finished when restoring in IdentityReader 'idr'"},
      {"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
       "Unexpected negative value when restoring in IdentityReader 'idr'"}};
  for (const auto& [state, message] : bad) {
    std::unique_ptr<KernelRun> r = Start(restore, {reader, Tensor::Scalar<std::string>(state)});
    absl::Status s = r->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
  }
  EXPECT_EQ(Counter("ReaderNumRecordsProducedV2", reader), 2);  // untouched by the failures

  Tensor lines = Reader(Node("TextLineReaderV2", "tl", 0));
  absl::Status s = Start(save, {lines})->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("TextLineReader 'tl' cannot save its state"));
}

TEST_F(ReaderOpsTest, WholeFileIdentityAndReadUpTo) {
  const std::string a = File("a", "first\nfile"), b = File("b", "");
  absl::Status end;
  EXPECT_EQ(ReadAll(Reader(Node("WholeFileReaderV2", "whole", 0)), FileQueue({a, b}), &end),
            (KV{{a, "first\nfile"}, {b, ""}}));
  EXPECT_EQ(ReadAll(Reader(Node("IdentityReaderV2", "id", 0)), FileQueue({"w1", "w2"}), &end),
            (KV{{"w1", "w1"}, {"w2", "w2"}}));

  // ReadUpTo stops at the end of a file: batches never span two.
  const std::string c = File("c", "1\n2\n3\n"), d = File("d", "4\n");
  Tensor reader = Reader(Node("TextLineReaderV2", "lines", 0));
  Tensor q = FileQueue({c, d});
  OpKernel* up_to = Kernel(Node("ReaderReadUpToV2", "up_to", 3));
  std::vector<std::vector<std::string>> batches;
  for (int i = 0; i < 4; ++i) {
    std::unique_ptr<KernelRun> r = Start(up_to, {reader, q, Tensor::Scalar<int64_t>(2)});
    if (!r->Wait().ok()) {
      EXPECT_EQ(r->status.code(), absl::StatusCode::kOutOfRange) << r->status;
      break;
    }
    auto v = r->output(1).flat<std::string>();
    batches.emplace_back(v.begin(), v.end());
  }
  EXPECT_EQ(batches, (std::vector<std::vector<std::string>>{{"1", "2"}, {"3"}, {"4"}}));
  std::unique_ptr<KernelRun> zero = Start(up_to, {reader, q, Tensor::Scalar<int64_t>(0)});
  EXPECT_EQ(zero->Wait().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReaderOpsTest, ReadWaitsForAFileNameWithoutAThreadUntilEnqueueOrCancel) {
  const std::string a = File("a", "line\n");
  Tensor reader = Reader(Node("TextLineReaderV2", "reader", 0));
  Tensor q = FileQueue({}, /*close=*/false);
  OpKernel* read = Kernel(Node("ReaderReadV2", "read", 2));
  std::unique_ptr<KernelRun> waiting = Start(read, {reader, q});
  EXPECT_FALSE(waiting->finished()) << "no file name yet";
  NodeDef e = Node("QueueEnqueueV2", "enqueue", 2);
  SetAttr(&e, "Tcomponents", std::vector<DataType>{DT_STRING});
  RunOk(Kernel(e), {q, Tensor::Scalar<std::string>(a)});
  ASSERT_TRUE(waiting->Wait().ok()) << waiting->status;
  EXPECT_EQ(waiting->output(1).scalar<std::string>(), "line");

  CancellationManager cm;
  std::unique_ptr<KernelRun> cancelled = Start(read, {reader, q}, &cm);
  EXPECT_FALSE(cancelled->finished());
  cm.StartCancel();
  EXPECT_EQ(cancelled->Wait().code(), absl::StatusCode::kCancelled);

  std::unique_ptr<KernelRun> closing = Start(read, {reader, q});
  EXPECT_FALSE(closing->finished());
  RunOk(Kernel(Node("QueueCloseV2", "close", 1)), {q});
  EXPECT_EQ(closing->Wait().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ReaderOpsTest, MatchingFilesIsSorted) {
  File("b.txt", ""), File("a.txt", ""), File("c.bin", "");
  Tensor t = RunOk(Kernel(Node("MatchingFiles", "match", 1)),
                   {Tensor::Scalar<std::string>(dir_.path() + "/*.txt")});
  ExpectTensorEq<std::string>(t, {dir_.path() + "/a.txt", dir_.path() + "/b.txt"},
                              TensorShape({2}));
  Tensor two = RunOk(Kernel(Node("MatchingFiles", "two", 1)),
                     {Tensor::Vec<std::string>({dir_.path() + "/*.txt", dir_.path() + "/c*"})});
  ExpectTensorEq<std::string>(
      two, {dir_.path() + "/a.txt", dir_.path() + "/b.txt", dir_.path() + "/c.bin"},
      TensorShape({3}));
  Tensor both = RunOk(Kernel(Node("MatchingFiles", "both", 1)),
                      {Tensor::Vec<std::string>({dir_.path() + "/c*", dir_.path() + "/a*"})});
  ExpectTensorEq<std::string>(both, {dir_.path() + "/a.txt", dir_.path() + "/c.bin"},
                              TensorShape({2}));
  Tensor none = RunOk(Kernel(Node("MatchingFiles", "none", 1)),
                      {Tensor::Scalar<std::string>(dir_.path() + "/*.png")});
  EXPECT_EQ(none.NumElements(), 0);
}

TEST_F(ReaderOpsTest, RandomShuffleIsAPermutationOfRows) {
  NodeDef n = Node("RandomShuffle", "shuffle", 1);
  SetAttr(&n, "T", DT_INT32);
  SetAttr(&n, "seed", int64_t{5});
  std::vector<int32_t> rows;
  for (int32_t i = 0; i < 50; ++i) rows.insert(rows.end(), {i, -i});
  Tensor out = RunOk(Kernel(n), {Tensor::FromVector<int32_t>(rows, TensorShape({50, 2}))});
  ASSERT_EQ(out.shape(), TensorShape({50, 2}));
  auto v = out.flat<int32_t>();
  std::vector<int32_t> firsts;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(v[2 * i + 1], -v[2 * i]) << "rows move whole";
    firsts.push_back(v[2 * i]);
  }
  std::vector<int32_t> sorted = firsts;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(firsts, sorted);
  for (int32_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
}

// One RandomShuffle op run on inputs of several shapes in turn gives
// TensorFlow's permutations: its Philox stream goes on from run to run, and
// inputs of one row or element take none of it.
TEST_F(ReaderOpsTest, RandomShuffleGivesTensorFlowsPermutations) {
  std::ifstream in(TestDataDir() + "/shuffle_golden.json");
  ASSERT_TRUE(in.good()) << "missing tests/data/shuffle_golden.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden["random_shuffle"].size(), 3u);
  for (const auto& c : golden["random_shuffle"]) {
    NodeDef n = Node("RandomShuffle", "shuffle", 1);
    SetAttr(&n, "T", DT_INT32);
    SetAttr(&n, "seed", c["seed"].get<int64_t>());
    SetAttr(&n, "seed2", c["seed2"].get<int64_t>());
    OpKernel* shuffle = Kernel(n);
    for (const auto& run : c["runs"]) {
      SCOPED_TRACE(absl::StrCat("seeds ", c["seed"].dump(), ", ", c["seed2"].dump(), " shape ",
                                run["shape"].dump()));
      TensorShape shape;
      for (int64_t d : run["shape"]) shape.AddDim(d);
      std::vector<int32_t> values(shape.num_elements());
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>(i);
      Tensor out = RunOk(shuffle, {Tensor::FromVector<int32_t>(values, shape)});
      ASSERT_EQ(out.shape(), shape);
      auto got = out.flat<int32_t>();
      EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()),
                run["out"].get<std::vector<int32_t>>());
    }
  }
}

TEST_F(ReaderOpsTest, CountUpToCountsARefVariableToItsLimit) {
  NodeDef n = Node("CountUpTo", "count", 1);
  SetAttr(&n, "T", DT_INT64);
  SetAttr(&n, "limit", int64_t{2});
  OpKernel* count = Kernel(n);
  Tensor var = Tensor::Scalar<int64_t>(0);
  absl::Mutex mu;
  auto run = [&](int64_t* out) {
    OpKernelContext::Params params;
    params.device = device_.get();
    params.op_kernel = count;
    params.inputs.push_back(TensorValue{&var, &mu});
    OpKernelContext ctx(&params);
    absl::Status s = count->Compute(&ctx);
    if (s.ok()) *out = ctx.release_output(0).tensor->scalar<int64_t>();
    return s;
  };
  int64_t got = -1;
  ASSERT_TRUE(run(&got).ok());
  EXPECT_EQ(got, 0);
  ASSERT_TRUE(run(&got).ok());
  EXPECT_EQ(got, 1);
  absl::Status end = run(&got);
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(end.message(), HasSubstr("Reached limit of 2"));
  EXPECT_EQ(var.scalar<int64_t>(), 2);
}

TEST_F(ReaderOpsTest, ConcurrentReadsFinishTheCurrentFileBeforeOutOfRange) {
  const std::string a = File("a", "1\n2\n3\n");
  Tensor reader = Reader(Node("TextLineReaderV2", "reader", 0));
  Tensor q = FileQueue({}, /*close=*/false);
  OpKernel* read = Kernel(Node("ReaderReadV2", "read", 2));
  // Two reads wait for a file (as two threads of train.batch(num_threads=2) do).
  std::unique_ptr<KernelRun> first = Start(read, {reader, q});
  std::unique_ptr<KernelRun> second = Start(read, {reader, q});
  NodeDef e = Node("QueueEnqueueV2", "enqueue", 2);
  SetAttr(&e, "Tcomponents", std::vector<DataType>{DT_STRING});
  RunOk(Kernel(e), {q, Tensor::Scalar<std::string>(a)});
  ASSERT_TRUE(first->Wait().ok()) << first->status;
  EXPECT_FALSE(second->finished());
  RunOk(Kernel(Node("QueueCloseV2", "close", 1)), {q});
  ASSERT_TRUE(second->Wait().ok()) << "the file has lines left: " << second->status;
  EXPECT_EQ(first->output(1).scalar<std::string>(), "1");
  EXPECT_EQ(second->output(1).scalar<std::string>(), "2");
  absl::Status end;
  EXPECT_EQ(ReadAll(reader, q, &end), (KV{{a + ":3", "3"}}));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace dflow
