// tf.data's iterator ops: IteratorV2 and OneShotIterator (a resource holding
// one pass over a dataset), MakeIterator, IteratorGetNext (OUT_OF_RANGE "End
// of sequence" once the pass is over, as in TensorFlow) and
// IteratorToStringHandle.
//
// An iterator lives in the resource manager of the device that owns it, so
// it runs on the task that created it. IteratorGetNext is asynchronous: the
// element is produced (map functions run, files read) on the process's data
// threads, never on the executor's pool.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/framework/thread_pool.h"

namespace dflow::data {
namespace {

// The threads that step iterators: a fixed number, shared by every iterator
// of the process.
ThreadPool* DataThreads() {
  static ThreadPool* pool = new ThreadPool("tf_data", 2);
  return pool;
}

// One iterator: the dataset it walks and where it is. Thread-safe.
class IteratorResource : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "IteratorResource";
  explicit IteratorResource(DataTypeVector dtypes) : dtypes_(std::move(dtypes)) {}
  std::string DebugString() const override { return "Iterator"; }

  // Starts a pass over `dataset`; INVALID_ARGUMENT when its element types
  // are not the iterator's.
  absl::Status SetDataset(std::shared_ptr<const DatasetBase> dataset) {
    if (dataset->output_dtypes() != dtypes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the dataset's element types (", DataTypeVectorString(dataset->output_dtypes()),
          ") are not the iterator's (", DataTypeVectorString(dtypes_), ")"));
    }
    std::unique_ptr<IteratorBase> it = dataset->MakeIterator();
    absl::MutexLock lock(&mu_);
    dataset_ = std::move(dataset);
    iterator_ = std::move(it);
    return absl::OkStatus();
  }

  // The next element; OUT_OF_RANGE "End of sequence" after the last one,
  // FAILED_PRECONDITION before SetDataset.
  absl::StatusOr<std::vector<Tensor>> GetNext(IteratorContext* ctx) {
    absl::MutexLock lock(&mu_);
    if (iterator_ == nullptr) {
      return absl::FailedPreconditionError(
          "GetNext() failed because the iterator has not been initialized. Ensure that you "
          "have run the initializer operation for this iterator before getting the next "
          "element.");
    }
    std::vector<Tensor> out;
    bool end = false;
    RETURN_IF_ERROR(iterator_->GetNext(ctx, &out, &end));
    if (end) return absl::OutOfRangeError("End of sequence");
    RETURN_IF_ERROR(CheckElementTypes(out, dtypes_, dataset_->DebugString()));
    return out;
  }

 private:
  static std::string DataTypeVectorString(const DataTypeVector& v) {
    std::string s;
    for (DataType d : v) absl::StrAppend(&s, s.empty() ? "" : ", ", DataTypeString(d));
    return s;
  }

  const DataTypeVector dtypes_;
  absl::Mutex mu_;
  std::shared_ptr<const DatasetBase> dataset_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<IteratorBase> iterator_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::shared_ptr<IteratorResource>> LookupIterator(const OpKernelContext& ctx,
                                                                 int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return ctx.InvalidArgument("input ", i, " must be a scalar resource handle, got ",
                               t.DebugString());
  }
  const ResourceHandle& h = t.flat<ResourceHandle>()[0];
  if (h.maybe_type_name != IteratorResource::kTypeName) {
    return ctx.InvalidArgument("handle ", h.name, " names a ", h.maybe_type_name,
                               " resource, not an iterator");
  }
  if (h.device != ctx.device()->name()) {
    return ctx.InvalidArgument("iterator ", h.name, " lives on ", h.device,
                               ", not on this kernel's device ", ctx.device()->name());
  }
  auto it = ctx.resource_manager()->Lookup<IteratorResource>(h.container, h.name);
  if (!it.ok()) return ctx.InvalidArgument(it.status().message());
  return *it;
}

// Looks up or creates the iterator resource `name` for node `kernel`.
absl::StatusOr<Tensor> IteratorHandle(OpKernelContext* ctx, const std::string& container,
                                      const std::string& name, const DataTypeVector& dtypes) {
  const std::string& c =
      container.empty() ? ctx->resource_manager()->default_container() : container;
  RETURN_IF_ERROR(ctx->resource_manager()
                      ->LookupOrCreate<IteratorResource>(
                          c, name,
                          [&]() -> absl::StatusOr<std::shared_ptr<IteratorResource>> {
                            return std::make_shared<IteratorResource>(dtypes);
                          })
                      .status());
  return ResourceHandleTensor<IteratorResource>(ctx->device()->name(), c, name);
}

// --- IteratorV2 ---------------------------------------------------------------------

class IteratorV2Op : public OpKernel {
 public:
  explicit IteratorV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    c->GetAttr("output_types", &dtypes_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Tensor handle, IteratorHandle(ctx, container_, name_, dtypes_));
    ctx->set_output(0, std::move(handle));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  std::string container_, name_;
  DataTypeVector dtypes_;
};

// --- OneShotIterator ----------------------------------------------------------------

// Runs its dataset factory the first time it runs and starts the one pass;
// later runs return the same iterator.
class OneShotIteratorOp : public OpKernel {
 public:
  explicit OneShotIteratorOp(OpKernelConstruction* c)
      : OpKernel(c), factory_(FunctionFromAttr(c, "dataset_factory")) {
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    c->GetAttr("output_types", &dtypes_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::MutexLock lock(&mu_);
    if (!handle_.has_value()) {
      ASSIGN_OR_RETURN(Tensor handle, IteratorHandle(ctx, container_, name_, dtypes_));
      ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIteratorOf(ctx, handle));
      auto made = factory_->Run({}, ctx->cancellation_manager());
      if (!made.ok()) {
        return absl::Status(
            made.status().code(),
            absl::StrCat(ctx->Prefix(), "dataset_factory: ", made.status().message()));
      }
      if (made->size() != 1) return ctx->InvalidArgument("dataset_factory must return one dataset");
      auto dataset = GetDataset((*made)[0]);
      if (!dataset.ok()) return ctx->InvalidArgument(dataset.status().message());
      absl::Status s = it->SetDataset(*std::move(dataset));
      if (!s.ok()) return ctx->InvalidArgument(s.message());
      handle_ = handle;
    }
    ctx->set_output(0, *handle_);
    return absl::OkStatus();
  }

 private:
  static absl::StatusOr<std::shared_ptr<IteratorResource>> LookupIteratorOf(OpKernelContext* ctx,
                                                                            const Tensor& handle) {
    const ResourceHandle& h = handle.scalar<ResourceHandle>();
    return ctx->resource_manager()->Lookup<IteratorResource>(h.container, h.name);
  }

  const std::shared_ptr<const FunctionRunner> factory_;
  std::string container_, name_;
  DataTypeVector dtypes_;
  absl::Mutex mu_;
  std::optional<Tensor> handle_ ABSL_GUARDED_BY(mu_);
};

// --- MakeIterator, IteratorGetNext, IteratorToStringHandle ---------------------------

class MakeIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    auto dataset = GetDataset(ctx->input(0));
    if (!dataset.ok()) return ctx->InvalidArgument(dataset.status().message());
    ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(*ctx, 1));
    absl::Status s = it->SetDataset(*std::move(dataset));
    return s.ok() ? s : ctx->InvalidArgument(s.message());
  }
  bool IsExpensive() const override { return false; }
};

class IteratorGetNextOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<IteratorResource>> it = LookupIterator(*ctx, 0);
    if (!it.ok()) return done(it.status());
    DataThreads()->Schedule([ctx, it = *std::move(it), done = std::move(done)]() {
      IteratorContext ictx;
      ictx.cancellation = ctx->cancellation_manager();
      absl::StatusOr<std::vector<Tensor>> element = it->GetNext(&ictx);
      if (!element.ok()) {
        const absl::Status& s = element.status();
        return done(absl::IsOutOfRange(s)
                        ? s
                        : absl::Status(s.code(), absl::StrCat(ctx->Prefix(), s.message())));
      }
      for (size_t i = 0; i < element->size(); ++i) ctx->set_output(i, std::move((*element)[i]));
      done(absl::OkStatus());
    });
  }
};

class IteratorToStringHandleOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
      return ctx->InvalidArgument("input must be a scalar resource handle");
    }
    tensorflow::ResourceHandleProto proto;
    t.flat<ResourceHandle>()[0].AsProto(&proto);
    Tensor out(DT_STRING, TensorShape());
    out.scalar<std::string>() = proto.SerializeAsString();
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

// --- registration ---------------------------------------------------------------------

REGISTER_OP("IteratorV2")
    .Output("handle: resource")
    .Attr("shared_name: string")
    .Attr("container: string")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorV2").Device(kDeviceCPU), IteratorV2Op);

REGISTER_OP("OneShotIterator")
    .Output("handle: resource")
    .Attr("dataset_factory: func")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("OneShotIterator").Device(kDeviceCPU), OneShotIteratorOp);

REGISTER_OP("MakeIterator")
    .Input("dataset: variant")
    .Input("iterator: resource")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("MakeIterator").Device(kDeviceCPU), MakeIteratorOp);

REGISTER_OP("IteratorGetNext")
    .Input("iterator: resource")
    .Output("components: output_types")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorGetNext").Device(kDeviceCPU), IteratorGetNextOp);

REGISTER_OP("IteratorToStringHandle")
    .Input("resource_handle: resource")
    .Output("string_handle: string")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorToStringHandle").Device(kDeviceCPU),
                IteratorToStringHandleOp);

}  // namespace
}  // namespace dflow::data
