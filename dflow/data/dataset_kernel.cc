#include "dflow/data/dataset_kernel.h"

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/function.h"

namespace dflow::data {

DatasetOpKernel::DatasetOpKernel(OpKernelConstruction* c) : OpKernel(c) {
  for (const char* attr : {"output_types", "Toutput_types"}) {
    if (c->HasAttr(attr)) c->GetAttr(attr, &output_dtypes_).IgnoreError();
  }
}

absl::Status DatasetOpKernel::Compute(OpKernelContext* ctx) {
  absl::StatusOr<std::shared_ptr<const DatasetBase>> ds = MakeDataset(ctx);
  if (!ds.ok()) return WithPrefix(ds.status(), ctx->Prefix());
  ctx->set_output(0, DatasetTensor(*std::move(ds)));
  return absl::OkStatus();
}

std::string DatasetOpKernel::What() const { return absl::StrCat(type_string(), " '", name(), "'"); }

std::shared_ptr<const FunctionRunner> FunctionFromAttr(OpKernelConstruction* c,
                                                       const std::string& attr) {
  auto fn = c->def().attr().find(attr);
  if (fn == c->def().attr().end() || !fn->second.has_func()) {
    c->SetStatus(absl::InvalidArgumentError(absl::StrCat("[", c->def().op(), " '", c->def().name(),
                                                         "'] has no function attr '", attr, "'")));
    return nullptr;
  }
  tensorflow::FunctionDefLibrary library;
  auto lib = c->def().attr().find(kFunctionLibraryAttr);
  if (lib != c->def().attr().end()) library.ParseFromString(lib->second.s());
  auto runner = FunctionRunner::Create(library, fn->second.func(), c->device());
  if (!runner.ok()) {
    c->SetStatus(absl::Status(
        runner.status().code(),
        absl::StrCat("[", c->def().op(), " '", c->def().name(), "'] ", runner.status().message())));
    return nullptr;
  }
  return std::shared_ptr<const FunctionRunner>(*std::move(runner));
}

absl::StatusOr<int64_t> ScalarInput(const OpKernelContext& ctx, int i, const std::string& what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_INT64 || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be an int64 scalar, got ", t.DebugString()));
  }
  return t.scalar<int64_t>();
}

}  // namespace dflow::data
