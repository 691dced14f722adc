// ReadFile: the whole content of a local file as a string scalar (what an
// image pipeline maps over its file names before DecodePng/DecodeJpeg).
//
// The file's size is checked against the tensor byte limit before it is read.
// Errors as TensorFlow's: NOT_FOUND for a missing file, FAILED_PRECONDITION
// for a directory, each naming the path.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// The status for errno `err` on `path`, as TensorFlow's file system reports it.
absl::Status FileError(const std::string& path, int err) {
  const std::string msg = absl::StrCat(path, "; ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EISDIR:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

absl::Status ReadWholeFile(const std::string& path, std::string* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FileError(path, errno);
  if (S_ISDIR(st.st_mode)) return FileError(path, EISDIR);
  RETURN_IF_ERROR(CheckTensorBytes(DT_STRING, TensorShape(), static_cast<uint64_t>(st.st_size)));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return FileError(path, errno);
  out->resize(static_cast<size_t>(st.st_size));
  const size_t n = std::fread(out->data(), 1, out->size(), f);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return FileError(path, err);
  out->resize(n);  // a file that shrank while read
  return absl::OkStatus();
}

class ReadFileOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& name = ctx->input(0);
    if (name.dims() != 0) {
      return ctx->InvalidArgument("Input filename tensor must be scalar, but had shape: ",
                                  name.shape().DebugString());
    }
    Tensor out(DT_STRING, TensorShape());
    absl::Status s = ReadWholeFile(name.scalar<std::string>(), &out.scalar<std::string>());
    if (!s.ok()) return WithPrefix(s, ctx->Prefix());
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

REGISTER_OP("ReadFile")
    .Input("filename: string")
    .Output("contents: string")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ReadFile").Device(kDeviceCPU), ReadFileOp);
REGISTER_NO_GRADIENT("ReadFile");

}  // namespace
}  // namespace dflow
