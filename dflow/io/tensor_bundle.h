// TensorFlow's checkpoint format ("V2", a tensor bundle), byte-compatible:
// PREFIX.index (a table: header under "", then one BundleEntryProto per
// tensor) and PREFIX.data-NNNNN-of-MMMMM (the tensors' bytes). Layout in
// docs/formats.md.
//
//   ASSIGN_OR_RETURN(auto w, BundleWriter::Create("/ckpt/model.ckpt-30"));
//   RETURN_IF_ERROR(w->Add("dense/kernel", kernel));
//   RETURN_IF_ERROR(w->Finish());        // Nothing is visible before this.
//   ASSIGN_OR_RETURN(auto r, BundleReader::Open("/ckpt/model.ckpt-30"));
//   ASSIGN_OR_RETURN(Tensor k, r->Read("dense/kernel"));
#ifndef DFLOW_IO_TENSOR_BUNDLE_H_
#define DFLOW_IO_TENSOR_BUNDLE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dflow/framework/tensor.h"
#include "dflow/io/file.h"
#include "dflow/io/tensor_slice.h"
#include "dflow/proto/tensor_bundle.pb.h"

namespace dflow::io {

// The bundle format version dflow writes and the newest it reads.
inline constexpr int kBundleVersion = 1;

std::string BundleIndexFilename(absl::string_view prefix);  // PREFIX.index
std::string BundleDataFilename(absl::string_view prefix, int shard, int num_shards);

// Writes one bundle with one data file. Not thread-safe.
class BundleWriter {
 public:
  // Creates the prefix's directory and a temporary data file beside it.
  // Fails naming the path when the directory cannot be written.
  static absl::StatusOr<std::unique_ptr<BundleWriter>> Create(const std::string& prefix);
  // Removes the temporary files unless Finish succeeded.
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Adds a whole tensor under `key`. INVALID_ARGUMENT for a key added before
  // or an unsupported dtype (resource handles are not saved). After a failed
  // Add every later call, Finish included, fails with its error.
  absl::Status Add(const std::string& key, const Tensor& tensor);
  // Adds `slice` (of a tensor of `full_shape` named `key`), holding `tensor`.
  // A slice covering the whole tensor is stored as Add would.
  absl::Status AddSlice(const std::string& key, const TensorShape& full_shape,
                        const TensorSlice& slice, const Tensor& tensor);
  // Syncs the data file, renames it into place, then writes the index under
  // a temporary name and renames it last: a bundle whose index exists is
  // complete. On failure nothing is left under the prefix.
  absl::Status Finish();

 private:
  BundleWriter(std::string prefix, std::string data_temp, std::unique_ptr<WritableFile> data)
      : prefix_(std::move(prefix)), data_temp_(std::move(data_temp)), data_(std::move(data)) {}
  absl::Status WriteEntry(const std::string& key, const Tensor& tensor);
  absl::Status AddSliceEntries(const std::string& key, const TensorShape& full_shape,
                               const TensorSlice& slice, const Tensor& tensor);

  std::string prefix_;
  std::string data_temp_;
  std::unique_ptr<WritableFile> data_;
  std::map<std::string, tensorflow::BundleEntryProto> entries_;
  bool finished_ = false;
  absl::Status status_;  // The first failed Add: Finish then fails with it.
};

// Reads a bundle. Thread-compatible (one reader per thread, or a lock).
class BundleReader {
 public:
  // Reads and checks the index. NOT_FOUND when PREFIX.index is missing;
  // DATA_LOSS naming the file when it is corrupt; FAILED_PRECONDITION with
  // the version when a newer format wrote it.
  static absl::StatusOr<std::unique_ptr<BundleReader>> Open(const std::string& prefix);

  // Every tensor's entry by name, without the header and slice entries
  // (what tf.train.list_variables shows).
  std::map<std::string, tensorflow::BundleEntryProto> Tensors() const;
  // NOT_FOUND naming the key and the checkpoint.
  absl::StatusOr<tensorflow::BundleEntryProto> Entry(const std::string& key) const;
  // The whole tensor under `key`, a partitioned one assembled from its
  // slices. DATA_LOSS naming the file and tensor for a bad checksum or a
  // truncated file; NOT_FOUND naming a missing data file.
  absl::StatusOr<Tensor> Read(const std::string& key);
  // The part `slice` of the tensor under `key`, from whichever stored
  // slices overlap it; INVALID_ARGUMENT when they do not cover it.
  absl::StatusOr<Tensor> ReadSlice(const std::string& key, const TensorSlice& slice);

  const std::string& prefix() const { return prefix_; }
  int num_shards() const { return num_shards_; }

 private:
  explicit BundleReader(std::string prefix) : prefix_(std::move(prefix)) {}
  // The bytes of a stored (unpartitioned or slice) entry as a tensor.
  absl::StatusOr<Tensor> ReadStored(const std::string& key,
                                    const tensorflow::BundleEntryProto& entry);
  absl::StatusOr<const RandomAccessFile*> DataFile(int shard);

  std::string prefix_;
  int num_shards_ = 1;
  std::map<std::string, tensorflow::BundleEntryProto> entries_;  // Every key but "".
  std::vector<std::unique_ptr<RandomAccessFile>> data_files_;    // Opened on first use.
};

// Merges the bundles at `prefixes` (e.g. one per parameter server) into one
// at `merged_prefix`, as MergeV2Checkpoints: data files are renamed, never
// copied; the merged index is written last (temporary name, then rename);
// the source indexes are deleted, and with `delete_old_dirs` their
// directories too when empty. With `allow_missing_files` a prefix without
// an index is skipped (at least one must exist).
absl::Status MergeBundles(const std::vector<std::string>& prefixes,
                          const std::string& merged_prefix, bool delete_old_dirs,
                          bool allow_missing_files);

}  // namespace dflow::io

#endif  // DFLOW_IO_TENSOR_BUNDLE_H_
