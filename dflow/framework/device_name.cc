#include "dflow/framework/device_name.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

absl::Status BadName(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("[DeviceName] cannot parse '", name, "': ", why));
}

bool IsDigits(absl::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// A job name as TensorFlow accepts it: [A-Za-z][A-Za-z0-9_]*.
bool IsJobName(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool IsTypeName(absl::string_view s) { return IsJobName(s); }

// Parses "N" or "*" into (has, value). False when neither.
bool ParseIndex(absl::string_view s, bool* has, int* value) {
  if (s == "*") {
    *has = false;
    return true;
  }
  if (!IsDigits(s)) return false;
  *has = absl::SimpleAtoi(s, value);
  return *has;
}

class Parser {
 public:
  explicit Parser(absl::string_view full) : full_(full) {}

  absl::Status Piece(absl::string_view piece, DeviceName* d) {
    if (piece.empty()) return BadName(full_, "empty component");
    std::vector<absl::string_view> f = absl::StrSplit(piece, ':');
    absl::string_view head = f[0];
    if (head == "job" && f.size() == 2) return Job(f[1], d);
    if (head == "replica" && f.size() == 2) return Index("replica", f[1], &d->has_replica,
                                                          &d->replica);
    if (head == "task" && f.size() == 2) return Index("task", f[1], &d->has_task, &d->task);
    if (head == "device" && (f.size() == 2 || f.size() == 3)) {
      return Device(f[1], f.size() == 3 ? f[2] : "*", d);
    }
    std::string lower = absl::AsciiStrToLower(head);
    if ((lower == "cpu" || lower == "gpu") && f.size() == 2) return Device(head, f[1], d);
    return BadName(full_, absl::StrCat("unknown component '", piece, "'"));
  }

 private:
  absl::Status Once(absl::string_view field) {
    if (!seen_.insert(std::string(field)).second) {
      return BadName(full_, absl::StrCat("'", field, "' appears twice"));
    }
    return absl::OkStatus();
  }

  absl::Status Job(absl::string_view job, DeviceName* d) {
    RETURN_IF_ERROR(Once("job"));
    if (job == "*") return absl::OkStatus();
    if (!IsJobName(job)) return BadName(full_, absl::StrCat("bad job name '", job, "'"));
    d->has_job = true;
    d->job = std::string(job);
    return absl::OkStatus();
  }

  absl::Status Index(absl::string_view field, absl::string_view s, bool* has, int* v) {
    RETURN_IF_ERROR(Once(field));
    if (!ParseIndex(s, has, v)) {
      return BadName(full_, absl::StrCat("bad ", field, " '", s, "'"));
    }
    return absl::OkStatus();
  }

  absl::Status Device(absl::string_view type, absl::string_view id, DeviceName* d) {
    RETURN_IF_ERROR(Once("device"));
    if (type != "*") {
      if (!IsTypeName(type)) {
        return BadName(full_, absl::StrCat("bad device type '", type, "'"));
      }
      d->has_type = true;
      d->type = absl::AsciiStrToUpper(type);
    }
    if (!ParseIndex(id, &d->has_id, &d->id)) {
      return BadName(full_, absl::StrCat("bad device id '", id, "'"));
    }
    return absl::OkStatus();
  }

  absl::string_view full_;
  absl::flat_hash_set<std::string> seen_;
};

}  // namespace

absl::StatusOr<DeviceName> DeviceName::Parse(absl::string_view name) {
  DeviceName d;
  absl::string_view rest = name;
  absl::ConsumePrefix(&rest, "/");
  if (rest.empty()) return d;
  Parser parser(name);
  for (absl::string_view piece : absl::StrSplit(rest, '/')) {
    RETURN_IF_ERROR(parser.Piece(piece, &d));
  }
  return d;
}

std::string DeviceName::ToString() const {
  std::string s;
  if (has_job) absl::StrAppend(&s, "/job:", job);
  if (has_replica) absl::StrAppend(&s, "/replica:", replica);
  if (has_task) absl::StrAppend(&s, "/task:", task);
  if (has_type || has_id) {
    absl::StrAppend(&s, "/device:", has_type ? type : "*", ":",
                    has_id ? absl::StrCat(id) : "*");
  }
  return s;
}

bool DeviceName::Matches(const DeviceName& other) const {
  if (has_job && (!other.has_job || other.job != job)) return false;
  if (has_replica && (!other.has_replica || other.replica != replica)) return false;
  if (has_task && (!other.has_task || other.task != task)) return false;
  if (has_type && (!other.has_type || other.type != type)) return false;
  if (has_id && (!other.has_id || other.id != id)) return false;
  return true;
}

namespace {

template <typename T>
absl::Status MergeField(absl::string_view field, bool other_has, const T& other_value,
                        bool override, bool* has, T* value, const DeviceName& a,
                        const DeviceName& b) {
  if (!other_has) return absl::OkStatus();
  if (*has && *value != other_value && !override) {
    return absl::InvalidArgumentError(
        absl::StrCat("[DeviceName] cannot merge devices with incompatible ", field, ": '",
                     a.ToString(), "' and '", b.ToString(), "'"));
  }
  *has = true;
  *value = other_value;
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceName::MergeFrom(const DeviceName& other, bool override) {
  const DeviceName before = *this;
  DeviceName m = *this;
  RETURN_IF_ERROR(MergeField("jobs", other.has_job, other.job, override, &m.has_job,
                             &m.job, before, other));
  RETURN_IF_ERROR(MergeField("replicas", other.has_replica, other.replica, override,
                             &m.has_replica, &m.replica, before, other));
  RETURN_IF_ERROR(MergeField("tasks", other.has_task, other.task, override, &m.has_task,
                             &m.task, before, other));
  RETURN_IF_ERROR(MergeField("device types", other.has_type, other.type, override,
                             &m.has_type, &m.type, before, other));
  RETURN_IF_ERROR(MergeField("device ids", other.has_id, other.id, override, &m.has_id,
                             &m.id, before, other));
  *this = std::move(m);
  return absl::OkStatus();
}

std::string DeviceName::TaskName() const {
  DeviceName t = *this;
  t.has_type = t.has_id = false;
  return t.ToString();
}

std::string FullDeviceName(absl::string_view job, int replica, int task,
                           absl::string_view type, int id) {
  return absl::StrCat("/job:", job, "/replica:", replica, "/task:", task, "/device:", type,
                      ":", id);
}

}  // namespace dflow
