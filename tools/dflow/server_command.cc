// `dflow server`: runs one task of a cluster until SIGTERM or SIGINT.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/framework/status.h"
#include "tools/dflow/commands.h"

namespace dflow::cli {

namespace {

// SIGTERM and SIGINT may land on any thread (OpenBLAS starts its threads when
// the library loads, before main), so the handler only writes the signal
// number to a pipe that one thread waits on.
int signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(signal_pipe[1], &byte, 1);
}

absl::Status InstallSignalPipe() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return absl::InternalError("cannot create a pipe");
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return absl::OkStatus();
}

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

absl::Status ServerCommand(const ServerFlags& flags) {
  ASSIGN_OR_RETURN(TfConfig task, ResolveTask(flags));
  RETURN_IF_ERROR(InstallSignalPipe());

  tensorflow::ServerDef def;
  *def.mutable_cluster() = task.cluster.ToClusterDef();
  def.set_job_name(task.task.job);
  def.set_task_index(task.task.index);
  def.set_protocol("grpc");
  (*def.mutable_default_session_config()->mutable_device_count())["CPU"] = flags.cpus;
  ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Create(def));
  RETURN_IF_ERROR(server->Start());
  std::cout << "dflow server: " << server->task_name() << " serving " << server->target()
            << std::endl;
  for (Device* d : server->device_mgr()->ListDevices()) {
    std::cout << "dflow server: device " << d->name() << " (incarnation " << d->incarnation() << ")"
              << std::endl;
  }
  std::thread waiter([&] {
    char sig = 0;
    while (read(signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    std::cout << "dflow server: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", shutting down"
              << std::endl;
    server->Stop();
  });
  server->Join();
  waiter.join();
  std::cout << "dflow server: stopped" << std::endl;
  return absl::OkStatus();
}

}  // namespace dflow::cli
