// `dflow server`: runs one task of a cluster until SIGTERM or SIGINT.
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/framework/status.h"
#include "tools/dflow/commands.h"
#include "tools/dflow/signals.h"

namespace dflow::cli {

namespace {

// The cluster and this task: from the flags, else from TF_CONFIG.
absl::StatusOr<TfConfig> ResolveTask(const ServerFlags& flags) {
  if (flags.cluster.empty()) {
    absl::StatusOr<TfConfig> env = TfConfigFromEnv();
    if (absl::IsNotFound(env.status())) {
      return absl::InvalidArgumentError(
          "give --cluster JSON|@file with --job and --task, or set TF_CONFIG");
    }
    return env;
  }
  TfConfig config;
  ASSIGN_OR_RETURN(config.cluster, ClusterSpec::FromJsonOrFile(flags.cluster));
  if (flags.job.empty() || flags.task < 0) {
    return absl::InvalidArgumentError("--cluster needs --job NAME and --task N");
  }
  if (!config.cluster.HasJob(flags.job)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--job '", flags.job, "' is not a job of the cluster ", config.cluster.ToJson()));
  }
  config.task = TaskId{flags.job, flags.task};
  return config;
}

}  // namespace

absl::StatusOr<SecurityOptions> ApplySecurityFlags(const SecurityFlags& flags) {
  ASSIGN_OR_RETURN(SecurityOptions security, LoadSecurityOptions(flags));
  SetDefaultClientSecurity(security);
  return security;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> StartTaskServer(const ClusterSpec& cluster,
                                                            const std::string& job, int task,
                                                            int cpus,
                                                            const GrpcServer::Options& options,
                                                            int gpus) {
  RETURN_IF_ERROR(ShutdownSignalFd().status());
  tensorflow::ServerDef def;
  *def.mutable_cluster() = cluster.ToClusterDef();
  def.set_job_name(job);
  def.set_task_index(task);
  def.set_protocol("grpc");
  (*def.mutable_default_session_config()->mutable_device_count())["CPU"] = cpus;
  if (gpus >= 0) (*def.mutable_default_session_config()->mutable_device_count())["GPU"] = gpus;
  ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Create(def, options));
  RETURN_IF_ERROR(server->Start());
  std::cout << "dflow server: " << server->task_name() << " serving " << server->target()
            << (options.security.tls() ? " (mutual TLS)" : "")
            << (options.security.auth_token.empty() ? "" : " (auth token required)") << std::endl;
  if (server->data_plane_port() != 0) {
    std::cout << "dflow server: tensor data plane on port " << server->data_plane_port()
              << (options.security.tls() ? " (mutual TLS)" : "") << std::endl;
  }
  for (Device* d : server->device_mgr()->ListDevices()) {
    std::cout << "dflow server: device " << d->name() << " (incarnation " << d->incarnation() << ")"
              << std::endl;
  }
  return server;
}

void ServeUntilSignal(GrpcServer* server) {
  std::thread waiter([&] {
    const int sig = WaitForShutdownSignal(*ShutdownSignalFd());
    std::cout << "dflow server: " << SignalName(sig) << ", shutting down" << std::endl;
    server->Stop();
  });
  server->Join();
  waiter.join();
  std::cout << "dflow server: stopped" << std::endl;
}

absl::Status ServerCommand(const ServerFlags& flags) {
  ASSIGN_OR_RETURN(TfConfig task, ResolveTask(flags));
  GrpcServer::Options options;
  SecurityFlags security = flags.security;
  for (auto [flag, key] :
       {std::pair{&security.auth_token_file, &task.auth_token_file},
        std::pair{&security.tls_cert, &task.tls_cert}, std::pair{&security.tls_key, &task.tls_key},
        std::pair{&security.tls_ca, &task.tls_ca}}) {
    if (flag->empty()) *flag = *key;  // Flags win over TF_CONFIG.
  }
  ASSIGN_OR_RETURN(options.security, ApplySecurityFlags(security));
  options.session_gc =
      flags.session_gc_seconds > 0 ? absl::Seconds(flags.session_gc_seconds) : absl::ZeroDuration();
  options.max_sessions = flags.max_sessions;
  options.max_graph_nodes = flags.max_graph_nodes;
  options.max_request_bytes = flags.max_request_bytes;
  ASSIGN_OR_RETURN(
      std::unique_ptr<GrpcServer> server,
      StartTaskServer(task.cluster, task.task.job, task.task.index, flags.cpus, options));
  ServeUntilSignal(server.get());
  return absl::OkStatus();
}

}  // namespace dflow::cli
