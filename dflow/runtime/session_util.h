// Pieces shared by the sessions that prepare a graph per Run signature (the
// in-process DirectSession and the distributed master's sessions).
#ifndef DFLOW_RUNTIME_SESSION_UTIL_H_
#define DFLOW_RUNTIME_SESSION_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/proto/config.pb.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/placer.h"

namespace dflow {

// "x" -> "x:0"; InvalidArgument for "^x" and malformed names, saying which
// `what` ("feed", "fetch") it was.
absl::StatusOr<std::string> CanonicalTensorName(const std::string& name, absl::string_view what);

std::vector<std::string> SortedUnique(std::vector<std::string> v);

// The full canonical signature, used as a cache key (never a hash).
std::string SignatureKey(const std::vector<std::string>& feeds,
                         const std::vector<std::string>& fetches,
                         const std::vector<std::string>& targets);

// Appends `extension`'s nodes and library functions to *graph (versions
// too, when given). InvalidArgument naming a node that is already there, or
// a function already there with another body; *graph is unchanged on error.
absl::Status ExtendGraphDef(tensorflow::GraphDef* graph, const tensorflow::GraphDef& extension);

// The nodes of `def`: its graph's and those of its library's functions.
int64_t GraphNodeCount(const tensorflow::GraphDef& def);
// ResourceExhausted when `nodes` exceeds `max_nodes` (> 0; 0 or less: no
// limit): "the graph has 300 nodes, over the limit of 200 (<limit_name>)",
// after `what` ("[Master CreateSession] ").
absl::Status CheckGraphNodeLimit(int64_t nodes, int64_t max_nodes, absl::string_view what,
                                 absl::string_view limit_name);

// What a fed tensor must look like: its dtype and, for placeholders, the
// declared shape.
struct FeedSpec {
  DataType dtype = DT_INVALID;
  std::optional<PartialShape> shape;
};
absl::StatusOr<FeedSpec> DescribeFeed(const Graph& g, const std::string& feed);
// InvalidArgument naming the feed when `value` has another dtype or a shape
// the placeholder does not allow.
absl::Status CheckFeed(const std::string& feed, DataType dtype, const TensorShape& shape,
                       const FeedSpec& spec);

// Places `g` like Place, except that stateful nodes listed in *pinned keep
// that device; then records in *pinned every stateful node placed for the
// first time, so later signatures see the same variables.
absl::Status PlacePinningState(Graph* g, const std::vector<Device*>& devices,
                               const Device* default_device, const PlacerOptions& opts,
                               absl::flat_hash_map<std::string, std::string>* pinned);

// The deadline of a step started now: RunOptions.timeout_in_ms, else
// config.operation_timeout_in_ms, else none.
absl::Time StepDeadline(const tensorflow::RunOptions& options,
                        const tensorflow::ConfigProto& config);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_SESSION_UTIL_H_
