// LocalMaster: the masters this process serves, by target, so that a session
// whose target is a server of this same process calls that master directly
// instead of through gRPC over loopback, as TensorFlow's LocalMaster does. A
// cluster worker's own trainer (`dflow train --job worker`) is such a client:
// its steps then cost no request and reply serialization, no loopback bytes
// (its fed batch included) and no gRPC thread hops. The call is the same
// MasterInterface call the gRPC service makes; what gRPC adds, the auth token
// check, guards the process boundary the call no longer crosses.
//
//   auto registration = LocalMaster::Register("localhost:2222", master);
//   std::unique_ptr<MasterInterface> m = LocalMaster::Lookup("localhost:2222");
//   // ... registration.reset(): later calls through `m` are UNAVAILABLE.
#ifndef DFLOW_DISTRIBUTED_LOCAL_MASTER_H_
#define DFLOW_DISTRIBUTED_LOCAL_MASTER_H_

#include <memory>
#include <string>

#include "dflow/distributed/master_interface.h"

namespace dflow {

class LocalMaster final : public MasterInterface {
 public:
  struct Entry;
  // Unregisters its target when destroyed, after any call being handed to
  // the master has been handed over (calls return at once: they are async).
  class Registration {
   public:
    explicit Registration(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    std::shared_ptr<Entry> entry_;
  };

  // Serves `master` (not owned; it must outlive the registration) as
  // `target` ("host:port", no scheme). A later registration of the same
  // target replaces this one for new lookups.
  static std::unique_ptr<Registration> Register(const std::string& target,
                                                MasterInterface* master);
  // The master this process serves as `target` ("host:port" or
  // "grpc://host:port"), or nullptr when none.
  static std::unique_ptr<MasterInterface> Lookup(const std::string& target);

  explicit LocalMaster(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}

  void CreateSessionAsync(const CallOptions& opts, const tensorflow::CreateSessionRequest* req,
                          tensorflow::CreateSessionResponse* resp, StatusCallback done) override;
  void ExtendSessionAsync(const CallOptions& opts, const tensorflow::ExtendSessionRequest* req,
                          tensorflow::ExtendSessionResponse* resp, StatusCallback done) override;
  void PartialRunSetupAsync(const CallOptions& opts, const tensorflow::PartialRunSetupRequest* req,
                            tensorflow::PartialRunSetupResponse* resp,
                            StatusCallback done) override;
  void RunStepAsync(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                    tensorflow::RunStepResponse* resp, StatusCallback done) override;
  void RunStepWithTensorsAsync(const CallOptions& opts, tensorflow::RunStepRequest* req,
                               std::vector<Tensor> feed_values, tensorflow::RunStepResponse* resp,
                               StatusCallback done) override;
  void CloseSessionAsync(const CallOptions& opts, const tensorflow::CloseSessionRequest* req,
                         tensorflow::CloseSessionResponse* resp, StatusCallback done) override;
  void ListDevicesAsync(const CallOptions& opts, const tensorflow::ListDevicesRequest* req,
                        tensorflow::ListDevicesResponse* resp, StatusCallback done) override;
  void ResetAsync(const CallOptions& opts, const tensorflow::ResetRequest* req,
                  tensorflow::ResetResponse* resp, StatusCallback done) override;
  void MakeCallableAsync(const CallOptions& opts, const tensorflow::MakeCallableRequest* req,
                         tensorflow::MakeCallableResponse* resp, StatusCallback done) override;
  void RunCallableAsync(const CallOptions& opts, const tensorflow::RunCallableRequest* req,
                        tensorflow::RunCallableResponse* resp, StatusCallback done) override;
  void ReleaseCallableAsync(const CallOptions& opts, const tensorflow::ReleaseCallableRequest* req,
                            tensorflow::ReleaseCallableResponse* resp,
                            StatusCallback done) override;

 private:
  // Runs `call` on the master, or answers UNAVAILABLE once it is unregistered.
  template <typename Call>
  void Dispatch(const char* method, StatusCallback& done, Call call);

  const std::shared_ptr<Entry> entry_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_LOCAL_MASTER_H_
