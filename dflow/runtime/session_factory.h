// NewSession: picks the session implementation for a target.
//   ""  or "local"      -> DirectSession (this process)
//   "grpc://host:port"  -> a remote master (registered by distributed/)
#ifndef DFLOW_RUNTIME_SESSION_FACTORY_H_
#define DFLOW_RUNTIME_SESSION_FACTORY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/runtime/session.h"

namespace dflow {

using SessionFactory =
    std::function<absl::StatusOr<std::unique_ptr<Session>>(const SessionOptions&)>;

// Registers the factory for targets starting with `prefix` (e.g. "grpc://").
void RegisterSessionFactory(const std::string& prefix, SessionFactory factory);

// InvalidArgument naming the target when no factory accepts it.
absl::StatusOr<std::unique_ptr<Session>> NewSession(const SessionOptions& options);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_SESSION_FACTORY_H_
