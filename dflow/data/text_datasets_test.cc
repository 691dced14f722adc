// TextLineDataset and FixedLengthRecordDataset(V2) in a dflow session
// (IteratorV2 + MakeIterator + IteratorGetNext, as tf.compat.v1's initializable
// iterator builds them): elements as TensorFlow gives them (checked with
// tf.data), OUT_OF_RANGE at the end, and bad files named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/io/test_util.h"
#include "dflow/runtime/direct_session.h"
#include "google/protobuf/text_format.h"

namespace dflow::data {
namespace {

using ::testing::HasSubstr;

// A graph reading `dataset_node` (a NodeDef text named "ds" whose inputs are
// the nodes of `consts`) through an iterator named "it".
tensorflow::GraphDef Graph(const std::string& consts, const std::string& dataset_node) {
  const std::string text = absl::StrCat(consts, "node { ", dataset_node, R"( }
node { name: "it" op: "IteratorV2"
  attr { key: "shared_name" value { s: "" } } attr { key: "container" value { s: "" } }
  attr { key: "output_types" value { list { type: DT_STRING } } }
  attr { key: "output_shapes" value { list { shape { } } } } }
node { name: "make" op: "MakeIterator" input: "ds" input: "it" }
node { name: "next" op: "IteratorGetNext" input: "it"
  attr { key: "output_types" value { list { type: DT_STRING } } }
  attr { key: "output_shapes" value { list { shape { } } } } }
)");
  tensorflow::GraphDef g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

// A string Const: a vector of `values`, or (`scalar`) its one value.
std::string StringConst(const std::string& name, const std::vector<std::string>& values,
                        bool scalar = false) {
  std::string vals;
  for (const std::string& v : values) absl::StrAppend(&vals, "string_val: \"", v, "\" ");
  return absl::StrCat("node { name: \"", name, R"(" op: "Const"
  attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { )",
                      scalar ? "" : absl::StrCat("dim { size: ", values.size(), " }"), " } ", vals,
                      "} } } }\n");
}

std::string Int64Const(const std::string& name, int64_t v) {
  return absl::StrCat("node { name: \"", name, R"(" op: "Const"
  attr { key: "dtype" value { type: DT_INT64 } }
  attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: )",
                      v, " } } } }\n");
}

// Every element until the end (OK) or the first error, which *end receives.
std::vector<std::string> Drain(const tensorflow::GraphDef& g, absl::Status* end) {
  auto s = DirectSession::New(SessionOptions());
  EXPECT_TRUE(s.ok()) << s.status();
  std::unique_ptr<DirectSession> session = *std::move(s);
  EXPECT_TRUE(session->Create(g).ok());
  std::vector<std::string> out;
  *end = session->Run({}, {}, {"make"}, nullptr);
  for (int i = 0; i < 100 && end->ok(); ++i) {
    std::vector<Tensor> got;
    *end = session->Run({}, {"next:0"}, {}, &got);
    if (end->ok()) out.push_back(got[0].scalar<std::string>());
  }
  return out;
}

TEST(TextDatasetsTest, TextLineDatasetGivesTheLinesOfEachFileInOrder) {
  io::TempDir dir;
  const std::string a = dir.path() + "/a.txt", b = dir.path() + "/b.txt";
  io::WriteFileOrDie(a, "alpha\r\nbeta\n\ngamma");
  io::WriteFileOrDie(b, "delta\n");
  const std::string consts = StringConst("files", {a, b}) +
                             StringConst("compression", {""}, /*scalar=*/true) +
                             Int64Const("buffer", 0);
  absl::Status end;
  EXPECT_EQ(Drain(Graph(consts, R"(name: "ds" op: "TextLineDataset" input: "files"
                             input: "compression" input: "buffer")"),
                  &end),
            (std::vector<std::string>{"alpha", "beta", "", "gamma", "delta"}));
  EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;

  const std::string missing = dir.path() + "/missing.txt";
  const std::string bad = StringConst("files", {missing}) +
                          StringConst("compression", {""}, /*scalar=*/true) +
                          Int64Const("buffer", 0);
  EXPECT_TRUE(Drain(Graph(bad, R"(name: "ds" op: "TextLineDataset" input: "files"
                           input: "compression" input: "buffer")"),
                    &end)
                  .empty());
  EXPECT_EQ(end.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(end.message(), HasSubstr(missing));
}

TEST(TextDatasetsTest, FixedLengthRecordDatasetSkipsHeaderAndFooter) {
  io::TempDir dir;
  const std::string a = dir.path() + "/a.bin", short_file = dir.path() + "/short.bin";
  io::WriteFileOrDie(a, "HHabcdefF");
  io::WriteFileOrDie(short_file, "HHabcdeF");
  auto graph = [](const std::string& file, bool v2) {
    std::string consts = StringConst("files", {file}) + Int64Const("header", 2) +
                         Int64Const("record", 2) + Int64Const("footer", 1) +
                         Int64Const("buffer", 0) +
                         StringConst("compression", {""}, /*scalar=*/true);
    return Graph(consts, absl::StrCat("name: \"ds\" op: \"FixedLengthRecordDataset", v2 ? "V2" : "",
                                      R"(" input: "files" input: "header"
                          input: "record" input: "footer" input: "buffer")",
                                      v2 ? " input: \"compression\"" : ""));
  };
  for (bool v2 : {false, true}) {
    SCOPED_TRACE(v2 ? "V2" : "V1");
    absl::Status end;
    EXPECT_EQ(Drain(graph(a, v2), &end), (std::vector<std::string>{"ab", "cd", "ef"}));
    EXPECT_EQ(end.code(), absl::StatusCode::kOutOfRange) << end;
    EXPECT_TRUE(Drain(graph(short_file, v2), &end).empty());
    EXPECT_EQ(end.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(end.message(), HasSubstr("input file \"" + short_file +
                                         "\" has body length 5 bytes, which is not an exact "
                                         "multiple of the record length (2 bytes)"));
  }
}

}  // namespace
}  // namespace dflow::data
