// TFRecord: TensorFlow's file of length-prefixed, checksummed records (what
// tf.io.TFRecordWriter writes and tf.data.TFRecordDataset reads). Each record
// is framed as (docs/formats.md, "TFRecord"):
//
//   uint64 length, little-endian
//   uint32 masked crc32c of those 8 bytes
//   byte   data[length]
//   uint32 masked crc32c of the data
//
// A file may also be compressed as a whole (compression_type "ZLIB" or
// "GZIP", zlib_stream.h): the records are framed the same inside the stream.
//
//   ASSIGN_OR_RETURN(auto w, TFRecordWriter::Create(path, TFRecordCompression::kGzip));
//   RETURN_IF_ERROR(w->Write("record"));
//   RETURN_IF_ERROR(w->Close());
//
//   ASSIGN_OR_RETURN(auto r, TFRecordReader::Open(path, TFRecordCompression::kGzip));
//   std::string record;
//   absl::Status s;
//   while ((s = r->ReadRecord(&record)).ok()) { ... }
//   if (!absl::IsOutOfRange(s)) return s;  // DATA_LOSS: a corrupt file
//
// Each object is used by one thread at a time.
#ifndef DFLOW_IO_TFRECORD_H_
#define DFLOW_IO_TFRECORD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/io/file.h"
#include "dflow/io/zlib_stream.h"

namespace dflow::io {

// Bytes of framing around each record: length, its crc, the data's crc.
inline constexpr uint64_t kTFRecordHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
inline constexpr uint64_t kTFRecordFooterBytes = sizeof(uint32_t);

enum class TFRecordCompression { kNone, kZlib, kGzip };

// "" (none), "ZLIB" or "GZIP", as TensorFlow's compression_type; anything
// else is INVALID_ARGUMENT naming it.
absl::StatusOr<TFRecordCompression> ParseTFRecordCompression(absl::string_view type);

class TFRecordWriter {
 public:
  // Creates (or truncates) `path`; fails naming it.
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Create(
      const std::string& path, TFRecordCompression compression = TFRecordCompression::kNone);
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  absl::Status Write(absl::string_view record);
  // Ends the compressed stream, flushes and closes; errors of the file
  // system are reported here or by Write.
  absl::Status Close();

 private:
  explicit TFRecordWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  absl::Status Append(absl::string_view data);

  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<ZlibOutputStream> zlib_;  // null when uncompressed; borrows file_
};

class TFRecordReader {
 public:
  // NOT_FOUND naming `path` when it does not exist.
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> Open(
      const std::string& path, TFRecordCompression compression = TFRecordCompression::kNone);
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  // The next record into *record. OUT_OF_RANGE at the end of the file (after
  // the last whole record); DATA_LOSS naming the file and the record's offset
  // when a length or data checksum disagrees or the file ends inside a
  // record; RESOURCE_EXHAUSTED when the length is over TensorByteLimit().
  // Offsets count uncompressed bytes; a compressed stream that is corrupt or
  // ends early is DATA_LOSS naming the file. After an error every later call
  // returns the same error.
  absl::Status ReadRecord(std::string* record);
  // Where the next record starts (in the uncompressed bytes).
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return in_->path(); }

 private:
  explicit TFRecordReader(std::unique_ptr<InputStream> in) : in_(std::move(in)) {}
  absl::Status ReadOne(std::string* record);
  absl::StatusOr<uint64_t> ReadLength();
  // Up to `n` bytes: fewer only where the stream ends.
  absl::StatusOr<size_t> ReadFully(size_t n, char* dst);

  std::unique_ptr<InputStream> in_;
  uint64_t offset_ = 0;
  absl::Status error_;  // the first error, repeated
};

}  // namespace dflow::io

#endif  // DFLOW_IO_TFRECORD_H_
