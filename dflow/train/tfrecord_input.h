// Training input from TFRecord files of tf.train.Example, read by the graph
// on the worker that trains (tf.data ops), so a step feeds nothing through
// the master: what `dflow data convert --to tfrecord` writes and
// `dflow train --data tfrecord:GLOB` reads.
//
// The records are TensorFlow's classic MNIST conversion: each a
// tf.train.Example with "image_raw" (bytes: the 784 pixels, one uint8 each,
// row major) and "label" (int64), readable by TensorFlow's
// tf.io.parse_single_example with those two FixedLenFeatures.
//
//   RETURN_IF_ERROR(WriteTFRecordShards(train, "/data/fmnist/train", 4));  // train-0000i-of-00004
//   ASSIGN_OR_RETURN(auto files, MatchFiles("/data/fmnist/train-*"));
//   ASSIGN_OR_RETURN(GraphBatches in, TFRecordBatches(scope, {.files = files, .batch_size = 128}));
//   // in.features float [B, 784] in [0,1], in.labels int32 [B]; run in.init once
//   // (the iterator, a resource of the worker, outlives a recreated session).
#ifndef DFLOW_TRAIN_TFRECORD_INPUT_H_
#define DFLOW_TRAIN_TFRECORD_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/scope.h"
#include "dflow/train/dataset.h"

namespace dflow {

// One example as tf.train.Example bytes: pixels of `features` ([784] in
// [0,1], multiples of 1/255 as Fashion-MNIST's are) and `label`.
std::string EncodeImageExample(const float* features, int64_t dim, int64_t label);

// Writes `data` as `shards` files PREFIX-0000i-of-0000N (examples dealt
// round-robin, in order), each written to a temporary name and renamed.
// InvalidArgument for shards < 1; the file system's error naming the file.
absl::Status WriteTFRecordShards(const Dataset& data, const std::string& prefix, int shards);

// The files matching a glob pattern, sorted; NotFound naming the pattern
// when none does.
absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern);

// Records in `files` (their framing is checked: DataLoss naming the file).
absl::StatusOr<int64_t> CountRecords(const std::vector<std::string>& files);

struct TFRecordInputOptions {
  std::vector<std::string> files;
  int64_t batch_size = 128;
  int64_t input_dim = 784;
  int64_t seed = 1;
  // This reader's share: record i of the files goes to shard i % num_shards.
  int64_t num_shards = 1;
  int64_t shard_index = 0;
  int64_t shuffle_buffer = 10000;  // Reshuffled every epoch.
};

struct GraphBatches {
  Output features;      // float [batch_size, input_dim]
  Output labels;        // int32 [batch_size]
  Operation init;       // Makes the iterator (from the first batch, or fed:)
  Output skip_batches;  // int64 scalar, 0 unless fed to `init`: batches to skip.
};

// TFRecordDataset(files) -> Shard -> Shuffle -> Repeat -> Skip -> Batch
// (dropping a short last batch) -> Prefetch, its iterator, and the parse of
// each batch (ParseExampleV2, DecodeRaw, scaling to [0,1]); every node on
// the scope's device. Errors of the records (a corrupt file, a malformed
// Example) end the step that reads them, naming the file or record.
absl::StatusOr<GraphBatches> TFRecordBatches(const Scope& scope, const TFRecordInputOptions& o);

}  // namespace dflow

#endif  // DFLOW_TRAIN_TFRECORD_INPUT_H_
