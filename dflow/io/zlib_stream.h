// Sequential byte streams over files, plain or zlib-compressed: what
// TFRecord files with compression_type "ZLIB" or "GZIP" are read and written
// through (tfrecord.h).
//
//   ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
//   auto in = std::make_unique<ZlibInputStream>(std::move(file), ZlibFormat::kGzip);
//   char buf[64];
//   ASSIGN_OR_RETURN(size_t n, in->Read(sizeof(buf), buf));  // 0: the end
//
// Memory is bounded: a stream holds one 256 KiB chunk (compressed input,
// or deflated output while writing) besides zlib's own window.
// Each object is used by one thread at a time.
#ifndef DFLOW_IO_ZLIB_STREAM_H_
#define DFLOW_IO_ZLIB_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/io/file.h"

struct z_stream_s;

namespace dflow::io {

// How a zlib stream is framed: a zlib header and adler32 trailer (RFC 1950),
// or a gzip header and crc32 trailer (RFC 1952).
enum class ZlibFormat { kZlib, kGzip };

// Bytes read front to back.
class InputStream {
 public:
  virtual ~InputStream() = default;
  // Up to `n` bytes into `dst`: fewer only at the end of the stream, 0 once
  // it is over. DATA_LOSS naming the file for a corrupt or truncated stream.
  virtual absl::StatusOr<size_t> Read(size_t n, char* dst) = 0;
  // Bytes left to read, where known without reading them (plain files).
  virtual std::optional<uint64_t> Remaining() const = 0;
  virtual const std::string& path() const = 0;
};

// A plain file read front to back.
class FileInputStream : public InputStream {
 public:
  explicit FileInputStream(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  absl::StatusOr<size_t> Read(size_t n, char* dst) override;
  std::optional<uint64_t> Remaining() const override { return file_->size() - offset_; }
  const std::string& path() const override { return file_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> file_;
  uint64_t offset_ = 0;
};

// The inflated bytes of a compressed file. Concatenated streams (gzip
// members) read as one. A stream that ends early, bad compressed data or a
// trailer checksum that disagrees is DATA_LOSS naming the file.
class ZlibInputStream : public InputStream {
 public:
  ZlibInputStream(std::unique_ptr<RandomAccessFile> file, ZlibFormat format);
  ~ZlibInputStream() override;
  ZlibInputStream(const ZlibInputStream&) = delete;
  ZlibInputStream& operator=(const ZlibInputStream&) = delete;

  absl::StatusOr<size_t> Read(size_t n, char* dst) override;
  std::optional<uint64_t> Remaining() const override { return std::nullopt; }
  const std::string& path() const override { return file_->path(); }

 private:
  absl::Status Init();
  absl::Status FillInput();
  absl::Status Corrupt(absl::string_view what) const;

  std::unique_ptr<RandomAccessFile> file_;
  const ZlibFormat format_;
  std::unique_ptr<z_stream_s> z_;
  bool initialized_ = false;
  bool stream_end_ = false;   // the last inflated stream ended at its trailer
  uint64_t file_offset_ = 0;  // compressed bytes handed to zlib so far
  std::string in_;            // one compressed chunk
};

// Deflates what is appended into a WritableFile it borrows.
class ZlibOutputStream {
 public:
  // `file` is not owned and must outlive this stream.
  ZlibOutputStream(WritableFile* file, ZlibFormat format);
  ~ZlibOutputStream();
  ZlibOutputStream(const ZlibOutputStream&) = delete;
  ZlibOutputStream& operator=(const ZlibOutputStream&) = delete;

  absl::Status Append(absl::string_view data);
  // Writes the end of the stream (its trailer); Append after it fails.
  absl::Status Finish();

 private:
  absl::Status Deflate(absl::string_view data, int flush);

  WritableFile* file_;  // not owned
  std::unique_ptr<z_stream_s> z_;
  absl::Status init_;
  bool finished_ = false;
};

}  // namespace dflow::io

#endif  // DFLOW_IO_ZLIB_STREAM_H_
