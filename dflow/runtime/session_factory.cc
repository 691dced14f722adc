#include "dflow/runtime/session_factory.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace dflow {
namespace {

struct Factories {
  absl::Mutex mu;
  std::map<std::string, SessionFactory> by_prefix ABSL_GUARDED_BY(mu);
};

Factories& GetFactories() {
  static Factories* f = new Factories;
  return *f;
}

}  // namespace

void RegisterSessionFactory(const std::string& prefix, SessionFactory factory) {
  Factories& f = GetFactories();
  absl::MutexLock l(&f.mu);
  f.by_prefix[prefix] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<Session>> NewSession(const SessionOptions& options) {
  if (options.target.empty() || options.target == "local") return NewDirectSession(options);
  SessionFactory factory;
  {
    Factories& f = GetFactories();
    absl::MutexLock l(&f.mu);
    for (const auto& [prefix, fn] : f.by_prefix) {
      if (absl::StartsWith(options.target, prefix)) factory = fn;
    }
  }
  if (!factory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no session implementation for target '", options.target,
        "' (known: \"\" or \"local\" for in-process; grpc:// needs the distributed runtime)"));
  }
  return factory(options);
}

}  // namespace dflow
