#include "dflow/distributed/remote_session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dflow/framework/status.h"
#include "dflow/framework/variant.h"
#include "dflow/runtime/session_util.h"

namespace dflow {

namespace {

absl::Status Closed() { return absl::CancelledError("[Session] the session is closed"); }

}  // namespace

RemoteSession::RemoteSession(std::shared_ptr<MasterInterface> master, SessionOptions options,
                             absl::Duration control_timeout)
    : master_(std::move(master)), options_(std::move(options)), control_timeout_(control_timeout) {}

RemoteSession::~RemoteSession() { Close().IgnoreError(); }

absl::Status RemoteSession::Create(const tensorflow::GraphDef& graph) {
  {
    absl::MutexLock l(&mu_);
    if (!handle_.empty()) {
      return absl::FailedPreconditionError(
          "[Session] Create: a graph was already created for this session; use Extend");
    }
  }
  return Extend(graph);
}

absl::Status RemoteSession::Extend(const tensorflow::GraphDef& graph) {
  absl::MutexLock l(&mu_);
  if (closed_) return Closed();
  if (handle_.empty()) {
    tensorflow::CreateSessionRequest req;
    *req.mutable_graph_def() = graph;
    *req.mutable_config() = options_.config;
    req.set_target(options_.target);
    tensorflow::CreateSessionResponse resp;
    RETURN_IF_ERROR(master_->CreateSession(req, &resp, Control()));
    handle_ = resp.session_handle();
    graph_version_ = resp.graph_version();
    return absl::OkStatus();
  }
  tensorflow::ExtendSessionRequest req;
  req.set_session_handle(handle_);
  *req.mutable_graph_def() = graph;
  req.set_current_graph_version(graph_version_);
  tensorflow::ExtendSessionResponse resp;
  RETURN_IF_ERROR(master_->ExtendSession(req, &resp, Control()));
  graph_version_ = resp.new_graph_version();
  return absl::OkStatus();
}

absl::Status RemoteSession::Run(const tensorflow::RunOptions& options,
                                const std::vector<std::pair<std::string, Tensor>>& feeds,
                                const std::vector<std::string>& fetches,
                                const std::vector<std::string>& targets,
                                std::vector<Tensor>* outputs, tensorflow::RunMetadata* metadata) {
  if (outputs == nullptr && !fetches.empty()) {
    return absl::InvalidArgumentError("[Session] Run: fetches given but outputs is null");
  }
  tensorflow::RunStepRequest req;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return Closed();
    if (handle_.empty()) {
      return absl::FailedPreconditionError("[Session] Run: no graph; call Create first");
    }
    req.set_session_handle(handle_);
  }
  // The values travel as tensors: a master in this process takes their
  // buffers, a remote one gets them encoded.
  std::vector<Tensor> feed_values;
  feed_values.reserve(feeds.size());
  for (const auto& [name, value] : feeds) {
    RETURN_IF_ERROR(CheckEncodable(value, absl::StrCat("[Session] feed '", name, "'")));
    req.add_feed()->set_name(name);
    feed_values.push_back(value);
  }
  for (const std::string& f : fetches) req.add_fetch(f);
  for (const std::string& t : targets) req.add_target(t);
  *req.mutable_options() = options;
  CallOptions opts;
  opts.deadline = StepDeadline(options, options_.config);
  if (opts.deadline != absl::InfiniteFuture())
    opts.deadline += absl::Seconds(1);  // The master's own deadline reports first.
  tensorflow::RunStepResponse resp;
  RETURN_IF_ERROR(master_->RunStepWithTensors(&req, std::move(feed_values), &resp, opts));
  if (resp.status_code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(resp.status_code()),
                        resp.status_error_message());
  }
  if (resp.tensor_size() != static_cast<int>(fetches.size())) {
    return absl::InternalError(absl::StrCat("[Session] Run: asked for ", fetches.size(),
                                            " fetches, the master returned ", resp.tensor_size()));
  }
  if (outputs != nullptr) {
    outputs->clear();
    for (const tensorflow::NamedTensorProto& t : resp.tensor()) {
      absl::StatusOr<Tensor> value = Tensor::FromProto(t.tensor());
      if (!value.ok()) {
        return WithContext(value.status(), absl::StrCat("[Session] Run: fetch '", t.name(), "'"));
      }
      outputs->push_back(*std::move(value));
    }
  }
  if (metadata != nullptr && resp.has_metadata()) metadata->Swap(resp.mutable_metadata());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DeviceInfo>> RemoteSession::ListDevices() {
  tensorflow::ListDevicesRequest req;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return Closed();
    req.set_session_handle(handle_);
  }
  tensorflow::ListDevicesResponse resp;
  RETURN_IF_ERROR(master_->ListDevices(req, &resp, Control()));
  std::vector<DeviceInfo> out;
  for (const auto& list : {resp.local_device(), resp.remote_device()}) {
    for (const tensorflow::DeviceAttributes& a : list) {
      out.push_back(DeviceInfo{a.name(), a.device_type(), a.memory_limit(), a.incarnation()});
    }
  }
  return out;
}

absl::Status RemoteSession::Close() {
  std::string handle;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    handle.swap(handle_);
  }
  if (handle.empty()) return absl::OkStatus();
  tensorflow::CloseSessionRequest req;
  req.set_session_handle(handle);
  tensorflow::CloseSessionResponse resp;
  return master_->CloseSession(req, &resp, Control());
}

absl::Status RemoteSession::Reset(const std::vector<std::string>& containers) {
  tensorflow::ResetRequest req;
  for (const std::string& c : containers) req.add_container(c);
  for (const std::string& f : options_.config.device_filters()) req.add_device_filters(f);
  tensorflow::ResetResponse resp;
  return master_->Reset(req, &resp, Control());
}

}  // namespace dflow
