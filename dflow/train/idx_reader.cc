#include "dflow/train/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

constexpr int64_t kChunkBytes = 1 << 20;
// No real idx file comes near this; a larger product means a corrupt header.
constexpr int64_t kMaxElements = int64_t{1} << 40;

// A gzip (or plain) file read sequentially; tracks the decompressed offset so
// errors can say where the data went wrong. Not thread-safe.
class GzReader {
 public:
  static absl::StatusOr<std::unique_ptr<GzReader>> Open(const std::string& path);
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  int64_t offset() const { return offset_; }
  // The stream length the header announces, for short-read messages.
  void set_announced_size(int64_t bytes) { announced_size_ = bytes; }
  // Reads exactly out.size() bytes; DataLoss naming the offset otherwise.
  absl::Status ReadExact(absl::Span<uint8_t> out);
  absl::StatusOr<uint32_t> ReadBigEndian32();
  // DataLoss when bytes remain or the gzip trailer (CRC, length) is wrong.
  absl::Status ExpectEnd();
  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("[ReadIdx] ", path_, ": ", what));
  }

 private:
  GzReader(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}
  std::string ZlibMessage() const;

  std::string path_;
  gzFile file_;
  int64_t offset_ = 0;
  int64_t announced_size_ = -1;  // Unknown while reading the header.
};

absl::StatusOr<std::unique_ptr<GzReader>> GzReader::Open(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat("[ReadIdx] ", path, ": no such file"));
  }
  if (st.type() == std::filesystem::file_type::directory) {
    return absl::InvalidArgumentError(absl::StrCat("[ReadIdx] ", path, ": is a directory"));
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    int err = errno;
    std::string msg = absl::StrCat("[ReadIdx] cannot open ", path, ": ", std::strerror(err));
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  gzbuffer(file, 1 << 18);
  return std::unique_ptr<GzReader>(new GzReader(path, file));
}

std::string GzReader::ZlibMessage() const {
  int code = Z_OK;
  absl::string_view msg = gzerror(file_, &code);
  if (code == Z_OK) return "end of file";
  absl::ConsumePrefix(&msg, absl::StrCat(path_, ": "));  // zlib repeats the path.
  return absl::StrCat("zlib: ", msg);
}

absl::Status GzReader::ReadExact(absl::Span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    unsigned want = static_cast<unsigned>(std::min<size_t>(out.size() - done, kChunkBytes));
    int got = gzread(file_, out.data() + done, want);
    if (got < 0) {
      return Error(absl::StrFormat("corrupt data at offset %d (%s)", offset_, ZlibMessage()));
    }
    if (got == 0 && announced_size_ >= 0) {
      return Error(absl::StrFormat("short read at offset %d: the header announces %d bytes (%s)",
                                   offset_, announced_size_, ZlibMessage()));
    }
    if (got == 0) {
      return Error(absl::StrFormat("short read at offset %d: expected %d more bytes (%s)", offset_,
                                   out.size() - done, ZlibMessage()));
    }
    done += got;
    offset_ += got;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> GzReader::ReadBigEndian32() {
  uint8_t b[4];
  RETURN_IF_ERROR(ReadExact(absl::MakeSpan(b, 4)));
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

absl::Status GzReader::ExpectEnd() {
  uint8_t extra;
  int got = gzread(file_, &extra, 1);
  if (got > 0) {
    return Error(absl::StrFormat("trailing data at offset %d: the header announces %d bytes",
                                 offset_, offset_));
  }
  if (got < 0) {  // Typically a gzip CRC or length mismatch in the trailer.
    return Error(absl::StrFormat("corrupt data at offset %d (%s)", offset_, ZlibMessage()));
  }
  return absl::OkStatus();
}

// Reads an idx header with `expected_magic` and returns its dimensions.
absl::StatusOr<std::vector<int64_t>> ReadHeader(GzReader& in, uint32_t expected_magic) {
  ASSIGN_OR_RETURN(uint32_t magic, in.ReadBigEndian32());
  if (magic != expected_magic) {
    return in.Error(absl::StrFormat(
        "bad magic 0x%08x at offset 0, expected 0x%08x (unsigned-byte idx with %d dims)", magic,
        expected_magic, expected_magic & 0xff));
  }
  std::vector<int64_t> dims;
  int64_t elements = 1;
  for (uint32_t i = 0; i < (expected_magic & 0xff); ++i) {
    ASSIGN_OR_RETURN(uint32_t d, in.ReadBigEndian32());
    dims.push_back(d);
    elements = (d != 0 && elements > kMaxElements / d) ? kMaxElements + 1 : elements * d;
  }
  if (elements > kMaxElements) {
    return in.Error(absl::StrCat("implausible dimensions [", absl::StrJoin(dims, ","),
                                 "] in the header at offset 4"));
  }
  return dims;
}

// Reads `count` bytes in chunks, so a corrupt header claiming a huge size
// fails with a short read instead of a huge allocation.
absl::StatusOr<std::vector<uint8_t>> ReadBody(GzReader& in, int64_t count) {
  in.set_announced_size(in.offset() + count);
  std::vector<uint8_t> data;
  while (static_cast<int64_t>(data.size()) < count) {
    size_t start = data.size();
    data.resize(std::min<int64_t>(count, start + 16 * kChunkBytes));
    RETURN_IF_ERROR(in.ReadExact(absl::MakeSpan(data).subspan(start)));
  }
  RETURN_IF_ERROR(in.ExpectEnd());
  return data;
}

}  // namespace

absl::StatusOr<IdxImages> ReadIdxImages(const std::string& path) {
  ASSIGN_OR_RETURN(auto in, GzReader::Open(path));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadHeader(*in, kIdxImagesMagic));
  IdxImages images;
  images.count = dims[0];
  images.rows = dims[1];
  images.cols = dims[2];
  ASSIGN_OR_RETURN(images.pixels, ReadBody(*in, dims[0] * dims[1] * dims[2]));
  return images;
}

absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path) {
  ASSIGN_OR_RETURN(auto in, GzReader::Open(path));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadHeader(*in, kIdxLabelsMagic));
  return ReadBody(*in, dims[0]);
}

absl::StatusOr<IdxExamples> ReadIdxExamples(const std::string& images_path,
                                            const std::string& labels_path) {
  IdxExamples ex;
  ASSIGN_OR_RETURN(ex.images, ReadIdxImages(images_path));
  ASSIGN_OR_RETURN(ex.labels, ReadIdxLabels(labels_path));
  if (static_cast<int64_t>(ex.labels.size()) != ex.images.count) {
    return absl::DataLossError(absl::StrFormat(
        "[ReadIdx] count mismatch: %s holds %d images (header at offset 4) but %s holds %d "
        "labels (header at offset 4)",
        images_path, ex.images.count, labels_path, ex.labels.size()));
  }
  return ex;
}

}  // namespace dflow
