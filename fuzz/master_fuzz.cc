// Fuzzes every Master request handler, called in-process on a two-task
// cluster (no network). An input is a sequence of calls (fuzz_util.h's
// CallReader): method byte % 10 picks the handler, the bytes are its request
// proto. A request with an empty session_handle gets the handle of the last
// session the input created, so a sequence can create, extend, run and close.
// The master is made per input; every call has a deadline.
#include <memory>
#include <string>
#include <vector>

#include "dflow/distributed/master.h"
#include "fuzz/cluster_util.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

FuzzCluster* cluster;

enum Method {
  kCreate, kExtend, kPartialRunSetup, kRunStep, kClose, kListDevices, kReset,
  kMakeCallable, kRunCallable, kReleaseCallable, kNumMethods
};

template <typename Req>
bool Parse(const std::string& bytes, Req* req, const std::string& handle) {
  if (!req->ParseFromString(bytes)) return false;
  if (req->session_handle().empty()) req->set_session_handle(handle);
  return true;
}

tensorflow::GraphDef SeedGraph() {
  tensorflow::GraphDef g;
  SetAttr(AddNode(&g, "x", "Placeholder", {}), "dtype", DT_FLOAT);
  tensorflow::NodeDef* c = AddNode(&g, "c", "Const", {}, "/job:ps/task:0");
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", Tensor::Vec<float>({1, 2, 3}));
  SetAttr(AddNode(&g, "y", "Mul", {"x", "c"}, "/job:worker/device:CPU:1"), "T", DT_FLOAT);
  tensorflow::NodeDef* v = AddNode(&g, "v", "VarHandleOp", {}, "/job:ps");
  SetAttr(v, "dtype", DT_FLOAT);
  SetAttr(v, "shape", TensorShape({3}));
  SetAttr(v, "shared_name", "v");
  SetAttr(AddNode(&g, "init", "AssignVariableOp", {"v", "c"}), "dtype", DT_FLOAT);
  SetAttr(AddNode(&g, "read", "ReadVariableOp", {"v"}), "dtype", DT_FLOAT);
  return g;
}

// Calls handler `method` of `master` with request `bytes`; `handle`: the
// last session created, for the requests that name none.
void CallMaster(Master& master, int method, const std::string& bytes, const CallOptions& opts,
                std::string* handle) {
  switch (method) {
    case kCreate: {
      tensorflow::CreateSessionRequest req;
      tensorflow::CreateSessionResponse resp;
      if (req.ParseFromString(bytes) && master.CreateSession(req, &resp, opts).ok()) {
        *handle = resp.session_handle();
      }
      break;
    }
    case kExtend: {
      tensorflow::ExtendSessionRequest req;
      tensorflow::ExtendSessionResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.ExtendSession(req, &resp, opts);
      break;
    }
    case kPartialRunSetup: {
      tensorflow::PartialRunSetupRequest req;
      tensorflow::PartialRunSetupResponse resp;
      if (Parse(bytes, &req, *handle)) {
        (void)WaitForCall([&](StatusCallback d) {
          master.PartialRunSetupAsync(opts, &req, &resp, std::move(d));
        });
      }
      break;
    }
    case kRunStep: {
      tensorflow::RunStepRequest req;
      tensorflow::RunStepResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.RunStep(req, &resp, opts);
      break;
    }
    case kClose: {
      tensorflow::CloseSessionRequest req;
      tensorflow::CloseSessionResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.CloseSession(req, &resp, opts);
      break;
    }
    case kListDevices: {
      tensorflow::ListDevicesRequest req;
      tensorflow::ListDevicesResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.ListDevices(req, &resp, opts);
      break;
    }
    case kReset: {
      tensorflow::ResetRequest req;
      tensorflow::ResetResponse resp;
      if (req.ParseFromString(bytes)) (void)master.Reset(req, &resp, opts);
      break;
    }
    case kMakeCallable: {
      tensorflow::MakeCallableRequest req;
      tensorflow::MakeCallableResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.MakeCallable(req, &resp, opts);
      break;
    }
    case kRunCallable: {
      tensorflow::RunCallableRequest req;
      tensorflow::RunCallableResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.RunCallable(req, &resp, opts);
      break;
    }
    case kReleaseCallable: {
      tensorflow::ReleaseCallableRequest req;
      tensorflow::ReleaseCallableResponse resp;
      if (Parse(bytes, &req, *handle)) (void)master.ReleaseCallable(req, &resp, opts);
      break;
    }
  }
}

}  // namespace

std::vector<std::string> Seeds() {
  tensorflow::CreateSessionRequest create;
  *create.mutable_graph_def() = SeedGraph();
  tensorflow::RunStepRequest init;
  init.add_target("init");
  tensorflow::RunStepRequest run;
  tensorflow::NamedTensorProto* feed = run.add_feed();
  feed->set_name("x:0");
  Tensor::Vec<float>({4, 5, 6}).AsProtoTensorContent(feed->mutable_tensor());
  run.add_fetch("y:0");
  run.add_fetch("read");
  tensorflow::ExtendSessionRequest extend;
  extend.set_current_graph_version(1);
  SetAttr(AddNode(extend.mutable_graph_def(), "z", "Neg", {"y"}), "T", DT_FLOAT);
  tensorflow::MakeCallableRequest make;
  make.mutable_options()->add_feed("x:0");
  make.mutable_options()->add_fetch("y:0");
  tensorflow::RunCallableRequest call;
  Tensor::Vec<float>({1, 1, 1}).AsProtoField(call.add_feed());
  const std::string s_create = Call(kCreate, create.SerializeAsString());
  return {
      s_create + Call(kRunStep, init.SerializeAsString()) + Call(kRunStep, run.SerializeAsString()),
      s_create + Call(kExtend, extend.SerializeAsString()) + Call(kClose, ""),
      s_create + Call(kMakeCallable, make.SerializeAsString()) +
          Call(kRunCallable, call.SerializeAsString()) + Call(kReleaseCallable, ""),
      s_create + Call(kListDevices, "") + Call(kReset, "") + Call(kPartialRunSetup, ""),
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
    MasterEnv env;
    env.task_name = kWorkerTask;
    env.cluster_tasks = {kWorkerTask, kPsTask};
    env.worker_for_task = [](const std::string& task) { return cluster->worker(task); };
    env.discovery_timeout = kCallTimeout;
    env.session_gc = absl::ZeroDuration();
    env.max_sessions = 4;
    {
      Master master(std::move(env));
      std::string handle;
      RunCalls(data, size, kNumMethods,
               [&](int method, const std::string& bytes, const CallOptions& opts) {
                 CallMaster(master, method, bytes, opts, &handle);
               });
      // Variables live on the devices: clear them for the next input.
      tensorflow::ResetRequest reset;
      tensorflow::ResetResponse reset_resp;
      (void)master.Reset(reset, &reset_resp, CallOptions::WithTimeout(kCallTimeout));
    }
  });
}
