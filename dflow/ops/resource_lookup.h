// Finding a kernel's resources (queues, readers, accumulators) in its
// device's ResourceMgr: created by the op that names them, looked up through
// the DT_RESOURCE handles it outputs.
//
//   ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, LookupFromHandle<Queue>(*ctx, 0));
#ifndef DFLOW_OPS_RESOURCE_LOOKUP_H_
#define DFLOW_OPS_RESOURCE_LOOKUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/resource_handle.h"
#include "dflow/framework/status.h"

namespace dflow {

// `container`, or the ResourceMgr's default one when empty.
inline std::string ContainerOr(const OpKernelContext& ctx, const std::string& container) {
  return container.empty() ? ctx.resource_manager()->default_container() : container;
}

// The resource `name` shared across sessions: created by `make` when absent,
// else it must agree with this op's attrs (`matches` says how not).
template <typename T, typename Make, typename Matches>
absl::StatusOr<std::shared_ptr<T>> LookupOrCreateShared(const OpKernelContext& ctx,
                                                        const std::string& container,
                                                        const std::string& name, Make make,
                                                        Matches matches) {
  ASSIGN_OR_RETURN(
      std::shared_ptr<T> r,
      ctx.resource_manager()->LookupOrCreate<T>(
          container, name, [&]() -> absl::StatusOr<std::shared_ptr<T>> { return make(); }));
  if (absl::Status s = matches(*r); !s.ok()) return WithPrefix(s, ctx.Prefix());
  return r;
}

// The resource of type T named by the DT_RESOURCE scalar of input `i`.
template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupFromHandle(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return ctx.InvalidArgument("input ", i, " must be a scalar resource handle, got ",
                               t.DebugString());
  }
  const ResourceHandle& h = t.flat<ResourceHandle>()[0];
  if (!h.device.empty() && h.device != ctx.device()->name()) {
    return ctx.InvalidArgument(T::kTypeName, " '", h.name, "' lives on ", h.device,
                               ", not on this kernel's device ", ctx.device()->name());
  }
  if (!h.maybe_type_name.empty() && h.maybe_type_name != T::kTypeName) {
    return ctx.InvalidArgument("handle ", h.name, " names a ", h.maybe_type_name, ", not a ",
                               T::kTypeName);
  }
  absl::StatusOr<std::shared_ptr<T>> r =
      ctx.resource_manager()->Lookup<T>(ContainerOr(ctx, h.container), h.name);
  if (!r.ok()) return WithPrefix(r.status(), ctx.Prefix());
  return r;
}

}  // namespace dflow

#endif  // DFLOW_OPS_RESOURCE_LOOKUP_H_
