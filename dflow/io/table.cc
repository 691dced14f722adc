#include "dflow/io/table.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "dflow/framework/coding.h"
#include "dflow/io/crc32c.h"

namespace dflow::io {
namespace {

constexpr size_t kBlockBytes = 262144;        // TensorFlow's table::Options.
constexpr int kDataRestartInterval = 16;
constexpr size_t kTrailerBytes = 5;           // Compression type + masked crc32c.
constexpr size_t kFooterBytes = 48;           // Two handles padded to 40, magic.
constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr char kNoCompression = 0;

size_t SharedPrefix(absl::string_view a, absl::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

// Builds one block: entries with prefix-compressed keys, then the offsets of
// the restart points (entries stored with their whole key) and their count.
class TableWriter::Block {
 public:
  explicit Block(int restart_interval) : restart_interval_(restart_interval) {}

  void Add(absl::string_view key, absl::string_view value) {
    size_t shared = 0;
    if (since_restart_ < restart_interval_) {
      shared = SharedPrefix(last_key_, key);
    } else {
      restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
      since_restart_ = 0;
    }
    PutVarint32(&buffer_, static_cast<uint32_t>(shared));
    PutVarint32(&buffer_, static_cast<uint32_t>(key.size() - shared));
    PutVarint32(&buffer_, static_cast<uint32_t>(value.size()));
    buffer_.append(key.data() + shared, key.size() - shared);
    buffer_.append(value.data(), value.size());
    last_key_.assign(key.data(), key.size());
    ++since_restart_;
    ++entries_;
  }

  // The finished block; the builder is empty again after.
  std::string Finish() {
    std::string out = std::move(buffer_);
    for (uint32_t r : restarts_) PutFixed32(&out, r);
    PutFixed32(&out, static_cast<uint32_t>(restarts_.size()));
    *this = Block(restart_interval_);
    return out;
  }

  size_t EstimatedBytes() const { return buffer_.size() + 4 * (restarts_.size() + 1); }
  bool empty() const { return entries_ == 0; }

 private:
  int restart_interval_;
  std::string buffer_;
  std::vector<uint32_t> restarts_{0};
  int since_restart_ = 0;
  int entries_ = 0;
  std::string last_key_;
};

TableWriter::TableWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
TableWriter::~TableWriter() = default;

absl::StatusOr<std::unique_ptr<TableWriter>> TableWriter::Create(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, WritableFile::Create(path));
  std::unique_ptr<TableWriter> w(new TableWriter(std::move(file)));
  w->data_ = std::make_unique<Block>(kDataRestartInterval);
  w->index_ = std::make_unique<Block>(1);
  return w;
}

absl::Status TableWriter::Add(absl::string_view key, absl::string_view value) {
  if (any_key_ && key <= absl::string_view(last_key_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[TableWriter] ", file_->path(), ": key '", absl::CEscape(key),
        "' does not sort after '", absl::CEscape(last_key_), "'"));
  }
  data_->Add(key, value);
  last_key_.assign(key.data(), key.size());
  any_key_ = true;
  if (data_->EstimatedBytes() >= kBlockBytes) return FlushDataBlock();
  return absl::OkStatus();
}

// The index entry's key is the block's last key: at least every key in the
// block and less than every key after it, which is all a reader needs.
absl::Status TableWriter::FlushDataBlock() {
  if (data_->empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string handle, WriteBlock(data_->Finish()));
  index_->Add(last_key_, handle);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TableWriter::WriteBlock(const std::string& contents) {
  std::string handle;
  PutVarint64(&handle, file_->size());
  PutVarint64(&handle, contents.size());
  char trailer[kTrailerBytes];
  trailer[0] = kNoCompression;
  uint32_t crc = crc32c::Extend(crc32c::Value(contents.data(), contents.size()), trailer, 1);
  EncodeFixed32(trailer + 1, crc32c::Mask(crc));
  RETURN_IF_ERROR(file_->Append(contents));
  RETURN_IF_ERROR(file_->Append(absl::string_view(trailer, kTrailerBytes)));
  return handle;
}

absl::Status TableWriter::Finish() {
  RETURN_IF_ERROR(FlushDataBlock());
  ASSIGN_OR_RETURN(std::string metaindex, WriteBlock(Block(1).Finish()));
  ASSIGN_OR_RETURN(std::string index, WriteBlock(index_->Finish()));
  std::string footer = metaindex + index;
  footer.resize(kFooterBytes - 8, '\0');
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic & 0xffffffffu));
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic >> 32));
  RETURN_IF_ERROR(file_->Append(footer));
  return file_->Close();
}

// --- reading ---------------------------------------------------------------------------

namespace {

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

absl::Status Corrupt(const RandomAccessFile& f, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("[ReadTable] ", f.path(), " is not a valid table: ", what));
}

bool DecodeHandle(absl::string_view* in, BlockHandle* h) {
  return GetVarint64(in, &h->offset) && GetVarint64(in, &h->size);
}

// Reads a block and checks its trailer; the handle is checked against the
// file's size before anything is allocated.
absl::StatusOr<std::string> ReadBlock(const RandomAccessFile& f, const BlockHandle& h,
                                      absl::string_view what) {
  if (h.offset > f.size() || h.size > f.size() - h.offset ||
      kTrailerBytes > f.size() - h.offset - h.size) {
    return Corrupt(f, absl::StrCat(what, " block (", h.size, " bytes at ", h.offset,
                                   ") runs past the end of the file (", f.size(), " bytes)"));
  }
  std::string block(h.size + kTrailerBytes, '\0');
  RETURN_IF_ERROR(f.Read(h.offset, block.size(), block.data()));
  const char* trailer = block.data() + h.size;
  const uint32_t stored = crc32c::Unmask(DecodeFixed32(trailer + 1));
  const uint32_t actual = crc32c::Value(block.data(), h.size + 1);
  if (stored != actual) {
    return Corrupt(f, absl::StrCat("checksum mismatch in the ", what, " block at offset ",
                                   h.offset));
  }
  if (trailer[0] != kNoCompression) {
    return absl::UnimplementedError(absl::StrCat(
        "[ReadTable] ", f.path(), ": compressed blocks (type ", int(trailer[0]),
        ") are not supported; TensorFlow's checkpoints are uncompressed"));
  }
  block.resize(h.size);
  return block;
}

// Appends the entries of one block to `out`, each key after the last one.
absl::Status ParseBlock(const RandomAccessFile& f, absl::string_view block,
                        absl::string_view what, std::vector<TableEntry>* out) {
  if (block.size() < 4) return Corrupt(f, absl::StrCat(what, " block is too short"));
  const uint64_t restarts = DecodeFixed32(block.data() + block.size() - 4);
  if (restarts > (block.size() - 4) / 4) {
    return Corrupt(f, absl::StrCat(what, " block claims ", restarts, " restart points"));
  }
  absl::string_view entries = block.substr(0, block.size() - 4 - 4 * restarts);
  std::string key;
  while (!entries.empty()) {
    uint32_t shared, unshared, value_bytes;
    if (!GetVarint32(&entries, &shared) || !GetVarint32(&entries, &unshared) ||
        !GetVarint32(&entries, &value_bytes) || shared > key.size() ||
        uint64_t{unshared} + value_bytes > entries.size()) {
      return Corrupt(f, absl::StrCat("malformed entry in the ", what, " block"));
    }
    key.resize(shared);
    key.append(entries.data(), unshared);
    if (!out->empty() && key <= out->back().key) {
      return Corrupt(f, absl::StrCat("keys out of order in the ", what, " block"));
    }
    out->push_back({key, std::string(entries.substr(unshared, value_bytes))});
    entries.remove_prefix(uint64_t{unshared} + value_bytes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TableEntry>> ReadTable(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path));
  if (f->size() < kFooterBytes) {
    return Corrupt(*f, absl::StrCat("it has ", f->size(), " bytes, less than a footer"));
  }
  char footer[kFooterBytes];
  RETURN_IF_ERROR(f->Read(f->size() - kFooterBytes, kFooterBytes, footer));
  const uint64_t magic = DecodeFixed32(footer + 40) |
                         (uint64_t{DecodeFixed32(footer + 44)} << 32);
  if (magic != kTableMagic) return Corrupt(*f, "bad magic number in the footer");
  absl::string_view handles(footer, kFooterBytes - 8);
  BlockHandle metaindex, index;
  if (!DecodeHandle(&handles, &metaindex) || !DecodeHandle(&handles, &index)) {
    return Corrupt(*f, "bad block handles in the footer");
  }
  ASSIGN_OR_RETURN(std::string index_block, ReadBlock(*f, index, "index"));
  std::vector<TableEntry> index_entries;
  RETURN_IF_ERROR(ParseBlock(*f, index_block, "index", &index_entries));
  std::vector<TableEntry> entries;
  for (const TableEntry& e : index_entries) {
    absl::string_view v = e.value;
    BlockHandle h;
    if (!DecodeHandle(&v, &h)) return Corrupt(*f, "bad block handle in the index");
    ASSIGN_OR_RETURN(std::string block, ReadBlock(*f, h, "data"));
    RETURN_IF_ERROR(ParseBlock(*f, block, "data", &entries));
  }
  return entries;
}

}  // namespace dflow::io
