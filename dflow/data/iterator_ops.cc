// tf.data's iterator ops: IteratorV2 and OneShotIterator (a resource holding
// one pass over a dataset), AnonymousIteratorV2/V3 and DeleteIterator,
// MakeIterator, IteratorGetNext (OUT_OF_RANGE "End of sequence" once the pass
// is over, as in TensorFlow), IteratorToStringHandle and
// IteratorFromStringHandle(V2) (the string handle is the serialized
// ResourceHandleProto: one get_next can switch between iterators by a fed
// handle), and IteratorGetNextAsOptional with OptionalHasValue and
// OptionalGetValue.
//
// An iterator lives in the resource manager of the device that owns it, so
// it runs on the task that created it. IteratorGetNext is asynchronous: the
// element is produced (map functions run, files read) on the process's data
// threads, never on the executor's pool.
#include <atomic>
#include <memory>
#include <optional>
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

  const DataTypeVector& dtypes() const { return dtypes_; }

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

// The iterator handle `t` names, on this kernel's device.
absl::StatusOr<std::shared_ptr<IteratorResource>> LookupHandle(const OpKernelContext& ctx,
                                                               const Tensor& t) {
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return ctx.InvalidArgument("the iterator must be a scalar resource handle, got ",
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

absl::StatusOr<std::shared_ptr<IteratorResource>> LookupIterator(const OpKernelContext& ctx,
                                                                 int i) {
  return LookupHandle(ctx, ctx.input(i));
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
        return done(absl::IsOutOfRange(s) ? s : WithPrefix(s, ctx->Prefix()));
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

// --- AnonymousIteratorV2, AnonymousIteratorV3, DeleteIterator -----------------------

// The deleter output of AnonymousIteratorV2: a token DeleteIterator takes
// with the handle. An anonymous iterator lives until DeleteIterator or until
// its device's resources are cleaned up (session close or reset).
class IteratorDeleter : public VariantValue {
 public:
  std::string TypeName() const override { return "tensorflow::data::IteratorResource::Deleter"; }
  std::string DebugString() const override { return "IteratorDeleter"; }
  std::unique_ptr<VariantValue> Clone() const override {
    return std::make_unique<IteratorDeleter>();
  }
};

// kDeleter: AnonymousIteratorV2, whose second output is the deleter.
template <bool kDeleter>
class AnonymousIteratorOp : public OpKernel {
 public:
  explicit AnonymousIteratorOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("output_types", &dtypes_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    static std::atomic<uint64_t> next_id{0};
    const std::string name = absl::StrCat("_AnonymousIterator", next_id.fetch_add(1));
    ASSIGN_OR_RETURN(Tensor handle, IteratorHandle(ctx, "", name, dtypes_));
    ctx->set_output(0, std::move(handle));
    if (kDeleter) {
      Tensor deleter(tensorflow::DT_VARIANT, TensorShape());
      VariantScalar(deleter).Set(std::make_unique<IteratorDeleter>());
      ctx->set_output(1, std::move(deleter));
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataTypeVector dtypes_;
};

class DeleteIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(*ctx, 0));
    const ResourceHandle& h = ctx->input(0).flat<ResourceHandle>()[0];
    return ctx->resource_manager()->Delete(h);
  }
  bool IsExpensive() const override { return false; }
};

// --- IteratorFromStringHandle(V2) -----------------------------------------------------

// Parses a handle from IteratorToStringHandle. With output_types set, the
// iterator must exist on this device and have those types.
class IteratorFromStringHandleOp : public OpKernel {
 public:
  explicit IteratorFromStringHandleOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("output_types", &dtypes_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& s = ctx->input(0);
    if (s.dtype() != DT_STRING || s.dims() != 0) {
      return ctx->InvalidArgument("string_handle must be a scalar string, got ", s.DebugString());
    }
    tensorflow::ResourceHandleProto proto;
    if (!proto.ParseFromString(s.scalar<std::string>())) {
      return ctx->InvalidArgument(
          "Could not parse string_handle as a valid ResourceHandle (it is not the output of "
          "an iterator's string_handle())");
    }
    Tensor handle(DT_RESOURCE, TensorShape());
    handle.scalar<ResourceHandle>().FromProto(proto);
    if (!dtypes_.empty()) {
      ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupHandle(*ctx, handle));
      if (it->dtypes() != dtypes_) {
        return ctx->InvalidArgument("the iterator ", proto.name(), " gives elements of types [",
                                    TypesString(it->dtypes()), "], expected [",
                                    TypesString(dtypes_), "]");
      }
    }
    ctx->set_output(0, std::move(handle));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  static std::string TypesString(const DataTypeVector& types) {
    std::string out;
    for (DataType d : types) absl::StrAppend(&out, out.empty() ? "" : ", ", DataTypeString(d));
    return out;
  }
  DataTypeVector dtypes_;
};

// --- IteratorGetNextAsOptional, OptionalHasValue, OptionalGetValue -----------------------

// An element, or none at the end of the sequence.
class OptionalValue : public VariantValue {
 public:
  explicit OptionalValue(std::optional<std::vector<Tensor>> value) : value_(std::move(value)) {}
  std::string TypeName() const override { return "tensorflow::data::OptionalVariant"; }
  std::string DebugString() const override {
    return value_.has_value() ? absl::StrCat("Optional<", value_->size(), " components>")
                              : "Optional<none>";
  }
  std::unique_ptr<VariantValue> Clone() const override {
    return std::make_unique<OptionalValue>(value_);
  }
  const std::optional<std::vector<Tensor>>& value() const { return value_; }

 private:
  std::optional<std::vector<Tensor>> value_;
};

absl::StatusOr<const OptionalValue*> GetOptional(const OpKernelContext& ctx) {
  const Tensor& t = ctx.input(0);
  const OptionalValue* v = t.dtype() == tensorflow::DT_VARIANT && t.dims() == 0
                               ? VariantScalar(t).get<OptionalValue>()
                               : nullptr;
  if (v == nullptr) {
    return ctx.InvalidArgument("input must be a scalar variant holding an optional, got ",
                               t.DebugString());
  }
  return v;
}

class IteratorGetNextAsOptionalOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<IteratorResource>> it = LookupIterator(*ctx, 0);
    if (!it.ok()) return done(it.status());
    DataThreads()->Schedule([ctx, it = *std::move(it), done = std::move(done)]() {
      IteratorContext ictx;
      ictx.cancellation = ctx->cancellation_manager();
      absl::StatusOr<std::vector<Tensor>> element = it->GetNext(&ictx);
      std::optional<std::vector<Tensor>> value;
      if (element.ok()) {
        value = *std::move(element);
      } else if (!absl::IsOutOfRange(element.status())) {
        const absl::Status& s = element.status();
        return done(WithPrefix(s, ctx->Prefix()));
      }
      Tensor out(tensorflow::DT_VARIANT, TensorShape());
      VariantScalar(out).Set(std::make_unique<OptionalValue>(std::move(value)));
      ctx->set_output(0, std::move(out));
      done(absl::OkStatus());
    });
  }
};

class OptionalHasValueOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const OptionalValue* v, GetOptional(*ctx));
    ctx->set_output(0, Tensor::Scalar<bool>(v->value().has_value()));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class OptionalGetValueOp : public OpKernel {
 public:
  explicit OptionalGetValueOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("output_types", &dtypes_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const OptionalValue* v, GetOptional(*ctx));
    if (!v->value().has_value()) {
      return ctx->InvalidArgument("The optional does not have a value.");
    }
    const std::vector<Tensor>& element = *v->value();
    absl::Status s = CheckElementTypes(element, dtypes_, "OptionalGetValue");
    if (!s.ok()) return ctx->InvalidArgument(s.message());
    for (size_t i = 0; i < element.size(); ++i) ctx->set_output(i, element[i]);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataTypeVector dtypes_;
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

REGISTER_OP("AnonymousIteratorV2")
    .Output("handle: resource")
    .Output("deleter: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("AnonymousIteratorV2").Device(kDeviceCPU),
                AnonymousIteratorOp</*kDeleter=*/true>);

REGISTER_OP("AnonymousIteratorV3")
    .Output("handle: resource")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("AnonymousIteratorV3").Device(kDeviceCPU),
                AnonymousIteratorOp</*kDeleter=*/false>);

REGISTER_OP("DeleteIterator")
    .Input("handle: resource")
    .Input("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("DeleteIterator").Device(kDeviceCPU), DeleteIteratorOp);

REGISTER_OP("IteratorFromStringHandleV2")
    .Input("string_handle: string")
    .Output("resource_handle: resource")
    .Attr("output_types: list(type) >= 0 = []")
    .Attr("output_shapes: list(shape) >= 0 = []")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorFromStringHandleV2").Device(kDeviceCPU),
                IteratorFromStringHandleOp);

REGISTER_OP("IteratorFromStringHandle")
    .Input("string_handle: string")
    .Output("resource_handle: resource")
    .Attr("output_types: list(type) >= 0 = []")
    .Attr("output_shapes: list(shape) >= 0 = []")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorFromStringHandle").Device(kDeviceCPU),
                IteratorFromStringHandleOp);

REGISTER_OP("IteratorGetNextAsOptional")
    .Input("iterator: resource")
    .Output("optional: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IteratorGetNextAsOptional").Device(kDeviceCPU),
                IteratorGetNextAsOptionalOp);

REGISTER_OP("OptionalHasValue")
    .Input("optional: variant")
    .Output("has_value: bool")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("OptionalHasValue").Device(kDeviceCPU), OptionalHasValueOp);

REGISTER_OP("OptionalGetValue")
    .Input("optional: variant")
    .Output("components: output_types")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("OptionalGetValue").Device(kDeviceCPU), OptionalGetValueOp);

}  // namespace
}  // namespace dflow::data
