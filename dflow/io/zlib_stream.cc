#include "dflow/io/zlib_stream.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"

namespace dflow::io {
namespace {

constexpr size_t kChunkBytes = 256 << 10;
// zlib counts in 32-bit units: larger reads and writes go in slices.
constexpr size_t kMaxSlice = size_t{1} << 30;

int WindowBits(ZlibFormat format) {
  return format == ZlibFormat::kGzip ? MAX_WBITS + 16 : MAX_WBITS;
}

const char* FormatName(ZlibFormat format) { return format == ZlibFormat::kGzip ? "GZIP" : "ZLIB"; }

}  // namespace

absl::StatusOr<size_t> FileInputStream::Read(size_t n, char* dst) {
  n = std::min<uint64_t>(n, file_->size() - offset_);
  RETURN_IF_ERROR(file_->Read(offset_, n, dst));
  offset_ += n;
  return n;
}

ZlibInputStream::ZlibInputStream(std::unique_ptr<RandomAccessFile> file, ZlibFormat format)
    : file_(std::move(file)), format_(format), z_(std::make_unique<z_stream_s>()) {}

ZlibInputStream::~ZlibInputStream() {
  if (initialized_) inflateEnd(z_.get());
}

absl::Status ZlibInputStream::Init() {
  *z_ = z_stream_s{};
  if (inflateInit2(z_.get(), WindowBits(format_)) != Z_OK) {
    return absl::ResourceExhaustedError(
        absl::StrCat("could not start inflating '", path(), "': ", z_->msg ? z_->msg : ""));
  }
  initialized_ = true;
  return absl::OkStatus();
}

absl::Status ZlibInputStream::FillInput() {
  const uint64_t n = std::min<uint64_t>(kChunkBytes, file_->size() - file_offset_);
  in_.resize(n);
  RETURN_IF_ERROR(file_->Read(file_offset_, n, in_.data()));
  file_offset_ += n;
  z_->next_in = reinterpret_cast<Bytef*>(in_.data());
  z_->avail_in = static_cast<uInt>(n);
  return absl::OkStatus();
}

absl::Status ZlibInputStream::Corrupt(absl::string_view what) const {
  const uint64_t at = file_offset_ - z_->avail_in;
  return absl::DataLossError(absl::StrCat(FormatName(format_), " file '", path(),
                                          "' is corrupt at compressed offset ", at, ": ", what));
}

absl::StatusOr<size_t> ZlibInputStream::Read(size_t n, char* dst) {
  if (!initialized_) RETURN_IF_ERROR(Init());
  size_t done = 0;
  while (done < n) {
    if (z_->avail_in == 0) {
      if (file_offset_ >= file_->size()) {
        if (stream_end_ || file_->size() == 0) break;
        return Corrupt("the compressed stream ends early (truncated file)");
      }
      RETURN_IF_ERROR(FillInput());
    }
    if (stream_end_) {  // more bytes after a finished stream: the next member
      inflateReset(z_.get());
      stream_end_ = false;
    }
    const size_t slice = std::min(n - done, kMaxSlice);
    z_->next_out = reinterpret_cast<Bytef*>(dst + done);
    z_->avail_out = static_cast<uInt>(slice);
    const int r = inflate(z_.get(), Z_NO_FLUSH);
    done += slice - z_->avail_out;
    if (r == Z_STREAM_END) {
      stream_end_ = true;
    } else if (r != Z_OK) {
      return Corrupt(z_->msg != nullptr ? z_->msg : absl::StrCat("inflate returned ", r));
    }
  }
  return done;
}

ZlibOutputStream::ZlibOutputStream(WritableFile* file, ZlibFormat format)
    : file_(file), z_(std::make_unique<z_stream_s>()) {
  *z_ = z_stream_s{};
  // TensorFlow's defaults (ZlibCompressionOptions): level 6, memory level 9.
  if (deflateInit2(z_.get(), Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(format), 9,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    init_ = absl::ResourceExhaustedError(
        absl::StrCat("could not start deflating '", file->path(), "'"));
  }
}

ZlibOutputStream::~ZlibOutputStream() {
  if (init_.ok()) deflateEnd(z_.get());
}

absl::Status ZlibOutputStream::Deflate(absl::string_view data, int flush) {
  RETURN_IF_ERROR(init_);
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("compressed file '", file_->path(), "' is already finished"));
  }
  std::string out(kChunkBytes, '\0');
  size_t pos = 0;
  while (true) {
    const size_t slice = std::min(data.size() - pos, kMaxSlice);
    z_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + pos));
    z_->avail_in = static_cast<uInt>(slice);
    const bool last = pos + slice == data.size();
    const int mode = last ? flush : Z_NO_FLUSH;
    int r;
    do {
      z_->next_out = reinterpret_cast<Bytef*>(out.data());
      z_->avail_out = static_cast<uInt>(out.size());
      r = deflate(z_.get(), mode);
      if (r == Z_STREAM_ERROR) {
        return absl::InternalError(absl::StrCat("deflate failed for '", file_->path(), "'"));
      }
      RETURN_IF_ERROR(file_->Append(absl::string_view(out.data(), out.size() - z_->avail_out)));
    } while (z_->avail_out == 0 || (mode == Z_FINISH && r != Z_STREAM_END));
    pos += slice;
    if (last) return absl::OkStatus();
  }
}

absl::Status ZlibOutputStream::Append(absl::string_view data) {
  if (data.empty()) return absl::OkStatus();
  return Deflate(data, Z_NO_FLUSH);
}

absl::Status ZlibOutputStream::Finish() {
  RETURN_IF_ERROR(Deflate({}, Z_FINISH));
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace dflow::io
