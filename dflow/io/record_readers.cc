#include "dflow/io/record_readers.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"

namespace dflow::io {
namespace {

constexpr uint64_t kBufferBytes = 256 << 10;

}  // namespace

absl::Status BufferedReader::Fill() {
  offset_ += pos_;
  buffer_.erase(0, pos_);
  pos_ = 0;
  const uint64_t left =
      file_->size() > offset_ + buffer_.size() ? file_->size() - offset_ - buffer_.size() : 0;
  const uint64_t n = std::min<uint64_t>(left, kBufferBytes);
  if (n == 0) return absl::OkStatus();
  const size_t old = buffer_.size();
  buffer_.resize(old + n);
  return file_->Read(offset_ + old, n, buffer_.data() + old);
}

absl::Status BufferedReader::Read(uint64_t n, std::string* out) {
  while (n > 0) {
    if (pos_ == buffer_.size()) {
      RETURN_IF_ERROR(Fill());
      if (buffer_.empty()) return absl::OkStatus();
    }
    const uint64_t take = std::min<uint64_t>(n, buffer_.size() - pos_);
    out->append(buffer_, pos_, take);
    pos_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BufferedReader::ReadUntil(char delim, std::string* out) {
  bool any = false;
  while (true) {
    if (pos_ == buffer_.size()) {
      RETURN_IF_ERROR(Fill());
      if (buffer_.empty()) return any;
    }
    any = true;
    const size_t at = buffer_.find(delim, pos_);
    if (at != std::string::npos) {
      out->append(buffer_, pos_, at - pos_);
      pos_ = at + 1;
      return true;
    }
    out->append(buffer_, pos_, std::string::npos);
    pos_ = buffer_.size();
    if (out->size() > TensorByteLimit()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("'", file_->path(), "': a line at offset ", offset(),
                       " is longer than the tensor byte limit ", TensorByteLimit()));
    }
  }
}

absl::Status BufferedReader::Skip(uint64_t n) {
  std::string ignored;
  while (n > 0) {
    const uint64_t chunk = std::min<uint64_t>(n, kBufferBytes);
    ignored.clear();
    RETURN_IF_ERROR(Read(chunk, &ignored));
    if (ignored.size() < chunk) return absl::OkStatus();
    n -= chunk;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path));
  return std::unique_ptr<LineReader>(new LineReader(std::move(f)));
}

absl::Status LineReader::ReadLine(std::string* line) {
  line->clear();
  ASSIGN_OR_RETURN(bool any, in_.ReadUntil('\n', line));
  if (!any) {
    return absl::OutOfRangeError(absl::StrCat("'", in_.file().path(), "': end of file"));
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_number_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FixedLengthRecordReader>> FixedLengthRecordReader::Open(
    const std::string& path, const FixedLengthFormat& format) {
  if (format.header_bytes < 0 || format.footer_bytes < 0 || format.hop_bytes < 0 ||
      format.record_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fixed-length records of '", path, "': header_bytes (", format.header_bytes,
        "), footer_bytes (", format.footer_bytes, ") and hop_bytes (", format.hop_bytes,
        ") must be >= 0 and record_bytes (", format.record_bytes, ") > 0"));
  }
  if (static_cast<uint64_t>(format.record_bytes) > TensorByteLimit()) {
    return absl::ResourceExhaustedError(absl::StrCat("record_bytes ", format.record_bytes,
                                                     " is over the tensor byte limit ",
                                                     TensorByteLimit()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path));
  const uint64_t size = f->size();
  const uint64_t frame = format.header_bytes + format.footer_bytes;
  if (size < frame) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input file \"", path, "\" is truncated: ", size, " bytes, fewer than its header (",
        format.header_bytes, ") and footer (", format.footer_bytes, ")"));
  }
  const uint64_t body = size - frame;
  if (format.hop_bytes == 0 && body % format.record_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Excluding the header (", format.header_bytes, " bytes) and footer (",
                     format.footer_bytes, " bytes), input file \"", path, "\" has body length ",
                     body, " bytes, which is not an exact multiple of the record length (",
                     format.record_bytes, " bytes)."));
  }
  return std::unique_ptr<FixedLengthRecordReader>(
      new FixedLengthRecordReader(std::move(f), format));
}

absl::Status FixedLengthRecordReader::ReadRecord(std::string* record) {
  const uint64_t step = format_.hop_bytes > 0 ? format_.hop_bytes : format_.record_bytes;
  const uint64_t start = format_.header_bytes + record_number_ * step;
  const uint64_t limit = file_->size() - format_.footer_bytes;
  if (start + format_.record_bytes > limit) {
    return absl::OutOfRangeError(absl::StrCat("'", file_->path(), "': end of records"));
  }
  record->resize(format_.record_bytes);
  RETURN_IF_ERROR(file_->Read(start, format_.record_bytes, record->data()));
  ++record_number_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path));
  if (f->size() > TensorByteLimit()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "'", path, "' has ", f->size(), " bytes, over the tensor byte limit ", TensorByteLimit()));
  }
  std::string out(f->size(), '\0');
  RETURN_IF_ERROR(f->Read(0, f->size(), out.data()));
  return out;
}

}  // namespace dflow::io
