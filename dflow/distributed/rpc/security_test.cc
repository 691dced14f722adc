#include "dflow/distributed/rpc/security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/rpc/grpc_remote_master.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/distributed/rpc/local_cluster_test_util.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/session_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Floats;
using worker_test::PsWorkerGraph;

constexpr char kToken[] = "the-right-token-0123456789";

CallOptions Timeout(absl::Duration d) { return CallOptions::WithTimeout(d); }

// A temporary directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dflow_security_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    for (const std::string& f : files_) std::remove(f.c_str());
    ::rmdir(path_.c_str());
  }
  std::string Write(const std::string& name, const std::string& bytes, mode_t mode) {
    const std::string path = absl::StrCat(path_, "/", name);
    std::ofstream(path) << bytes;
    ::chmod(path.c_str(), mode);
    files_.push_back(path);
    return path;
  }
  const std::string& path() const { return path_; }
  void Track(const std::string& path) { files_.push_back(path); }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

TEST(SecurityOptionsTest, LoadsATokenFileWithoutItsTrailingNewline) {
  TempDir dir;
  auto loaded = LoadSecurityOptions({dir.Write("token", "abc123\n", 0600)});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->auth_token, "abc123");
  EXPECT_FALSE(loaded->tls());
}

TEST(SecurityOptionsTest, RefusesWorldReadableEmptyOrMissingTokenFiles) {
  TempDir dir;
  auto open = LoadSecurityOptions({dir.Write("open", "abc", 0644)});
  EXPECT_EQ(open.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(open.status().message(), HasSubstr("readable by every user"));
  auto empty = LoadSecurityOptions({dir.Write("empty", " \n", 0600)});
  EXPECT_THAT(empty.status().message(), HasSubstr("is empty"));
  auto missing = LoadSecurityOptions({dir.path() + "/nope"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(SecurityOptionsTest, TlsNeedsCertKeyAndCa) {
  TempDir dir;
  SecurityFiles files;
  files.tls_cert = dir.Write("cert.pem", "x", 0644);
  files.tls_ca = dir.Write("ca.pem", "x", 0644);
  auto loaded = LoadSecurityOptions(files);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("--tls-key is missing"));
  files.tls_key = dir.Write("key.pem", "x", 0644);  // A private key others can read.
  EXPECT_THAT(LoadSecurityOptions(files).status().message(), HasSubstr("readable by every user"));
}

TEST(SecurityOptionsTest, TokensEqualOnlyWhenEqual) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
  EXPECT_FALSE(TokensEqual("abc", ""));
  EXPECT_FALSE(TokensEqual("abc", "abcabc"));  // The expected bytes are cycled, not repeated.
  EXPECT_FALSE(TokensEqual("abc", "ab"));
  EXPECT_FALSE(TokensEqual("", "abc"));
  EXPECT_TRUE(TokensEqual("", ""));
  EXPECT_TRUE(CheckAuthToken("", nullptr, "[X]").ok());  // No token required.
}

TEST(SecurityOptionsTest, WritesThrowawayFilesThatLoad) {
  TempDir dir;
  auto files = WriteThrowawaySecurity(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string* f :
       {&files->auth_token_file, &files->tls_cert, &files->tls_key, &files->tls_ca}) {
    dir.Track(*f);
  }
  auto loaded = LoadSecurityOptions(*files);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->auth_token.size(), 64u);
  EXPECT_THAT(loaded->tls_cert, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(loaded->tls_key, HasSubstr("BEGIN PRIVATE KEY"));
}

// A cluster of 1 ps and 2 workers on 127.0.0.1 whose servers all use `security`.
class SecureCluster {
 public:
  explicit SecureCluster(const SecurityOptions& security) {
    ClusterSpec spec;
    EXPECT_TRUE(spec.AddTask("ps", 0, "127.0.0.1:0").ok());
    EXPECT_TRUE(spec.AddTask("worker", 0, "127.0.0.1:0").ok());
    EXPECT_TRUE(spec.AddTask("worker", 1, "127.0.0.1:0").ok());
    GrpcServer::Options options;
    options.security = security;
    ClusterSpec bound;
    for (const TaskId& t : spec.AllTasks()) {
      auto server = GrpcServer::Create(ServerDefFor(spec, t.job, t.index), options);
      EXPECT_TRUE(server.ok()) << server.status();
      EXPECT_TRUE((*server)->Start().ok());
      EXPECT_TRUE(
          bound.AddTask(t.job, t.index, absl::StrCat("127.0.0.1:", (*server)->bound_port())).ok());
      servers_.push_back(std::move(server).value());
    }
    for (auto& server : servers_) EXPECT_TRUE(server->UpdateCluster(bound).ok());
  }
  GrpcServer& ps() { return *servers_[0]; }
  GrpcServer& worker() { return *servers_[1]; }
  std::string address() { return absl::StrCat("127.0.0.1:", worker().bound_port()); }

 private:
  std::vector<std::unique_ptr<GrpcServer>> servers_;
};

SecurityOptions Token(const std::string& token) {
  SecurityOptions s;
  s.auth_token = token;
  return s;
}

absl::Status ListDevices(const std::string& target, const SecurityOptions& security) {
  std::unique_ptr<MasterInterface> master = NewGrpcRemoteMaster(target, security);
  tensorflow::ListDevicesRequest req;
  tensorflow::ListDevicesResponse resp;
  return master->ListDevices(req, &resp, Timeout(absl::Seconds(30)));
}

absl::Status GetStatus(const std::string& address, const SecurityOptions& security) {
  std::unique_ptr<WorkerInterface> worker = NewGrpcRemoteWorker(address, "", security);
  tensorflow::GetStatusRequest req;
  tensorflow::GetStatusResponse resp;
  return worker->GetStatus(req, &resp, Timeout(absl::Seconds(30)));
}

// Runs the ps/worker graph three steps through `security`'s master client.
absl::Status TrainThreeSteps(const std::string& target, const SecurityOptions& security) {
  SessionOptions options;
  options.target = target;
  RemoteSession session(NewGrpcRemoteMaster(target, security), options);
  RETURN_IF_ERROR(session.Create(PsWorkerGraph()));
  RETURN_IF_ERROR(session.Run({}, {}, {"init", "assign_r"}, nullptr));
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session.Run({{"two", Tensor::Scalar(3.0f)}}, {"y"}, {}, &out));
    if (Floats(out[0]) != std::vector<float>{3, 6, 9}) {
      return absl::InternalError("y is not [3, 6, 9]");
    }
  }
  return session.Close();
}

TEST(GrpcServerAuthTest, CallsWithoutTheTokenAreUnauthenticatedNamingTheCall) {
  SecureCluster cluster(Token(kToken));
  absl::Status s = ListDevices(cluster.worker().target(), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(s.message(), HasSubstr("[MasterService.ListDevices] missing auth token"));
  s = ListDevices(cluster.worker().target(), Token("not-the-token"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(s.message(), HasSubstr("[MasterService.ListDevices] wrong auth token"));
  s = GetStatus(cluster.address(), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(s.message(), HasSubstr("[WorkerService.GetStatus] missing auth token"));
  s = GetStatus(cluster.address(), Token(std::string(kToken) + "x"));
  EXPECT_THAT(s.message(), HasSubstr("[WorkerService.GetStatus] wrong auth token"));
  // RecvTensor (parsed by hand, not through Forward) checks it too.
  std::unique_ptr<WorkerInterface> worker = NewGrpcRemoteWorker(cluster.address(), "", {});
  tensorflow::RecvTensorRequest req;
  req.set_rendezvous_key("a;b;c;d;e");
  RecvTensorResult got;
  s = worker->RecvTensor(req, &got, Timeout(absl::Seconds(30)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(s.message(), HasSubstr("[WorkerService.RecvTensor] missing auth token"));
  // Nothing ran: no session was made.
  EXPECT_FALSE(TrainThreeSteps(cluster.worker().target(), {}).ok());
  EXPECT_EQ(cluster.worker().master()->NumSessions(), 0);
}

TEST(GrpcServerAuthTest, TheRightTokenTrainsAcrossTasks) {
  SecureCluster cluster(Token(kToken));
  EXPECT_TRUE(ListDevices(cluster.worker().target(), Token(kToken)).ok());
  EXPECT_TRUE(GetStatus(cluster.address(), Token(kToken)).ok());
  // The worker reads the ps's variable (RecvTensor, with the token on the data plane).
  absl::Status s = TrainThreeSteps(cluster.worker().target(), Token(kToken));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(cluster.ps().data_plane_port(), 0);
}

TEST(GrpcServerAuthTest, ASessionInTheServersOwnProcessNeedsNoToken) {
  // It calls the master directly (LocalMaster): no process boundary to guard.
  SecureCluster cluster(Token(kToken));
  const std::string target = cluster.worker().target();
  SessionOptions options;
  options.target = target;
  auto session = NewSession(options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(PsWorkerGraph()).ok());
  absl::Status s = (*session)->Run({}, {}, {"init", "assign_r"}, nullptr);
  EXPECT_TRUE(s.ok()) << s;
  // The same call over gRPC without the token is refused.
  s = TrainThreeSteps(target, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

TEST(GrpcServerAuthTest, WithoutATokenTheServerTakesEveryCaller) {
  SecureCluster cluster({});
  EXPECT_TRUE(ListDevices(cluster.worker().target(), {}).ok());
  EXPECT_TRUE(ListDevices(cluster.worker().target(), Token("anything")).ok());
}

SecurityOptions Tls(const ThrowawayTls& tls, const std::string& token = "") {
  SecurityOptions s = tls.security();
  s.auth_token = token;
  return s;
}

TEST(GrpcServerTlsTest, MutualTlsRefusesClientsWithoutACertificateFromItsCa) {
  auto tls = MakeThrowawayTls();
  auto other = MakeThrowawayTls();  // Another CA.
  ASSERT_TRUE(tls.ok() && other.ok()) << tls.status() << other.status();
  SecureCluster cluster(Tls(*tls, kToken));
  EXPECT_NE(cluster.ps().data_plane_port(), 0);  // Mutual TLS there too.
  const std::string target = cluster.worker().target();
  // Plaintext to a TLS port: the handshake fails (UNAVAILABLE).
  absl::Status s = ListDevices(target, Token(kToken));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // A certificate from another CA (the client does not trust the server either).
  s = ListDevices(target, Tls(*other, kToken));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // It trusts the server, but its own certificate is from another CA.
  SecurityOptions foreign = Tls(*other, kToken);
  foreign.tls_ca = tls->ca_cert;
  s = ListDevices(target, foreign);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // The right certificate but no token.
  s = ListDevices(target, Tls(*tls));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  // Everything right: trains across tasks over TLS; the worker reads the ps's
  // variable over the data plane's TLS, not the gRPC channel.
  s = TrainThreeSteps(target, Tls(*tls, kToken));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_GT(cluster.ps().data_plane_requests(), 0);
}

}  // namespace
}  // namespace dflow
