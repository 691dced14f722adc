#include "dflow/framework/resource_mgr.h"

namespace dflow {

std::shared_ptr<ResourceBase> ResourceMgr::Find(const std::string& container,
                                                const Key& key) const {
  auto c = containers_.find(container);
  if (c == containers_.end()) return nullptr;
  auto r = c->second.find(key);
  if (r == c->second.end()) return nullptr;
  return r->second;
}

absl::Status ResourceMgr::NotFound(const std::string& container, const Key& key) {
  return absl::NotFoundError(absl::StrCat("Resource ", container, "/", key.second, " (",
                                          key.first, ") does not exist"));
}

absl::Status ResourceMgr::Delete(const ResourceHandle& handle) {
  const std::string& container =
      handle.container.empty() ? default_container_ : handle.container;
  Key key(handle.maybe_type_name, handle.name);
  absl::MutexLock l(&mu_);
  auto it = containers_.find(container);
  if (it == containers_.end() || it->second.erase(key) == 0) return NotFound(container, key);
  return absl::OkStatus();
}

void ResourceMgr::Cleanup(const std::string& container) {
  Container dropped;  // Destroyed after the lock is released.
  absl::MutexLock l(&mu_);
  auto it = containers_.find(container);
  if (it == containers_.end()) return;
  dropped.swap(it->second);
  containers_.erase(it);
}

void ResourceMgr::CleanupAll() {
  std::map<std::string, Container> dropped;
  absl::MutexLock l(&mu_);
  dropped.swap(containers_);
}

std::vector<std::string> ResourceMgr::Containers() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<std::string> names;
  names.reserve(containers_.size());
  for (const auto& [name, c] : containers_) names.push_back(name);
  return names;
}

int ResourceMgr::NumResources() const {
  absl::ReaderMutexLock l(&mu_);
  int n = 0;
  for (const auto& [name, c] : containers_) n += static_cast<int>(c.size());
  return n;
}

}  // namespace dflow
