// tf.data's file datasets over plain files: TextLineDataset (one string per
// line) and FixedLengthRecordDataset / FixedLengthRecordDatasetV2 (one
// string per fixed-length record), reading through dflow/io/record_readers.h
// as the queue readers do. Files are read in the order given; only
// uncompressed files (compression_type "").
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/io/record_readers.h"

namespace dflow::data {
namespace {

// Reads the next record of an open file into *record; OUT_OF_RANGE at its end.
using NextRecord = std::function<absl::Status(std::string* record)>;
// Opens one file of the dataset.
using OpenFile = std::function<absl::StatusOr<NextRecord>(const std::string& path)>;

// The records of `files` in order, one scalar string per element.
class FileRecordDataset : public DatasetBase {
 public:
  FileRecordDataset(std::vector<std::string> files, OpenFile open, std::string what)
      : DatasetBase({DT_STRING}),
        files_(std::move(files)),
        open_(std::move(open)),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat(what_, "([", absl::StrJoin(files_, ", "), "])");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const FileRecordDataset* ds) : ds_(ds->shared_from_this()), d_(ds) {}
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      while (true) {
        if (!next_) {
          *end = file_ >= d_->files_.size();
          if (*end) return absl::OkStatus();
          ASSIGN_OR_RETURN(next_, d_->open_(d_->files_[file_]));
        }
        std::string record;
        absl::Status s = next_(&record);
        if (s.ok()) {
          *out = {Tensor::Scalar<std::string>(std::move(record))};
          return absl::OkStatus();
        }
        if (!absl::IsOutOfRange(s)) return s;
        next_ = nullptr;
        ++file_;
      }
    }

   private:
    std::shared_ptr<const DatasetBase> ds_;  // keeps d_ alive
    const FileRecordDataset* d_;
    size_t file_ = 0;
    NextRecord next_;
  };

  const std::vector<std::string> files_;
  const OpenFile open_;
  const std::string what_;
};

absl::StatusOr<std::vector<std::string>> FileNames(const Tensor& names) {
  if (names.dtype() != DT_STRING || names.dims() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "`filenames` must be a scalar or a vector of strings, got ", names.DebugString()));
  }
  return std::vector<std::string>(names.flat<std::string>().begin(),
                                  names.flat<std::string>().end());
}

absl::Status CheckUncompressed(const Tensor& compression) {
  if (compression.dtype() != DT_STRING || compression.dims() != 0) {
    return absl::InvalidArgumentError("`compression_type` must be a string scalar");
  }
  if (!compression.scalar<std::string>().empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "compression_type '", compression.scalar<std::string>(), "' is not supported; only ''"));
  }
  return absl::OkStatus();
}

class TextLineDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx->input(0)));
    RETURN_IF_ERROR(CheckUncompressed(ctx->input(1)));
    OpenFile open = [](const std::string& path) -> absl::StatusOr<NextRecord> {
      ASSIGN_OR_RETURN(std::shared_ptr<io::LineReader> r, io::LineReader::Open(path));
      return [r](std::string* line) { return r->ReadLine(line); };
    };
    return std::make_shared<FileRecordDataset>(std::move(files), std::move(open), What());
  }
};

// FixedLengthRecordDataset and FixedLengthRecordDatasetV2 (which adds
// compression_type as input 5).
class FixedLengthRecordDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx->input(0)));
    io::FixedLengthFormat f;
    ASSIGN_OR_RETURN(f.header_bytes, ScalarInput(*ctx, 1, "header_bytes"));
    ASSIGN_OR_RETURN(f.record_bytes, ScalarInput(*ctx, 2, "record_bytes"));
    ASSIGN_OR_RETURN(f.footer_bytes, ScalarInput(*ctx, 3, "footer_bytes"));
    if (f.header_bytes < 0 || f.footer_bytes < 0 || f.record_bytes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("record_bytes must be > 0 (got ",
                                                     f.record_bytes,
                                                     ") and header_bytes, footer_bytes >= 0 (got ",
                                                     f.header_bytes, ", ", f.footer_bytes, ")"));
    }
    if (ctx->num_inputs() > 5) RETURN_IF_ERROR(CheckUncompressed(ctx->input(5)));
    OpenFile open = [f](const std::string& path) -> absl::StatusOr<NextRecord> {
      ASSIGN_OR_RETURN(std::shared_ptr<io::FixedLengthRecordReader> r,
                       io::FixedLengthRecordReader::Open(path, f));
      return [r](std::string* record) { return r->ReadRecord(record); };
    };
    return std::make_shared<FileRecordDataset>(std::move(files), std::move(open), What());
  }
};

REGISTER_OP("TextLineDataset")
    .Input("filenames: string")
    .Input("compression_type: string")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TextLineDataset").Device(kDeviceCPU), TextLineDatasetOp);

REGISTER_OP("FixedLengthRecordDataset")
    .Input("filenames: string")
    .Input("header_bytes: int64")
    .Input("record_bytes: int64")
    .Input("footer_bytes: int64")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FixedLengthRecordDataset").Device(kDeviceCPU),
                FixedLengthRecordDatasetOp);

REGISTER_OP("FixedLengthRecordDatasetV2")
    .Input("filenames: string")
    .Input("header_bytes: int64")
    .Input("record_bytes: int64")
    .Input("footer_bytes: int64")
    .Input("buffer_size: int64")
    .Input("compression_type: string")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FixedLengthRecordDatasetV2").Device(kDeviceCPU),
                FixedLengthRecordDatasetOp);

}  // namespace
}  // namespace dflow::data
