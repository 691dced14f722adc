// Plain POSIX files with errors that name the path: the only file access of
// checkpoints. A WritableFile is used by one thread at a time.
#ifndef DFLOW_IO_FILE_H_
#define DFLOW_IO_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflow::io {

// A file written front to back through a buffer.
class WritableFile {
 public:
  // Creates (or truncates) `path`. Fails naming the path and the OS error.
  static absl::StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path);
  ~WritableFile();  // Closes without syncing if Close was not called.
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  absl::Status Append(absl::string_view data);
  // Flushes, fsyncs (so a rename after it publishes complete bytes) and
  // closes. A full disk or an I/O error is reported here or by Append.
  absl::Status Close();
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Flush();
  absl::Status WriteAll(const char* p, size_t n);

  std::string path_;
  int fd_;
  uint64_t size_ = 0;
  std::string buffer_;
};

// A file read at offsets (pread); Read may run on several threads at once.
class RandomAccessFile {
 public:
  // NOT_FOUND naming the path when it does not exist.
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes at `offset` into `dst`; DATA_LOSS naming the
  // path when the file is shorter.
  absl::Status Read(uint64_t offset, uint64_t n, char* dst) const;

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_;
  uint64_t size_;
};

// Renames atomically (same file system), replacing `to`.
absl::Status RenameFile(const std::string& from, const std::string& to);
// OK when `path` is gone, including when it never existed.
absl::Status DeleteFile(const std::string& path);
// Removes an empty directory; fails (and keeps it) when it is not empty.
absl::Status DeleteDir(const std::string& path);
// Creates `path` and its missing parents.
absl::Status CreateDirs(const std::string& path);
bool FileExists(const std::string& path);
// The directory part of a path ("a/b/c" -> "a/b", "c" -> "").
std::string Dirname(absl::string_view path);
// Names of the entries of a directory (not "." or "..").
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);
// The paths matching a shell glob `pattern` ("dir/train-*"), sorted; empty
// when none does. Internal naming the pattern when the match itself fails.
absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern);
// A name unique to this process and call, for temporary files.
std::string TempSuffix();

}  // namespace dflow::io

#endif  // DFLOW_IO_FILE_H_
