// Record-at-a-time readers of plain files, shared by the queue readers
// (TextLineReaderV2, FixedLengthRecordReaderV2, WholeFileReaderV2 in
// ops/reader_ops.cc) and tf.data's TextLineDataset and
// FixedLengthRecordDataset (data/text_datasets.cc):
//
//   ASSIGN_OR_RETURN(auto r, LineReader::Open(path));
//   std::string line;
//   absl::Status s;
//   while ((s = r->ReadLine(&line)).ok()) { ... }
//   if (!absl::IsOutOfRange(s)) return s;
//
// Errors name the file. Each object is used by one thread at a time.
#ifndef DFLOW_IO_RECORD_READERS_H_
#define DFLOW_IO_RECORD_READERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dflow/io/file.h"

namespace dflow::io {

// Reads a file front to back through a buffer.
class BufferedReader {
 public:
  explicit BufferedReader(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  // Up to `n` bytes appended to *out; fewer only at the end of the file.
  absl::Status Read(uint64_t n, std::string* out);
  // Appends bytes up to the next `delim` (consumed, not appended) or the end
  // of the file. False when the file was already at its end.
  absl::StatusOr<bool> ReadUntil(char delim, std::string* out);
  absl::Status Skip(uint64_t n);
  uint64_t offset() const { return offset_ + pos_; }
  const RandomAccessFile& file() const { return *file_; }

 private:
  absl::Status Fill();
  std::unique_ptr<RandomAccessFile> file_;
  std::string buffer_;
  size_t pos_ = 0;       // next byte of buffer_
  uint64_t offset_ = 0;  // file offset of buffer_[0]
};

// The lines of a text file, as TensorFlow's TextLineReader and
// TextLineDataset give them: without the '\n' and a '\r' before it; a last
// line without '\n' counts, the empty rest after a final '\n' does not.
class LineReader {
 public:
  // NOT_FOUND naming `path` when it does not exist.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  // The next line. OUT_OF_RANGE at the end of the file; RESOURCE_EXHAUSTED
  // naming the file for a line longer than TensorByteLimit().
  absl::Status ReadLine(std::string* line);
  // Lines read so far (the 1-based number of the last one).
  int64_t line_number() const { return line_number_; }

 private:
  explicit LineReader(std::unique_ptr<RandomAccessFile> f) : in_(std::move(f)) {}
  BufferedReader in_;
  int64_t line_number_ = 0;
};

// Fixed-length records after a header and before a footer, as TensorFlow's
// FixedLengthRecordReader (with hop_bytes) and FixedLengthRecordDataset.
struct FixedLengthFormat {
  int64_t header_bytes = 0;
  int64_t record_bytes = 0;  // > 0
  int64_t footer_bytes = 0;
  // 0: records follow each other. Otherwise each record starts hop_bytes
  // after the previous one's start (records may overlap or leave gaps), as
  // long as it ends before the footer.
  int64_t hop_bytes = 0;
};

class FixedLengthRecordReader {
 public:
  // NOT_FOUND naming `path`; INVALID_ARGUMENT for a negative size or
  // record_bytes <= 0, and (as TensorFlow) INVALID_ARGUMENT naming the file
  // when it is shorter than header + footer or (hop_bytes 0) when its body
  // is not a whole number of records (a truncated file).
  static absl::StatusOr<std::unique_ptr<FixedLengthRecordReader>> Open(
      const std::string& path, const FixedLengthFormat& format);
  // The next record; OUT_OF_RANGE after the last.
  absl::Status ReadRecord(std::string* record);
  // Records read so far (the 0-based number of the next one).
  int64_t record_number() const { return record_number_; }

 private:
  FixedLengthRecordReader(std::unique_ptr<RandomAccessFile> f, FixedLengthFormat format)
      : file_(std::move(f)), format_(format) {}
  std::unique_ptr<RandomAccessFile> file_;
  const FixedLengthFormat format_;
  int64_t record_number_ = 0;
};

// The whole of `path`: NOT_FOUND naming it; RESOURCE_EXHAUSTED when it is
// larger than TensorByteLimit().
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace dflow::io

#endif  // DFLOW_IO_RECORD_READERS_H_
