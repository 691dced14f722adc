#include "dflow/client/graph_io.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace dflow {
namespace {

// Collects the first text-format parse error with its position.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::StatusOr<tensorflow::GraphDef> ParseGraphDef(const std::string& bytes) {
  tensorflow::GraphDef graph;
  if (!graph.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat("cannot parse ", bytes.size(), " bytes as a binary GraphDef"));
  }
  return graph;
}

absl::StatusOr<tensorflow::GraphDef> ParseGraphDefText(const std::string& text) {
  tensorflow::GraphDef graph;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &graph)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse text GraphDef: ", errors.error()));
  }
  return graph;
}

absl::StatusOr<tensorflow::GraphDef> LoadGraphDef(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open graph file '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  bool text = absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt");
  auto graph = text ? ParseGraphDefText(buf.str()) : ParseGraphDef(buf.str());
  if (!graph.ok()) return WithContext(graph.status(), path);
  return graph;
}

std::string GraphDefToText(const tensorflow::GraphDef& graph) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(graph, &text);
  return text;
}

absl::Status SaveGraphDef(const tensorflow::GraphDef& graph, const std::string& path,
                          bool as_text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  if (as_text) {
    out << GraphDefToText(graph);
  } else {
    graph.SerializeToOstream(&out);
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("failed writing '", path, "'"));
  return absl::OkStatus();
}

}  // namespace dflow
