#include "dflow/runtime/session_util.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"
#include "google/protobuf/util/message_differencer.h"

namespace dflow {

absl::StatusOr<std::string> CanonicalTensorName(const std::string& name, absl::string_view what) {
  std::string node;
  int index = 0;
  absl::Status s = ParseTensorName(name, &node, &index);
  if (!s.ok() || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Session] ", what, " '", name, "' is not a tensor name like 'node:0'"));
  }
  return absl::StrCat(node, ":", index);
}

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string SignatureKey(const std::vector<std::string>& feeds,
                         const std::vector<std::string>& fetches,
                         const std::vector<std::string>& targets) {
  return absl::StrCat(absl::StrJoin(feeds, "\x01"), "\x02", absl::StrJoin(fetches, "\x01"), "\x02",
                      absl::StrJoin(targets, "\x01"));
}

int64_t GraphNodeCount(const tensorflow::GraphDef& def) {
  int64_t nodes = def.node_size();
  for (const tensorflow::FunctionDef& f : def.library().function()) nodes += f.node_def_size();
  return nodes;
}

absl::Status CheckGraphNodeLimit(int64_t nodes, int64_t max_nodes, absl::string_view what,
                                 absl::string_view limit_name) {
  if (max_nodes <= 0 || nodes <= max_nodes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(what, "the graph has ", nodes,
                                                   " nodes, over the limit of ", max_nodes, " (",
                                                   limit_name, ")"));
}

absl::Status ExtendGraphDef(tensorflow::GraphDef* graph, const tensorflow::GraphDef& extension) {
  absl::flat_hash_set<std::string> names;
  for (const tensorflow::NodeDef& n : graph->node()) names.insert(n.name());
  for (const tensorflow::NodeDef& n : extension.node()) {
    if (!names.insert(n.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Session] Extend: node '", n.name(), "' already exists in the graph"));
    }
  }
  absl::flat_hash_map<std::string, const tensorflow::FunctionDef*> functions;
  for (const tensorflow::FunctionDef& f : graph->library().function()) {
    functions[f.signature().name()] = &f;
  }
  std::vector<const tensorflow::FunctionDef*> new_functions;
  for (const tensorflow::FunctionDef& f : extension.library().function()) {
    auto it = functions.find(f.signature().name());
    if (it == functions.end()) {
      new_functions.push_back(&f);
    } else if (!google::protobuf::util::MessageDifferencer::Equals(*it->second, f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Session] Extend: function '", f.signature().name(),
                       "' already exists in the library with a different definition"));
    }
  }
  for (const tensorflow::NodeDef& n : extension.node()) *graph->add_node() = n;
  for (const tensorflow::FunctionDef* f : new_functions) {
    *graph->mutable_library()->add_function() = *f;
  }
  if (extension.has_versions()) *graph->mutable_versions() = extension.versions();
  return absl::OkStatus();
}

absl::StatusOr<FeedSpec> DescribeFeed(const Graph& g, const std::string& feed) {
  std::string name;
  int index = 0;
  RETURN_IF_ERROR(ParseTensorName(feed, &name, &index));
  const Node* node = g.FindNode(name);
  if (node == nullptr) {
    return absl::NotFoundError(absl::StrCat("[Session] feed '", feed, "' refers to no node"));
  }
  if (index >= node->num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Session] feed '", feed, "': node has ", node->num_outputs(), " outputs"));
  }
  FeedSpec spec;
  spec.dtype = BaseType(node->output_type(index));
  tensorflow::TensorShapeProto proto;
  const bool placeholder =
      node->type_string() == "Placeholder" || node->type_string() == "PlaceholderWithDefault";
  if (placeholder && GetNodeAttr(node->def(), "shape", &proto).ok()) {
    spec.shape = PartialShape::FromProto(proto);
  }
  return spec;
}

absl::Status CheckFeed(const std::string& feed, DataType dtype, const TensorShape& shape,
                       const FeedSpec& spec) {
  if (dtype != spec.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("[Session] feed '", feed, "' has dtype ",
                                                   DataTypeString(dtype), " but the graph expects ",
                                                   DataTypeString(spec.dtype)));
  }
  if (spec.shape && !spec.shape->IsCompatibleWith(shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Session] cannot feed value of shape ", shape.DebugString(), " for '", feed,
                     "', which has shape ", spec.shape->DebugString()));
  }
  return absl::OkStatus();
}

absl::Status PlacePinningState(Graph* g, const std::vector<Device*>& devices,
                               const Device* default_device, const PlacerOptions& opts,
                               absl::flat_hash_map<std::string, std::string>* pinned) {
  for (Node* n : g->nodes()) {
    auto it = pinned->find(n->name());
    if (it != pinned->end() && n->IsStateful()) n->set_assigned_device_name(it->second);
  }
  RETURN_IF_ERROR(Place(g, devices, default_device, opts));
  for (Node* n : g->nodes()) {
    if (n->IsStateful() && n->type_string()[0] != '_') {
      pinned->try_emplace(n->name(), n->assigned_device_name());
    }
  }
  return absl::OkStatus();
}

absl::Time StepDeadline(const tensorflow::RunOptions& options,
                        const tensorflow::ConfigProto& config) {
  int64_t ms = options.timeout_in_ms();
  if (ms <= 0) ms = config.operation_timeout_in_ms();
  return ms > 0 ? absl::Now() + absl::Milliseconds(ms) : absl::InfiniteFuture();
}

}  // namespace dflow
