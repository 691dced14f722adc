#include "dflow/distributed/master_interface.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dflow {

absl::Status CheckFeedValues(const tensorflow::RunStepRequest& req, size_t num_values) {
  if (num_values == static_cast<size_t>(req.feed_size())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("[Master RunStep] ", req.feed_size(),
                                                 " feeds named, ", num_values, " values given"));
}

void MasterInterface::RunStepWithTensorsAsync(const CallOptions& opts,
                                              tensorflow::RunStepRequest* req,
                                              std::vector<Tensor> feed_values,
                                              tensorflow::RunStepResponse* resp,
                                              StatusCallback done) {
  if (absl::Status s = CheckFeedValues(*req, feed_values.size()); !s.ok()) return done(s);
  for (size_t i = 0; i < feed_values.size(); ++i) {
    feed_values[i].AsProtoTensorContent(req->mutable_feed(static_cast<int>(i))->mutable_tensor());
  }
  RunStepAsync(opts, req, resp, std::move(done));
}

}  // namespace dflow
