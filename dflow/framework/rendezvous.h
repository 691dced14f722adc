// Rendezvous: where a _Send leaves a tensor and the matching _Recv picks it
// up, one table per step. Keys follow TensorFlow's format:
//   "<src_device>;<src_incarnation as 16 hex digits>;<dst_device>;<tensor_name>;<frame_id>:<iter_id>"
// e.g. "/job:ps/replica:0/task:0/device:CPU:0;0000000000000001;
//       /job:worker/replica:0/task:0/device:CPU:0;edge_5_w;0:0".
// Outside loops the frame and iteration are 0:0; inside a loop they name the
// loop instance and its iteration, the same on both sides of a cut edge.
#ifndef DFLOW_FRAMEWORK_RENDEZVOUS_H_
#define DFLOW_FRAMEWORK_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/tensor.h"

namespace dflow {

// Which loop instance and iteration a node runs in. The root frame is 0 and
// has one iteration, 0; a loop instance's id is derived from its parent's id,
// the parent's iteration and the loop's frame name, so every partition of a
// loop computes the same ids.
struct FrameAndIter {
  uint64_t frame_id = 0;
  int64_t iter_id = 0;
  bool IsRoot() const { return frame_id == 0 && iter_id == 0; }
};

class Rendezvous {
 public:
  struct ParsedKey {
    std::string full_key;
    std::string src_device;
    uint64_t src_incarnation = 0;
    std::string dst_device;
    std::string edge_name;
    DeviceName src;
    DeviceName dst;
  };
  // (status, value, is_dead). Called exactly once, possibly on another thread.
  using DoneCallback = std::function<void(const absl::Status&, const Tensor&, bool)>;

  virtual ~Rendezvous() = default;

  static std::string CreateKey(absl::string_view src_device, uint64_t src_incarnation,
                               absl::string_view dst_device, absl::string_view name,
                               FrameAndIter frame_iter = {});
  // `key` moved to another loop frame and iteration.
  static ParsedKey InFrame(const ParsedKey& key, FrameAndIter frame_iter);
  // InvalidArgument quoting the key when it is malformed.
  static absl::StatusOr<ParsedKey> ParseKey(absl::string_view key);

  // Hands `value` to the (possibly already waiting) receiver of `key`.
  // Fails when the key was already sent this step or the rendezvous aborted.
  virtual absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) = 0;
  virtual void RecvAsync(const ParsedKey& key, DoneCallback done) = 0;
  // Fails every pending and future Recv with `status` (must be non-OK).
  virtual void StartAbort(const absl::Status& status) = 0;

  // Blocking receive with a deadline: DeadlineExceeded names the key.
  absl::Status Recv(const ParsedKey& key, absl::Duration timeout, Tensor* value,
                    bool* is_dead);
};

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_RENDEZVOUS_H_
