// The table a GPU's Device::ScatterRows hands its kernel (LaunchScatterRows
// in cwise_launch.h): the updates grouped by the row they go to, each group
// in the updates' order, so that one thread per (row, element) applies its
// updates in the order the host would. Host code, without CUDA.
#ifndef DFLOW_GPU_SCATTER_ROWS_H_
#define DFLOW_GPU_SCATTER_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace dflow {
namespace gpu {

struct ScatterRowsTable {
  int64_t num_dest = 0;  // Distinct destination rows.
  // dest[num_dest], then starts[num_dest + 1] into the update positions
  // that follow (one per non-negative index), grouped by destination.
  std::vector<int64_t> table;
};

// The table of `indices` (negative ones skipped).
inline ScatterRowsTable MakeScatterRowsTable(absl::Span<const int64_t> indices) {
  std::vector<int64_t> order;  // Update positions, grouped by destination.
  order.reserve(indices.size());
  for (int64_t i = 0; i < static_cast<int64_t>(indices.size()); ++i) {
    if (indices[i] >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  std::vector<int64_t> dest, starts;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || indices[order[k]] != indices[order[k - 1]]) {
      dest.push_back(indices[order[k]]);
      starts.push_back(static_cast<int64_t>(k));
    }
  }
  starts.push_back(static_cast<int64_t>(order.size()));
  ScatterRowsTable out;
  out.num_dest = static_cast<int64_t>(dest.size());
  out.table = std::move(dest);
  out.table.insert(out.table.end(), starts.begin(), starts.end());
  out.table.insert(out.table.end(), order.begin(), order.end());
  return out;
}

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_SCATTER_ROWS_H_
