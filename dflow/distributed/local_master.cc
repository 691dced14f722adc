#include "dflow/distributed/local_master.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace dflow {

struct LocalMaster::Entry {
  explicit Entry(std::string t, MasterInterface* m) : target(std::move(t)), master(m) {}
  const std::string target;
  // Readers hand calls to the master; unregistering takes it as a writer.
  absl::Mutex mu;
  MasterInterface* master ABSL_GUARDED_BY(mu);
};

namespace {

struct Registry {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<LocalMaster::Entry>> by_target
      ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry;  // Never destroyed.
  return *registry;
}

std::string WithoutScheme(const std::string& target) {
  return absl::StartsWith(target, "grpc://") ? target.substr(7) : target;
}

}  // namespace

LocalMaster::Registration::~Registration() {
  Registry& r = GlobalRegistry();
  {
    absl::MutexLock l(&r.mu);
    auto it = r.by_target.find(entry_->target);
    if (it != r.by_target.end() && it->second == entry_) r.by_target.erase(it);
  }
  absl::MutexLock l(&entry_->mu);  // Waits for calls being handed over.
  entry_->master = nullptr;
}

std::unique_ptr<LocalMaster::Registration> LocalMaster::Register(const std::string& target,
                                                                 MasterInterface* master) {
  auto entry = std::make_shared<Entry>(WithoutScheme(target), master);
  Registry& r = GlobalRegistry();
  absl::MutexLock l(&r.mu);
  r.by_target[entry->target] = entry;
  return std::make_unique<Registration>(std::move(entry));
}

std::unique_ptr<MasterInterface> LocalMaster::Lookup(const std::string& target) {
  Registry& r = GlobalRegistry();
  absl::MutexLock l(&r.mu);
  auto it = r.by_target.find(WithoutScheme(target));
  if (it == r.by_target.end()) return nullptr;
  return std::make_unique<LocalMaster>(it->second);
}

template <typename Call>
void LocalMaster::Dispatch(const char* method, StatusCallback& done, Call call) {
  {
    absl::ReaderMutexLock l(&entry_->mu);
    if (entry_->master != nullptr) {
      call(entry_->master);
      return;
    }
  }
  done(absl::UnavailableError(absl::StrCat("[MasterService.", method, "] the server at ",
                                           entry_->target, " in this process has stopped")));
}

#define DFLOW_LOCAL_MASTER_METHOD(Method, Request, Response)                                  \
  void LocalMaster::Method##Async(const CallOptions& opts, const tensorflow::Request* req,     \
                                  tensorflow::Response* resp, StatusCallback done) {           \
    Dispatch(#Method, done, [&](MasterInterface* m) {                                          \
      m->Method##Async(opts, req, resp, std::move(done));                                     \
    });                                                                                        \
  }

DFLOW_LOCAL_MASTER_METHOD(CreateSession, CreateSessionRequest, CreateSessionResponse)
DFLOW_LOCAL_MASTER_METHOD(ExtendSession, ExtendSessionRequest, ExtendSessionResponse)
DFLOW_LOCAL_MASTER_METHOD(PartialRunSetup, PartialRunSetupRequest, PartialRunSetupResponse)
DFLOW_LOCAL_MASTER_METHOD(RunStep, RunStepRequest, RunStepResponse)
DFLOW_LOCAL_MASTER_METHOD(CloseSession, CloseSessionRequest, CloseSessionResponse)
DFLOW_LOCAL_MASTER_METHOD(ListDevices, ListDevicesRequest, ListDevicesResponse)
DFLOW_LOCAL_MASTER_METHOD(Reset, ResetRequest, ResetResponse)
DFLOW_LOCAL_MASTER_METHOD(MakeCallable, MakeCallableRequest, MakeCallableResponse)
DFLOW_LOCAL_MASTER_METHOD(RunCallable, RunCallableRequest, RunCallableResponse)
DFLOW_LOCAL_MASTER_METHOD(ReleaseCallable, ReleaseCallableRequest, ReleaseCallableResponse)

#undef DFLOW_LOCAL_MASTER_METHOD

void LocalMaster::RunStepWithTensorsAsync(const CallOptions& opts, tensorflow::RunStepRequest* req,
                                          std::vector<Tensor> feed_values,
                                          tensorflow::RunStepResponse* resp, StatusCallback done) {
  Dispatch("RunStep", done, [&](MasterInterface* m) {
    m->RunStepWithTensorsAsync(opts, req, std::move(feed_values), resp, std::move(done));
  });
}

}  // namespace dflow
