// Helpers shared by the dataset op kernels: a base class that builds a
// dataset from a node's inputs, and the function runners of func attrs.
#ifndef DFLOW_DATA_DATASET_KERNEL_H_
#define DFLOW_DATA_DATASET_KERNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/data/dataset.h"
#include "dflow/framework/kernel.h"
#include "dflow/runtime/function_runner.h"

namespace dflow::data {

// A kernel whose output 0 is a dataset: subclasses build it in MakeDataset.
// Reads "output_types" (or "Toutput_types") into output_dtypes() where the
// op has one.
class DatasetOpKernel : public OpKernel {
 public:
  explicit DatasetOpKernel(OpKernelConstruction* c);
  absl::Status Compute(OpKernelContext* ctx) final;
  bool IsExpensive() const override { return false; }

 protected:
  virtual absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) = 0;
  const DataTypeVector& output_dtypes() const { return output_dtypes_; }
  // "MapDataset 'name'", for the messages of datasets and iterators.
  std::string What() const;

 private:
  DataTypeVector output_dtypes_;
};

// The runner of the function named by func attr `attr` of the node being
// built, from its library attr (runtime/function.h); a failure is recorded
// on `c` and null returned.
std::shared_ptr<const FunctionRunner> FunctionFromAttr(OpKernelConstruction* c,
                                                       const std::string& attr);

// Input `i` as an int64 scalar, INVALID_ARGUMENT naming `what` otherwise.
absl::StatusOr<int64_t> ScalarInput(const OpKernelContext& ctx, int i, const std::string& what);

}  // namespace dflow::data

#endif  // DFLOW_DATA_DATASET_KERNEL_H_
