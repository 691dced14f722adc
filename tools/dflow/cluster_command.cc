// `dflow cluster`: a whole training cluster as local processes.
//
// Starts P ps tasks and W worker tasks of `dflow train --cluster ...` on
// 127.0.0.1 (ports chosen by the kernel), prefixes each line they print with
// the task ("[worker0] step 100/702 ..."), and waits for the workers that
// train (in-graph: worker 0, the others only serve). When they are done (or
// one fails) the rest are stopped with SIGTERM, then
// SIGKILL after a grace period; SIGINT/SIGTERM to this command does the same.
//
// Supervision, as a launcher (Kubernetes) does: a task killed by a signal
// (kill -9, the OOM killer, a crash) is started again with the same flags
// on the same address, at most --max-restarts times per task; the workers'
// monitored sessions recover (the chief restoring the latest checkpoint when
// a ps lost its variables). A task that exits with an error is not
// restarted: the error would repeat.
//
// Security: --auth-token-file and --tls-* are passed to every task; --secure
// makes a throwaway CA, certificate and token (throwaway_tls.h) in a private
// temporary directory, passes them likewise, and removes them at the end.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "dflow/framework/status.h"
#include "dflow/train/train_mode.h"
#include "tools/dflow/commands.h"
#include "tools/dflow/signals.h"

namespace dflow::cli {

namespace {

// A free port on 127.0.0.1, held open (so the next pick differs) until closed.
absl::StatusOr<std::pair<int, int>> HoldFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError("cannot find a free port on 127.0.0.1");
  }
  return std::make_pair(fd, static_cast<int>(ntohs(addr.sin_port)));
}

struct Child {
  std::string name;     // "ps0", "worker1"
  bool trains = false;  // A worker driving training (in-graph: worker 0 only); others serve.
  std::vector<std::string> args;
  pid_t pid = -1;
  int out_fd = -1;
  std::thread reader;
  int exit_code = -1;    // Once reaped.
  int term_signal = 0;   // The signal that ended it, if one did.
  int restarts = 0;
};

std::mutex print_mu;

// Copies the child's output to stdout, line by line, prefixed with its name.
void ForwardLines(Child* child) {
  std::string pending;
  char buf[4096];
  for (;;) {
    ssize_t n = read(child->out_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, n);
    size_t start = 0, end;
    while ((end = pending.find_first_of("\n\r", start)) != std::string::npos) {
      if (end > start) {
        std::lock_guard<std::mutex> l(print_mu);
        std::cout << "[" << child->name << "] " << pending.substr(start, end - start) << "\n"
                  << std::flush;
      }
      start = end + 1;
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) {
    std::lock_guard<std::mutex> l(print_mu);
    std::cout << "[" << child->name << "] " << pending << "\n" << std::flush;
  }
  close(child->out_fd);
}

absl::Status Spawn(const std::vector<std::string>& args, Child* child) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("cannot create a pipe");
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  child->pid = pid;
  child->out_fd = fds[0];
  child->reader = std::thread(ForwardLines, child);
  return absl::OkStatus();
}

// Reaps every child that has exited; true when `child` is done.
bool Reap(std::vector<Child>& children) {
  bool any = false;
  for (Child& c : children) {
    if (c.exit_code >= 0) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      c.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      any = true;
    }
  }
  return any;
}

// SIGTERM to every running child, SIGKILL to those still running after `grace`.
void StopAll(std::vector<Child>& children, std::chrono::seconds grace) {
  for (Child& c : children) {
    if (c.exit_code < 0) kill(c.pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    Reap(children);
    bool running = false;
    for (Child& c : children) running |= c.exit_code < 0;
    if (!running) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (Child& c : children) {
    if (c.exit_code < 0) {
      kill(c.pid, SIGKILL);
      int status = 0;
      waitpid(c.pid, &status, 0);
      c.exit_code = 128 + SIGKILL;
    }
  }
}

// The flags that pass `security` on to a task.
std::vector<std::string> SecurityArgs(const SecurityFlags& security) {
  std::vector<std::string> args;
  for (auto [flag, value] :
       {std::pair{"--auth-token-file", &security.auth_token_file},
        std::pair{"--tls-cert", &security.tls_cert}, std::pair{"--tls-key", &security.tls_key},
        std::pair{"--tls-ca", &security.tls_ca}}) {
    if (!value->empty()) args.insert(args.end(), {flag, *value});
  }
  return args;
}

// A private temporary directory holding throwaway security files; removed
// with them on destruction.
class ThrowawayDir {
 public:
  ~ThrowawayDir() {
    if (path_.empty()) return;
    for (const std::string* f :
         {&files_.auth_token_file, &files_.tls_cert, &files_.tls_key, &files_.tls_ca}) {
      if (!f->empty()) ::unlink(f->c_str());
    }
    ::rmdir(path_.c_str());
  }
  absl::StatusOr<SecurityFlags> Make() {
    char tmpl[] = "/tmp/dflow_cluster_secure_XXXXXX";  // mkdtemp: mode 0700.
    if (::mkdtemp(tmpl) == nullptr) {
      return absl::InternalError("--secure: cannot make a temporary directory");
    }
    path_ = tmpl;
    ASSIGN_OR_RETURN(files_, WriteThrowawaySecurity(path_));
    return files_;
  }

 private:
  std::string path_;
  SecurityFiles files_;
};

// The cluster spec of `ps` + `workers` tasks on free ports of 127.0.0.1, as
// JSON. Each port is held until every one is picked, so no two collide.
absl::StatusOr<std::string> LocalClusterSpec(int num_ps, int num_workers) {
  std::vector<std::pair<int, int>> held;
  std::vector<std::string> ps, workers;
  absl::Status status;
  for (int i = 0; i < num_ps + num_workers; ++i) {
    absl::StatusOr<std::pair<int, int>> port = HoldFreePort();
    if (!port.ok()) {
      status = port.status();
      break;
    }
    held.push_back(*port);
    (i < num_ps ? ps : workers).push_back(absl::StrCat("\"127.0.0.1:", port->second, "\""));
  }
  for (const auto& [fd, port] : held) close(fd);
  RETURN_IF_ERROR(status);
  return absl::StrCat("{\"ps\":[", absl::StrJoin(ps, ","), "],\"worker\":[",
                      absl::StrJoin(workers, ","), "]}");
}

// Whether the cluster's tasks outnumber this machine's cores.
bool Crowded(const ClusterFlags& flags) {
  return flags.ps + flags.workers > static_cast<int>(std::thread::hardware_concurrency());
}

// More tasks than cores: each worker runs its kernels on one thread, unless
// the user's train flags say otherwise. A second pool thread in a worker
// whose core another task needs only hands kernels over between threads (1 ps
// + 2 workers on 2 cores: ~7 pool wake-ups a step; docs/performance.md,
// session 26). A ps keeps a thread per core: it serves every worker, and with
// one thread their updates queue behind each other (W=2 async +4%, session 27).
std::vector<std::string> WorkerThreadArgs(const ClusterFlags& flags) {
  for (const std::string& a : flags.train_args) {
    if (a.rfind("--inter-op-threads", 0) == 0) return {};
  }
  if (!Crowded(flags)) return {};
  return {"--inter-op-threads", "1"};
}

// Starts every task: `dflow train` with its job and index, the security
// flags and the user's train flags. On failure `children` holds the ones
// started, for the caller to stop.
absl::Status SpawnTasks(const ClusterFlags& flags, TrainMode mode, const std::string& cluster,
                        const SecurityFlags& security, std::vector<Child>& children) {
  // Each reader thread holds its Child's address: no reallocation. Only
  // started tasks are in `children` (StopAll signals each one's pid).
  children.reserve(flags.ps + flags.workers);
  const std::vector<std::string> security_args = SecurityArgs(security);
  const std::vector<std::string> worker_thread_args = WorkerThreadArgs(flags);
  for (int i = 0; i < flags.ps + flags.workers; ++i) {
    Child& c = children.emplace_back();
    const bool worker = i >= flags.ps;
    const int task = worker ? i - flags.ps : i;
    c.trains = worker && (task == 0 || !IsInGraph(mode));
    c.name = absl::StrCat(worker ? "worker" : "ps", task);
    c.args = {"dflow",     "train",
              "--cluster", cluster,
              "--job",     worker ? "worker" : "ps",
              "--task",    std::to_string(task),
              "--mode",    flags.mode};
    c.args.insert(c.args.end(), security_args.begin(), security_args.end());
    if (worker) c.args.insert(c.args.end(), worker_thread_args.begin(), worker_thread_args.end());
    c.args.insert(c.args.end(), flags.train_args.begin(), flags.train_args.end());
    if (absl::Status s = Spawn(c.args, &c); !s.ok()) {
      children.pop_back();
      return s;
    }
  }
  return absl::OkStatus();
}

// Starts again, on its address, each task a signal killed that has restarts
// left; returns the first failure to start one.
absl::Status RestartKilled(std::vector<Child>& children, int max_restarts) {
  absl::Status status;
  for (Child& c : children) {
    if (c.exit_code < 0 || c.term_signal == 0 || c.restarts >= max_restarts) continue;
    {
      std::lock_guard<std::mutex> l(print_mu);
      std::cout << "dflow cluster: " << c.name << " was killed by " << SignalName(c.term_signal)
                << "; restarting it on the same address (" << c.restarts + 1 << "/"
                << max_restarts << ")" << std::endl;
    }
    c.reader.join();
    if (absl::Status s = Spawn(c.args, &c); !s.ok()) {
      if (status.ok()) status = s;
      continue;  // It keeps its exit code: the run ends.
    }
    ++c.restarts;
    c.exit_code = -1;
    c.term_signal = 0;
  }
  return status;
}

// Watches the tasks until the workers are done, one fails, or a shutdown
// signal arrives on `signal_fd`; the run's outcome.
absl::Status Supervise(std::vector<Child>& children, int max_restarts, int signal_fd) {
  absl::Status status;
  for (;;) {
    Reap(children);
    if (absl::Status s = RestartKilled(children, max_restarts); !s.ok() && status.ok()) status = s;
    bool training = false;
    for (const Child& c : children) {
      // A trainer that fails, or a server that exits at all, ends the run.
      if ((c.trains ? c.exit_code > 0 : c.exit_code >= 0) && status.ok()) {
        status = absl::AbortedError(
            absl::StrCat(c.name, " exited with status ", c.exit_code, "; stopping the cluster"));
      }
      training |= c.trains && c.exit_code < 0;
    }
    if (!training || !status.ok()) return status;
    pollfd p{signal_fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const int sig = WaitForShutdownSignal(signal_fd);
      return absl::CancelledError(absl::StrCat(SignalName(sig), "; stopping the cluster"));
    }
  }
}

}  // namespace

absl::Status ClusterCommand(const ClusterFlags& flags) {
  if (flags.ps < 1 || flags.workers < 1) {
    return absl::InvalidArgumentError("--ps and --workers must be >= 1");
  }
  ASSIGN_OR_RETURN(const TrainMode mode, ParseTrainMode(flags.mode));
  SecurityFlags security = flags.security;
  ThrowawayDir throwaway;
  if (flags.secure) {
    if (!SecurityArgs(security).empty()) {
      return absl::InvalidArgumentError(
          "--secure makes its own token and certificates; give it without --auth-token-file "
          "and --tls-*");
    }
    ASSIGN_OR_RETURN(security, throwaway.Make());
  }
  // Fail here, not in every task, when a file is missing or unfit.
  RETURN_IF_ERROR(LoadSecurityOptions(security).status());
  ASSIGN_OR_RETURN(int signal_fd, ShutdownSignalFd());
  ASSIGN_OR_RETURN(const std::string cluster, LocalClusterSpec(flags.ps, flags.workers));
  std::cout << "dflow cluster: " << cluster << ", mode " << flags.mode
            << (security.tls_cert.empty() ? "" : ", mutual TLS")
            << (security.auth_token_file.empty() ? "" : ", auth token") << std::endl;
  // More tasks than cores: a pool thread spinning for work in one task takes
  // the core another task needs (1 ps + 2 workers on 2 cores: ~10% more CPU a
  // step, PoolSpinning). An explicit DFLOW_POOL_SPIN stays as it is.
  if (Crowded(flags)) setenv("DFLOW_POOL_SPIN", "0", /*overwrite=*/0);
  std::vector<Child> children;
  absl::Status status = SpawnTasks(flags, mode, cluster, security, children);
  const bool started = status.ok();
  if (started) status = Supervise(children, flags.max_restarts, signal_fd);
  StopAll(children, std::chrono::seconds(started ? 10 : 5));
  for (Child& c : children) {
    if (c.reader.joinable()) c.reader.join();  // Not after a restart that failed to start.
  }
  return status;
}

}  // namespace dflow::cli
