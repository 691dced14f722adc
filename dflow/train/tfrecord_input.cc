#include "dflow/train/tfrecord_input.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dflow/client/op_builder.h"
#include "dflow/client/ops.h"
#include "dflow/framework/coding.h"
#include "dflow/framework/status.h"
#include "dflow/io/file.h"
#include "dflow/io/tfrecord.h"

namespace dflow {

namespace {

// Protobuf wire format: a length-delimited field `number` holding `bytes`.
void PutBytesField(std::string* out, uint32_t number, absl::string_view bytes) {
  PutVarint32(out, (number << 3) | 2);
  PutVarint64(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

// Features.feature map entry {key = 1, value = 2 (a Feature)}.
void PutFeature(std::string* features, absl::string_view key, const std::string& feature) {
  std::string entry;
  PutBytesField(&entry, 1, key);
  PutBytesField(&entry, 2, feature);
  PutBytesField(features, 1, entry);
}

tensorflow::AttrValue Types(std::vector<DataType> types) {
  tensorflow::AttrValue v;
  for (DataType t : types) v.mutable_list()->add_type(t);
  return v;
}

tensorflow::AttrValue Shapes(const std::vector<std::vector<int64_t>>& shapes) {
  tensorflow::AttrValue v;
  for (const auto& dims : shapes) {
    tensorflow::TensorShapeProto* shape = v.mutable_list()->add_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
  }
  return v;
}

// A dataset transformation of `input` with `inputs` after it, yielding one
// string component of shape `shape`.
Output Transform(const Scope& s, const std::string& op, const Output& input,
                 const std::vector<Input>& inputs, const std::vector<int64_t>& shape) {
  OpBuilder b(s, op);
  b.Input(input);
  for (const Input& in : inputs) b.Input(in);
  return b.Attr("output_types", Types({DT_STRING})).Attr("output_shapes", Shapes({shape})).Finish();
}

}  // namespace

std::string EncodeImageExample(const float* features, int64_t dim, int64_t label) {
  std::string pixels(dim, '\0');
  for (int64_t i = 0; i < dim; ++i) {
    const float v = std::clamp(features[i], 0.0f, 1.0f);
    pixels[i] = static_cast<char>(static_cast<uint8_t>(std::lround(v * 255.0f)));
  }
  std::string bytes_list, image_feature;  // BytesList {value = 1}; Feature {bytes_list = 1}
  PutBytesField(&bytes_list, 1, pixels);
  PutBytesField(&image_feature, 1, bytes_list);
  std::string int64_list, label_feature;  // Int64List {value = 1, packed}; Feature {int64_list = 3}
  std::string packed;
  PutVarint64(&packed, static_cast<uint64_t>(label));
  PutBytesField(&int64_list, 1, packed);
  PutBytesField(&label_feature, 3, int64_list);
  std::string features_msg, example;  // Features {feature = 1}; Example {features = 1}
  PutFeature(&features_msg, "image_raw", image_feature);
  PutFeature(&features_msg, "label", label_feature);
  PutBytesField(&example, 1, features_msg);
  return example;
}

absl::Status WriteTFRecordShards(const Dataset& data, const std::string& prefix, int shards) {
  if (shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("[data] shards must be >= 1, got ", shards));
  }
  const int64_t dim = data.features().dim_size(1);
  const float* features = data.features().flat<float>().data();
  const int32_t* labels = data.labels().flat<int32_t>().data();
  for (int shard = 0; shard < shards; ++shard) {
    const std::string path = absl::StrFormat("%s-%05d-of-%05d", prefix, shard, shards);
    const std::string tmp = path + ".tmp";
    ASSIGN_OR_RETURN(std::unique_ptr<io::TFRecordWriter> w, io::TFRecordWriter::Create(tmp));
    for (int64_t i = shard; i < data.size(); i += shards) {
      RETURN_IF_ERROR(w->Write(EncodeImageExample(features + i * dim, dim, labels[i])));
    }
    RETURN_IF_ERROR(w->Close());
    RETURN_IF_ERROR(io::RenameFile(tmp, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, io::MatchFiles(pattern));
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("[data] no file matches '", pattern, "'"));
  }
  return files;
}

absl::StatusOr<int64_t> CountRecords(const std::vector<std::string>& files) {
  int64_t n = 0;
  std::string record;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::unique_ptr<io::TFRecordReader> r, io::TFRecordReader::Open(file));
    for (;;) {
      absl::Status s = r->ReadRecord(&record);
      if (absl::IsOutOfRange(s)) break;
      RETURN_IF_ERROR(s);
      ++n;
    }
  }
  return n;
}

namespace {

// TFRecordDataset(o.files) -> Shard -> Shuffle -> Repeat -> Skip
// (`*skip_batches` batches: a placeholder, 0 unless fed) -> Batch ->
// Prefetch: batches of serialized Examples.
Output BatchedRecords(const Scope& s, const TFRecordInputOptions& o, Output* skip_batches) {
  Tensor files(DT_STRING, TensorShape({static_cast<int64_t>(o.files.size())}));
  for (size_t i = 0; i < o.files.size(); ++i) files.flat<std::string>()[i] = o.files[i];
  Output records = OpBuilder(s, "TFRecordDataset")
                       .Input(files)
                       .Input(Tensor::Scalar<std::string>(""))
                       .Input(Tensor::Scalar<int64_t>(256 << 10))
                       .Finish();
  Output ds = Transform(s, "ShardDataset", records,
                        {Tensor::Scalar<int64_t>(o.num_shards), Tensor::Scalar<int64_t>(o.shard_index)},
                        {});
  ds = Transform(s, "ShuffleDataset", ds,
                 {Tensor::Scalar<int64_t>(o.shuffle_buffer), Tensor::Scalar<int64_t>(o.seed),
                  Tensor::Scalar<int64_t>(o.shard_index)},
                 {});
  ds = Transform(s, "RepeatDataset", ds, {Tensor::Scalar<int64_t>(-1)}, {});
  *skip_batches = ops::PlaceholderWithDefault(s.WithOpName("skip_batches"),
                                              Tensor::Scalar<int64_t>(0), PartialShape({}));
  ds = Transform(s, "SkipDataset", ds,
                 {ops::Mul(s, *skip_batches, Tensor::Scalar<int64_t>(o.batch_size))}, {});
  ds = Transform(s, "BatchDatasetV2", ds,
                 {Tensor::Scalar<int64_t>(o.batch_size), Tensor::Scalar<bool>(true)},
                 {o.batch_size});
  return Transform(s, "PrefetchDataset", ds, {Tensor::Scalar<int64_t>(2)}, {o.batch_size});
}

// Each serialized Example's image (scaled to [0,1]) and label.
absl::Status ParseBatch(const Scope& s, const Output& serialized, const TFRecordInputOptions& o,
                        GraphBatches* out) {
  Tensor keys(DT_STRING, TensorShape({2}));
  keys.flat<std::string>()[0] = "image_raw";
  keys.flat<std::string>()[1] = "label";
  std::vector<Output> parsed =
      OpBuilder(s, "ParseExampleV2")
          .Input(serialized)
          .Input(Tensor(DT_STRING, TensorShape({0})))  // names
          .Input(Tensor(DT_STRING, TensorShape({0})))  // sparse_keys
          .Input(keys)                                 // dense_keys
          .Input(Tensor(DT_STRING, TensorShape({0})))  // ragged_keys
          .InputList({Tensor(DT_STRING, TensorShape({0})), Tensor(DT_INT64, TensorShape({0}))})
          .Attr("num_sparse", int64_t{0})
          .Attr("sparse_types", std::vector<DataType>{})
          .Attr("ragged_value_types", std::vector<DataType>{})
          .Attr("ragged_split_types", std::vector<DataType>{})
          .Attr("dense_shapes", Shapes({{}, {}}))
          .FinishAll();
  RETURN_IF_ERROR(s.status());
  if (parsed.size() != 2) {
    return absl::InternalError(absl::StrCat("ParseExampleV2 gave ", parsed.size(), " outputs, not 2"));
  }
  Output pixels = OpBuilder(s, "DecodeRaw")
                      .Input(parsed[0])
                      .Attr("out_type", DT_UINT8)
                      .Attr("little_endian", true)
                      .Finish();
  out->features = ops::Mul(s.WithOpName("features"),
                           ops::Reshape(s, ops::Cast(s, pixels, DT_FLOAT),
                                        Tensor::Vec<int64_t>({o.batch_size, o.input_dim})),
                           Tensor::Scalar(1.0f / 255.0f));
  out->labels = ops::Cast(s.WithOpName("labels"), parsed[1], DT_INT32);
  return s.status();
}

}  // namespace

absl::StatusOr<GraphBatches> TFRecordBatches(const Scope& scope, const TFRecordInputOptions& o) {
  if (o.files.empty() || o.batch_size < 1 || o.num_shards < 1 || o.shard_index < 0 ||
      o.shard_index >= o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[data] TFRecord input needs files, batch_size >= 1 and 0 <= shard_index < num_shards "
        "(got ", o.files.size(), " files, batch_size ", o.batch_size, ", shard ", o.shard_index,
        " of ", o.num_shards, ")"));
  }
  Scope s = scope.NewSubScope("input");
  GraphBatches out;
  const Output ds = BatchedRecords(s, o, &out.skip_batches);
  Output iterator = OpBuilder(s.WithOpName("iterator"), "IteratorV2")
                        .Attr("shared_name", std::string(""))
                        .Attr("container", std::string(""))
                        .Attr("output_types", Types({DT_STRING}))
                        .Attr("output_shapes", Shapes({{o.batch_size}}))
                        .Finish();
  out.init = OpBuilder(s.WithOpName("make_iterator"), "MakeIterator")
                 .Input(ds)
                 .Input(iterator)
                 .FinishOp();
  Output serialized = OpBuilder(s, "IteratorGetNext")
                          .Input(iterator)
                          .Attr("output_types", Types({DT_STRING}))
                          .Attr("output_shapes", Shapes({{o.batch_size}}))
                          .Finish();
  RETURN_IF_ERROR(ParseBatch(s, serialized, o, &out));
  return out;
}

}  // namespace dflow
