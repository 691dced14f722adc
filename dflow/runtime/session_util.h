// Pieces shared by the sessions that prepare a graph per Run signature (the
// in-process DirectSession and the distributed master's sessions).
#ifndef DFLOW_RUNTIME_SESSION_UTIL_H_
#define DFLOW_RUNTIME_SESSION_UTIL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/framework/status.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/proto/config.pb.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/placer.h"

namespace dflow {

// "x" -> "x:0"; InvalidArgument for "^x" and malformed names, saying which
// `what` ("feed", "fetch") it was.
absl::StatusOr<std::string> CanonicalTensorName(const std::string& name, absl::string_view what);

std::vector<std::string> SortedUnique(std::vector<std::string> v);

// The full canonical signature, used as a cache key (never a hash).
std::string SignatureKey(const std::vector<std::string>& feeds,
                         const std::vector<std::string>& fetches,
                         const std::vector<std::string>& targets);

// Appends `extension`'s nodes and library functions to *graph (versions
// too, when given). InvalidArgument naming a node that is already there, or
// a function already there with another body; *graph is unchanged on error.
absl::Status ExtendGraphDef(tensorflow::GraphDef* graph, const tensorflow::GraphDef& extension);

// The nodes of `def`: its graph's and those of its library's functions.
int64_t GraphNodeCount(const tensorflow::GraphDef& def);
// ResourceExhausted when `nodes` exceeds `max_nodes` (> 0; 0 or less: no
// limit): "the graph has 300 nodes, over the limit of 200 (<limit_name>)",
// after `what` ("[Master CreateSession] ").
absl::Status CheckGraphNodeLimit(int64_t nodes, int64_t max_nodes, absl::string_view what,
                                 absl::string_view limit_name);

// What a fed tensor must look like: its dtype and, for placeholders, the
// declared shape.
struct FeedSpec {
  DataType dtype = DT_INVALID;
  std::optional<PartialShape> shape;
};
absl::StatusOr<FeedSpec> DescribeFeed(const Graph& g, const std::string& feed);
// InvalidArgument naming the feed when `value` has another dtype or a shape
// the placeholder does not allow.
absl::Status CheckFeed(const std::string& feed, DataType dtype, const TensorShape& shape,
                       const FeedSpec& spec);

// Places `g` like Place, except that stateful nodes listed in *pinned keep
// that device; then records in *pinned every stateful node placed for the
// first time, so later signatures see the same variables.
absl::Status PlacePinningState(Graph* g, const std::vector<Device*>& devices,
                               const Device* default_device, const PlacerOptions& opts,
                               absl::flat_hash_map<std::string, std::string>* pinned);

// What a session prepares once per Run signature (DirectSession's
// executors, the master's registered partitions), kept by SignatureKey.
// Lookups share a reader lock; builds run one at a time, so concurrent first
// Runs of a signature build it once, and what builders share (the stateful
// placements) changes in one order. After Close every call fails with the
// status Close was given.
template <typename T>
class SignatureCache {
 public:
  using Builder = std::function<absl::StatusOr<std::shared_ptr<const T>>()>;

  // The entry for `key`, made by `build` (not called when it exists).
  absl::StatusOr<std::shared_ptr<const T>> GetOrBuild(const std::string& key,
                                                      const Builder& build) {
    if (absl::StatusOr<std::shared_ptr<const T>> found = Find(key); !found.ok() || *found) {
      return found;
    }
    absl::MutexLock building(&build_mu_);
    // Another thread may have built it meanwhile.
    if (absl::StatusOr<std::shared_ptr<const T>> found = Find(key); !found.ok() || *found) {
      return found;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const T> built, build());
    absl::MutexLock l(&mu_);
    if (!closed_.ok()) return closed_;
    entries_[key] = built;
    return built;
  }

  void Close(absl::Status why) {
    absl::MutexLock l(&mu_);
    closed_ = std::move(why);
    entries_.clear();
  }

  int size() const {
    absl::ReaderMutexLock l(&mu_);
    return static_cast<int>(entries_.size());
  }

  // The entry, null when there is none, or the status Close was given.
  absl::StatusOr<std::shared_ptr<const T>> Find(const std::string& key) const {
    absl::ReaderMutexLock l(&mu_);
    if (!closed_.ok()) return closed_;
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second;
  }

 private:
  absl::Mutex build_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const T>> entries_ ABSL_GUARDED_BY(mu_);
};

// The deadline of a step started now: RunOptions.timeout_in_ms, else
// config.operation_timeout_in_ms, else none.
absl::Time StepDeadline(const tensorflow::RunOptions& options,
                        const tensorflow::ConfigProto& config);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_SESSION_UTIL_H_
