// `dflow train`: trains a model and prints its metrics.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/framework/status.h"
#include "dflow/train/train_mode.h"
#include "tools/dflow/commands.h"
#include "tools/dflow/signals.h"

namespace dflow::cli {

absl::Status TrainCommand(const TrainOptions& flags, const SecurityFlags& security) {
  TrainOptions options = flags;
  options.tty = isatty(fileno(stderr)) != 0;
  std::unique_ptr<GrpcServer> server;
  if (!options.cluster.empty()) {
    ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromJsonOrFile(options.cluster));
    if (!cluster.HasJob(options.job)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--job '", options.job, "' is not a job of the cluster ", cluster.ToJson()));
    }
    GrpcServer::Options server_options;
    ASSIGN_OR_RETURN(server_options.security, ApplySecurityFlags(security));
    // The trainer's ps tasks keep variables in host memory (no GPU), as
    // TensorFlow users do with CUDA_VISIBLE_DEVICES="" on a ps; a worker's
    // towers each take a GPU when it has enough.
    const bool ps = options.job == "ps";
    ASSIGN_OR_RETURN(server, StartTaskServer(cluster, options.job, options.task,
                                             ps ? 1 : options.towers, server_options,
                                             ps ? 0 : -1));
    int64_t gpus = 0;
    for (Device* d : server->device_mgr()->ListDevices()) gpus += d->device_type() == kDeviceGPU;
    if (options.towers > 1 && gpus >= options.towers) options.tower_device_type = kDeviceGPU;
    // A ps, and in-graph every worker but the client (worker 0), only serve.
    ASSIGN_OR_RETURN(const TrainMode mode, ParseTrainMode(options.mode));
    if (options.job == "ps" || (IsInGraph(mode) && options.task != 0)) {
      ServeUntilSignal(server.get());
      return absl::OkStatus();
    }
    options.session_target = server->target();
    options.ping_task = [s = server.get()](const std::string& task, absl::Duration timeout) {
      return s->PingTask(task, timeout);
    };
    // A worker stops at once on SIGTERM/SIGINT; its steps are not resumable.
    std::thread([] {
      const int sig = WaitForShutdownSignal(*ShutdownSignalFd());
      std::cerr << "dflow train: " << SignalName(sig) << ", stopping" << std::endl;
      std::_Exit(128 + sig);
    }).detach();
  }
  absl::StatusOr<TrainMetrics> metrics = Train(options, std::cerr);
  if (!metrics.ok()) return metrics.status();
  for (const std::string& path : metrics->trace_files) {
    std::cout << "step trace written to " << path << "\n";
  }
  if (!metrics->mode.empty()) {
    std::cout << absl::StrFormat(
        "worker %d of %d (%s): %d local steps, %.0f examples/s here; %d stale gradients\n",
        options.task, metrics->workers, metrics->mode, metrics->local_steps,
        metrics->local_examples_per_sec, metrics->stale_gradients);
    if (options.task != 0) return absl::OkStatus();  // The chief reports the rest.
  }
  std::cout << absl::StrFormat(
      "%s (%s, lr %g, batch %d): %d steps, %d epochs in %.1fs (train %.1fs, %.0f examples/s); "
      "final loss %.4f; test accuracy %.4f\n",
      metrics->model, metrics->optimizer, metrics->learning_rate, metrics->batch_size,
      metrics->steps, metrics->epochs, metrics->wall_seconds, metrics->train_seconds,
      metrics->examples_per_sec, metrics->final_loss, metrics->test_accuracy);
  if (!options.metrics_out.empty())
    std::cout << "metrics written to " << options.metrics_out << "\n";
  return absl::OkStatus();
}

}  // namespace dflow::cli
