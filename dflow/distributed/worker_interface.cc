#include "dflow/distributed/worker_interface.h"

#include <memory>
#include <utility>

namespace dflow {

void WorkerInterface::RunGraphWithTensorsAsync(const CallOptions& opts,
                                               const tensorflow::RunGraphRequest* req,
                                               TensorSends sends,
                                               tensorflow::RunGraphResponse* resp,
                                               StatusCallback done) {
  if (sends.empty()) return RunGraphAsync(opts, req, resp, std::move(done));
  auto encoded = std::make_shared<tensorflow::RunGraphRequest>(*req);
  for (const auto& [key, value] : sends) {
    tensorflow::NamedTensorProto* send = encoded->add_send();
    send->set_name(key);
    value.AsProtoTensorContent(send->mutable_tensor());
  }
  RunGraphAsync(opts, encoded.get(), resp,
                [encoded, done = std::move(done)](const absl::Status& s) { done(s); });
}

}  // namespace dflow
