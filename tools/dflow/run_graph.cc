#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/client/graph_io.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/session_factory.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"
#include "tools/dflow/commands.h"

namespace dflow::cli {
namespace {

using json = nlohmann::json;

// The dtype of tensor "node:i" in `graph`.
absl::StatusOr<DataType> TensorDtype(const tensorflow::GraphDef& graph, const std::string& name) {
  std::string node_name = name;
  int index = 0;
  if (size_t colon = name.rfind(':'); colon != std::string::npos) {
    node_name = name.substr(0, colon);
    index = std::atoi(name.c_str() + colon + 1);
  }
  for (const auto& node : graph.node()) {
    if (node.name() != node_name) continue;
    ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(node.op()));
    tensorflow::NodeDef copy = node;
    AddDefaultAttrs(*op, &copy);
    DataTypeVector in, out;
    RETURN_IF_ERROR(InOutTypesForNode(copy, *op, &in, &out));
    if (index < 0 || index >= static_cast<int>(out.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "': node has ", out.size(), " outputs"));
    }
    return BaseType(out[index]);
  }
  return absl::NotFoundError(absl::StrCat("feed '", name, "' names no node of the graph"));
}

// Walks a nested JSON array, collecting its shape and leaves.
absl::Status Flatten(const json& v, int depth, std::vector<int64_t>* shape,
                     std::vector<json>* leaves) {
  if (!v.is_array()) {
    if (depth != static_cast<int>(shape->size())) {
      return absl::InvalidArgumentError("ragged nested list");
    }
    leaves->push_back(v);
    return absl::OkStatus();
  }
  if (depth == static_cast<int>(shape->size())) {
    if (!leaves->empty()) return absl::InvalidArgumentError("ragged nested list");
    shape->push_back(static_cast<int64_t>(v.size()));
  } else if (depth > static_cast<int>(shape->size()) ||
             (*shape)[depth] != static_cast<int64_t>(v.size())) {
    return absl::InvalidArgumentError("ragged nested list");
  }
  for (const json& e : v) RETURN_IF_ERROR(Flatten(e, depth + 1, shape, leaves));
  return absl::OkStatus();
}

template <typename T>
absl::Status FillLeaves(const std::vector<json>& leaves, Tensor* t) {
  auto out = t->flat<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    try {
      out[i] = leaves[i].get<T>();
    } catch (const json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("value ", leaves[i].dump(), " is not a ",
                                                     DataTypeString(t->dtype())));
    }
  }
  return absl::OkStatus();
}

// "name=JSON": a (nested) list or scalar, or {"dtype":..,"shape":..,"values":..}.
absl::StatusOr<std::pair<std::string, Tensor>> ParseFeed(const tensorflow::GraphDef& graph,
                                                         const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--feed '", spec, "' is not NAME=JSON"));
  }
  std::string name = spec.substr(0, eq);
  json value = json::parse(spec.substr(eq + 1), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("--feed ", name, ": value is not JSON"));
  }
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<json> leaves;
  if (value.is_object()) {
    ASSIGN_OR_RETURN(dtype, DataTypeFromString(value.value("dtype", "float")));
    RETURN_IF_ERROR(Flatten(value.value("values", json::array()), 0, &shape, &leaves));
    if (value.contains("shape")) shape = value["shape"].get<std::vector<int64_t>>();
  } else {
    ASSIGN_OR_RETURN(dtype, TensorDtype(graph, name));
    RETURN_IF_ERROR(WithContext(Flatten(value, 0, &shape, &leaves), "--feed " + name));
  }
  ASSIGN_OR_RETURN(TensorShape tshape, TensorShape::FromDims(shape));
  if (tshape.num_elements() != static_cast<int64_t>(leaves.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--feed ", name, ": shape ",
                                                   tshape.DebugString(), " needs ",
                                                   tshape.num_elements(), " values, got ",
                                                   leaves.size()));
  }
  Tensor t(dtype, tshape);
  RETURN_IF_ERROR(WithContext(SwitchAll(dtype, "--feed", [&](auto tag) {
    return FillLeaves<typename decltype(tag)::type>(leaves, &t);
  }), "--feed " + name));
  return std::make_pair(name, t);
}

// Keys in the documented order: name, dtype, shape, values.
nlohmann::ordered_json TensorJson(const std::string& name, const Tensor& t) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  SwitchAll(t.dtype(), "print", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const T& v : t.flat<T>()) values.push_back(v);
    return absl::OkStatus();
  }).IgnoreError();
  std::vector<int64_t> shape(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
  return nlohmann::ordered_json{{"name", name},
                                {"dtype", DataTypeString(t.dtype())},
                                {"shape", shape},
                                {"values", values}};
}

absl::StatusOr<tensorflow::ConfigProto> LoadConfig(const std::string& path) {
  tensorflow::ConfigProto config;
  if (path.empty()) return config;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open config '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  if (!google::protobuf::TextFormat::ParseFromString(buf.str(), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a text ConfigProto"));
  }
  return config;
}

}  // namespace

absl::Status RunGraph(const RunGraphFlags& flags) {
  ASSIGN_OR_RETURN(tensorflow::GraphDef graph, LoadGraphDef(flags.graph_path));
  SessionOptions options;
  RETURN_IF_ERROR(ApplySecurityFlags(flags.security).status());
  options.target = flags.session_target;
  ASSIGN_OR_RETURN(options.config, LoadConfig(flags.config_path));
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const std::string& spec : flags.feeds) {
    ASSIGN_OR_RETURN(auto feed, ParseFeed(graph, spec));
    feeds.push_back(std::move(feed));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewSession(options));
  RETURN_IF_ERROR(session->Create(graph));
  std::vector<Tensor> outputs;
  absl::Status run = session->Run(feeds, flags.fetches, flags.targets, &outputs);
  session->Close().IgnoreError();
  RETURN_IF_ERROR(run);
  for (size_t i = 0; i < outputs.size(); ++i) {
    // JSON holds text: bytes of a string that are not UTF-8 print as U+FFFD.
    std::cout << TensorJson(flags.fetches[i], outputs[i])
                     .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
  }
  return absl::OkStatus();
}

absl::Status ListOps(bool as_json) {
  std::vector<KernelDef> kernels = KernelRegistry::Global()->ListKernels();
  json all = json::array();
  for (const std::string& op : OpRegistry::Global()->ListOps()) {
    json entry{{"op", op}, {"kernels", json::array()}};
    for (const KernelDef& k : kernels) {
      if (k.op != op) continue;
      json constraints = json::object();
      for (const auto& [attr, types] : k.type_constraints) {
        std::vector<std::string> names;
        for (DataType t : types) names.push_back(DataTypeString(t));
        constraints[attr] = names;
      }
      entry["kernels"].push_back({{"device", k.device_type}, {"types", constraints}});
    }
    all.push_back(entry);
  }
  if (as_json) {
    std::cout << all.dump(1) << "\n";
    return absl::OkStatus();
  }
  for (const json& e : all) {
    std::vector<std::string> kernels_text;
    for (const json& k : e["kernels"]) {
      std::string text = k["device"].get<std::string>();
      for (const auto& [attr, types] : k["types"].items()) {
        text += absl::StrCat(" ", attr, "=", absl::StrJoin(types.get<std::vector<std::string>>(), "|"));
      }
      kernels_text.push_back(text);
    }
    std::cout << e["op"].get<std::string>() << "\t"
              << (kernels_text.empty() ? "(no kernel)" : absl::StrJoin(kernels_text, "; ")) << "\n";
  }
  return absl::OkStatus();
}

absl::Status CheckOps(const std::string& path) {
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, LoadGraphDef(path));
  const std::vector<UnsupportedOp> unsupported = UnsupportedOps(def, /*functions=*/true);
  if (unsupported.empty()) {
    std::cout << "every op of " << path << " is supported (" << def.node_size() << " nodes, "
              << def.library().function_size() << " functions)\n";
    return absl::OkStatus();
  }
  for (const UnsupportedOp& u : unsupported) {
    std::cout << u.op << "\t" << u.nodes.size() << "\t" << absl::StrJoin(u.nodes, " ") << "\n";
  }
  return absl::NotFoundError(absl::StrCat(path, " uses ", DescribeUnsupportedOps(unsupported)));
}

}  // namespace dflow::cli
