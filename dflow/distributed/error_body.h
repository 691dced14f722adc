// TensorFlow's clients set store_errors_in_response_body on RunStep and
// RunGraph: a failed call then answers OK and carries its error in the
// response's status_code and status_error_message fields.
//
//   done(StoreErrorInBody(req->store_errors_in_response_body(), status, resp));
#ifndef DFLOW_DISTRIBUTED_ERROR_BODY_H_
#define DFLOW_DISTRIBUTED_ERROR_BODY_H_

#include <string>

#include "absl/status/status.h"
#include "dflow/proto/error_codes.pb.h"

namespace dflow {

// OK after writing a non-OK `status` into `resp` when `store` is set;
// `status` itself otherwise. `Resp` is RunStepResponse or RunGraphResponse.
template <typename Resp>
absl::Status StoreErrorInBody(bool store, const absl::Status& status, Resp* resp) {
  if (status.ok() || !store) return status;
  resp->set_status_code(static_cast<tensorflow::error::Code>(status.code()));
  resp->set_status_error_message(std::string(status.message()));
  return absl::OkStatus();
}

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_ERROR_BODY_H_
