// RecvTensor between two processes on 127.0.0.1 against a raw TCP stream of
// the same bytes, measured in the same run (a plain main printing a table;
// Google Benchmark's per-function timing does not pair transports).
//
// The parent forks a child before touching gRPC. The child serves a Worker
// ("/job:ps/replica:0/task:0") through GrpcWorkerService, its tensor data
// plane (tensor_data_plane.h, offered over gRPC) and a raw TCP sender: for
// each 8-byte request (a size) it writes that many bytes from one buffer.
// Both ports come back through a pipe. The parent registers, per size, a
// graph Const(size bytes) -> _Send on the child; per sample, interleaved, it
// times one raw request of the size (read into a reused buffer), one
// RecvTensor over gRPC only (GrpcRemoteWorker with the data plane off: decoded
// into a fresh tensor) and one over the data plane (GrpcRemoteWorker with it
// on: received straight into a fresh tensor), each after running its step.
// Reported: median GB/s of each, and each transport's ratio to raw TCP as the
// median over samples of raw time / transport time (a sample's three
// transfers run back to back, so pairing them cancels most of the drift of a
// shared machine's load).
// A fourth transport: RecvTensor over gRPC with mutual TLS (the same child's
// gRPC server on a second port with SslServerCredentials requiring client
// certificates; throwaway_tls.h certificates made before the fork), which is
// how tensors moved when TLS was on before the data plane spoke TLS.
// Reported for it: GB/s, its ratio to raw TCP, and paired per-sample ratios
// to plaintext gRPC and to the data plane.
// A fifth: RecvTensor over the data plane with mutual TLS (a second data
// plane of the child with the same certificates, offered through the TLS
// port's own gRPC server), which is how tensors move when TLS is on. Reported:
// GB/s and its paired per-sample ratio to the plaintext data plane (issue 14's
// goal: >= 0.7), and the CPU time both processes spent per byte on the data
// plane's and the TLS data plane's samples (a whole step each: RunGraph,
// RecvTensor, CleanupGraph), which a loaded machine does not distort as much
// as wall time.
//
//   build/bench/rpc_bench [--quick] [--min-bytes N]   (sizes below N skipped)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/grpc_worker_service.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "dflow/distributed/worker.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/rendezvous.h"

namespace dflow {
namespace {

constexpr size_t kMaxBytes = size_t{256} << 20;
constexpr const char* kDst = "/job:worker/replica:0/task:0/device:CPU:0";

void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);  // A socket or the report pipe.
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A listening socket on 127.0.0.1:0; returns its fd and sets *port.
int Listen(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 4) != 0) {
    Die("raw listen");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// The raw sender: answers each 8-byte size with that many bytes.
void ServeRaw(int listen_fd) {
  std::vector<char> data(kMaxBytes, 'r');
  for (;;) {
    int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    NoDelay(fd);
    uint64_t n = 0;
    while (ReadAll(fd, reinterpret_cast<char*>(&n), sizeof(n)) && n <= kMaxBytes &&
           WriteAll(fd, data.data(), n)) {
    }
    ::close(fd);
  }
}

// The child: a Worker served over gRPC plus the raw sender; never returns.
[[noreturn]] void RunChild(int report_fd, const SecurityOptions& tls) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the parent.
  tensorflow::ConfigProto config;
  auto devices = CreateLocalDevices(config, "ps", 0, 0);
  if (!devices.ok()) Die("devices");
  DeviceMgr mgr(*std::move(devices));
  Worker worker(&mgr, {});
  GrpcWorkerService service(&worker);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int ports[5] = {0, 0, 0, 0, 0};
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &ports[0]);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  DataPlaneServer::Options dp_options;
  dp_options.local_socket = false;  // TCP against raw TCP.
  DataPlaneServer data_plane(&worker, dp_options);
  if (!data_plane.Start("127.0.0.1").ok()) Die("data plane");
  service.set_data_plane(data_plane.offer());
  // The TLS port: its own service, which offers the TLS data plane.
  GrpcWorkerService tls_service(&worker);
  grpc::ServerBuilder tls_builder;
  ConfigureServerBuilder(&tls_builder);
  tls_builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(tls), &ports[2]);
  tls_builder.RegisterService(&tls_service);
  std::unique_ptr<grpc::Server> tls_server = tls_builder.BuildAndStart();
  DataPlaneServer::Options tls_options;
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls_context =
      DataPlaneTls::Create(tls, DataPlaneTls::kServer);
  if (!tls_context.ok()) Die("TLS data plane context");
  tls_options.tls = *tls_context;
  tls_options.local_socket = false;
  DataPlaneServer tls_data_plane(&worker, tls_options);
  if (!tls_data_plane.Start("127.0.0.1").ok()) Die("TLS data plane");
  tls_service.set_data_plane(tls_data_plane.offer());
  // Two more ports whose data planes serve local receivers over the abstract
  // AF_UNIX socket: one answering through the receiver's shared region, one
  // always through the socket.
  std::vector<std::unique_ptr<GrpcWorkerService>> local_services;
  std::vector<std::unique_ptr<grpc::Server>> local_servers;
  std::vector<std::unique_ptr<DataPlaneServer>> local_planes;
  for (int k = 0; k < 2; ++k) {
    local_services.push_back(std::make_unique<GrpcWorkerService>(&worker));
    grpc::ServerBuilder local_builder;
    ConfigureServerBuilder(&local_builder);
    local_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                                   &ports[3 + k]);
    local_builder.RegisterService(local_services.back().get());
    local_servers.push_back(local_builder.BuildAndStart());
    DataPlaneServer::Options local_options;
    local_options.shared_memory = k == 1;
    local_planes.push_back(std::make_unique<DataPlaneServer>(&worker, local_options));
    if (!local_planes.back()->Start("127.0.0.1").ok()) Die("local data plane");
    local_services.back()->set_data_plane(local_planes.back()->offer());
  }
  int raw_fd = Listen(&ports[1]);
  if (::write(report_fd, ports, sizeof(ports)) != sizeof(ports)) Die("report ports");
  ::close(report_fd);
  ServeRaw(raw_fd);  // Until the parent kills this process.
  std::exit(0);
}

struct Remote {
  std::unique_ptr<GrpcRemoteWorker> worker;      // gRPC only; also runs the steps.
  std::unique_ptr<GrpcRemoteWorker> data_plane;  // RecvTensor over the data plane.
  std::unique_ptr<GrpcRemoteWorker> tls;         // RecvTensor over gRPC with mutual TLS.
  std::unique_ptr<GrpcRemoteWorker> tls_dp;      // RecvTensor over the TLS data plane.
  std::unique_ptr<GrpcRemoteWorker> local;       // Over the local socket, inline.
  std::unique_ptr<GrpcRemoteWorker> shared;      // Over the local socket and shared region.
  std::string src;                               // The child's CPU:0.
  uint64_t incarnation = 0;
};

// Registers Const(bytes) -> _Send("edge_<bytes>") on the child; returns the handle.
std::string RegisterSource(const Remote& r, size_t bytes) {
  tensorflow::RegisterGraphRequest req;
  tensorflow::NodeDef* c = req.mutable_graph_def()->add_node();
  c->set_name("c");
  c->set_op("Const");
  c->set_device(r.src);
  Tensor value(DT_FLOAT, TensorShape({static_cast<int64_t>(bytes / 4)}));
  for (size_t i = 0; i < bytes / 4; i += 1024) value.flat<float>()[i] = static_cast<float>(i);
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", value);
  tensorflow::NodeDef* s = req.mutable_graph_def()->add_node();
  s->set_name("s");
  s->set_op("_Send");
  s->add_input("c");
  s->set_device(r.src);
  SetAttr(s, "T", DT_FLOAT);
  SetAttr(s, "tensor_name", "edge_" + std::to_string(bytes));
  SetAttr(s, "send_device", r.src);
  SetAttr(s, "send_device_incarnation", static_cast<int64_t>(r.incarnation));
  SetAttr(s, "recv_device", kDst);
  SetAttr(s, "client_terminated", false);
  tensorflow::RegisterGraphResponse resp;
  absl::Status st =
      r.worker->RegisterGraph(req, &resp, CallOptions::WithTimeout(absl::Seconds(120)));
  if (!st.ok()) {
    std::fprintf(stderr, "RegisterGraph: %s\n", std::string(st.message()).c_str());
    std::exit(1);
  }
  return resp.graph_handle();
}

// One RecvTensor of the step's tensor through `via`; returns seconds, or -1 on error.
double TimedRecvTensor(const Remote& r, WorkerInterface* via, const std::string& handle,
                       size_t bytes, int64_t step) {
  const CallOptions opts = CallOptions::WithTimeout(absl::Seconds(60));
  tensorflow::RunGraphRequest run;
  run.set_graph_handle(handle);
  run.set_step_id(step);
  tensorflow::RunGraphResponse run_resp;
  if (!r.worker->RunGraph(run, &run_resp, opts).ok()) return -1;
  tensorflow::RecvTensorRequest req;
  req.set_step_id(step);
  req.set_rendezvous_key(
      Rendezvous::CreateKey(r.src, r.incarnation, kDst, "edge_" + std::to_string(bytes)));
  RecvTensorResult result;
  const absl::Time start = absl::Now();
  absl::Status s = via->RecvTensor(req, &result, opts);
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(step);
  tensorflow::CleanupGraphResponse cleanup_resp;
  r.worker->CleanupGraph(cleanup, &cleanup_resp, opts).IgnoreError();
  if (!s.ok() || result.tensor.TotalBytes() != bytes) {
    std::fprintf(stderr, "RecvTensor: %s\n", std::string(s.message()).c_str());
    return -1;
  }
  return secs;
}

double TimedRaw(int fd, std::vector<char>* buf, size_t bytes) {
  const uint64_t n = bytes;
  const absl::Time start = absl::Now();
  if (!WriteAll(fd, reinterpret_cast<const char*>(&n), sizeof(n)) ||
      !ReadAll(fd, buf->data(), bytes)) {
    return -1;
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// CPU seconds used so far by this process (user + system) and by `child`
// (from /proc, in clock ticks).
double CpuSeconds(pid_t child) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  double secs = self.ru_utime.tv_sec + self.ru_utime.tv_usec / 1e6 + self.ru_stime.tv_sec +
                self.ru_stime.tv_usec / 1e6;
  const std::string path = "/proc/" + std::to_string(child) + "/stat";
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[1024];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // Fields after the ")" ending the command name: state is field 3, utime 14, stime 15.
    const char* p = std::strrchr(buf, ')');
    unsigned long utime = 0, stime = 0;
    if (p != nullptr &&
        std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                    &stime) == 2) {
      secs += static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  return secs;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Connects to the child's servers (ports: gRPC, raw TCP, TLS gRPC, local
// socket, shared region) every way the bench compares; false when the child
// does not answer.
bool ConnectRemotes(const int ports[5], const SecurityOptions& tls, Remote& r) {
  const std::string address = "127.0.0.1:" + std::to_string(ports[0]);
  std::shared_ptr<grpc::Channel> channel = GrpcChannelCache::Global().FindOrCreate(address);
  const std::string name = "/job:ps/replica:0/task:0 (" + address + ")";
  r.worker = std::make_unique<GrpcRemoteWorker>(channel, name, /*use_data_plane=*/false);
  r.data_plane = std::make_unique<GrpcRemoteWorker>(channel, name, /*use_data_plane=*/true);
  const std::string tls_address = "127.0.0.1:" + std::to_string(ports[2]);
  r.tls = std::make_unique<GrpcRemoteWorker>(
      GrpcChannelCache::Global().FindOrCreate(tls_address, tls), name, /*use_data_plane=*/false);
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> client_tls = DataPlaneTls::ForClient(tls);
  if (!client_tls.ok()) Die("TLS data plane client context");
  r.tls_dp = std::make_unique<GrpcRemoteWorker>(
      GrpcChannelCache::Global().FindOrCreate(tls_address, tls), name, /*use_data_plane=*/true,
      "", *client_tls);
  for (auto [k, remote] : {std::pair{3, &r.local}, std::pair{4, &r.shared}}) {
    const std::string local_address = "127.0.0.1:" + std::to_string(ports[k]);
    *remote = std::make_unique<GrpcRemoteWorker>(
        GrpcChannelCache::Global().FindOrCreate(local_address), name, /*use_data_plane=*/true);
  }
  tensorflow::GetStatusResponse status;
  if (!r.worker->GetStatus({}, &status, CallOptions::WithTimeout(absl::Seconds(30))).ok() ||
      status.device_attributes_size() == 0) {
    std::fprintf(stderr, "child worker does not answer\n");
    return false;
  }
  r.src = status.device_attributes(0).name();
  r.incarnation = status.device_attributes(0).incarnation();
  return true;
}

int ConnectRaw(int port) {
  int raw = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(raw, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("raw connect");
  NoDelay(raw);
  return raw;
}

// Seconds of each way's samples of one size.
struct Samples {
  std::vector<double> raw, rpc, dp, tls, tls_dp, local, shared;
  double dp_cpu = 0, tls_dp_cpu = 0;  // Both processes, the timed samples' steps.
};

// Times `samples` transfers of `handle`'s tensor each way, interleaved;
// false when one fails.
bool Measure(const Remote& r, int raw, std::vector<char>& buf, const std::string& handle,
             size_t bytes, int samples, pid_t child, int64_t& step, Samples& out) {
  for (int i = -1; i < samples; ++i) {  // Sample -1 warms the paths up (and negotiates).
    const double a = TimedRaw(raw, &buf, bytes);
    const double b = TimedRecvTensor(r, r.worker.get(), handle, bytes, step++);
    const double cpu0 = CpuSeconds(child);
    const double c = TimedRecvTensor(r, r.data_plane.get(), handle, bytes, step++);
    const double cpu1 = CpuSeconds(child);
    const double d = TimedRecvTensor(r, r.tls.get(), handle, bytes, step++);
    const double cpu2 = CpuSeconds(child);
    const double e = TimedRecvTensor(r, r.tls_dp.get(), handle, bytes, step++);
    const double cpu3 = CpuSeconds(child);
    const double f = TimedRecvTensor(r, r.local.get(), handle, bytes, step++);
    const double g = TimedRecvTensor(r, r.shared.get(), handle, bytes, step++);
    if (a < 0 || b < 0 || c < 0 || d < 0 || e < 0 || f < 0 || g < 0) return false;
    if (i >= 0) {
      out.raw.push_back(a), out.rpc.push_back(b), out.dp.push_back(c), out.tls.push_back(d);
      out.tls_dp.push_back(e), out.local.push_back(f), out.shared.push_back(g);
      out.dp_cpu += cpu1 - cpu0;
      out.tls_dp_cpu += cpu3 - cpu2;
    }
  }
  if (!r.data_plane->data_plane_ready() || !r.tls_dp->data_plane_ready() ||
      !r.local->data_plane_ready() || !r.shared->data_plane_ready()) {
    std::fprintf(stderr, "a data plane was not negotiated; its column is gRPC\n");
  }
  return true;
}

void PrintHeader() {
  double loadavg[3] = {0, 0, 0};
  getloadavg(loadavg, 3);
  std::printf("RecvTensor vs raw TCP, two processes on 127.0.0.1, load average %.2f\n", loadavg[0]);
  std::printf("%10s %8s %13s %13s %7s %13s %7s %13s %7s %9s %9s %13s %11s %13s %9s %11s %11s "
              "%13s\n",
              "bytes", "samples", "raw TCP GB/s", "gRPC GB/s", "ratio", "data pl. GB/s", "ratio",
              "TLS gRPC GB/s", "ratio", "TLS/gRPC", "TLS/d.pl.", "TLS d.pl GB/s", "TLSdp/d.pl",
              "CPU ns/B d.pl", "TLS d.pl", "local GB/s", "shared GB/s", "shared/local");
}

// One row: each way's GB/s (of the median sample) and the medians of the
// per-sample ratios.
void PrintRow(size_t bytes, int samples, const Samples& s) {
  auto gbs = [bytes](const std::vector<double>& v) { return bytes / Median(v) / 1e9; };
  // The median over samples of `num[i] / den[i]`.
  auto ratio = [](const std::vector<double>& num, const std::vector<double>& den) {
    std::vector<double> r;
    for (size_t i = 0; i < num.size(); ++i) r.push_back(num[i] / den[i]);
    return Median(r);
  };
  const double total = static_cast<double>(bytes) * samples;
  std::printf("%10zu %8d %13.3f %13.3f %7.2f %13.3f %7.2f %13.3f %7.2f %9.2f %9.2f %13.3f %11.2f "
              "%13.2f %9.2f %11.3f %11.3f %13.2f\n",
              bytes, samples, gbs(s.raw), gbs(s.rpc), ratio(s.raw, s.rpc), gbs(s.dp),
              ratio(s.raw, s.dp), gbs(s.tls), ratio(s.raw, s.tls), ratio(s.rpc, s.tls),
              ratio(s.dp, s.tls), gbs(s.tls_dp), ratio(s.dp, s.tls_dp), s.dp_cpu / total * 1e9,
              s.tls_dp_cpu / total * 1e9, gbs(s.local), gbs(s.shared), ratio(s.local, s.shared));
  std::fflush(stdout);
}

int RunParent(const int ports[5], const SecurityOptions& tls, bool quick, size_t min_bytes,
              pid_t child) {
  Remote r;
  if (!ConnectRemotes(ports, tls, r)) return 1;
  const int raw = ConnectRaw(ports[1]);
  std::vector<char> buf(kMaxBytes);
  PrintHeader();
  const size_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  int64_t step = 1;
  for (size_t bytes : sizes) {
    if (bytes < min_bytes) continue;
    const std::string handle = RegisterSource(r, bytes);
    const size_t budget = (quick ? size_t{64} : size_t{768}) << 20;
    const int samples =
        static_cast<int>(std::clamp<size_t>(budget / bytes, quick ? 5 : 11, quick ? 50 : 300));
    Samples s;
    if (!Measure(r, raw, buf, handle, bytes, samples, child, step, s)) return 1;
    PrintRow(bytes, samples, s);
    tensorflow::DeregisterGraphRequest dereg;
    dereg.set_graph_handle(handle);
    tensorflow::DeregisterGraphResponse dereg_resp;
    r.worker->DeregisterGraph(dereg, &dereg_resp, CallOptions::WithTimeout(absl::Seconds(30)))
        .IgnoreError();
  }
  ::close(raw);
  return 0;
}

}  // namespace
}  // namespace dflow

int main(int argc, char** argv) {
  bool quick = false;
  size_t min_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--min-bytes" && i + 1 < argc) {
      min_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: rpc_bench [--quick] [--min-bytes N]\n");
      return 2;
    }
  }
  absl::StatusOr<dflow::ThrowawayTls> made = dflow::MakeThrowawayTls();  // No gRPC state yet.
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  const dflow::SecurityOptions tls = made->security();
  int report[2];
  if (::pipe(report) != 0) dflow::Die("pipe");
  const pid_t child = ::fork();  // Before any gRPC state exists in this process.
  if (child < 0) dflow::Die("fork");
  if (child == 0) {
    ::close(report[0]);
    dflow::RunChild(report[1], tls);
  }
  ::close(report[1]);
  int ports[5] = {0, 0, 0, 0, 0};
  if (!dflow::ReadAll(report[0], reinterpret_cast<char*>(ports), sizeof(ports))) {
    std::fprintf(stderr, "child did not report its ports\n");
    ::kill(child, SIGKILL);
    return 1;
  }
  const int rc = dflow::RunParent(ports, tls, quick, min_bytes, child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return rc;
}
