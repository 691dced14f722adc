#include "dflow/distributed/master_interface.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dflow {

void MasterInterface::RunStepWithTensorsAsync(const CallOptions& opts,
                                              tensorflow::RunStepRequest* req,
                                              std::vector<Tensor> feed_values,
                                              tensorflow::RunStepResponse* resp,
                                              StatusCallback done) {
  if (feed_values.size() != static_cast<size_t>(req->feed_size())) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("[MasterService.RunStep] ", req->feed_size(), " feeds named, ",
                     feed_values.size(), " values given")));
  }
  for (size_t i = 0; i < feed_values.size(); ++i) {
    feed_values[i].AsProtoTensorContent(req->mutable_feed(static_cast<int>(i))->mutable_tensor());
  }
  RunStepAsync(opts, req, resp, std::move(done));
}

}  // namespace dflow
