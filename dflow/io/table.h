// A sorted key -> value table in LevelDB's table format, the format of
// TensorFlow's checkpoint index (PREFIX.index). Written as TensorFlow's
// bundle writer does: data blocks of ~256 KiB with a restart point every 16
// keys, an index block with one per key, an empty metaindex block, no
// compression, a masked crc32c after every block, and the 48-byte footer.
// Layout in docs/formats.md.
//
//   ASSIGN_OR_RETURN(auto w, TableWriter::Create(path));
//   RETURN_IF_ERROR(w->Add("", header));   // Keys in increasing byte order.
//   RETURN_IF_ERROR(w->Finish());
//   ASSIGN_OR_RETURN(std::vector<TableEntry> entries, ReadTable(path));
#ifndef DFLOW_IO_TABLE_H_
#define DFLOW_IO_TABLE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/io/file.h"

namespace dflow::io {

class TableWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TableWriter>> Create(const std::string& path);
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // REQUIRES: `key` sorts after every key added before (bytewise); a key out
  // of order is INVALID_ARGUMENT and nothing is added.
  absl::Status Add(absl::string_view key, absl::string_view value);
  // Writes the last data block, the metaindex and index blocks and the
  // footer, then syncs and closes the file.
  absl::Status Finish();

 private:
  explicit TableWriter(std::unique_ptr<WritableFile> file);
  absl::Status FlushDataBlock();
  // Appends `contents` and its trailer; returns its handle (offset, size).
  absl::StatusOr<std::string> WriteBlock(const std::string& contents);

  class Block;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<Block> data_;
  std::unique_ptr<Block> index_;
  std::string last_key_;
  bool any_key_ = false;
};

struct TableEntry {
  std::string key;
  std::string value;
};

// Every entry of the table at `path`, in key order, each block's checksum
// verified. DATA_LOSS naming the file for a bad magic, a bad checksum, a
// truncated file or a malformed block; NOT_FOUND when the file is missing.
// Reads the whole table: checkpoint indexes hold one small entry a tensor.
absl::StatusOr<std::vector<TableEntry>> ReadTable(const std::string& path);

}  // namespace dflow::io

#endif  // DFLOW_IO_TABLE_H_
