// GrpcRemoteMaster: the MasterInterface of a task reached over gRPC
// ("/tensorflow.MasterService/<Method>"), and the "grpc://" session target
// built on it. Every call carries CallOptions::deadline as its gRPC
// deadline; transport failures name the call and the target:
//   "[MasterService.RunStep to 127.0.0.1:2222] ..."
// Thread-safe.
//
//   ASSIGN_OR_RETURN(auto session, NewSession({.target = "grpc://127.0.0.1:2222"}));
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_MASTER_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_MASTER_H_

#include <memory>
#include <string>

#include "dflow/distributed/master_interface.h"
#include "dflow/distributed/rpc/security.h"

namespace dflow {

// A master on the cached channel to `target` ("host:port" or "grpc://host:port"),
// presenting `security` (its TLS certificate, its token on every call).
std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(const std::string& target,
                                                     const SecurityOptions& security);
// The same with DefaultClientSecurity().
std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(const std::string& target);

// Makes NewSession accept "grpc://host:port" targets (a RemoteSession on a
// GrpcRemoteMaster presenting DefaultClientSecurity()). Idempotent; also done
// by a static initializer of this library, so linking it whole is enough.
void RegisterGrpcSessionFactory();

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_MASTER_H_
