#include "dflow/distributed/rpc/grpc_server.h"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dflow/distributed/local_master.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/grpc_master_service.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/grpc_worker_service.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"
#include "dflow/framework/status.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

namespace {

// "host:port" -> host and port (ValidateAddress has checked the form).
void SplitAddress(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  *host = address.substr(0, colon);
  if (!absl::SimpleAtoi(address.substr(colon + 1), port)) *port = 0;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "[::1]";
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const tensorflow::ServerDef& def,
                                                               const Options& options) {
  ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromClusterDef(def.cluster()));
  if (!cluster.HasJob(def.job_name())) {
    return absl::InvalidArgumentError(absl::StrCat("[Server] job '", def.job_name(),
                                                   "' is not in the cluster ", cluster.ToJson()));
  }
  absl::StatusOr<std::string> address = cluster.TaskAddress(def.job_name(), def.task_index());
  if (!address.ok()) {  // The ServerDef names a task its cluster lacks.
    return absl::InvalidArgumentError(absl::StrCat("[Server] ", address.status().message()));
  }
  if (def.port() < 0 || def.port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Server] port ", def.port(), " is out of range"));
  }
  auto server = std::unique_ptr<GrpcServer>(new GrpcServer(def, std::move(cluster)));
  server->security_ = options.security;
  server->max_request_bytes_ = options.max_request_bytes;
  SplitAddress(*address, &server->host_, &server->port_);
  if (def.port() != 0) server->port_ = def.port();
  ASSIGN_OR_RETURN(auto devices, CreateLocalDevices(def.default_session_config(), def.job_name(),
                                                    def.replica(), def.task_index()));
  server->devices_ = std::make_unique<DeviceMgr>(std::move(devices));
  GrpcServer* self = server.get();
  auto worker_for_task = [self](const std::string& task) { return self->WorkerFor(task); };
  WorkerOptions wopts;
  wopts.worker_for_task = worker_for_task;
  wopts.inter_op_pool = InterOpPool();
  wopts.max_graph_nodes = 2 * options.max_graph_nodes;
  server->worker_ = std::make_unique<Worker>(server->devices_.get(), std::move(wopts));
  MasterEnv env;
  env.task_name = server->task_name_;
  {
    absl::MutexLock l(&server->mu_);
    for (const TaskId& t : server->cluster_.AllTasks()) {
      env.cluster_tasks.push_back(ClusterSpec::TaskName(t.job, t.index));
    }
  }
  env.worker_for_task = worker_for_task;
  env.default_session_config = def.default_session_config();
  env.session_gc = options.session_gc;
  env.max_sessions = options.max_sessions;
  env.max_graph_nodes = options.max_graph_nodes;
  server->master_ = std::make_unique<Master>(std::move(env));
  server->worker_service_ =
      std::make_unique<GrpcWorkerService>(server->worker_.get(), options.security.auth_token);
  server->master_service_ =
      std::make_unique<GrpcMasterService>(server->master_.get(), options.security.auth_token);
  return server;
}

GrpcServer::GrpcServer(const tensorflow::ServerDef& def, ClusterSpec cluster)
    : def_(def), task_name_(ClusterSpec::TaskName(def.job_name(), def.task_index())) {
  absl::MutexLock l(&mu_);
  cluster_ = std::move(cluster);
}

GrpcServer::~GrpcServer() {
  Stop();
  master_.reset();  // Closes its sessions while the workers it calls still exist.
  absl::MutexLock l(&mu_);
  server_.reset();
}

absl::Status GrpcServer::Start() {
  absl::MutexLock l(&mu_);
  if (server_ != nullptr || stopped_) {
    return absl::FailedPreconditionError(
        absl::StrCat("[Server] ", task_name_, " was already started"));
  }
  const std::string bind = absl::StrCat(IsLoopback(host_) ? "127.0.0.1" : "0.0.0.0", ":", port_);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder, max_request_bytes_);
  int bound = 0;
  builder.AddListeningPort(bind, ServerCredentialsFor(security_), &bound);
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(master_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("[Server] ", task_name_, " cannot listen on ", bind,
                                               "; is the port already in use?"));
  }
  bound_port_ = bound;
  // Sessions of this process that target this server reach its master directly.
  local_master_ = LocalMaster::Register(absl::StrCat(host_, ":", bound_port_), master_.get());
  // Under TLS the data plane speaks mutual TLS with the port's certificates.
  std::shared_ptr<const DataPlaneTls> dp_tls;
  if (DataPlaneEnabledByEnv() && security_.tls()) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made =
        DataPlaneTls::Create(security_, DataPlaneTls::kServer);
    if (!made.ok()) {  // gRPC accepted them, so this is unexpected: tensors stay on gRPC.
      std::fprintf(stderr, "[Server] %s: no tensor data plane: %s\n", task_name_.c_str(),
                   std::string(made.status().message()).c_str());
    } else {
      dp_tls = *std::move(made);
    }
  }
  if (DataPlaneEnabledByEnv() && (!security_.tls() || dp_tls != nullptr)) {
    DataPlaneServer::Options dp_options;
    dp_options.auth_token = security_.auth_token;
    dp_options.tls = std::move(dp_tls);
    // The local socket has no TLS: only where the TCP port has none either.
    dp_options.local_socket = LocalDataPlaneEnabledByEnv() && dp_options.tls == nullptr;
    dp_options.shared_memory = SharedDataPlaneEnabledByEnv();
    auto data_plane = std::make_unique<DataPlaneServer>(worker_.get(), dp_options);
    if (data_plane->Start(IsLoopback(host_) ? "127.0.0.1" : "0.0.0.0").ok()) {
      worker_service_->set_data_plane(data_plane->offer());
      data_plane_ = std::move(data_plane);
    }  // Else RecvTensor stays on gRPC.
  }
  return absl::OkStatus();
}

void GrpcServer::Stop() {
  // Unregistered without mu_ held: a call being handed to the master may
  // need it (WorkerFor).
  std::unique_ptr<LocalMaster::Registration> local_master;
  absl::MutexLock l(&mu_);
  if (stopped_) return;
  stopped_ = true;
  local_master = std::move(local_master_);
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  if (data_plane_ != nullptr) data_plane_->Stop();
}

void GrpcServer::Join() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(&stopped_));
}

int GrpcServer::data_plane_port() const {
  absl::MutexLock l(&mu_);
  return data_plane_ != nullptr ? data_plane_->port() : 0;
}

int64_t GrpcServer::data_plane_requests() const {
  absl::MutexLock l(&mu_);
  return data_plane_ != nullptr ? data_plane_->num_requests() : 0;
}

std::string GrpcServer::target() const {
  absl::MutexLock l(&mu_);
  return absl::StrCat("grpc://", host_, ":", bound_port_ != 0 ? bound_port_ : port_);
}

int GrpcServer::bound_port() const {
  absl::MutexLock l(&mu_);
  return bound_port_;
}

absl::Status GrpcServer::UpdateCluster(const ClusterSpec& cluster) {
  absl::MutexLock l(&mu_);
  std::vector<TaskId> before = cluster_.AllTasks(), after = cluster.AllTasks();
  if (before.size() != after.size() || !std::equal(before.begin(), before.end(), after.begin())) {
    return absl::InvalidArgumentError(absl::StrCat("[Server] the new cluster ", cluster.ToJson(),
                                                   " has other tasks than ", cluster_.ToJson()));
  }
  cluster_ = cluster;
  return absl::OkStatus();
}

absl::Status GrpcServer::PingTask(const std::string& task, absl::Duration timeout) {
  WorkerInterface* worker = WorkerFor(task);
  if (worker == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("[Server] ", task, " is not a task of the cluster"));
  }
  tensorflow::GetStatusResponse resp;
  return worker->GetStatus({}, &resp, CallOptions::WithTimeout(timeout));
}

WorkerInterface* GrpcServer::WorkerFor(const std::string& task) {
  if (task == task_name_) return worker_.get();
  absl::MutexLock l(&mu_);
  auto it = remote_workers_.find(task);
  if (it != remote_workers_.end()) return it->second.get();
  absl::StatusOr<DeviceName> name = DeviceName::Parse(task);
  if (!name.ok() || !name->has_job || !name->has_task) return nullptr;
  absl::StatusOr<std::string> address = cluster_.TaskAddress(name->job, name->task);
  if (!address.ok()) return nullptr;
  std::unique_ptr<WorkerInterface>& w = remote_workers_[task];
  w = NewGrpcRemoteWorker(*address, task, security_);
  return w.get();
}

}  // namespace dflow
