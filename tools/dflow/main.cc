// dflow: the command line. Flag parsing only; each command lives in its own file.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/host_memory.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/train/cluster_trainer.h"
#include "dflow/train/step_trace.h"
#include "dflow/train/train_mode.h"
#include "tools/dflow/commands.h"

namespace {

// An integer flag's lower bound, failing as a sentence:
// "--epochs must be >= 1, got -1" (CLI11's own range check prints its bound
// with hundreds of digits).
CLI::Validator AtLeast(int64_t min) {
  const std::string bound = ">= " + std::to_string(min);
  return CLI::Validator(
      [min, bound](std::string& value) -> std::string {
        int64_t n = 0;
        if (!CLI::detail::lexical_cast(value, n)) return "must be an integer " + bound + ", got " + value;
        return n < min ? "must be " + bound + ", got " + value : "";
      },
      min == 1 ? "POSITIVE" : min == 0 ? "NONNEGATIVE" : bound);  // As CLI11's help named them.
}

// A number flag that must be above zero: "--learning-rate must be > 0, got 0".
CLI::Validator Positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(value, x)) return "must be a number > 0, got " + value;
        return x > 0 ? "" : "must be > 0, got " + value;
      },
      "POSITIVE");
}

// CLI11 prints a failed check as "--flag: <message>"; ours read as
// sentences, "--flag must be ...".
std::string FailureMessage(const CLI::App* app, const CLI::Error& e) {
  std::string text = CLI::FailureMessage::simple(app, e);
  const std::string::size_type colon = text.find(": must be ");
  if (e.get_name() == "ValidationError" && colon != std::string::npos) text.erase(colon, 1);
  return text;
}

// Every command's flags, as the parser fills them.
struct Flags {
  dflow::cli::RunGraphFlags run;
  std::vector<std::string> run_targets;  // Nodes to run, or the session's grpc:// target.
  bool ops_json = false;
  std::string ops_check;
  dflow::TrainOptions train;
  dflow::cli::SecurityFlags train_security;
  std::string trace_steps;
  int inter_op_threads = 0;  // 0: one per core.
  dflow::cli::DataConvertFlags convert;
  dflow::cli::ServerFlags server;
  dflow::cli::ClusterFlags cluster;
};

// Opt-in security (SECURITY.md), the same four flags on every command that
// serves or calls a cluster.
void AddSecurityFlags(CLI::App* cmd, dflow::cli::SecurityFlags* flags) {
  cmd->add_option("--auth-token-file", flags->auth_token_file,
                  "Shared token (file, not readable by others): required of every RPC and "
                  "data-plane connection, and sent on ours")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", flags->tls_cert, "Mutual TLS: this end's certificate (PEM)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", flags->tls_key, "Mutual TLS: its private key (PEM)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-ca", flags->tls_ca,
                  "Mutual TLS: the CA that signs every task's and client's certificate (PEM)")
      ->check(CLI::ExistingFile);
}

CLI::App* AddRunGraphCommand(CLI::App& app, Flags& f) {
  CLI::App* run_cmd = app.add_subcommand("run-graph", "Run a GraphDef and print fetched tensors as JSON lines");
  run_cmd->add_option("graph", f.run.graph_path, "GraphDef file (.pb binary, .pbtxt text)")
      ->required()->check(CLI::ExistingFile);
  run_cmd->add_option("--fetch", f.run.fetches, "Tensor to fetch, NAME:INDEX (repeatable)");
  run_cmd->add_option("--feed", f.run.feeds, "NAME=JSON value to feed (repeatable)");
  run_cmd->add_option("--target", f.run_targets,
                      "Node to run for its effects (repeatable), or the session target "
                      "grpc://host:port");
  run_cmd->add_option("--config", f.run.config_path, "ConfigProto in text format")
      ->check(CLI::ExistingFile);
  AddSecurityFlags(run_cmd, &f.run.security);
  return run_cmd;
}

CLI::App* AddOpsCommand(CLI::App& app, Flags& f) {
  CLI::App* ops_cmd = app.add_subcommand("ops", "List registered ops and their kernels");
  ops_cmd->add_flag("--json", f.ops_json, "Print JSON");
  ops_cmd->add_option("--check", f.ops_check,
                      "Instead, list the ops a GraphDef file (.pb, or .pbtxt) uses that dflow "
                      "does not support; exit 1 if there are any");
  return ops_cmd;
}

// The process's kernel threads (TensorFlow's inter_op_parallelism_threads),
// on the commands that run graphs in this process.
void AddInterOpThreadsFlag(CLI::App* cmd, Flags& f) {
  cmd->add_option("--inter-op-threads", f.inter_op_threads,
                  "Threads that run kernels in this process (0: one per core)")
      ->check(AtLeast(0))->capture_default_str();
}

// What to train and how: the model, data and optimizer.
CLI::App* AddTrainCommand(CLI::App& app, Flags& f) {
  CLI::App* train_cmd = app.add_subcommand("train", "Train a model on Fashion-MNIST (or synthetic data)");
  AddSecurityFlags(train_cmd, &f.train_security);
  train_cmd->add_option("--model", f.train.model, "Model")
      ->check(CLI::IsMember(dflow::TrainModels()))->capture_default_str();
  train_cmd->add_option("--epochs", f.train.epochs, "Passes over the training set")
      ->check(AtLeast(1))->capture_default_str();
  train_cmd->add_option("--batch-size", f.train.batch_size, "Examples per step")
      ->check(AtLeast(1))->capture_default_str();
  train_cmd->add_option("--optimizer", f.train.optimizer, "Optimizer")
      ->check(CLI::IsMember(dflow::TrainOptimizers()))->capture_default_str();
  train_cmd->add_option("--learning-rate", f.train.learning_rate,
                        "Learning rate (default: the optimizer's, e.g. adam 0.001, sgd 0.1)")
      ->check(Positive());
  train_cmd->add_option("--learning-rate-decay", f.train.learning_rate_decay,
                        "none, or cosine: TensorFlow's cosine_decay from the learning rate to 0 "
                        "at the last step")
      ->check(CLI::IsMember(dflow::TrainLearningRateDecays()))->capture_default_str();
  train_cmd->add_option("--seed", f.train.seed, "Seed of initial weights and batch order")
      ->capture_default_str();
  train_cmd->add_option("--data", f.train.data,
                        "Training data: fashion-mnist, synthetic, or tfrecord:GLOB (files of "
                        "`dflow data convert`, read by the graph on each worker)")
      ->check(
          [](const std::string& v) -> std::string {
            if (v.rfind("tfrecord:", 0) == 0 && v.size() > 9) return "";
            for (const std::string& s : dflow::TrainDataSources()) {
              if (v == s) return "";
            }
            return "'" + v + "' is not fashion-mnist, synthetic or tfrecord:GLOB";
          },
          "fashion-mnist|synthetic|tfrecord:GLOB")
      ->capture_default_str();
  train_cmd->add_option("--metrics-out", f.train.metrics_out, "Write metrics JSON to this file");
  AddInterOpThreadsFlag(train_cmd, f);
  return train_cmd;
}

// Where a training run goes: its cluster, checkpoints and traces.
void AddTrainClusterFlags(CLI::App* train_cmd, Flags& f) {
  train_cmd->add_option("--cluster", f.train.cluster,
                        "Train on a cluster: JSON {\"ps\":[...],\"worker\":[...]} or @file");
  train_cmd->add_option("--job", f.train.job, "This task's job (ps serves, workers train)")
      ->check(CLI::IsMember({"ps", "worker"}))->capture_default_str();
  train_cmd->add_option("--task", f.train.task, "This task's index in its job")
      ->check(AtLeast(0))->capture_default_str();
  train_cmd->add_option("--mode", f.train.mode, "Replication mode")
      ->check(CLI::IsMember(dflow::TrainModes()))->capture_default_str();
  train_cmd->add_option("--replicas-to-aggregate", f.train.replicas_to_aggregate,
                        "between-sync: gradients averaged per step (default: every worker)")
      ->check(AtLeast(1));
  train_cmd->add_option("--towers", f.train.towers,
                        "Model copies per worker, each on its own GPU when the worker has that "
                        "many, else on its own CPU device; their gradients are averaged")
      ->check(AtLeast(1))->capture_default_str();
  train_cmd->add_option("--ps-strategy", f.train.ps_strategy, "Placement of variables on ps tasks")
      ->check(CLI::IsMember({"bytes", "round-robin"}))->capture_default_str();
  train_cmd->add_option("--max-steps", f.train.max_steps, "Stop at this global step")
      ->check(AtLeast(1));
  train_cmd->add_option("--stall-report-secs", f.train.stall_report_secs,
                        "On a cluster: after this long without a step, name the tasks that do "
                        "not answer (<= 0: never)")
      ->capture_default_str();
  train_cmd->add_option("--log-every", f.train.log_every,
                        "Steps between progress lines when stderr is not a terminal")
      ->check(AtLeast(1))->capture_default_str();
  train_cmd->add_option("--checkpoint-dir", f.train.checkpoint_dir,
                        "Save checkpoints (TensorFlow's format) here; a run restores the latest "
                        "one and goes on from its global step");
  train_cmd->add_option("--save-checkpoint-steps", f.train.save_checkpoint_steps,
                        "Save every N global steps")
      ->check(AtLeast(1));
  train_cmd->add_option("--save-checkpoint-secs", f.train.save_checkpoint_secs,
                        "Save every S seconds (default 600 when no --save-checkpoint-steps)")
      ->check(Positive());
  train_cmd->add_option("--keep-checkpoints", f.train.keep_checkpoints,
                        "Checkpoints kept, the newest")
      ->check(AtLeast(1))->capture_default_str();
  train_cmd->add_option("--trace-steps", f.trace_steps,
                        "Trace these global steps (N[,M...]) as Chrome trace JSON; on a cluster "
                        "every worker traces its own");
  train_cmd->add_option("--trace-dir", f.train.trace_dir,
                        "Where traces go (default: --checkpoint-dir, else the working directory)");
}

// `dflow data convert`: the subcommand returned is convert's.
CLI::App* AddDataCommand(CLI::App& app, Flags& f) {
  CLI::App* data_cmd = app.add_subcommand("data", "Prepare training data");
  data_cmd->require_subcommand(1);
  CLI::App* convert_cmd = data_cmd->add_subcommand(
      "convert", "Write Fashion-MNIST as sharded TFRecord files of tf.train.Example "
                 "(image_raw: 784 bytes, label: int64): OUT/train-0000i-of-0000N, OUT/test-...");
  convert_cmd->add_option("--to", f.convert.format, "Output format")
      ->check(CLI::IsMember({"tfrecord"}))->capture_default_str();
  convert_cmd->add_option("--out", f.convert.out_dir, "Directory to write (created)")->required();
  convert_cmd->add_option("--shards", f.convert.shards, "Files the training set is split into")
      ->check(AtLeast(1))->capture_default_str();
  convert_cmd->add_option("--data-dir", f.convert.data_dir,
                          "Fashion-MNIST's idx files (default: the Debian package's)");
  return convert_cmd;
}

CLI::App* AddServerCommand(CLI::App& app, Flags& f) {
  CLI::App* server_cmd =
      app.add_subcommand("server", "Serve one task of a cluster (master + worker, one gRPC port)");
  server_cmd->add_option("--cluster", f.server.cluster,
                         "Cluster spec: JSON {\"ps\":[\"host:port\"],...} or @file "
                         "(default: TF_CONFIG)");
  server_cmd->add_option("--job", f.server.job, "This task's job name");
  server_cmd->add_option("--task", f.server.task, "This task's index in its job")
      ->check(AtLeast(0));
  server_cmd->add_option("--cpus", f.server.cpus, "CPU devices of this task")
      ->check(AtLeast(1))->capture_default_str();
  server_cmd->add_option("--session_gc_seconds", f.server.session_gc_seconds,
                         "Close a session no call used for this long (<= 0: never), as "
                         "TensorFlow's session_gc_seconds")
      ->capture_default_str();
  server_cmd->add_option("--max_sessions", f.server.max_sessions,
                         "Open sessions at most; more CreateSession calls are RESOURCE_EXHAUSTED")
      ->check(AtLeast(1))->capture_default_str();
  server_cmd->add_option("--max_graph_nodes,--max-graph-nodes", f.server.max_graph_nodes,
                         "Nodes a session's graph may have at most (0: no limit), a graph "
                         "registered on this task's worker twice that; more is RESOURCE_EXHAUSTED")
      ->check(AtLeast(0))->capture_default_str();
  server_cmd->add_option("--max_request_bytes,--max-request-bytes", f.server.max_request_bytes,
                         "Bytes a MasterService/WorkerService request may have at most (0: no "
                         "limit); more is RESOURCE_EXHAUSTED before it is parsed")
      ->check(AtLeast(0))->capture_default_str();
  AddSecurityFlags(server_cmd, &f.server.security);
  AddInterOpThreadsFlag(server_cmd, f);
  return server_cmd;
}

CLI::App* AddClusterCommand(CLI::App& app, Flags& f) {
  CLI::App* cluster_cmd = app.add_subcommand(
      "cluster", "Train on a local cluster: ps and worker processes on 127.0.0.1");
  cluster_cmd->add_option("--ps", f.cluster.ps, "Parameter server tasks")
      ->check(AtLeast(1))->capture_default_str();
  cluster_cmd->add_option("--workers", f.cluster.workers, "Worker tasks")
      ->check(AtLeast(1))->capture_default_str();
  cluster_cmd->add_option("--mode", f.cluster.mode, "Replication mode")
      ->check(CLI::IsMember(dflow::TrainModes()))->capture_default_str();
  cluster_cmd->add_option("--max-restarts", f.cluster.max_restarts,
                          "Restarts of a task killed by a signal, on the same address")
      ->check(AtLeast(0))->capture_default_str();
  AddSecurityFlags(cluster_cmd, &f.cluster.security);
  cluster_cmd->add_flag("--secure", f.cluster.secure,
                        "Make a throwaway CA, certificate and token for this run (mutual TLS and "
                        "the token on every task), removed at the end");
  cluster_cmd->add_option("train_args", f.cluster.train_args,
                          "After --: flags for every task's `dflow train`");
  return cluster_cmd;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on: every lock
  // records its order in a global graph (GraphCycles was ~1.5% of a cluster
  // worker's profile). The tests keep it; the program does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  dflow::RetainFreedHostMemory();
  CLI::App app{"dflow: train and run TensorFlow-format dataflow graphs"};
  app.failure_message(FailureMessage);  // Before the subcommands: they copy it.
  app.set_version_flag("--version", dflow::cli::VersionText());
  app.require_subcommand(1);
  Flags f;
  CLI::App* run_cmd = AddRunGraphCommand(app, f);
  CLI::App* ops_cmd = AddOpsCommand(app, f);
  CLI::App* train_cmd = AddTrainCommand(app, f);
  AddTrainClusterFlags(train_cmd, f);
  CLI::App* convert_cmd = AddDataCommand(app, f);
  CLI::App* server_cmd = AddServerCommand(app, f);
  CLI::App* cluster_cmd = AddClusterCommand(app, f);
  CLI11_PARSE(app, argc, argv);
  dflow::SetInterOpThreads(f.inter_op_threads);  // Before anything runs a kernel.

  absl::Status status;
  if (*run_cmd) {
    // Node names cannot contain "://", so a URL is the session's target.
    for (const std::string& t : f.run_targets) {
      (t.find("://") != std::string::npos ? f.run.session_target : f.run.targets.emplace_back()) = t;
    }
    if (f.run.fetches.empty() && f.run.targets.empty()) {
      std::cerr << "dflow run-graph: give at least one --fetch or --target\n";
      return 1;
    }
    status = dflow::cli::RunGraph(f.run);
  } else if (*ops_cmd) {
    status = f.ops_check.empty() ? dflow::cli::ListOps(f.ops_json) : dflow::cli::CheckOps(f.ops_check);
  } else if (*server_cmd) {
    status = dflow::cli::ServerCommand(f.server);
  } else if (*train_cmd) {
    absl::StatusOr<std::vector<int64_t>> steps = dflow::ParseTraceSteps(f.trace_steps);
    if (steps.ok()) f.train.trace_steps = *std::move(steps);
    status = steps.ok() ? dflow::cli::TrainCommand(f.train, f.train_security) : steps.status();
  } else if (*cluster_cmd) {
    status = dflow::cli::ClusterCommand(f.cluster);
  } else if (*convert_cmd) {
    status = dflow::cli::DataConvertCommand(f.convert);
  }
  if (!status.ok()) {
    std::cerr << "dflow: " << status << "\n";
    return 1;
  }
  return 0;
}
