// `dflow train`: trains a model and prints its metrics.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "tools/dflow/commands.h"

namespace dflow::cli {

absl::Status TrainCommand(const TrainOptions& flags) {
  TrainOptions options = flags;
  options.tty = isatty(fileno(stderr)) != 0;
  absl::StatusOr<TrainMetrics> metrics = Train(options, std::cerr);
  if (!metrics.ok()) return metrics.status();
  std::cout << absl::StrFormat(
      "%s (%s, lr %g, batch %d): %d steps, %d epochs in %.1fs (train %.1fs, %.0f examples/s); "
      "final loss %.4f; test accuracy %.4f\n",
      metrics->model, metrics->optimizer, metrics->learning_rate, metrics->batch_size,
      metrics->steps, metrics->epochs, metrics->wall_seconds, metrics->train_seconds,
      metrics->examples_per_sec, metrics->final_loss, metrics->test_accuracy);
  if (!options.metrics_out.empty()) std::cout << "metrics written to " << options.metrics_out << "\n";
  return absl::OkStatus();
}

}  // namespace dflow::cli
