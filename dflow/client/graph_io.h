// Reading and writing GraphDefs in TensorFlow's binary (.pb) and text
// (.pbtxt) encodings, as tf.io.write_graph produces them.
#ifndef DFLOW_CLIENT_GRAPH_IO_H_
#define DFLOW_CLIENT_GRAPH_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "dflow/proto/graph.pb.h"

namespace dflow {

// Parses binary bytes; DataLoss (with the byte count) when they are not a GraphDef.
absl::StatusOr<tensorflow::GraphDef> ParseGraphDef(const std::string& bytes);
// Parses text format; InvalidArgument with the line and column of the error.
absl::StatusOr<tensorflow::GraphDef> ParseGraphDefText(const std::string& text);
// Reads a file: text format when the name ends in ".pbtxt"/".txt", else binary.
// NotFound naming the path when it cannot be read.
absl::StatusOr<tensorflow::GraphDef> LoadGraphDef(const std::string& path);
// Writes text format when `as_text`, else binary.
absl::Status SaveGraphDef(const tensorflow::GraphDef& graph, const std::string& path,
                          bool as_text);
std::string GraphDefToText(const tensorflow::GraphDef& graph);

}  // namespace dflow

#endif  // DFLOW_CLIENT_GRAPH_IO_H_
