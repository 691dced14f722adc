#include "dflow/io/tfrecord.h"

#include "absl/strings/str_cat.h"
#include "dflow/framework/coding.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/io/crc32c.h"

namespace dflow::io {
namespace {

uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // Little-endian hosts only, as coding.h.
  return v;
}

uint32_t MaskedCrc(const char* data, size_t n) { return crc32c::Mask(crc32c::Value(data, n)); }

}  // namespace

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, WritableFile::Create(path));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(file)));
}

absl::Status TFRecordWriter::Write(absl::string_view record) {
  char header[kTFRecordHeaderBytes];
  const uint64_t length = record.size();
  std::memcpy(header, &length, sizeof(length));
  EncodeFixed32(header + sizeof(length), MaskedCrc(header, sizeof(length)));
  char footer[kTFRecordFooterBytes];
  EncodeFixed32(footer, MaskedCrc(record.data(), record.size()));
  RETURN_IF_ERROR(file_->Append(absl::string_view(header, sizeof(header))));
  RETURN_IF_ERROR(file_->Append(record));
  return file_->Append(absl::string_view(footer, sizeof(footer)));
}

absl::Status TFRecordWriter::Close() { return file_->Close(); }

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(path));
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(std::move(file)));
}

absl::StatusOr<uint64_t> TFRecordReader::ReadLength() {
  const uint64_t left = file_->size() - offset_;
  if (left < kTFRecordHeaderBytes) {
    return absl::DataLossError(absl::StrCat("TFRecord file '", path(),
                                            "': truncated record header at offset ", offset_, " (",
                                            left, " of ", kTFRecordHeaderBytes, " bytes)"));
  }
  char header[kTFRecordHeaderBytes];
  RETURN_IF_ERROR(file_->Read(offset_, sizeof(header), header));
  if (DecodeFixed32(header + 8) != MaskedCrc(header, 8)) {
    return absl::DataLossError(absl::StrCat("TFRecord file '", path(),
                                            "': corrupted record at offset ", offset_,
                                            ": the length's checksum does not match"));
  }
  return DecodeFixed64(header);
}

absl::Status TFRecordReader::ReadRecord(std::string* record) {
  if (offset_ >= file_->size()) {
    return absl::OutOfRangeError(absl::StrCat("TFRecord file '", path(), "': end of file"));
  }
  ASSIGN_OR_RETURN(const uint64_t length, ReadLength());
  const uint64_t left = file_->size() - offset_ - kTFRecordHeaderBytes;
  if (length > left || left - length < kTFRecordFooterBytes) {
    return absl::DataLossError(absl::StrCat(
        "TFRecord file '", path(), "': truncated record at offset ", offset_, ": its ", length,
        " data bytes and checksum need ", length + kTFRecordFooterBytes, ", the file has ", left));
  }
  if (length > TensorByteLimit()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("TFRecord file '", path(), "': the record at offset ", offset_, " has ",
                     length, " bytes, over the tensor byte limit ", TensorByteLimit()));
  }
  std::string data(length + kTFRecordFooterBytes, '\0');
  RETURN_IF_ERROR(file_->Read(offset_ + kTFRecordHeaderBytes, data.size(), data.data()));
  if (DecodeFixed32(data.data() + length) != MaskedCrc(data.data(), length)) {
    return absl::DataLossError(absl::StrCat("TFRecord file '", path(),
                                            "': corrupted record at offset ", offset_,
                                            ": the data's checksum does not match"));
  }
  data.resize(length);
  *record = std::move(data);
  offset_ += kTFRecordHeaderBytes + length + kTFRecordFooterBytes;
  return absl::OkStatus();
}

}  // namespace dflow::io
