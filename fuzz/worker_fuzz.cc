// Fuzzes every Worker request handler, called in-process (no network) on a
// worker of /job:worker/task:0 whose peer /job:ps/task:0 is in-process too.
// An input is a sequence of calls (fuzz_util.h's CallReader): method byte % 9
// picks the handler, the bytes are its request proto. An empty graph_handle
// becomes the handle of the last graph the input registered, so a sequence can
// register, run, receive and clean up. Workers are made per input; every call
// has a deadline.
#include <string>
#include <vector>

#include "dflow/framework/rendezvous.h"
#include "fuzz/cluster_util.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

FuzzCluster* cluster;

enum Method {
  kGetStatus, kCreateSession, kDeleteSession, kRegister, kDeregister, kRunGraph, kCleanupGraph,
  kCleanupAll, kRecvTensor, kNumMethods
};

template <typename Req>
bool ParseWithGraph(const std::string& bytes, Req* req, const std::string& graph) {
  if (!req->ParseFromString(bytes)) return false;
  if (req->graph_handle().empty()) req->set_graph_handle(graph);
  return true;
}

// Calls handler `method` of worker `w` with request `bytes`; `graph`: the
// last graph registered, for the requests that name none.
void CallWorker(WorkerInterface* w, int method, const std::string& bytes, const CallOptions& opts,
                std::string* graph) {
  switch (method) {
    case kGetStatus: {
      tensorflow::GetStatusRequest req;
      tensorflow::GetStatusResponse resp;
      if (req.ParseFromString(bytes)) (void)w->GetStatus(req, &resp, opts);
      break;
    }
    case kCreateSession: {
      tensorflow::CreateWorkerSessionRequest req;
      tensorflow::CreateWorkerSessionResponse resp;
      if (req.ParseFromString(bytes)) (void)w->CreateWorkerSession(req, &resp, opts);
      break;
    }
    case kDeleteSession: {
      tensorflow::DeleteWorkerSessionRequest req;
      tensorflow::DeleteWorkerSessionResponse resp;
      if (req.ParseFromString(bytes)) (void)w->DeleteWorkerSession(req, &resp, opts);
      break;
    }
    case kRegister: {
      tensorflow::RegisterGraphRequest req;
      tensorflow::RegisterGraphResponse resp;
      if (req.ParseFromString(bytes) && w->RegisterGraph(req, &resp, opts).ok()) {
        *graph = resp.graph_handle();
      }
      break;
    }
    case kDeregister: {
      tensorflow::DeregisterGraphRequest req;
      tensorflow::DeregisterGraphResponse resp;
      if (ParseWithGraph(bytes, &req, *graph)) (void)w->DeregisterGraph(req, &resp, opts);
      break;
    }
    case kRunGraph: {
      tensorflow::RunGraphRequest req;
      tensorflow::RunGraphResponse resp;
      if (ParseWithGraph(bytes, &req, *graph)) (void)w->RunGraph(req, &resp, opts);
      break;
    }
    case kCleanupGraph: {
      tensorflow::CleanupGraphRequest req;
      tensorflow::CleanupGraphResponse resp;
      if (req.ParseFromString(bytes)) (void)w->CleanupGraph(req, &resp, opts);
      break;
    }
    case kCleanupAll: {
      tensorflow::CleanupAllRequest req;
      tensorflow::CleanupAllResponse resp;
      if (req.ParseFromString(bytes)) (void)w->CleanupAll(req, &resp, opts);
      break;
    }
    case kRecvTensor: {
      tensorflow::RecvTensorRequest req;
      RecvTensorResult resp;
      if (req.ParseFromString(bytes)) {
        (void)w->RecvTensor(req, &resp, CallOptions::WithTimeout(absl::Milliseconds(20)));
      }
      break;
    }
  }
}

}  // namespace

std::vector<std::string> Seeds() {
  // What a master registers: y = 2 * x on CPU:0, x received from the client,
  // y sent to it, and z = y + 1 sent to CPU:1 of the same task.
  FuzzCluster c;
  const std::string cpu0 = c.mgr(kWorkerTask)->ListDevices()[0]->name();
  const std::string cpu1 = c.mgr(kWorkerTask)->ListDevices()[1]->name();
  const uint64_t inc0 = c.mgr(kWorkerTask)->ListDevices()[0]->incarnation();
  tensorflow::RegisterGraphRequest reg;
  tensorflow::GraphDef* g = reg.mutable_graph_def();
  auto key_attrs = [&](tensorflow::NodeDef* n, const std::string& name, const std::string& dst,
                       bool client) {
    SetAttr(n, "tensor_name", name);
    SetAttr(n, "send_device", cpu0);
    SetAttr(n, "send_device_incarnation", static_cast<int64_t>(inc0));
    SetAttr(n, "recv_device", dst);
    SetAttr(n, "client_terminated", client);
  };
  tensorflow::NodeDef* x = AddNode(g, "x", "_Recv", {}, cpu0);
  SetAttr(x, "tensor_type", DT_FLOAT);
  key_attrs(x, "x", cpu0, true);
  tensorflow::NodeDef* two = AddNode(g, "two", "Const", {}, cpu0);
  SetAttr(two, "dtype", DT_FLOAT);
  SetAttr(two, "value", Tensor::Scalar(2.0f));
  SetAttr(AddNode(g, "y", "Mul", {"x", "two"}, cpu0), "T", DT_FLOAT);
  tensorflow::NodeDef* send = AddNode(g, "send_y", "_Send", {"y"}, cpu0);
  SetAttr(send, "T", DT_FLOAT);
  key_attrs(send, "y", cpu0, true);
  tensorflow::NodeDef* send1 = AddNode(g, "send_y1", "_Send", {"y"}, cpu0);
  SetAttr(send1, "T", DT_FLOAT);
  key_attrs(send1, "edge_y", cpu1, false);

  tensorflow::RunGraphRequest run;
  run.set_step_id(7);
  tensorflow::NamedTensorProto* feed = run.add_send();
  feed->set_name(Rendezvous::CreateKey(cpu0, inc0, cpu0, "x", {0, 0}));
  Tensor::Vec<float>({1, 2, 3}).AsProtoTensorContent(feed->mutable_tensor());
  run.add_recv_key(Rendezvous::CreateKey(cpu0, inc0, cpu0, "y", {0, 0}));
  tensorflow::RecvTensorRequest recv;
  recv.set_step_id(7);
  recv.set_rendezvous_key(Rendezvous::CreateKey(cpu0, inc0, cpu1, "edge_y", {0, 0}));
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(7);
  tensorflow::CreateWorkerSessionRequest create;
  create.set_session_handle("sess");
  create.mutable_server_def()->set_job_name("worker");
  return {
      Call(kRegister, reg.SerializeAsString()) + Call(kRunGraph, run.SerializeAsString()) +
          Call(kRecvTensor, recv.SerializeAsString()) +
          Call(kCleanupGraph, cleanup.SerializeAsString()) + Call(kDeregister, ""),
      Call(kGetStatus, "") + Call(kCreateSession, create.SerializeAsString()) +
          Call(kDeleteSession, create.SerializeAsString()) + Call(kCleanupAll, ""),
  };
}

}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dflow::fuzz::cluster = dflow::fuzz::InitServiceFuzzer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  using namespace dflow::fuzz;
  return FuzzOneInput(cluster, size, [&] {
    WorkerInterface* w = cluster->worker(kWorkerTask);
    std::string graph;
    RunCalls(data, size, kNumMethods,
             [&](int method, const std::string& bytes, const CallOptions& opts) {
               CallWorker(w, method, bytes, opts, &graph);
             });
    // Resource containers live on the devices: clear them for the next input.
    tensorflow::CleanupAllRequest all;
    tensorflow::CleanupAllResponse all_resp;
    (void)w->CleanupAll(all, &all_resp, CallOptions::WithTimeout(kCallTimeout));
  });
}
