#include "dflow/client/client_session.h"

#include "dflow/framework/status.h"
#include "dflow/runtime/session_factory.h"

namespace dflow {

ClientSession::ClientSession(const Scope& scope, const std::string& target)
    : ClientSession(scope, SessionOptions{target, {}}) {}

ClientSession::ClientSession(const Scope& scope, const SessionOptions& options)
    : scope_(scope) {
  auto session = NewSession(options);
  if (session.ok()) {
    session_ = *std::move(session);
  } else {
    init_status_ = session.status();
  }
}

ClientSession::~ClientSession() {
  if (session_) session_->Close().IgnoreError();
}

absl::Status ClientSession::MaybeExtend() const {
  RETURN_IF_ERROR(init_status_);
  RETURN_IF_ERROR(scope_.status());
  absl::MutexLock l(&mu_);
  // Copying the GraphDef every step cost ~3% of an MLP training step.
  if (scope_.num_nodes() == nodes_sent_) return absl::OkStatus();
  tensorflow::GraphDef def;
  RETURN_IF_ERROR(scope_.ToGraphDef(&def));
  tensorflow::GraphDef delta;
  *delta.mutable_versions() = def.versions();
  for (int i = nodes_sent_; i < def.node_size(); ++i) *delta.add_node() = def.node(i);
  RETURN_IF_ERROR(nodes_sent_ == 0 ? session_->Create(delta) : session_->Extend(delta));
  nodes_sent_ = def.node_size();
  return absl::OkStatus();
}

absl::Status ClientSession::Run(const std::vector<Output>& fetches,
                                std::vector<Tensor>* outputs) const {
  return Run(FeedType{}, fetches, {}, outputs);
}

absl::Status ClientSession::Run(const FeedType& feeds, const std::vector<Output>& fetches,
                                std::vector<Tensor>* outputs) const {
  return Run(feeds, fetches, {}, outputs);
}

absl::Status ClientSession::Run(const FeedType& feeds, const std::vector<Output>& fetches,
                                const std::vector<Operation>& targets,
                                std::vector<Tensor>* outputs) const {
  return Run(tensorflow::RunOptions(), feeds, fetches, targets, outputs, nullptr);
}

absl::Status ClientSession::Run(const tensorflow::RunOptions& options, const FeedType& feeds,
                                const std::vector<Output>& fetches,
                                const std::vector<Operation>& targets,
                                std::vector<Tensor>* outputs,
                                tensorflow::RunMetadata* metadata) const {
  RETURN_IF_ERROR(MaybeExtend());
  std::vector<std::pair<std::string, Tensor>> feed_tensors;
  for (const auto& [output, input] : feeds) {
    if (!input.is_const()) {
      return absl::InvalidArgumentError("feed for " + output.name() +
                                        " must be a value, not another output");
    }
    feed_tensors.emplace_back(output.name(), input.tensor());
  }
  std::vector<std::string> fetch_names, target_names;
  for (const Output& o : fetches) fetch_names.push_back(o.name());
  for (const Operation& op : targets) target_names.push_back(op.name());
  return session_->Run(options, feed_tensors, fetch_names, target_names, outputs, metadata);
}

}  // namespace dflow
