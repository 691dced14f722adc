// ResourceMgr: a device's stateful objects (variables, queues, ...), by
// container and name. Same container and name = same object, which is how
// sessions (and replicas on other tasks) share a variable. Thread-safe.
#ifndef DFLOW_FRAMEWORK_RESOURCE_MGR_H_
#define DFLOW_FRAMEWORK_RESOURCE_MGR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/resource_handle.h"
#include "dflow/framework/tensor.h"

namespace dflow {

class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  virtual std::string DebugString() const = 0;
};

// The type name used in handles and messages, e.g. "Var".
template <typename T>
std::string ResourceTypeName() {
  return T::kTypeName;
}
template <typename T>
uint64_t ResourceTypeHash() {
  return std::hash<std::string>()(T::kTypeName);
}

class ResourceMgr {
 public:
  explicit ResourceMgr(std::string default_container = "localhost")
      : default_container_(std::move(default_container)) {}
  const std::string& default_container() const { return default_container_; }

  // AlreadyExists if present.
  template <typename T>
  absl::Status Create(const std::string& container, const std::string& name,
                      std::shared_ptr<T> resource);
  // NotFound naming container, name and type if absent.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(const std::string& container,
                                            const std::string& name) const;
  // Returns the existing resource, or creates one with `creator` atomically.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(
      const std::string& container, const std::string& name,
      const std::function<absl::StatusOr<std::shared_ptr<T>>()>& creator);
  // NotFound if absent.
  template <typename T>
  absl::Status Delete(const std::string& container, const std::string& name);
  absl::Status Delete(const ResourceHandle& handle);
  // Drops every resource of `container` (a no-op when it does not exist).
  void Cleanup(const std::string& container);
  void CleanupAll();
  std::vector<std::string> Containers() const;
  // Resources held, over every container.
  int NumResources() const;

 private:
  using Key = std::pair<std::string, std::string>;  // (type name, name)
  using Container = std::map<Key, std::shared_ptr<ResourceBase>>;
  std::shared_ptr<ResourceBase> Find(const std::string& container, const Key& key) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static absl::Status NotFound(const std::string& container, const Key& key);

  const std::string default_container_;
  mutable absl::Mutex mu_;
  std::map<std::string, Container> containers_ ABSL_GUARDED_BY(mu_);
};

// A handle to resource `name` of type T in `container` on `device`.
template <typename T>
ResourceHandle MakeResourceHandle(const std::string& device, const std::string& container,
                                  const std::string& name) {
  ResourceHandle h;
  h.device = device;
  h.container = container;
  h.name = name;
  h.hash_code = ResourceTypeHash<T>();
  h.maybe_type_name = ResourceTypeName<T>();
  return h;
}

// What a handle op (VarHandleOp, FIFOQueueV2, ...) outputs: a DT_RESOURCE
// scalar holding MakeResourceHandle<T>(device, container, name).
template <typename T>
Tensor ResourceHandleTensor(const std::string& device, const std::string& container,
                            const std::string& name) {
  Tensor t(DT_RESOURCE);
  t.scalar<ResourceHandle>() = MakeResourceHandle<T>(device, container, name);
  return t;
}

// --- template implementation ------------------------------------------------

template <typename T>
absl::Status ResourceMgr::Create(const std::string& container, const std::string& name,
                                 std::shared_ptr<T> resource) {
  absl::MutexLock l(&mu_);
  Key key(ResourceTypeName<T>(), name);
  auto& c = containers_[container];
  if (!c.emplace(key, std::move(resource)).second) {
    return absl::AlreadyExistsError(absl::StrCat("resource ", container, "/", name, " (",
                                                 key.first, ") already exists"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::Lookup(const std::string& container,
                                                       const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  Key key(ResourceTypeName<T>(), name);
  std::shared_ptr<ResourceBase> r = Find(container, key);
  if (r == nullptr) return NotFound(container, key);
  return std::static_pointer_cast<T>(r);
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::LookupOrCreate(
    const std::string& container, const std::string& name,
    const std::function<absl::StatusOr<std::shared_ptr<T>>()>& creator) {
  absl::MutexLock l(&mu_);
  Key key(ResourceTypeName<T>(), name);
  if (std::shared_ptr<ResourceBase> r = Find(container, key)) {
    return std::static_pointer_cast<T>(r);
  }
  absl::StatusOr<std::shared_ptr<T>> created = creator();
  if (!created.ok()) return created.status();
  containers_[container][key] = *created;
  return created;
}

template <typename T>
absl::Status ResourceMgr::Delete(const std::string& container, const std::string& name) {
  absl::MutexLock l(&mu_);
  Key key(ResourceTypeName<T>(), name);
  auto it = containers_.find(container);
  if (it == containers_.end() || it->second.erase(key) == 0) return NotFound(container, key);
  return absl::OkStatus();
}

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_RESOURCE_MGR_H_
