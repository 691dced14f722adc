#include "dflow/train/train_mode.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflow {
namespace {

constexpr std::pair<TrainMode, const char*> kModes[] = {
    {TrainMode::kBetweenAsync, "between-async"},
    {TrainMode::kBetweenSync, "between-sync"},
    {TrainMode::kInGraphAsync, "in-graph-async"},
    {TrainMode::kInGraphSync, "in-graph-sync"},
};

}  // namespace

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name) {
  for (const auto& [mode, mode_name] : kModes) {
    if (name == mode_name) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("[train] --mode '", std::string(name),
                   "' is not one of: ", absl::StrJoin(TrainModes(), ", ")));
}

const char* TrainModeName(TrainMode mode) {
  for (const auto& [m, name] : kModes) {
    if (m == mode) return name;
  }
  return "?";
}

const std::vector<std::string>& TrainModes() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& [mode, name] : kModes) v->push_back(name);
    return v;
  }();
  return *names;
}

}  // namespace dflow
