// Step resources: objects that live for one step on one device (stacks,
// TensorArrays). A kernel creates one in OpKernelContext::step_resources()
// under a name unique in the process and outputs its DT_RESOURCE handle; the
// kernels given that handle find it again. They go when the step ends.
//
//   ASSIGN_OR_RETURN(Tensor h, CreateStepResource<Stack>(ctx, "stack", make));
//   ASSIGN_OR_RETURN(std::shared_ptr<Stack> s, LookupStepResource<Stack>(ctx, 0));
#ifndef DFLOW_OPS_STEP_RESOURCE_H_
#define DFLOW_OPS_STEP_RESOURCE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/status.h"

namespace dflow {

inline constexpr char kStepContainer[] = "_step";

inline absl::Status CheckStepResources(OpKernelContext* ctx) {
  if (ctx->step_resources() != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError("runs only inside a step (it keeps per-step state)");
}

// `make` receives the unique name. Returns the handle tensor.
template <typename T>
absl::StatusOr<Tensor> CreateStepResource(
    OpKernelContext* ctx, const std::string& base,
    const std::function<std::shared_ptr<T>(const std::string&)>& make) {
  RETURN_IF_ERROR(CheckStepResources(ctx));
  static std::atomic<int64_t> counter{0};
  const std::string name = absl::StrCat(base, "_", counter.fetch_add(1));
  RETURN_IF_ERROR(ctx->step_resources()->Create<T>(kStepContainer, name, make(name)));
  return ResourceHandleTensor<T>(ctx->device()->name(), kStepContainer, name);
}

// The resource named by input `input`, a DT_RESOURCE scalar handle.
template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupStepResource(OpKernelContext* ctx, int input) {
  RETURN_IF_ERROR(CheckStepResources(ctx));
  const Tensor& t = ctx->input(input);
  if (t.dtype() != DT_RESOURCE || t.dims() != 0) {
    return ctx->InvalidArgument("input ", input, " must be a resource handle scalar");
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.hash_code != ResourceTypeHash<T>()) {
    return ctx->InvalidArgument("input ", input, " is a handle to a ", h.maybe_type_name,
                                ", not a ", ResourceTypeName<T>());
  }
  absl::StatusOr<std::shared_ptr<T>> r = ctx->step_resources()->Lookup<T>(h.container, h.name);
  if (!r.ok()) {
    return ctx->InvalidArgument(ResourceTypeName<T>(), " '", h.name,
                                "' does not exist in this step (handles live for one step)");
  }
  return r;
}

}  // namespace dflow

#endif  // DFLOW_OPS_STEP_RESOURCE_H_
