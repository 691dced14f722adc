#include "dflow/distributed/master.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dflow/distributed/error_body.h"
#include "dflow/distributed/master_session.h"
#include "dflow/framework/device.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/session_util.h"

namespace dflow {

namespace {

// "[Master <method>] " before a failure's message unless it already names
// where it came from ("[...").
absl::Status Prefixed(absl::string_view method, const absl::Status& s) {
  if (s.ok() || absl::StartsWith(s.message(), "[")) return s;
  return WithPrefix(s, absl::StrCat("[Master ", method, "] "));
}

std::string NewSessionHandle() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

// True when `filter` (a partial device spec) allows task `task`.
bool TaskMatches(const DeviceName& filter, const DeviceName& task) {
  return (!filter.has_job || filter.job == task.job) &&
         (!filter.has_replica || filter.replica == task.replica) &&
         (!filter.has_task || filter.task == task.task);
}

// Runs `fn` with the status and then `done`, on the master's pool: master
// calls wait on workers, which must not block gRPC's own threads.
template <typename Fn>
void RunOn(ThreadPool* pool, StatusCallback done, Fn fn) {
  pool->Schedule([done = std::move(done), fn = std::move(fn)]() mutable { fn(std::move(done)); });
}

}  // namespace

Master::Master(MasterEnv env)
    : env_(std::move(env)), pool_(std::make_unique<ThreadPool>("master", 8)) {
  if (env_.session_gc > absl::ZeroDuration()) {
    collector_ = std::thread([this] { CollectIdleSessions(); });
  }
}

Master::~Master() {
  absl::flat_hash_map<std::string, Entry> sessions;
  {
    absl::MutexLock l(&mu_);
    shutting_down_ = true;
    sessions.swap(sessions_);
  }
  if (collector_.joinable()) collector_.join();
  for (auto& [handle, entry] : sessions) {
    entry.session->Close(absl::Now() + absl::Seconds(5)).IgnoreError();
  }
  pool_.reset();  // Waits for calls in flight.
}

void Master::CollectIdleSessions() {
  const absl::Duration period = std::min(env_.session_gc / 4, absl::Seconds(10));
  for (;;) {
    std::vector<std::shared_ptr<MasterSession>> idle;
    {
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), period)) return;
      const absl::Time now = absl::Now();
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (now - it->second.last_used >= env_.session_gc) {
          idle.push_back(std::move(it->second.session));
          sessions_.erase(it++);
        } else {
          ++it;
        }
      }
    }
    for (const std::shared_ptr<MasterSession>& session : idle) {
      session->Close(absl::Now() + env_.discovery_timeout).IgnoreError();
    }
  }
}

int Master::NumSessions() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(sessions_.size());
}

absl::StatusOr<std::shared_ptr<MasterSession>> Master::FindSession(const std::string& handle) {
  absl::MutexLock l(&mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::AbortedError(absl::StrCat(
        "session '", handle, "' is not found on ", env_.task_name,
        "; it was closed, reset or unused for longer than session_gc, or the master restarted"));
  }
  it->second.last_used = absl::Now();
  return it->second.session;
}

// --- discovery ---------------------------------------------------------------------------

absl::StatusOr<std::vector<std::string>> Master::FilteredTasks(
    const std::vector<std::string>& filters) {
  std::vector<DeviceName> parsed;
  for (const std::string& f : filters) {
    absl::StatusOr<DeviceName> name = DeviceName::Parse(f);
    if (!name.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("device filter '", f, "' does not parse"));
    }
    parsed.push_back(*std::move(name));
  }
  std::vector<std::string> tasks;
  for (const std::string& task : env_.cluster_tasks) {
    absl::StatusOr<DeviceName> name = DeviceName::Parse(task);
    if (!name.ok()) continue;
    const bool allowed = task == env_.task_name || parsed.empty() ||
                         std::any_of(parsed.begin(), parsed.end(),
                                     [&](const DeviceName& f) { return TaskMatches(f, *name); });
    if (allowed) tasks.push_back(task);
  }
  if (std::find(tasks.begin(), tasks.end(), env_.task_name) == tasks.end()) {
    tasks.push_back(env_.task_name);
  }
  return tasks;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> Master::DiscoverDevices(
    const std::vector<std::string>& filters, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::vector<std::string> tasks, FilteredTasks(filters));
  struct Ask {
    tensorflow::GetStatusRequest req;
    tensorflow::GetStatusResponse resp;
    absl::Status status;
    absl::Notification done;
  };
  std::vector<Ask> asks(tasks.size());
  CallOptions opts;
  opts.deadline = std::min(deadline, absl::Now() + env_.discovery_timeout);
  for (size_t i = 0; i < tasks.size(); ++i) {
    WorkerInterface* worker = env_.worker_for_task ? env_.worker_for_task(tasks[i]) : nullptr;
    if (worker == nullptr) {
      asks[i].status = absl::UnavailableError(absl::StrCat("no worker is known for ", tasks[i]));
      asks[i].done.Notify();
      continue;
    }
    Ask* ask = &asks[i];
    worker->GetStatusAsync(opts, &ask->req, &ask->resp, [ask](const absl::Status& s) {
      ask->status = s;
      ask->done.Notify();
    });
  }
  std::vector<DeviceName> allowed;
  for (const std::string& f : filters) allowed.push_back(*DeviceName::Parse(f));
  std::vector<std::unique_ptr<Device>> devices;
  absl::Status status;
  for (size_t i = 0; i < tasks.size(); ++i) {
    asks[i].done.WaitForNotification();  // Every call ends by its deadline.
    if (!asks[i].status.ok()) {
      status.Update(absl::UnavailableError(
          absl::StrCat("device discovery: ", tasks[i],
                       " did not answer GetStatus: ", asks[i].status.message())));
      continue;
    }
    for (const tensorflow::DeviceAttributes& a : asks[i].resp.device_attributes()) {
      absl::StatusOr<DeviceName> name = DeviceName::Parse(a.name());
      if (!name.ok() || !name->IsFullySpecified()) continue;
      const bool keep = tasks[i] == env_.task_name || allowed.empty() ||
                        std::any_of(allowed.begin(), allowed.end(),
                                    [&](const DeviceName& f) { return f.Matches(*name); });
      if (keep)
        devices.push_back(std::make_unique<Device>(*name, a.incarnation(), a.memory_limit()));
    }
  }
  RETURN_IF_ERROR(status);
  return devices;
}

// --- sessions ----------------------------------------------------------------------------

void Master::CreateSessionAsync(const CallOptions& opts,
                                const tensorflow::CreateSessionRequest* req,
                                tensorflow::CreateSessionResponse* resp, StatusCallback done) {
  const int open = NumSessions();
  if (open >= env_.max_sessions) {
    return done(absl::ResourceExhaustedError(
        absl::StrCat("[Master CreateSession] ", env_.task_name, " already has ", open,
                     " open sessions (max_sessions ", env_.max_sessions,
                     "); close unused ones, or let session_gc collect them")));
  }
  if (absl::Status s = CheckGraphNodeLimit(GraphNodeCount(req->graph_def()), env_.max_graph_nodes,
                                           "[Master CreateSession] ", "max_graph_nodes");
      !s.ok()) {
    return done(s);
  }
  RunOn(pool_.get(), std::move(done), [this, opts, req, resp](StatusCallback done) {
    const tensorflow::ConfigProto config =
        req->has_config() ? req->config() : env_.default_session_config;
    std::vector<std::string> filters(config.device_filters().begin(),
                                     config.device_filters().end());
    absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
        DiscoverDevices(filters, opts.deadline);
    if (!devices.ok()) return done(Prefixed("CreateSession", devices.status()));
    auto session =
        std::make_shared<MasterSession>(NewSessionHandle(), &env_, config, *std::move(devices));
    absl::Status s = session->Create(req->graph_def(), opts.deadline);
    if (!s.ok()) return done(Prefixed("CreateSession", s));
    resp->set_session_handle(session->handle());
    resp->set_graph_version(0);
    {
      absl::MutexLock l(&mu_);
      sessions_[session->handle()] = Entry{session, absl::Now()};
    }
    done(absl::OkStatus());
  });
}

void Master::ExtendSessionAsync(const CallOptions&, const tensorflow::ExtendSessionRequest* req,
                                tensorflow::ExtendSessionResponse* resp, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
  if (!session.ok()) return done(Prefixed("ExtendSession", session.status()));
  done(Prefixed("ExtendSession", (*session)->Extend(*req, resp)));
}

void Master::PartialRunSetupAsync(const CallOptions&, const tensorflow::PartialRunSetupRequest*,
                                  tensorflow::PartialRunSetupResponse*, StatusCallback done) {
  done(absl::UnimplementedError("[Master PartialRunSetup] partial runs are not supported"));
}

void Master::RunStepAsync(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                          tensorflow::RunStepResponse* resp, StatusCallback done) {
  StartStep(opts, req, {}, resp, std::move(done), /*on_caller_thread=*/false);
}

void Master::RunStepWithTensorsAsync(const CallOptions& opts, tensorflow::RunStepRequest* req,
                                     std::vector<Tensor> feed_values,
                                     tensorflow::RunStepResponse* resp, StatusCallback done) {
  StartStep(opts, req, std::move(feed_values), resp, std::move(done), /*on_caller_thread=*/true);
}

void Master::StartStep(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                       std::vector<Tensor> feed_values, tensorflow::RunStepResponse* resp,
                       StatusCallback done, bool on_caller_thread) {
  // Errors go into the body when the client asks for it (TensorFlow's clients do).
  StatusCallback finish = [req, resp, done = std::move(done)](const absl::Status& s) {
    done(StoreErrorInBody(req->store_errors_in_response_body(), Prefixed("RunStep", s), resp));
  };
  absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
  if (!session.ok()) return finish(session.status());
  // A prepared signature waits on no worker: its step starts on the calling
  // (gRPC) thread, a thread hop less; a new one registers its partitions on
  // the master's pool.
  if (on_caller_thread || (*session)->HasPlanFor(*req)) {
    (*session)->RunStepAsync(opts.deadline, req, std::move(feed_values), resp, std::move(finish));
    return;
  }
  RunOn(pool_.get(), std::move(finish),
        [session = *std::move(session), opts, req, feed_values = std::move(feed_values),
         resp](StatusCallback done) mutable {
          session->RunStepAsync(opts.deadline, req, std::move(feed_values), resp,
                                std::move(done));
        });
}

void Master::CloseSessionAsync(const CallOptions& opts, const tensorflow::CloseSessionRequest* req,
                               tensorflow::CloseSessionResponse*, StatusCallback done) {
  std::shared_ptr<MasterSession> session;
  {
    absl::MutexLock l(&mu_);
    auto it = sessions_.find(req->session_handle());
    if (it != sessions_.end()) {
      session = std::move(it->second.session);
      sessions_.erase(it);
    }
  }
  if (session == nullptr) {
    return done(Prefixed("CloseSession", FindSession(req->session_handle()).status()));
  }
  RunOn(pool_.get(), std::move(done), [session, opts](StatusCallback done) {
    done(Prefixed("CloseSession", session->Close(opts.deadline)));
  });
}

void Master::ListDevicesAsync(const CallOptions& opts, const tensorflow::ListDevicesRequest* req,
                              tensorflow::ListDevicesResponse* resp, StatusCallback done) {
  if (!req->session_handle().empty()) {
    absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
    if (!session.ok()) return done(Prefixed("ListDevices", session.status()));
    (*session)->ListDevices(resp);
    return done(absl::OkStatus());
  }
  RunOn(pool_.get(), std::move(done), [this, opts, resp](StatusCallback done) {
    absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
        DiscoverDevices({}, opts.deadline);
    if (!devices.ok()) return done(Prefixed("ListDevices", devices.status()));
    AddDevices(*devices, env_.task_name, resp);
    done(absl::OkStatus());
  });
}

void Master::ResetAsync(const CallOptions& opts, const tensorflow::ResetRequest* req,
                        tensorflow::ResetResponse*, StatusCallback done) {
  RunOn(pool_.get(), std::move(done), [this, opts, req](StatusCallback done) {
    absl::flat_hash_map<std::string, Entry> sessions;
    {
      absl::MutexLock l(&mu_);
      sessions.swap(sessions_);
    }
    absl::Status status;
    for (auto& [handle, entry] : sessions) status.Update(entry.session->Close(opts.deadline));
    std::vector<std::string> filters(req->device_filters().begin(), req->device_filters().end());
    absl::StatusOr<std::vector<std::string>> tasks = FilteredTasks(filters);
    if (!tasks.ok()) return done(Prefixed("Reset", tasks.status()));
    for (const std::string& task : *tasks) {
      WorkerInterface* worker = env_.worker_for_task ? env_.worker_for_task(task) : nullptr;
      if (worker == nullptr) continue;
      tensorflow::CleanupAllRequest cleanup;
      *cleanup.mutable_container() = req->container();
      tensorflow::CleanupAllResponse ignored;
      CallOptions call;
      call.deadline = std::min(opts.deadline, absl::Now() + env_.discovery_timeout);
      status.Update(WithContext(worker->CleanupAll(cleanup, &ignored, call), task));
    }
    done(Prefixed("Reset", status));
  });
}

// --- callables ---------------------------------------------------------------------------

void Master::MakeCallableAsync(const CallOptions&, const tensorflow::MakeCallableRequest* req,
                               tensorflow::MakeCallableResponse* resp, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
  if (!session.ok()) return done(Prefixed("MakeCallable", session.status()));
  done(Prefixed("MakeCallable", (*session)->MakeCallable(*req, resp)));
}

void Master::RunCallableAsync(const CallOptions& opts, const tensorflow::RunCallableRequest* req,
                              tensorflow::RunCallableResponse* resp, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
  if (!session.ok()) return done(Prefixed("RunCallable", session.status()));
  RunOn(pool_.get(), std::move(done),
        [session = *std::move(session), opts, req, resp](StatusCallback done) {
          session->RunCallableAsync(opts.deadline, req, resp, [done](const absl::Status& s) {
            done(Prefixed("RunCallable", s));
          });
        });
}

void Master::ReleaseCallableAsync(const CallOptions&, const tensorflow::ReleaseCallableRequest* req,
                                  tensorflow::ReleaseCallableResponse*, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<MasterSession>> session = FindSession(req->session_handle());
  if (!session.ok()) return done(Prefixed("ReleaseCallable", session.status()));
  done(Prefixed("ReleaseCallable", (*session)->ReleaseCallable(*req)));
}

}  // namespace dflow
