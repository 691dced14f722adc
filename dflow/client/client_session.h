// ClientSession: runs the graph of a Scope, in this process or on a remote
// master, extending the session with nodes added since the last run.
//
//   ClientSession session(root);                 // or (root, "grpc://host:port")
//   std::vector<Tensor> out;
//   absl::Status s = session.Run({{x, Tensor::Vec<float>({1, 2})}}, {y}, &out);
// Thread-safe.
#ifndef DFLOW_CLIENT_CLIENT_SESSION_H_
#define DFLOW_CLIENT_CLIENT_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dflow/client/scope.h"
#include "dflow/runtime/session.h"

namespace dflow {

class ClientSession {
 public:
  using FeedType = std::vector<std::pair<Output, Input>>;

  explicit ClientSession(const Scope& scope, const std::string& target = "");
  ClientSession(const Scope& scope, const SessionOptions& options);
  ~ClientSession();

  // Session creation errors are reported by the first Run.
  absl::Status Run(const std::vector<Output>& fetches, std::vector<Tensor>* outputs) const;
  absl::Status Run(const FeedType& feeds, const std::vector<Output>& fetches,
                   std::vector<Tensor>* outputs) const;
  absl::Status Run(const FeedType& feeds, const std::vector<Output>& fetches,
                   const std::vector<Operation>& targets, std::vector<Tensor>* outputs) const;
  absl::Status Run(const tensorflow::RunOptions& options, const FeedType& feeds,
                   const std::vector<Output>& fetches, const std::vector<Operation>& targets,
                   std::vector<Tensor>* outputs, tensorflow::RunMetadata* metadata) const;

  Session* session() const { return session_.get(); }

 private:
  absl::Status MaybeExtend() const;

  Scope scope_;
  absl::Status init_status_;
  std::unique_ptr<Session> session_;
  mutable absl::Mutex mu_;
  mutable int nodes_sent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dflow

#endif  // DFLOW_CLIENT_CLIENT_SESSION_H_
