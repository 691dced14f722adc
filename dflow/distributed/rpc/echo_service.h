// The bare-gRPC baseline of the benchmarks: a server whose one method
// ("/dflow.Echo/Echo") answers with its request bytes, and a client making
// unary calls to it with the channel settings the runtime uses.
//
//   ASSIGN_OR_RETURN(auto server, EchoServer::Start());   // 127.0.0.1, port 0
//   EchoClient client(absl::StrCat("127.0.0.1:", server->port()));
//   RETURN_IF_ERROR(client.Call(std::string(16, 'x')));
#ifndef DFLOW_DISTRIBUTED_RPC_ECHO_SERVICE_H_
#define DFLOW_DISTRIBUTED_RPC_ECHO_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dflow {

class EchoServer {
 public:
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start();
  ~EchoServer();
  int port() const;

 private:
  struct Impl;
  explicit EchoServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class EchoClient {
 public:
  explicit EchoClient(const std::string& target);
  ~EchoClient();
  // One unary call carrying `payload`; waits at most `timeout`.
  absl::Status Call(const std::string& payload, absl::Duration timeout = absl::Seconds(10));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_ECHO_SERVICE_H_
