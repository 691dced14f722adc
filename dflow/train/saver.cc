#include "dflow/train/saver.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/client/op_builder.h"
#include "dflow/client/ops.h"
#include "dflow/framework/status.h"
#include "dflow/io/checkpoint_state.h"
#include "dflow/io/file.h"

namespace dflow {
namespace {

// The device each variable's node was placed on, in first-seen order.
std::vector<std::pair<std::string, std::vector<Variable>>> ByDevice(
    const Scope& scope, const std::vector<Variable>& variables) {
  std::map<std::string, std::string> device_of;
  for (const auto& node : scope.graph_def().node()) device_of[node.name()] = node.device();
  std::vector<std::pair<std::string, std::vector<Variable>>> groups;
  for (const Variable& v : variables) {
    const std::string& device = device_of[v.name()];
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == device; });
    if (it == groups.end()) it = groups.insert(groups.end(), {device, {}});
    it->second.push_back(v);
  }
  return groups;
}

Tensor Strings(const std::vector<std::string>& v) { return Tensor::Vec<std::string>(v); }

// The whole of a tensor of `shape` as RestoreV2's shape_and_slice ("3 4 -:-"),
// so that a checkpoint holding another shape is refused naming both; ""
// for a scalar, which has no slice syntax.
std::string WholeSliceOf(const TensorShape& shape) {
  if (shape.dims() == 0) return "";
  std::vector<std::string> dims, extents;
  for (int d = 0; d < shape.dims(); ++d) {
    dims.push_back(absl::StrCat(shape.dim_size(d)));
    extents.push_back("-");
  }
  return absl::StrCat(absl::StrJoin(dims, " "), " ", absl::StrJoin(extents, ":"));
}

// The files of the checkpoint at `prefix`: its index and data shards.
absl::Status DeleteCheckpoint(const std::string& prefix) {
  const std::string dir = io::Dirname(prefix);
  const std::string base = prefix.substr(dir.empty() ? 0 : dir.size() + 1);
  ASSIGN_OR_RETURN(std::vector<std::string> names, io::ListDir(dir.empty() ? "." : dir));
  for (const std::string& name : names) {
    if (name == base + ".index" || absl::StartsWith(name, base + ".data-")) {
      RETURN_IF_ERROR(io::DeleteFile(dir.empty() ? name : dir + "/" + name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Saver> Saver::Create(const Scope& scope, const std::vector<Variable>& variables,
                                    SaverOptions options) {
  std::set<std::string> names;
  for (const Variable& v : variables) {
    if (!names.insert(v.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Saver] two variables are named '", v.name(), "'"));
    }
  }
  if (variables.empty()) return absl::InvalidArgumentError("[Saver] no variables to save");
  Saver saver;
  saver.options_ = options;
  Scope s = scope.NewSubScope("save");
  saver.filename_ = ops::Placeholder(s.WithOpName("filename"), DT_STRING);
  const auto groups = ByDevice(scope, variables);
  const int n = static_cast<int>(groups.size());
  std::vector<Input> parts;
  std::vector<Operation> saves, assigns;
  for (int i = 0; i < n; ++i) {
    const auto& [device, vars] = groups[i];
    Scope d = s.WithDevice(device);
    std::vector<std::string> var_names;
    std::vector<Input> values;
    std::vector<DataType> dtypes;
    std::vector<std::string> restore_slices;
    for (const Variable& v : vars) {
      var_names.push_back(v.name());
      values.push_back(v.Read(d));
      dtypes.push_back(v.dtype());
      restore_slices.push_back(WholeSliceOf(v.shape()));
    }
    const std::vector<std::string> whole(vars.size(), "");
    Output temp = OpBuilder(d, "StringJoin")
                      .InputList({saver.filename_, Tensor::Scalar<std::string>("_temp/part")})
                      .Finish();
    Output part = OpBuilder(d, "ShardedFilename")
                      .Input(temp)
                      .Input(Tensor::Scalar<int32_t>(i))
                      .Input(Tensor::Scalar<int32_t>(n))
                      .Finish();
    parts.push_back(part);
    saves.push_back(OpBuilder(d, "SaveV2")
                        .Input(part)
                        .Input(Strings(var_names))
                        .Input(Strings(whole))
                        .InputList(values)
                        .FinishOp());
    std::vector<Output> restored = OpBuilder(d, "RestoreV2")
                                       .Input(saver.filename_)
                                       .Input(Strings(var_names))
                                       .Input(Strings(restore_slices))
                                       .Attr("dtypes", dtypes)
                                       .FinishAll();
    for (size_t k = 0; k < restored.size() && k < vars.size(); ++k) {
      assigns.push_back(vars[k].Assign(s, restored[k]));
    }
  }
  Scope last = s.WithDevice(groups.back().first).WithControlDependencies(saves);
  Operation merge = OpBuilder(last, "MergeV2Checkpoints")
                        .Input(ops::Stack(last, parts))
                        .Input(saver.filename_)
                        .FinishOp();
  saver.save_ = ops::Identity(s.WithControlDependencies({merge}), saver.filename_);
  saver.restore_ = ops::NoOp(s.WithOpName("restore_all").WithControlDependencies(assigns));
  RETURN_IF_ERROR(scope.status());
  return saver;
}

absl::StatusOr<std::string> Saver::Save(const ClientSession& session, const std::string& base,
                                        int64_t global_step) const {
  const std::string prefix = absl::StrCat(base, "-", global_step);
  const std::string dir = io::Dirname(prefix);
  RETURN_IF_ERROR(io::CreateDirs(dir));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(WithContext(
      session.Run({{filename_, Tensor::Scalar<std::string>(prefix)}}, {save_}, &out),
      absl::StrCat("[Saver] saving ", prefix)));
  ASSIGN_OR_RETURN(std::optional<tensorflow::CheckpointState> old, io::ReadCheckpointState(dir));
  tensorflow::CheckpointState state;
  std::vector<std::string> kept;
  if (old) {
    for (const std::string& p : old->all_model_checkpoint_paths()) {
      const std::string full = io::ResolveCheckpointPath(dir, p);
      if (full != prefix) kept.push_back(full);
    }
  }
  kept.push_back(prefix);
  std::vector<std::string> dropped;
  if (options_.max_to_keep > 0 && kept.size() > size_t(options_.max_to_keep)) {
    const size_t extra = kept.size() - options_.max_to_keep;
    dropped.assign(kept.begin(), kept.begin() + extra);
    kept.erase(kept.begin(), kept.begin() + extra);
  }
  state.set_model_checkpoint_path(prefix);
  for (const std::string& p : kept) state.add_all_model_checkpoint_paths(p);
  RETURN_IF_ERROR(io::WriteCheckpointState(dir, state));  // The new one is published first.
  for (const std::string& p : dropped) RETURN_IF_ERROR(DeleteCheckpoint(p));
  return prefix;
}

absl::Status Saver::Restore(const ClientSession& session, const std::string& prefix) const {
  return WithContext(
      session.Run({{filename_, Tensor::Scalar<std::string>(prefix)}}, {}, {restore_}, nullptr),
      absl::StrCat("[Saver] restoring ", prefix));
}

}  // namespace dflow
