#include "dflow/framework/rendezvous.h"

#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

absl::Status BadKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("[Rendezvous] malformed key '", key, "': ", why));
}

// 1 to 16 hex digits, nothing else (no sign, no "0x").
bool ParseHex64(absl::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c)) return false;
  }
  return absl::SimpleHexAtoi(s, out);
}

absl::StatusOr<DeviceName> ParseFullDevice(absl::string_view key, absl::string_view dev) {
  absl::StatusOr<DeviceName> d = DeviceName::Parse(dev);
  if (!d.ok()) return BadKey(key, d.status().message());
  if (!d->IsFullySpecified()) {
    return BadKey(key, absl::StrCat("device '", dev, "' is not a full device name"));
  }
  return d;
}

}  // namespace

std::string Rendezvous::CreateKey(absl::string_view src_device, uint64_t src_incarnation,
                                  absl::string_view dst_device, absl::string_view name,
                                  FrameAndIter frame_iter) {
  return absl::StrCat(src_device, ";", absl::Hex(src_incarnation, absl::kZeroPad16), ";",
                      dst_device, ";", name, ";", frame_iter.frame_id, ":", frame_iter.iter_id);
}

Rendezvous::ParsedKey Rendezvous::InFrame(const ParsedKey& key, FrameAndIter frame_iter) {
  ParsedKey p = key;
  p.full_key =
      CreateKey(key.src_device, key.src_incarnation, key.dst_device, key.edge_name, frame_iter);
  return p;
}

absl::StatusOr<Rendezvous::ParsedKey> Rendezvous::ParseKey(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, ';');
  if (parts.size() != 5) {
    return BadKey(key, absl::StrCat("expected 5 ';'-separated parts, got ", parts.size()));
  }
  ParsedKey p;
  p.full_key = std::string(key);
  ASSIGN_OR_RETURN(p.src, ParseFullDevice(key, parts[0]));
  if (!ParseHex64(parts[1], &p.src_incarnation)) {
    return BadKey(key, absl::StrCat("incarnation '", parts[1], "' is not hex"));
  }
  ASSIGN_OR_RETURN(p.dst, ParseFullDevice(key, parts[2]));
  if (parts[3].empty()) return BadKey(key, "empty tensor name");
  if (parts[4].empty()) return BadKey(key, "empty frame and iteration");
  p.src_device = std::string(parts[0]);
  p.dst_device = std::string(parts[2]);
  p.edge_name = std::string(parts[3]);
  return p;
}

absl::Status Rendezvous::Recv(const ParsedKey& key, absl::Duration timeout, Tensor* value,
                              bool* is_dead) {
  // Shared with the callback, which may still run after a timeout returns.
  struct State {
    absl::Notification done;
    absl::Status status;
    Tensor value;
    bool is_dead = false;
  };
  auto state = std::make_shared<State>();
  RecvAsync(key, [state](const absl::Status& s, const Tensor& v, bool dead) {
    state->status = s;
    state->value = v;
    state->is_dead = dead;
    state->done.Notify();
  });
  if (!state->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("[Rendezvous] Recv of '", key.full_key, "' timed out after ",
                     absl::FormatDuration(timeout)));
  }
  if (!state->status.ok()) return state->status;
  *value = state->value;
  *is_dead = state->is_dead;
  return absl::OkStatus();
}

}  // namespace dflow
