// The kernels behind tf.data's anonymous resources, which come as a trio of
// ops per resource: Anonymous<R> (a new resource and a deleter token),
// Dummy<R> (a handle with no resource behind it: the dataset keeps its own)
// and Delete<R> (frees what Anonymous<R> made). SeedGenerator and
// MemoryCache are the two users.
//
// `Resource` is a ResourceBase with kTypeName ("SeedGenerator"); `DummyTag`
// is the type name of its dummy handle ("DummySeedGenerator").
#ifndef DFLOW_DATA_ANONYMOUS_RESOURCE_H_
#define DFLOW_DATA_ANONYMOUS_RESOURCE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/status.h"
#include "dflow/framework/variant.h"

namespace dflow::data {

// Anonymous<R>'s deleter output: a token Delete<R> takes
// ("tensorflow::data::SeedGeneratorDeleter").
template <typename Resource>
class AnonymousResourceDeleter : public VariantValue {
 public:
  std::string TypeName() const override {
    return absl::StrCat("tensorflow::data::", Resource::kTypeName, "Deleter");
  }
  std::string DebugString() const override { return absl::StrCat(Resource::kTypeName, "Deleter"); }
  std::unique_ptr<VariantValue> Clone() const override {
    return std::make_unique<AnonymousResourceDeleter>();
  }
};

// Anonymous<R>'s outputs: `resource` created in the default container under
// a fresh name ("_AnonymousSeedGenerator7"), its handle as output 0 and a
// deleter token as output 1.
template <typename Resource>
absl::Status OutputAnonymousResource(OpKernelContext* ctx, std::shared_ptr<Resource> resource) {
  static std::atomic<uint64_t> next_id{0};
  const std::string name = absl::StrCat("_Anonymous", Resource::kTypeName, next_id.fetch_add(1));
  const std::string& container = ctx->resource_manager()->default_container();
  RETURN_IF_ERROR(ctx->resource_manager()->Create(container, name, std::move(resource)));
  ctx->set_output(0, ResourceHandleTensor<Resource>(ctx->device()->name(), container, name));
  Tensor deleter(tensorflow::DT_VARIANT, TensorShape());
  VariantScalar(deleter).Set(std::make_unique<AnonymousResourceDeleter<Resource>>());
  ctx->set_output(1, std::move(deleter));
  return absl::OkStatus();
}

// The resource input `i` names, for a dataset op that takes one: null for a
// Dummy<R> handle; INVALID_ARGUMENT naming the input `what` when it is not a
// scalar handle, names another kind of resource (`noun` says the wanted
// one: "a seed generator") or no live resource.
template <typename Resource, typename DummyTag>
absl::StatusOr<std::shared_ptr<Resource>> AnonymousResourceInput(const OpKernelContext& ctx, int i,
                                                                 const std::string& what,
                                                                 const std::string& noun) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_RESOURCE || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a scalar resource handle, got ", t.DebugString()));
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.maybe_type_name == DummyTag::kTypeName) return nullptr;
  if (h.maybe_type_name != Resource::kTypeName) {
    return absl::InvalidArgumentError(absl::StrCat(what, " handle ", h.name, " names a ",
                                                   h.maybe_type_name, " resource, not ", noun));
  }
  auto r = ctx.resource_manager()->Lookup<Resource>(h.container, h.name);
  if (!r.ok()) return absl::InvalidArgumentError(r.status().message());
  return *std::move(r);
}

// Dummy<R>: a handle of type DummyTag named "_DummySeedGenerator".
template <typename DummyTag>
class DummyResourceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, ResourceHandleTensor<DummyTag>(ctx->device()->name(), "",
                                                      absl::StrCat("_", DummyTag::kTypeName)));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

// Delete<R>: deletes the resource input 0 names; a Dummy<R> handle is a
// no-op; a missing resource is the resource manager's NOT_FOUND.
template <typename DummyTag>
class DeleteAnonymousResourceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    if (t.dtype() != DT_RESOURCE || t.dims() != 0) {
      return ctx->InvalidArgument("handle must be a scalar resource handle, got ", t.DebugString());
    }
    const ResourceHandle& h = t.scalar<ResourceHandle>();
    if (h.maybe_type_name == DummyTag::kTypeName) return absl::OkStatus();
    return ctx->resource_manager()->Delete(h);
  }
  bool IsExpensive() const override { return false; }
};

}  // namespace dflow::data

#endif  // DFLOW_DATA_ANONYMOUS_RESOURCE_H_
