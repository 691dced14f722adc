// TFRecord: TensorFlow's file of length-prefixed, checksummed records (what
// tf.io.TFRecordWriter writes and tf.data.TFRecordDataset reads). Each record
// is framed as (docs/formats.md, "TFRecord"):
//
//   uint64 length, little-endian
//   uint32 masked crc32c of those 8 bytes
//   byte   data[length]
//   uint32 masked crc32c of the data
//
// Only uncompressed files: GZIP and ZLIB streams are not read or written yet.
//
//   ASSIGN_OR_RETURN(auto w, TFRecordWriter::Create(path));
//   RETURN_IF_ERROR(w->Write("record"));
//   RETURN_IF_ERROR(w->Close());
//
//   ASSIGN_OR_RETURN(auto r, TFRecordReader::Open(path));
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

namespace dflow::io {

// Bytes of framing around each record: length, its crc, the data's crc.
inline constexpr uint64_t kTFRecordHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
inline constexpr uint64_t kTFRecordFooterBytes = sizeof(uint32_t);

class TFRecordWriter {
 public:
  // Creates (or truncates) `path`; fails naming it.
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Create(const std::string& path);
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  absl::Status Write(absl::string_view record);
  // Flushes and closes; errors of the file system are reported here or by Write.
  absl::Status Close();

 private:
  explicit TFRecordWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<WritableFile> file_;
};

class TFRecordReader {
 public:
  // NOT_FOUND naming `path` when it does not exist.
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> Open(const std::string& path);
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  // The next record into *record. OUT_OF_RANGE at the end of the file (after
  // the last whole record); DATA_LOSS naming the file and the record's offset
  // when a length or data checksum disagrees or the file ends inside a
  // record; RESOURCE_EXHAUSTED when the length is over TensorByteLimit().
  // After an error the reader stays at the failing record.
  absl::Status ReadRecord(std::string* record);
  // Where the next record starts.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return file_->path(); }

 private:
  explicit TFRecordReader(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  absl::StatusOr<uint64_t> ReadLength();

  std::unique_ptr<RandomAccessFile> file_;
  uint64_t offset_ = 0;
};

}  // namespace dflow::io

#endif  // DFLOW_IO_TFRECORD_H_
