#include "dflow/io/checkpoint_state.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "dflow/io/file.h"
#include "dflow/io/tensor_bundle.h"

namespace dflow::io {
namespace {

// `path` relative to `dir` when it lies directly inside it.
std::string Relative(const std::string& dir, const std::string& path) {
  const std::string prefix = dir + "/";
  if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
      path.find('/', prefix.size()) == std::string::npos) {
    return path.substr(prefix.size());
  }
  return path;
}

// Keeps the first parse error for the caller's message (instead of logging it).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat("line ", line + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

std::string ResolveCheckpointPath(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

absl::StatusOr<std::optional<tensorflow::CheckpointState>> ReadCheckpointState(
    const std::string& dir) {
  const std::string path = ResolveCheckpointPath(dir, kCheckpointStateFile);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = RandomAccessFile::Open(path);
  if (absl::IsNotFound(f.status())) return std::optional<tensorflow::CheckpointState>();
  RETURN_IF_ERROR(f.status());
  if ((*f)->size() > (uint64_t{16} << 20)) {
    return absl::DataLossError(absl::StrCat(path, " is ", (*f)->size(), " bytes; not a state file"));
  }
  std::string text((*f)->size(), '\0');
  RETURN_IF_ERROR((*f)->Read(0, text.size(), text.data()));
  tensorflow::CheckpointState state;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &state)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a CheckpointState in text format: ", errors.error()));
  }
  return std::optional<tensorflow::CheckpointState>(std::move(state));
}

absl::Status WriteCheckpointState(const std::string& dir, tensorflow::CheckpointState state) {
  state.set_model_checkpoint_path(Relative(dir, state.model_checkpoint_path()));
  for (std::string& p : *state.mutable_all_model_checkpoint_paths()) p = Relative(dir, p);
  std::string text;
  google::protobuf::TextFormat::PrintToString(state, &text);
  const std::string path = ResolveCheckpointPath(dir, kCheckpointStateFile);
  const std::string temp = path + TempSuffix();
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, WritableFile::Create(temp));
    RETURN_IF_ERROR(f->Append(text));
    RETURN_IF_ERROR(f->Close());
    return RenameFile(temp, path);
  }();
  if (!s.ok()) DeleteFile(temp).IgnoreError();
  return s;
}

absl::StatusOr<std::optional<std::string>> LatestCheckpoint(const std::string& dir) {
  ASSIGN_OR_RETURN(std::optional<tensorflow::CheckpointState> state, ReadCheckpointState(dir));
  if (!state || state->model_checkpoint_path().empty()) return std::optional<std::string>();
  const std::string prefix = ResolveCheckpointPath(dir, state->model_checkpoint_path());
  if (!FileExists(BundleIndexFilename(prefix))) return std::optional<std::string>();
  return std::optional<std::string>(prefix);
}

}  // namespace dflow::io
