// Empty-step latency: RunStep on a dflow server in another process against a
// bare gRPC unary call to that process, measured in the same run and
// interleaved (a plain main printing a table).
//
// The parent forks a child before touching gRPC. The child runs a one-task
// GrpcServer ("/job:worker/task:0", master and worker on one port) and a
// second gRPC server whose only method echoes its request bytes; both ports
// come back through a pipe. The parent opens a grpc:// session with a graph
// of a NoOp and a scalar Const, then per sample times, in turn:
//   bare    one echo call of 16 bytes (GenericStub, the channel settings the
//           runtime uses);
//   empty   Session::Run with target "noop" (a RunStep: the master runs the
//           registered partition on its own worker and answers);
//   scalar  Session::Run fetching the Const (one tensor back).
// Reported: p50 and p99 in microseconds and each step's p50 over bare's.
// Then the shared token's cost (security.h), in a second loop rotating the
// order of three series per sample: the empty step, the same on another
// tokenless GrpcServer of the child (the A/A noise floor of comparing two
// servers), and the empty step on a GrpcServer of the child that requires a
// token, through a session presenting it; reported as p50 ratios to the first.
//
//   build/bench/runstep_bench [--quick]
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/rpc/echo_service.h"
#include "dflow/distributed/rpc/grpc_remote_master.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/framework/attr_util.h"
#include "dflow/runtime/session_factory.h"

namespace dflow {
namespace {

void Die(const char* what) {
  std::fprintf(stderr, "runstep_bench: %s\n", what);
  std::exit(1);
}

constexpr char kToken[] = "runstep-bench-shared-token-0123456789abcdef";

SecurityOptions TokenSecurity() {
  SecurityOptions security;
  security.auth_token = kToken;
  return security;
}

[[noreturn]] void RunChild(int report_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the parent.
  ClusterSpec cluster;
  if (!cluster.AddTask("worker", 0, "127.0.0.1:0").ok()) Die("cluster");
  tensorflow::ServerDef def;
  *def.mutable_cluster() = cluster.ToClusterDef();
  def.set_job_name("worker");
  def.set_protocol("grpc");
  auto server = GrpcServer::Create(def);
  if (!server.ok() || !(*server)->Start().ok()) Die("dflow server");
  GrpcServer::Options with_token;
  with_token.security = TokenSecurity();
  auto token_server = GrpcServer::Create(def, with_token);
  if (!token_server.ok() || !(*token_server)->Start().ok()) Die("dflow server with a token");
  auto other_server = GrpcServer::Create(def);
  if (!other_server.ok() || !(*other_server)->Start().ok()) Die("another dflow server");
  auto echo = EchoServer::Start();
  if (!echo.ok()) Die("echo server");
  int ports[4] = {(*server)->bound_port(), (*echo)->port(), (*token_server)->bound_port(),
                  (*other_server)->bound_port()};
  if (write(report_fd, ports, sizeof(ports)) != sizeof(ports)) Die("report");
  (*server)->Join();  // Killed by the parent.
  std::exit(0);
}

tensorflow::GraphDef Graph() {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* noop = g.add_node();
  noop->set_name("noop");
  noop->set_op("NoOp");
  tensorflow::NodeDef* c = g.add_node();
  c->set_name("c");
  c->set_op("Const");
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", Tensor::Scalar(1.0f));
  return g;
}

struct Percentiles {
  double p50, p99;
};

Percentiles Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  return {at(0.5), at(0.99)};
}

// One kind of call, and its latencies.
struct Series {
  const char* name;
  std::function<void()> run;
  std::vector<double> us;
};

// Warms each series up, then times `samples` calls of each, one of each in
// turn; with `rotate`, the order turns by one each round.
void TimeInterleaved(std::vector<Series>& series, int samples, bool rotate) {
  for (int i = 0; i < samples / 10; ++i) {  // Warm up connections and caches.
    for (Series& s : series) s.run();
  }
  const size_t n = series.size();
  for (int i = 0; i < samples; ++i) {
    for (size_t k = 0; k < n; ++k) {
      Series& s = series[rotate ? (i + k) % n : k];
      const absl::Time start = absl::Now();
      s.run();
      s.us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
  }
}

// p50 and p99 of each series, and its p50 over the first's.
void PrintTable(const std::vector<Series>& series, const char* ratio_name, int ratio_digits) {
  std::printf("%-18s %10s %10s %12s\n", "call", "p50 us", "p99 us", ratio_name);
  const double base_p50 = Summarize(series[0].us).p50;
  for (const Series& s : series) {
    Percentiles p = Summarize(s.us);
    std::printf("%-18s %10.1f %10.1f %12.*f\n", s.name, p.p50, p.p99, ratio_digits,
                p.p50 / base_p50);
  }
}

std::unique_ptr<Session> Connect(int port, const char* what) {
  SessionOptions options;
  options.target = "grpc://127.0.0.1:" + std::to_string(port);
  auto session = NewSession(options);
  if (!session.ok() || !(*session)->Create(Graph()).ok()) Die(what);
  return *std::move(session);
}

int Main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int samples = quick ? 300 : 3000;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) Die("pipe");
  const pid_t child = fork();
  if (child == 0) RunChild(pipe_fds[1]);
  int ports[4];
  if (read(pipe_fds[0], ports, sizeof(ports)) != sizeof(ports)) Die("child did not start");

  std::unique_ptr<Session> session = Connect(ports[0], "session");
  SessionOptions token_options;
  token_options.target = "grpc://127.0.0.1:" + std::to_string(ports[2]);
  RemoteSession token_session(NewGrpcRemoteMaster(token_options.target, TokenSecurity()),
                              token_options);
  if (!token_session.Create(Graph()).ok()) Die("session with a token");
  EchoClient echo("127.0.0.1:" + std::to_string(ports[1]));
  const std::string payload(16, 'x');
  auto bare_call = [&] {
    if (!echo.Call(payload).ok()) Die("echo call failed");
  };
  auto empty_step = [&] {
    if (!session->Run({}, {}, {"noop"}, nullptr).ok()) Die("empty step failed");
  };
  auto token_step = [&] {
    if (!token_session.Run({}, {}, {"noop"}, nullptr).ok()) Die("empty step with a token failed");
  };
  std::vector<Tensor> out;
  auto scalar_step = [&] {
    if (!session->Run({}, {"c:0"}, {}, &out).ok()) Die("scalar step failed");
  };
  std::vector<Series> series = {{"bare gRPC unary", bare_call, {}},
                                {"RunStep empty", empty_step, {}},
                                {"RunStep 1 fetch", scalar_step, {}}};
  TimeInterleaved(series, samples, /*rotate=*/false);
  std::printf("Empty-step latency over 127.0.0.1, %d samples each, interleaved\n", samples);
  PrintTable(series, "p50 / bare", 2);
  // The token check's cost against the noise floor of two servers.
  std::unique_ptr<Session> session_b = Connect(ports[3], "second session");
  auto empty_step_b = [&] {
    if (!session_b->Run({}, {}, {"noop"}, nullptr).ok()) Die("empty step failed");
  };
  std::vector<Series> pair = {{"RunStep empty", empty_step, {}},
                              {"same, other server", empty_step_b, {}},
                              {"same, with token", token_step, {}}};
  TimeInterleaved(pair, samples, /*rotate=*/true);
  std::printf("\nToken check, %d samples each, order rotated per sample\n", samples);
  PrintTable(pair, "p50 / empty", 3);
  session_b->Close().IgnoreError();
  session->Close().IgnoreError();
  token_session.Close().IgnoreError();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}

}  // namespace
}  // namespace dflow

int main(int argc, char** argv) { return dflow::Main(argc, argv); }
