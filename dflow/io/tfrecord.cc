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

absl::StatusOr<TFRecordCompression> ParseTFRecordCompression(absl::string_view type) {
  if (type.empty()) return TFRecordCompression::kNone;
  if (type == "ZLIB") return TFRecordCompression::kZlib;
  if (type == "GZIP") return TFRecordCompression::kGzip;
  return absl::InvalidArgumentError(absl::StrCat("Unsupported compression_type: '", type,
                                                 "'; expected '', 'ZLIB' or 'GZIP'"));
}

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(
    const std::string& path, TFRecordCompression compression) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, WritableFile::Create(path));
  std::unique_ptr<TFRecordWriter> w(new TFRecordWriter(std::move(file)));
  if (compression != TFRecordCompression::kNone) {
    w->zlib_ = std::make_unique<ZlibOutputStream>(
        w->file_.get(),
        compression == TFRecordCompression::kGzip ? ZlibFormat::kGzip : ZlibFormat::kZlib);
  }
  return w;
}

absl::Status TFRecordWriter::Append(absl::string_view data) {
  return zlib_ != nullptr ? zlib_->Append(data) : file_->Append(data);
}

absl::Status TFRecordWriter::Write(absl::string_view record) {
  char header[kTFRecordHeaderBytes];
  const uint64_t length = record.size();
  std::memcpy(header, &length, sizeof(length));
  EncodeFixed32(header + sizeof(length), MaskedCrc(header, sizeof(length)));
  char footer[kTFRecordFooterBytes];
  EncodeFixed32(footer, MaskedCrc(record.data(), record.size()));
  RETURN_IF_ERROR(Append(absl::string_view(header, sizeof(header))));
  RETURN_IF_ERROR(Append(record));
  return Append(absl::string_view(footer, sizeof(footer)));
}

absl::Status TFRecordWriter::Close() {
  if (zlib_ != nullptr) RETURN_IF_ERROR(zlib_->Finish());
  return file_->Close();
}

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::Open(
    const std::string& path, TFRecordCompression compression) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(path));
  std::unique_ptr<InputStream> in;
  if (compression == TFRecordCompression::kNone) {
    in = std::make_unique<FileInputStream>(std::move(file));
  } else {
    in = std::make_unique<ZlibInputStream>(
        std::move(file),
        compression == TFRecordCompression::kGzip ? ZlibFormat::kGzip : ZlibFormat::kZlib);
  }
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(std::move(in)));
}

absl::StatusOr<size_t> TFRecordReader::ReadFully(size_t n, char* dst) {
  size_t done = 0;
  while (done < n) {
    ASSIGN_OR_RETURN(size_t got, in_->Read(n - done, dst + done));
    if (got == 0) break;
    done += got;
  }
  return done;
}

absl::StatusOr<uint64_t> TFRecordReader::ReadLength() {
  char header[kTFRecordHeaderBytes];
  ASSIGN_OR_RETURN(const size_t got, ReadFully(sizeof(header), header));
  if (got == 0) {
    return absl::OutOfRangeError(absl::StrCat("TFRecord file '", path(), "': end of file"));
  }
  if (got < kTFRecordHeaderBytes) {
    return absl::DataLossError(absl::StrCat("TFRecord file '", path(),
                                            "': truncated record header at offset ", offset_, " (",
                                            got, " of ", kTFRecordHeaderBytes, " bytes)"));
  }
  if (DecodeFixed32(header + 8) != MaskedCrc(header, 8)) {
    return absl::DataLossError(absl::StrCat("TFRecord file '", path(),
                                            "': corrupted record at offset ", offset_,
                                            ": the length's checksum does not match"));
  }
  return DecodeFixed64(header);
}

absl::Status TFRecordReader::ReadRecord(std::string* record) {
  if (!error_.ok()) return error_;
  absl::Status s = ReadOne(record);
  if (!s.ok()) error_ = s;
  return s;
}

absl::Status TFRecordReader::ReadOne(std::string* record) {
  ASSIGN_OR_RETURN(const uint64_t length, ReadLength());
  auto truncated = [&](uint64_t left) {
    return absl::DataLossError(absl::StrCat(
        "TFRecord file '", path(), "': truncated record at offset ", offset_, ": its ", length,
        " data bytes and checksum need ", length + kTFRecordFooterBytes, ", the file has ", left));
  };
  const std::optional<uint64_t> left = in_->Remaining();
  if (left.has_value() && (length > *left || *left - length < kTFRecordFooterBytes)) {
    return truncated(*left);
  }
  if (length > TensorByteLimit()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("TFRecord file '", path(), "': the record at offset ", offset_, " has ",
                     length, " bytes, over the tensor byte limit ", TensorByteLimit()));
  }
  std::string data(length + kTFRecordFooterBytes, '\0');
  ASSIGN_OR_RETURN(const size_t got, ReadFully(data.size(), data.data()));
  if (got < data.size()) return truncated(got);
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
