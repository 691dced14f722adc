#include "dflow/io/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dflow::io {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

absl::Status OsError(absl::string_view what, const std::string& path, int err) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS: return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return absl::ResourceExhaustedError(message);
    case EEXIST: return absl::AlreadyExistsError(message);
    default: return absl::UnavailableError(message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<WritableFile>> WritableFile::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("cannot create", path, errno);
  return std::unique_ptr<WritableFile>(new WritableFile(path, fd));
}

WritableFile::~WritableFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status WritableFile::WriteAll(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) return OsError("cannot write", path_, errno);
    p += done;
    n -= static_cast<size_t>(done);
  }
  return absl::OkStatus();
}

absl::Status WritableFile::Flush() {
  absl::Status s = WriteAll(buffer_.data(), buffer_.size());
  buffer_.clear();
  return s;
}

absl::Status WritableFile::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  size_ += data.size();
  if (buffer_.size() + data.size() > kBufferBytes) {
    if (absl::Status s = Flush(); !s.ok()) return s;
    if (data.size() >= kBufferBytes) return WriteAll(data.data(), data.size());  // No copy.
  }
  buffer_.append(data.data(), data.size());
  return absl::OkStatus();
}

absl::Status WritableFile::Close() {
  if (fd_ < 0) return absl::OkStatus();
  absl::Status s = Flush();
  if (s.ok() && ::fsync(fd_) != 0) s = OsError("cannot sync", path_, errno);
  if (::close(fd_) != 0 && s.ok()) s = OsError("cannot close", path_, errno);
  fd_ = -1;
  return s;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return OsError("cannot stat", path, err);
  }
  return std::unique_ptr<RandomAccessFile>(
      new RandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

RandomAccessFile::~RandomAccessFile() { ::close(fd_); }

absl::Status RandomAccessFile::Read(uint64_t offset, uint64_t n, char* dst) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::DataLossError(absl::StrCat(path_, " is truncated: ", n, " bytes at offset ",
                                            offset, " run past its end (", size_, " bytes)"));
  }
  while (n > 0) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return OsError("cannot read", path_, errno);
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(path_, " ended early at offset ", offset));
    }
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return OsError("cannot rename", absl::StrCat(from, " to ", to), errno);
  }
  return absl::OkStatus();
}

absl::Status DeleteFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return OsError("cannot delete", path, errno);
  }
  return absl::OkStatus();
}

absl::Status DeleteDir(const std::string& path) {
  if (::rmdir(path.c_str()) != 0) return OsError("cannot remove directory", path, errno);
  return absl::OkStatus();
}

absl::Status CreateDirs(const std::string& path) {
  if (path.empty() || FileExists(path)) return absl::OkStatus();
  if (absl::Status s = CreateDirs(Dirname(path)); !s.ok()) return s;
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return OsError("cannot create directory", path, errno);
  }
  return absl::OkStatus();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string Dirname(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return "";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return OsError("cannot list", path, errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> files(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    return absl::InternalError(absl::StrCat("cannot match '", pattern, "'"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat(".tempstate%d-%d", ::getpid(), counter.fetch_add(1));
}

}  // namespace dflow::io
