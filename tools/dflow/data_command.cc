// `dflow data convert`: Fashion-MNIST as sharded TFRecord files.
#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dflow/framework/status.h"
#include "dflow/train/dataset.h"
#include "dflow/train/tfrecord_input.h"
#include "tools/dflow/commands.h"

namespace dflow::cli {

absl::Status DataConvertCommand(const DataConvertFlags& flags) {
  const std::string dir = flags.data_dir.empty() ? kFashionMnistDir : flags.data_dir;
  std::error_code ec;
  std::filesystem::create_directories(flags.out_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("[data] cannot create ", flags.out_dir, ": ", ec.message()));
  }
  for (const auto& [split, shards] : {std::pair<const char*, int>{"train", flags.shards},
                                      std::pair<const char*, int>{"test", 1}}) {
    ASSIGN_OR_RETURN(Dataset data, LoadFashionMnist(dir, split));
    const std::string prefix = absl::StrCat(flags.out_dir, "/", split);
    RETURN_IF_ERROR(WriteTFRecordShards(data, prefix, shards));
    std::cout << "wrote " << data.size() << " examples to " << prefix << "-*-of-"
              << absl::StrFormat("%05d", shards) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace dflow::cli
