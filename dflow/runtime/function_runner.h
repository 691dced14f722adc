// FunctionRunner: runs one function of a GraphDef's library as a graph of
// its own, once per call (what a dataset's map function and an iterator's
// dataset factory need: dflow/data). The body is built once, as a
// PartitionedCall between _Arg and _Retval nodes lowered like any graph
// (function.h), with every node on `device`; each Run is one executor step
// on the calling thread.
//
//   ASSIGN_OR_RETURN(auto fn, FunctionRunner::Create(library, f_attr, device));
//   ASSIGN_OR_RETURN(std::vector<Tensor> out, fn->Run({x}, cancellation));
//
// Thread-safe: several Runs may go at once.
#ifndef DFLOW_RUNTIME_FUNCTION_RUNNER_H_
#define DFLOW_RUNTIME_FUNCTION_RUNNER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/device.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/types.h"
#include "dflow/proto/function.pb.h"
#include "dflow/runtime/executor.h"

namespace dflow {

class FunctionRunner {
 public:
  // NOT_FOUND naming the function when `fn` is not in `library`;
  // INVALID_ARGUMENT when an argument or result type is neither a type nor
  // a type attr that `fn` sets, or when the body does not build.
  static absl::StatusOr<std::unique_ptr<FunctionRunner>> Create(
      const tensorflow::FunctionDefLibrary& library, const tensorflow::NameAttrList& fn,
      Device* device);  // device: not owned, outlives the runner
  FunctionRunner(const FunctionRunner&) = delete;
  FunctionRunner& operator=(const FunctionRunner&) = delete;

  // Runs the body on `args`. INVALID_ARGUMENT naming the function when their
  // number or dtypes disagree with its signature; otherwise the body's first
  // error, prefixed with the function's name.
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> args,
                                          CancellationManager* cancellation = nullptr) const;

  const DataTypeVector& arg_types() const { return arg_types_; }
  const DataTypeVector& ret_types() const { return ret_types_; }
  const std::string& name() const { return name_; }

 private:
  FunctionRunner(std::string name, DataTypeVector args, DataTypeVector rets,
                 std::unique_ptr<Executor> executor)
      : name_(std::move(name)),
        arg_types_(std::move(args)),
        ret_types_(std::move(rets)),
        executor_(std::move(executor)) {}

  const std::string name_;
  const DataTypeVector arg_types_;
  const DataTypeVector ret_types_;
  const std::unique_ptr<Executor> executor_;
};

}  // namespace dflow

#endif  // DFLOW_RUNTIME_FUNCTION_RUNNER_H_
