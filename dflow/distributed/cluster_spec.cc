#include "dflow/distributed/cluster_spec.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "dflow/framework/status.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using Json = nlohmann::json;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("[ClusterSpec] ", what));
}

bool IsJobName(absl::string_view job) {
  if (job.empty() || !absl::ascii_isalpha(job[0])) return false;
  for (char c : job) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status ValidateJobName(absl::string_view job) {
  if (IsJobName(job)) return absl::OkStatus();
  return Bad(
      absl::StrCat("job name '", job, "' is not valid (a letter, then letters, digits or '_')"));
}

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Bad(absl::StrCat(what, " is not valid JSON: '", text.substr(0, 200), "'"));
  }
  return j;
}

absl::StatusOr<std::string> AddressOf(const std::string& job, const Json& value) {
  if (!value.is_string()) {
    return Bad(absl::StrCat("job '", job, "': task address ", value.dump(), " is not a string"));
  }
  return value.get<std::string>();
}

absl::Status AddJob(const std::string& job, const Json& tasks, ClusterSpec* spec) {
  RETURN_IF_ERROR(ValidateJobName(job));
  if (tasks.is_array()) {
    if (tasks.empty()) return Bad(absl::StrCat("job '", job, "' has no tasks"));
    for (size_t i = 0; i < tasks.size(); ++i) {
      ASSIGN_OR_RETURN(std::string address, AddressOf(job, tasks[i]));
      RETURN_IF_ERROR(spec->AddTask(job, static_cast<int>(i), address));
    }
    return absl::OkStatus();
  }
  if (!tasks.is_object()) {
    return Bad(absl::StrCat("job '", job, "' must be a list of \"host:port\" or an object ",
                            "{\"index\": \"host:port\"}, got ", tasks.dump()));
  }
  if (tasks.empty()) return Bad(absl::StrCat("job '", job, "' has no tasks"));
  for (const auto& [key, value] : tasks.items()) {
    int index = 0;
    if (!absl::SimpleAtoi(key, &index) || index < 0) {
      return Bad(absl::StrCat("job '", job, "': task index '", key, "' is not an integer >= 0"));
    }
    ASSIGN_OR_RETURN(std::string address, AddressOf(job, value));
    RETURN_IF_ERROR(spec->AddTask(job, index, address));
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterSpec> FromJsonValue(const Json& j) {
  if (!j.is_object()) {
    return Bad(
        absl::StrCat("the cluster must be a JSON object {\"job\": [\"host:port\", ...]}, got ",
                     j.dump().substr(0, 200)));
  }
  if (j.empty()) return Bad("the cluster has no jobs");
  ClusterSpec spec;
  for (const auto& [job, tasks] : j.items()) RETURN_IF_ERROR(AddJob(job, tasks, &spec));
  return spec;
}

}  // namespace

absl::Status ValidateAddress(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return Bad(absl::StrCat("address '", address, "' is not \"host:port\": ", why));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no ':port'");
  absl::string_view host = address.substr(0, colon);
  absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return bad("empty host");
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3)
      return bad("unbalanced '[...]' around the IPv6 host");
  } else {
    for (char c : host) {
      if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') {
        return bad(absl::StrCat("bad character '", std::string(1, c), "' in the host"));
      }
    }
  }
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &p) || p < 0 || p > 65535 ||
      !absl::ascii_isdigit(port[0])) {
    return bad("the port is not a number in 0..65535");
  }
  return absl::OkStatus();
}

absl::Status ClusterSpec::AddTask(const std::string& job, int index, const std::string& address) {
  RETURN_IF_ERROR(ValidateJobName(job));
  if (index < 0) return Bad(absl::StrCat("job '", job, "': task index ", index, " is negative"));
  absl::Status s = ValidateAddress(address);
  if (!s.ok()) {
    return Bad(absl::StrCat("job '", job, "' task ", index, ": ",
                            absl::StripPrefix(s.message(), "[ClusterSpec] ")));
  }
  jobs_[job][index] = address;
  return absl::OkStatus();
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJson(absl::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseJson(json, "the cluster spec"));
  return FromJsonValue(j);
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJsonOrFile(absl::string_view json_or_file) {
  if (!absl::StartsWith(json_or_file, "@")) return FromJson(json_or_file);
  const std::string path(json_or_file.substr(1));
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("[ClusterSpec] cannot read the cluster spec file '", path, "'"));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  absl::StatusOr<ClusterSpec> spec = FromJson(buf.str());
  if (!spec.ok()) {
    return WithMessage(spec.status(),
                       absl::StrCat(spec.status().message(), " (in file '", path, "')"));
  }
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromClusterDef(const tensorflow::ClusterDef& def) {
  ClusterSpec spec;
  for (const tensorflow::JobDef& job : def.job()) {
    RETURN_IF_ERROR(ValidateJobName(job.name()));
    if (spec.HasJob(job.name())) {
      return Bad(absl::StrCat("job '", job.name(), "' appears twice in the ClusterDef"));
    }
    if (job.tasks().empty()) return Bad(absl::StrCat("job '", job.name(), "' has no tasks"));
    for (const auto& [index, address] : job.tasks()) {
      RETURN_IF_ERROR(spec.AddTask(job.name(), index, address));
    }
  }
  return spec;
}

tensorflow::ClusterDef ClusterSpec::ToClusterDef() const {
  tensorflow::ClusterDef def;
  for (const auto& [job, tasks] : jobs_) {
    tensorflow::JobDef* j = def.add_job();
    j->set_name(job);
    for (const auto& [index, address] : tasks) (*j->mutable_tasks())[index] = address;
  }
  return def;
}

std::string ClusterSpec::ToJson() const {
  Json out = Json::object();
  for (const auto& [job, tasks] : jobs_) {
    const bool dense = tasks.rbegin()->first + 1 == static_cast<int>(tasks.size());
    Json j = dense ? Json::array() : Json::object();
    for (const auto& [index, address] : tasks) {
      if (dense) {
        j.push_back(address);
      } else {
        j[std::to_string(index)] = address;
      }
    }
    out[job] = std::move(j);
  }
  return out.dump();
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> out;
  for (const auto& [job, tasks] : jobs_) out.push_back(job);
  return out;
}

std::vector<int> ClusterSpec::TaskIndices(absl::string_view job) const {
  std::vector<int> out;
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end()) return out;
  for (const auto& [index, address] : it->second) out.push_back(index);
  return out;
}

int ClusterSpec::NumTasks(absl::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::StatusOr<std::string> ClusterSpec::TaskAddress(absl::string_view job, int index) const {
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("[ClusterSpec] no job '", job, "'; jobs are [",
                                            absl::StrJoin(jobs(), ", "), "]"));
  }
  auto t = it->second.find(index);
  if (t == it->second.end()) {
    return absl::NotFoundError(absl::StrCat("[ClusterSpec] job '", job, "' has no task ", index,
                                            "; its tasks are [",
                                            absl::StrJoin(TaskIndices(job), ", "), "]"));
  }
  return t->second;
}

std::vector<TaskId> ClusterSpec::AllTasks() const {
  std::vector<TaskId> out;
  for (const auto& [job, tasks] : jobs_) {
    for (const auto& [index, address] : tasks) out.push_back(TaskId{job, index});
  }
  return out;
}

std::string ClusterSpec::TaskName(absl::string_view job, int index) {
  return absl::StrCat("/job:", job, "/replica:0/task:", index);
}

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("[TF_CONFIG] ", why));
  };
  Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return bad(absl::StrCat("not valid JSON: '", json.substr(0, 200), "'"));
  }
  if (!j.is_object()) return bad("must be a JSON object {\"cluster\": ..., \"task\": ...}");
  if (!j.contains("cluster")) return bad("has no \"cluster\"");
  absl::StatusOr<ClusterSpec> spec = FromJsonValue(j["cluster"]);
  if (!spec.ok()) return bad(spec.status().message());
  if (!j.contains("task") || !j["task"].is_object()) {
    return bad("has no \"task\": {\"type\": \"worker\", \"index\": 0}");
  }
  const Json& task = j["task"];
  if (!task.contains("type") || !task["type"].is_string()) {
    return bad("\"task\" has no string \"type\"");
  }
  TfConfig out;
  out.task.job = task["type"].get<std::string>();
  if (task.contains("index")) {
    if (!task["index"].is_number_integer()) {
      return bad(absl::StrCat("\"task\" index ", task["index"].dump(), " is not an integer"));
    }
    out.task.index = task["index"].get<int>();
  }
  if (!spec->HasJob(out.task.job)) {
    return bad(absl::StrCat("task type '", out.task.job, "' is not a job of the cluster [",
                            absl::StrJoin(spec->jobs(), ", "), "]"));
  }
  if (!spec->TaskAddress(out.task.job, out.task.index).ok()) {
    return bad(absl::StrCat("task index ", out.task.index, " is out of range: job '", out.task.job,
                            "' has tasks [", absl::StrJoin(spec->TaskIndices(out.task.job), ", "),
                            "]"));
  }
  for (auto [key, field] :
       {std::pair{"auth_token_file", &out.auth_token_file}, std::pair{"tls_cert", &out.tls_cert},
        std::pair{"tls_key", &out.tls_key}, std::pair{"tls_ca", &out.tls_ca}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) {
      return bad(absl::StrCat("\"", key, "\" is not a string (a file path)"));
    }
    *field = j[key].get<std::string>();
  }
  out.cluster = *std::move(spec);
  return out;
}

absl::StatusOr<TfConfig> TfConfigFromEnv() {
  const char* env = std::getenv("TF_CONFIG");
  if (env == nullptr || *env == '\0') {
    return absl::NotFoundError("[TF_CONFIG] the TF_CONFIG environment variable is not set");
  }
  return ParseTfConfig(env);
}

}  // namespace dflow
