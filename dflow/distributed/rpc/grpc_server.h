// GrpcServer: one task of a cluster. It owns the task's devices, its Worker
// and its Master, and serves both (tensorflow.WorkerService and
// tensorflow.MasterService) on one gRPC port. Its own task is called
// in-process; other tasks through cached gRPC channels. Several servers may
// live in one process (they share the inter-op pool); port 0 picks a free
// port, reported by bound_port() and target() after Start().
//
//   tensorflow::ServerDef def;  // cluster {ps: [...], worker: [...]}, job_name, task_index
//   ASSIGN_OR_RETURN(auto server, GrpcServer::Create(def));
//   RETURN_IF_ERROR(server->Start());
//   std::cout << server->target();  // "grpc://127.0.0.1:2222"
//   server->Join();                  // until Stop()
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_SERVER_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/local_master.h"
#include "dflow/distributed/master.h"
#include "dflow/distributed/rpc/security.h"
#include "dflow/distributed/worker.h"
#include "dflow/proto/tensorflow_server.pb.h"
#include "dflow/runtime/device_mgr.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace dflow {

class DataPlaneServer;
class GrpcMasterService;
class GrpcWorkerService;

class GrpcServer {
 public:
  // What ServerDef does not carry (TensorFlow passes session_gc_seconds to
  // its Master beside the ServerDef, too).
  struct Options {
    absl::Duration session_gc = absl::Hours(24);  // MasterEnv::session_gc.
    int max_sessions = 1024;                      // MasterEnv::max_sessions.
    // MasterEnv::max_graph_nodes: a session's graph of more nodes is
    // ResourceExhausted; a graph registered on this task's worker may have
    // twice as many (WorkerOptions::max_graph_nodes: partitions add
    // _Send/_Recv nodes). Zero: no limit.
    int64_t max_graph_nodes = 0;
    // A MasterService or WorkerService request of more bytes (a graph, a
    // RunStep's feeds, a RunGraph's sends) is RESOURCE_EXHAUSTED before it is
    // parsed, so no request can make the server hold more than this for it.
    // Zero: no limit (TensorFlow's servers take up to 2 GiB). The tensor data
    // plane's requests have their own, fixed caps (64 KiB, RunGraph 1 MiB).
    int64_t max_request_bytes = 0;
    // Off by default. A token: every MasterService/WorkerService call and
    // every data-plane connection must carry it, and this task's own calls to
    // other tasks present it. TLS: the port requires client certificates
    // signed by tls_ca and presents tls_cert; so does the tensor data plane
    // (mutual TLS 1.3, data_plane_connection.h). See SECURITY.md.
    SecurityOptions security;
  };

  // Checks `def` (its job and task are in its cluster, addresses are
  // "host:port") and builds the task's devices, worker and master; nothing
  // listens yet. InvalidArgument naming what is wrong.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const tensorflow::ServerDef& def,
                                                            const Options& options);
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const tensorflow::ServerDef& def) {
    return Create(def, Options());
  }
  ~GrpcServer();  // Stops.
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds the task's port (ServerDef.port when set, else the port of its
  // address; loopback hosts bind 127.0.0.1, others every interface) and
  // serves. Unless DFLOW_DATA_PLANE=0, also serves RecvTensor's data plane
  // (tensor_data_plane.h) on a kernel-chosen port of the same interface
  // (gRPC only if that fails). Unavailable naming the address when it cannot
  // be bound (e.g. the port is taken); FailedPrecondition when already started.
  absl::Status Start();
  // Stops serving (calls in flight end with CANCELLED) and wakes Join.
  // Idempotent.
  void Stop();
  // Blocks until Stop.
  void Join();

  // "grpc://host:port" of this task, with the bound port once started.
  std::string target() const;
  int bound_port() const;
  // The port of this task's tensor data plane once started; 0 when it has none.
  int data_plane_port() const;
  // Requests its data plane has served so far (tensor_data_plane.h's
  // DataPlaneServer::num_requests); 0 without one.
  int64_t data_plane_requests() const;
  // "/job:worker/replica:0/task:0"
  const std::string& task_name() const { return task_name_; }

  // Replaces the other tasks' addresses, e.g. once tasks started on port 0
  // know each other's ports. InvalidArgument when the jobs or tasks differ
  // from the server's cluster. Channels already made are kept.
  absl::Status UpdateCluster(const ClusterSpec& cluster);

  // Whether task `task` ("/job:ps/replica:0/task:0") answers a GetStatus
  // within `timeout`: its error otherwise (UNAVAILABLE for a dead one,
  // DEADLINE_EXCEEDED for a hung one); InvalidArgument for an unknown task.
  absl::Status PingTask(const std::string& task, absl::Duration timeout);

  DeviceMgr* device_mgr() { return devices_.get(); }
  Worker* worker() { return worker_.get(); }
  Master* master() { return master_.get(); }

 private:
  GrpcServer(const tensorflow::ServerDef& def, ClusterSpec cluster);
  // This task's worker in-process, another's over gRPC; nullptr when unknown.
  WorkerInterface* WorkerFor(const std::string& task);

  const tensorflow::ServerDef def_;
  SecurityOptions security_;  // Set by Create, then read-only.
  int64_t max_request_bytes_ = 0;  // Likewise.
  std::string task_name_;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<DeviceMgr> devices_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<LocalMaster::Registration> local_master_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<GrpcWorkerService> worker_service_;
  std::unique_ptr<GrpcMasterService> master_service_;

  mutable absl::Mutex mu_;
  ClusterSpec cluster_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<WorkerInterface>> remote_workers_
      ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<DataPlaneServer> data_plane_ ABSL_GUARDED_BY(mu_);
  int bound_port_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_SERVER_H_
