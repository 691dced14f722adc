// Ops that parse serialized tf.train.Example protos into tensors:
//
//   ParseExampleV2      a scalar or vector of Examples; dense, sparse and ragged
//                       features (what tf.io.parse_example and
//                       tf.io.parse_single_example emit)
//   ParseSingleExample  one Example; the keys are attrs
//   ParseExample        TensorFlow 1's batch op (GraphDefs exported before 2.1)
//
// The Examples are read from their wire bytes (example_wire.h): each
// requested feature's values go straight from the serialized record into the
// output tensor. Batches are split over the intra-op pool by example. Error
// texts follow TensorFlow's kernels and name the example (index, and its name
// where `names` gives one) and the feature.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/example_wire.h"

namespace dflow {
namespace {

using example_wire::FeatureList;
using example_wire::Kind;

// What to parse: the features by kind, each with its output dtype.
struct ParseConfig {
  struct Dense {
    std::string key;
    DataType dtype;
    std::vector<int64_t> shape;  // shape[0] == -1: variable length (padded)
    int64_t stride;              // elements per row (all but a variable first dim)
    bool variable_length;
  };
  struct Sparse {
    std::string key;
    DataType dtype;
    DataType split_dtype = DT_INT64;  // ragged only
  };
  std::vector<Dense> dense;
  std::vector<Sparse> sparse;
  std::vector<Sparse> ragged;
  // Each key's slots (dense features first, then sparse, then ragged): set by
  // IndexKeys once the keys are known.
  absl::flat_hash_map<std::string, std::vector<int>> slots_of_key;

  void IndexKeys() {
    slots_of_key.clear();
    int slot = 0;
    for (const auto& d : dense) slots_of_key[d.key].push_back(slot++);
    for (const auto& f : sparse) slots_of_key[f.key].push_back(slot++);
    for (const auto& r : ragged) slots_of_key[r.key].push_back(slot++);
  }
  // The keys in input order: sparse, dense, ragged.
  std::vector<absl::string_view> Keys() const {
    std::vector<absl::string_view> keys;
    for (const auto& f : sparse) keys.push_back(f.key);
    for (const auto& d : dense) keys.push_back(d.key);
    for (const auto& r : ragged) keys.push_back(r.key);
    return keys;
  }
  // A copy of this config with `keys` (in Keys() order), indexed.
  std::shared_ptr<const ParseConfig> WithKeys(const std::vector<absl::string_view>& keys) const {
    auto c = std::make_shared<ParseConfig>(*this);
    size_t k = 0;
    for (auto& f : c->sparse) f.key = std::string(keys[k++]);
    for (auto& d : c->dense) d.key = std::string(keys[k++]);
    for (auto& r : c->ragged) r.key = std::string(keys[k++]);
    c->IndexKeys();
    return c;
  }
};

// The config for a step's key inputs: the last one built while the keys stay
// the same (in graphs TensorFlow builds they are constants), so a step costs no
// key copies or index. Thread-safe.
class ConfigCache {
 public:
  explicit ConfigCache(ParseConfig base) : base_(std::move(base)) {}
  const ParseConfig& base() const { return base_; }

  std::shared_ptr<const ParseConfig> Get(const std::vector<absl::string_view>& keys) {
    absl::MutexLock l(&mu_);
    if (last_ == nullptr || last_->Keys() != keys) last_ = base_.WithKeys(keys);
    return last_;
  }

 private:
  const ParseConfig base_;
  absl::Mutex mu_;
  std::shared_ptr<const ParseConfig> last_ ABSL_GUARDED_BY(mu_);
};

// "[?,3]": a dense shape with its variable first dimension shown as TensorFlow does.
std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", dims[i] < 0 ? "?" : absl::StrCat(dims[i]));
  }
  return out + "]";
}

// The list(shape) attr `name`, each shape as dims (-1 unknown).
absl::Status GetShapeListAttr(const tensorflow::NodeDef& node, const std::string& name,
                              std::vector<std::vector<int64_t>>* out) {
  auto it = node.attr().find(name);
  if (it == node.attr().end()) return absl::NotFoundError(absl::StrCat("no attr ", name));
  for (const auto& s : it->second.list().shape()) {
    std::vector<int64_t> dims;
    for (const auto& d : s.dim()) dims.push_back(d.size());
    out->push_back(std::move(dims));
  }
  return absl::OkStatus();
}

// Checks the dense attrs against each other and fills `config->dense` from
// keys and types (defaults come later, from the inputs).
absl::Status DenseFromAttrs(const tensorflow::NodeDef& node, const std::string& op,
                            const std::vector<std::string>& keys, ParseConfig* config) {
  std::vector<DataType> types;
  std::vector<std::vector<int64_t>> shapes;
  RETURN_IF_ERROR(GetNodeAttr(node, "Tdense", &types));
  RETURN_IF_ERROR(GetShapeListAttr(node, "dense_shapes", &shapes));
  if (shapes.size() != types.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[", op, "] len(dense_shapes) != len(Tdense): ", shapes.size(), " vs. ", types.size()));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    ParseConfig::Dense d;
    d.key = i < keys.size() ? keys[i] : "";
    d.dtype = types[i];
    d.shape = shapes[i];
    d.variable_length = !d.shape.empty() && d.shape[0] == -1;
    d.stride = 1;
    for (size_t k = d.variable_length ? 1 : 0; k < d.shape.size(); ++k) {
      if (d.shape[k] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("[", op, "] dense_shapes[", i, "] has an unknown dimension ", k,
                         " (only the first may be unknown): ", DimsString(d.shape)));
      }
      d.stride *= d.shape[k];
    }
    config->dense.push_back(std::move(d));
  }
  return absl::OkStatus();
}

// A fixed-shape default: a tensor of the dense shape (a scalar for one element).
bool MatchesDenseShape(const Tensor& def, const ParseConfig::Dense& d) {
  if (def.NumElements() != d.stride) return false;
  if (def.dims() == 0) return true;
  return std::vector<int64_t>(def.shape().dim_sizes().begin(), def.shape().dim_sizes().end()) ==
         d.shape;
}

// Checks the default of each dense feature (input `first + i`; no elements:
// the feature is required) and returns them.
absl::StatusOr<std::vector<Tensor>> DenseDefaults(OpKernelContext* ctx, int first,
                                                  const ParseConfig& config) {
  std::vector<Tensor> defaults;
  for (size_t i = 0; i < config.dense.size(); ++i) {
    const ParseConfig::Dense& d = config.dense[i];
    const Tensor& def = ctx->input(first + static_cast<int>(i));
    if (d.variable_length) {
      if (def.NumElements() != 1) {
        return ctx->InvalidArgument(
            "dense_shape[", i, "] is a variable length shape: ", ShapeString(d.shape),
            ", therefore def_value[", i,
            "] must contain a single element (the padding element).  But its shape is: ",
            def.shape().DebugString());
      }
    } else if (def.NumElements() != 0 && !MatchesDenseShape(def, d)) {
      return ctx->InvalidArgument("def_value[", i, "].shape() == ", def.shape().DebugString(),
                                  " is not compatible with dense_shapes_[", i,
                                  "] == ", DimsString(d.shape));
    }
    defaults.push_back(def);
  }
  return defaults;
}

// The string views of one element's features, per requested feature: the last
// map entry with its key, or absent.
struct FeatureSlot {
  absl::string_view bytes;
  bool present = false;
};

class ExampleParser {
 public:
  // `names` may be empty; otherwise it names each serialized example.
  // REQUIRES: config.IndexKeys() ran; one default per dense feature.
  ExampleParser(OpKernelContext* ctx, const ParseConfig& config,
                const std::vector<Tensor>& defaults, const Tensor& serialized, const Tensor* names)
      : ctx_(ctx),
        config_(config),
        defaults_(defaults),
        serialized_(serialized),
        names_(names),
        num_examples_(serialized.NumElements()),
        num_slots_(config.dense.size() + config.sparse.size() + config.ragged.size()) {}

  // Parses every example and sets the outputs in TensorFlow's order: sparse
  // indices, values and shapes, dense values, ragged values and row splits.
  absl::Status Run() {
    const bool batched = serialized_.dims() == 1;
    slots_.assign(num_examples_ * num_slots_, FeatureSlot());
    lists_.assign(num_examples_ * num_slots_, FeatureList());
    RETURN_IF_ERROR(AllocateFixedDense(batched));
    // Pass 1: find the features, check them, write fixed-shape dense values.
    RETURN_IF_ERROR(ForExamples(num_examples_ * (num_slots_ + 1) * 200,
                                [&](int64_t e) { return ParseOne(e); }));
    RETURN_IF_ERROR(FillVariableDense(batched));
    RETURN_IF_ERROR(FillSparse(batched));
    return FillRagged(batched);
  }

 private:
  // Runs fn(e) for every example over the intra-op pool; the error of the
  // lowest failing example wins.
  absl::Status ForExamples(int64_t cost, const std::function<absl::Status(int64_t)>& fn) {
    absl::Mutex mu;
    int64_t first_bad = num_examples_;
    absl::Status first;
    auto shard = [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        absl::Status s = fn(e);
        if (s.ok()) continue;
        absl::MutexLock l(&mu);
        if (e < first_bad) first_bad = e, first = s;
        return;
      }
    };
    if (num_examples_ < 8) {
      shard(0, num_examples_);
    } else {
      ctx_->intra_op_pool()->ParallelFor(num_examples_, cost / std::max<int64_t>(1, num_examples_),
                                         shard);
    }
    return first;
  }

  std::string Name(int64_t e) const {
    if (names_ == nullptr || names_->NumElements() == 0) return "<unknown>";
    return names_->flat<std::string>()[e];
  }

  absl::Status AllocateFixedDense(bool batched) {
    for (size_t i = 0; i < config_.dense.size(); ++i) {
      const auto& d = config_.dense[i];
      if (d.variable_length) continue;
      std::vector<int64_t> dims;
      if (batched) dims.push_back(num_examples_);
      dims.insert(dims.end(), d.shape.begin(), d.shape.end());
      ASSIGN_OR_RETURN(TensorShape shape,
                       OutputShape(dims, d.dtype, ctx_->op_kernel().type_string()));
      dense_out_.push_back(ctx_->allocate_output_for_overwrite(DenseOutput(i), shape));
    }
    return absl::OkStatus();
  }

  int DenseOutput(size_t i) const { return 3 * config_.sparse.size() + i; }

  absl::Status ParseOne(int64_t e) {
    FeatureSlot* slots = &slots_[e * num_slots_];
    const std::string& record = serialized_.flat<std::string>()[e];
    const bool ok =
        example_wire::ForEachFeature(record, [&](absl::string_view key, absl::string_view feature) {
          auto it = config_.slots_of_key.find(key);
          if (it == config_.slots_of_key.end()) return;
          for (int s : it->second) slots[s] = FeatureSlot{feature, true};
        });
    if (!ok) {
      return ctx_->InvalidArgument(
          "Name: ", Name(e), ", Index: ", e, ".  Could not parse example input, value: '",
          absl::CHexEscape(record.substr(0, 256)), record.size() > 256 ? "...'" : "'");
    }
    size_t fixed = 0;
    for (size_t s = 0; s < num_slots_; ++s) {
      if (!slots[s].present) continue;
      FeatureList* list = &lists_[e * num_slots_ + s];
      if (!example_wire::ParseFeature(slots[s].bytes, list)) {
        return ctx_->InvalidArgument("Name: ", Name(e), ", Key: ", KeyOf(s), ", Index: ", e,
                                     ".  Can't parse serialized Example: the feature's values "
                                     "are malformed");
      }
      if (list->kind() != Kind::kNone && example_wire::KindType(list->kind()) != TypeOf(s)) {
        if (s < config_.dense.size()) {
          return ctx_->InvalidArgument("Name: ", Name(e), ", Key: ", KeyOf(s), ", Index: ", e,
                                       ".  Data types don't match. Data type: ",
                                       DataTypeString(example_wire::KindType(list->kind())),
                                       " but expected type: ", DataTypeString(TypeOf(s)));
        }
        return ctx_->InvalidArgument(
            "Name: ", Name(e), ", Key: ", KeyOf(s), ", Index: ", e,
            ".  Data types don't match. Expected type: ", DataTypeString(TypeOf(s)),
            ", Actual type: ", DataTypeString(example_wire::KindType(list->kind())));
      }
    }
    for (size_t i = 0; i < config_.dense.size(); ++i) {
      const auto& d = config_.dense[i];
      if (d.variable_length) {
        RETURN_IF_ERROR(CheckVariableDense(e, i));
        continue;
      }
      RETURN_IF_ERROR(WriteFixedDense(e, i, dense_out_[fixed++]));
    }
    return absl::OkStatus();
  }

  const std::string& KeyOf(size_t s) const {
    const size_t nd = config_.dense.size(), ns = config_.sparse.size();
    if (s < nd) return config_.dense[s].key;
    if (s < nd + ns) return config_.sparse[s - nd].key;
    return config_.ragged[s - nd - ns].key;
  }
  DataType TypeOf(size_t s) const {
    const size_t nd = config_.dense.size(), ns = config_.sparse.size();
    if (s < nd) return config_.dense[s].dtype;
    if (s < nd + ns) return config_.sparse[s - nd].dtype;
    return config_.ragged[s - nd - ns].dtype;
  }

  absl::Status WriteFixedDense(int64_t e, size_t i, Tensor* out) {
    const auto& d = config_.dense[i];
    const FeatureSlot& slot = slots_[e * num_slots_ + i];
    const FeatureList& list = lists_[e * num_slots_ + i];
    const int64_t offset = e * d.stride;
    if (!slot.present || list.kind() == Kind::kNone) {  // an empty Feature counts as missing
      if (defaults_[i].NumElements() == 0) {
        return ctx_->InvalidArgument("Name: ", Name(e), ", Feature: ", d.key,
                                     " (data type: ", DataTypeString(d.dtype),
                                     ") is required but could not be found.");
      }
      CopyElements(defaults_[i], 0, out, offset, d.stride);
      return absl::OkStatus();
    }
    if (list.size() != d.stride) {
      return ctx_->InvalidArgument("Name: ", Name(e), ", Key: ", d.key, ", Index: ", e,
                                   ".  Number of ", DataTypeString(d.dtype),
                                   " values != expected.  Values size: ", list.size(),
                                   " but output shape: ", DimsString(d.shape));
    }
    WriteValues(list, d.dtype, out, offset);
    return absl::OkStatus();
  }

  // Copies `n` elements of `from` (starting at `from_at`) into `to` at `to_at`.
  static void CopyElements(const Tensor& from, int64_t from_at, Tensor* to, int64_t to_at,
                           int64_t n) {
    if (from.dtype() == DT_STRING) {
      auto src = from.flat<std::string>();
      auto dst = to->flat<std::string>();
      for (int64_t k = 0; k < n; ++k) dst[to_at + k] = src[from_at + k];
      return;
    }
    const size_t w = DataTypeSize(from.dtype());
    std::memcpy(static_cast<char*>(to->raw_data()) + to_at * w,
                static_cast<const char*>(from.raw_data()) + from_at * w, n * w);
  }

  static void WriteValues(const FeatureList& list, DataType dtype, Tensor* out, int64_t at) {
    if (list.size() == 0) return;
    switch (dtype) {
      case DT_FLOAT:
        list.CopyFloats(out->flat<float>().data() + at);
        break;
      case DT_INT64:
        list.CopyInt64s(out->flat<int64_t>().data() + at);
        break;
      default:
        list.CopyBytes(out->flat<std::string>().data() + at);
        break;
    }
  }

  absl::Status CheckVariableDense(int64_t e, size_t i) {
    const auto& d = config_.dense[i];
    const FeatureList& list = lists_[e * num_slots_ + i];
    if (d.stride == 0 ? list.size() != 0 : list.size() % d.stride != 0) {
      return ctx_->InvalidArgument("Name: ", Name(e), ", Key: ", d.key, ", Index: ", e,
                                   ".  Number of ", DataTypeString(d.dtype),
                                   " values is not a multiple of stride length. Saw ", list.size(),
                                   " values but output shape is: ", ShapeString(d.shape));
    }
    return absl::OkStatus();
  }

  // Variable-length dense features: [batch, max rows, ...], padded with the
  // default (a scalar) where an example has fewer rows.
  absl::Status FillVariableDense(bool batched) {
    for (size_t i = 0; i < config_.dense.size(); ++i) {
      const auto& d = config_.dense[i];
      if (!d.variable_length) continue;
      int64_t rows = 0;
      for (int64_t e = 0; e < num_examples_; ++e) {
        if (d.stride > 0) rows = std::max(rows, lists_[e * num_slots_ + i].size() / d.stride);
      }
      std::vector<int64_t> dims;
      if (batched) dims.push_back(num_examples_);
      dims.push_back(rows);
      dims.insert(dims.end(), d.shape.begin() + 1, d.shape.end());
      ASSIGN_OR_RETURN(TensorShape shape,
                       OutputShape(dims, d.dtype, ctx_->op_kernel().type_string()));
      Tensor* out = ctx_->allocate_output(DenseOutput(i), shape);
      const int64_t per_example = rows * d.stride;
      for (int64_t e = 0; e < num_examples_; ++e) {
        const FeatureList& list = lists_[e * num_slots_ + i];
        WriteValues(list, d.dtype, out, e * per_example);
        for (int64_t k = list.size(); k < per_example; ++k) {
          CopyElements(defaults_[i], 0, out, e * per_example + k, 1);
        }
      }
    }
    return absl::OkStatus();
  }

  // Sparse features: indices [n, batch rank + 1], values [n], dense shape.
  absl::Status FillSparse(bool batched) {
    const size_t ns = config_.sparse.size(), nd = config_.dense.size();
    const int rank = batched ? 2 : 1;
    for (size_t i = 0; i < ns; ++i) {
      const size_t s = nd + i;
      int64_t total = 0, longest = 0;
      for (int64_t e = 0; e < num_examples_; ++e) {
        const int64_t n = lists_[e * num_slots_ + s].size();
        total += n;
        longest = std::max(longest, n);
      }
      const DataType dtype = config_.sparse[i].dtype;
      ASSIGN_OR_RETURN(TensorShape vshape,
                       OutputShape({total}, dtype, ctx_->op_kernel().type_string()));
      Tensor* indices = ctx_->allocate_output_for_overwrite(i, TensorShape({total, rank}));
      Tensor* values = ctx_->allocate_output(ns + i, vshape);
      Tensor* shape = ctx_->allocate_output_for_overwrite(2 * ns + i, TensorShape({rank}));
      int64_t* idx = indices->flat<int64_t>().data();
      int64_t at = 0;
      for (int64_t e = 0; e < num_examples_; ++e) {
        const FeatureList& list = lists_[e * num_slots_ + s];
        WriteValues(list, dtype, values, at);
        for (int64_t k = 0; k < list.size(); ++k) {
          if (batched) *idx++ = e;
          *idx++ = k;
        }
        at += list.size();
      }
      auto sh = shape->flat<int64_t>();
      if (batched) sh[0] = num_examples_;
      sh[rank - 1] = longest;
    }
    return absl::OkStatus();
  }

  // Ragged features: the values of every example in order, and row splits
  // [batch + 1] (empty for a scalar input).
  absl::Status FillRagged(bool batched) {
    const size_t nr = config_.ragged.size();
    const size_t base = config_.dense.size() + config_.sparse.size();
    const int first_out = 3 * config_.sparse.size() + config_.dense.size();
    for (size_t i = 0; i < nr; ++i) {
      const size_t s = base + i;
      int64_t total = 0;
      for (int64_t e = 0; e < num_examples_; ++e) total += lists_[e * num_slots_ + s].size();
      const auto& r = config_.ragged[i];
      ASSIGN_OR_RETURN(TensorShape vshape,
                       OutputShape({total}, r.dtype, ctx_->op_kernel().type_string()));
      Tensor* values = ctx_->allocate_output(first_out + i, vshape);
      Tensor* splits =
          ctx_->allocate_output(first_out + nr + i, TensorShape({batched ? num_examples_ + 1 : 0}));
      int64_t at = 0;
      for (int64_t e = 0; e < num_examples_; ++e) {
        const FeatureList& list = lists_[e * num_slots_ + s];
        WriteValues(list, r.dtype, values, at);
        at += list.size();
        if (!batched) continue;
        if (r.split_dtype == DT_INT32) {
          splits->flat<int32_t>()[e + 1] = static_cast<int32_t>(at);
        } else {
          splits->flat<int64_t>()[e + 1] = at;
        }
      }
    }
    return absl::OkStatus();
  }

  OpKernelContext* ctx_;  // not owned
  const ParseConfig& config_;
  const std::vector<Tensor>& defaults_;  // per dense feature; no elements: required
  const Tensor& serialized_;
  const Tensor* names_;  // not owned; may be null
  const int64_t num_examples_;
  const size_t num_slots_;
  std::vector<FeatureSlot> slots_;  // [example][slot]
  std::vector<FeatureList> lists_;  // [example][slot]
  std::vector<Tensor*> dense_out_;  // fixed-shape dense outputs, in order
};

// Appends the strings of the 1-D key input `i` to `keys` (views into the
// input); `what` names it in errors.
absl::Status AppendKeys(OpKernelContext* ctx, int i, absl::string_view what, size_t expected,
                        std::vector<absl::string_view>* keys) {
  const Tensor& t = ctx->input(i);
  if (t.dims() > 1) {
    return ctx->InvalidArgument("Expected ", what,
                                " to be a vector, got shape: ", t.shape().DebugString());
  }
  if (static_cast<size_t>(t.NumElements()) != expected) {
    return ctx->InvalidArgument("Expected len(", what, ") to match the number of ", what,
                                " attrs: ", expected, " but got ", t.NumElements());
  }
  for (const std::string& k : t.flat<std::string>()) keys->push_back(k);
  return absl::OkStatus();
}

// Checks `names` against `serialized`: empty, or one name per example.
absl::Status CheckNames(OpKernelContext* ctx, const Tensor& names, const Tensor& serialized) {
  if (names.NumElements() == 0 || names.shape() == serialized.shape()) return absl::OkStatus();
  return ctx->InvalidArgument("Expected names have the same shape as serialized: ", "names.shape=",
                              names.shape().DebugString(),
                              ", serialized.shape=", serialized.shape().DebugString());
}

class ParseExampleV2Op : public OpKernel {
 public:
  explicit ParseExampleV2Op(OpKernelConstruction* c) : OpKernel(c) {
    int64_t num_sparse = 0;
    std::vector<DataType> sparse_types, ragged_types, split_types;
    c->GetAttr("num_sparse", &num_sparse).IgnoreError();
    c->GetAttr("sparse_types", &sparse_types).IgnoreError();
    c->GetAttr("ragged_value_types", &ragged_types).IgnoreError();
    c->GetAttr("ragged_split_types", &split_types).IgnoreError();
    if (static_cast<size_t>(num_sparse) != sparse_types.size() ||
        ragged_types.size() != split_types.size()) {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat(
          "[ParseExampleV2] num_sparse (", num_sparse, ") must equal len(sparse_types) (",
          sparse_types.size(), ") and len(ragged_value_types) (", ragged_types.size(),
          ") len(ragged_split_types) (", split_types.size(), ")")));
      return;
    }
    ParseConfig config;
    for (DataType t : sparse_types) config.sparse.push_back({"", t});
    for (size_t i = 0; i < ragged_types.size(); ++i) {
      config.ragged.push_back({"", ragged_types[i], split_types[i]});
    }
    c->SetStatus(DenseFromAttrs(c->def(), "ParseExampleV2", {}, &config));
    cache_ = std::make_unique<ConfigCache>(std::move(config));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    const Tensor& names = ctx->input(1);
    if (serialized.dims() > 1) {
      return ctx->InvalidArgument("Expected serialized to be a scalar or vector, got shape: ",
                                  serialized.shape().DebugString());
    }
    RETURN_IF_ERROR(CheckNames(ctx, names, serialized));
    const ParseConfig& base = cache_->base();
    std::vector<absl::string_view> keys;
    RETURN_IF_ERROR(AppendKeys(ctx, 2, "sparse_keys", base.sparse.size(), &keys));
    RETURN_IF_ERROR(AppendKeys(ctx, 3, "dense_keys", base.dense.size(), &keys));
    RETURN_IF_ERROR(AppendKeys(ctx, 4, "ragged_keys", base.ragged.size(), &keys));
    std::shared_ptr<const ParseConfig> config = cache_->Get(keys);
    ASSIGN_OR_RETURN(std::vector<Tensor> defaults, DenseDefaults(ctx, 5, *config));
    return ExampleParser(ctx, *config, defaults, serialized, &names).Run();
  }

 private:
  std::unique_ptr<ConfigCache> cache_;
};

class ParseSingleExampleOp : public OpKernel {
 public:
  explicit ParseSingleExampleOp(OpKernelConstruction* c) : OpKernel(c) {
    std::vector<std::string> sparse_keys, dense_keys;
    std::vector<DataType> sparse_types;
    c->GetAttr("sparse_keys", &sparse_keys).IgnoreError();
    c->GetAttr("dense_keys", &dense_keys).IgnoreError();
    c->GetAttr("sparse_types", &sparse_types).IgnoreError();
    if (sparse_keys.size() != sparse_types.size()) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[ParseSingleExample] len(sparse_keys) (", sparse_keys.size(),
                       ") != len(sparse_types) (", sparse_types.size(), ")")));
      return;
    }
    for (size_t i = 0; i < sparse_keys.size(); ++i) {
      config_.sparse.push_back({sparse_keys[i], sparse_types[i]});
    }
    absl::Status s = DenseFromAttrs(c->def(), "ParseSingleExample", dense_keys, &config_);
    if (s.ok() && dense_keys.size() != config_.dense.size()) {
      s = absl::InvalidArgumentError(absl::StrCat("[ParseSingleExample] len(dense_keys) (",
                                                  dense_keys.size(), ") != len(Tdense) (",
                                                  config_.dense.size(), ")"));
    }
    config_.IndexKeys();
    c->SetStatus(s);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    if (serialized.dims() != 0) {
      return ctx->InvalidArgument("Expected `serialized` to be a scalar, got shape: ",
                                  serialized.shape().DebugString());
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> defaults, DenseDefaults(ctx, 1, config_));
    return ExampleParser(ctx, config_, defaults, serialized, nullptr).Run();
  }

 private:
  ParseConfig config_;  // keys from the attrs, indexed
};

// TensorFlow 1's op (graphs exported before TensorFlow 2.1): a vector of
// Examples, each key a scalar input of its own, no ragged features.
class ParseExampleOp : public OpKernel {
 public:
  explicit ParseExampleOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t num_sparse = 0;
    std::vector<DataType> sparse_types;
    c->GetAttr("Nsparse", &num_sparse).IgnoreError();
    c->GetAttr("sparse_types", &sparse_types).IgnoreError();
    if (static_cast<size_t>(num_sparse) != sparse_types.size()) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[ParseExample] len(sparse_keys) != len(sparse_types): ", num_sparse,
                       " vs. ", sparse_types.size())));
      return;
    }
    ParseConfig config;
    for (DataType t : sparse_types) config.sparse.push_back({"", t});
    c->SetStatus(DenseFromAttrs(c->def(), "ParseExample", {}, &config));
    cache_ = std::make_unique<ConfigCache>(std::move(config));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    const Tensor& names = ctx->input(1);
    if (serialized.dims() != 1) {
      return ctx->InvalidArgument("Expected serialized to be a vector, got shape: ",
                                  serialized.shape().DebugString());
    }
    RETURN_IF_ERROR(CheckNames(ctx, names, serialized));
    const int ns = static_cast<int>(cache_->base().sparse.size());
    const int nd = static_cast<int>(cache_->base().dense.size());
    std::vector<absl::string_view> keys;
    for (int i = 0; i < ns + nd; ++i) {
      const Tensor& key = ctx->input(2 + i);
      if (key.dims() != 0) {
        return ctx->InvalidArgument("Expected ", i < ns ? "sparse_keys[" : "dense_keys[",
                                    i < ns ? i : i - ns,
                                    "] to be a scalar, got shape: ", key.shape().DebugString());
      }
      keys.push_back(key.scalar<std::string>());
    }
    std::shared_ptr<const ParseConfig> config = cache_->Get(keys);
    ASSIGN_OR_RETURN(std::vector<Tensor> defaults, DenseDefaults(ctx, 2 + ns + nd, *config));
    return ExampleParser(ctx, *config, defaults, serialized, &names).Run();
  }

 private:
  std::unique_ptr<ConfigCache> cache_;
};

// Shapes: with serialized of rank r (0 or 1), sparse indices [?, r+1], values
// [?], shapes [r+1]; dense values batch + dense_shape (a variable first dim
// unknown); ragged values [?] and row splits [batch + 1].
absl::Status ParseShape(InferenceContext* c, int first_dense_output, int num_sparse,
                        int num_ragged) {
  PartialShape in = c->input(0);
  if (in.rank_known() && in.rank() > 1) {
    return c->Error("serialized must be a scalar or vector, got " + in.DebugString());
  }
  std::vector<std::vector<int64_t>> dense_shapes;
  RETURN_IF_ERROR(GetShapeListAttr(c->node_def(), "dense_shapes", &dense_shapes));
  const bool known = in.rank_known();
  const int r = known ? in.rank() : 0;
  for (int i = 0; i < num_sparse; ++i) {
    c->set_output(i, known ? PartialShape({kUnknownDim, r + 1}) : PartialShape::UnknownDims(2));
    c->set_output(num_sparse + i, PartialShape({kUnknownDim}));
    c->set_output(2 * num_sparse + i, known ? PartialShape({r + 1}) : PartialShape({kUnknownDim}));
  }
  for (size_t i = 0; i < dense_shapes.size(); ++i) {
    if (!known) {
      c->set_output(first_dense_output + i, PartialShape::Unknown());
      continue;
    }
    std::vector<int64_t> dims(in.dims());
    dims.insert(dims.end(), dense_shapes[i].begin(), dense_shapes[i].end());
    c->set_output(first_dense_output + i, PartialShape(dims));
  }
  const int first_ragged = first_dense_output + dense_shapes.size();
  for (int i = 0; i < num_ragged; ++i) {
    c->set_output(first_ragged + i, PartialShape({kUnknownDim}));
    const int64_t splits = !known                     ? kUnknownDim
                           : r == 0                   ? 0
                           : in.dim(0) == kUnknownDim ? kUnknownDim
                                                      : in.dim(0) + 1;
    c->set_output(first_ragged + num_ragged + i, PartialShape({splits}));
  }
  return absl::OkStatus();
}

absl::Status ParseExampleV2Shape(InferenceContext* c) {
  int64_t num_sparse = 0;
  std::vector<DataType> ragged;
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  RETURN_IF_ERROR(c->GetAttr("ragged_value_types", &ragged));
  return ParseShape(c, 3 * num_sparse, num_sparse, ragged.size());
}

absl::Status ParseSingleExampleShape(InferenceContext* c) {
  int64_t num_sparse = 0;
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  return ParseShape(c, 3 * num_sparse, num_sparse, 0);
}

REGISTER_OP("ParseExampleV2")
    .Input("serialized: string")
    .Input("names: string")
    .Input("sparse_keys: string")
    .Input("dense_keys: string")
    .Input("ragged_keys: string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("dense_values: Tdense")
    .Output("ragged_values: ragged_value_types")
    .Output("ragged_row_splits: ragged_split_types")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("num_sparse: int >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("ragged_value_types: list({float,int64,string}) >= 0")
    .Attr("ragged_split_types: list({int32,int64}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseExampleV2Shape);
REGISTER_KERNEL(KernelDefBuilder("ParseExampleV2").Device(kDeviceCPU), ParseExampleV2Op);
REGISTER_NO_GRADIENT("ParseExampleV2");

absl::Status ParseExampleShape(InferenceContext* c) {
  int64_t num_sparse = 0;
  RETURN_IF_ERROR(c->GetAttr("Nsparse", &num_sparse));
  PartialShape unused;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &unused));
  return ParseShape(c, 3 * num_sparse, num_sparse, 0);
}

REGISTER_OP("ParseExample")
    .Input("serialized: string")
    .Input("names: string")
    .Input("sparse_keys: Nsparse * string")
    .Input("dense_keys: Ndense * string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: Nsparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: Nsparse * int64")
    .Output("dense_values: Tdense")
    .Attr("Nsparse: int >= 0")
    .Attr("Ndense: int >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseExampleShape);
REGISTER_KERNEL(KernelDefBuilder("ParseExample").Device(kDeviceCPU), ParseExampleOp);
REGISTER_NO_GRADIENT("ParseExample");

REGISTER_OP("ParseSingleExample")
    .Input("serialized: string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("dense_values: Tdense")
    .Attr("num_sparse: int >= 0")
    .Attr("sparse_keys: list(string) >= 0")
    .Attr("dense_keys: list(string) >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseSingleExampleShape);
REGISTER_KERNEL(KernelDefBuilder("ParseSingleExample").Device(kDeviceCPU), ParseSingleExampleOp);
REGISTER_NO_GRADIENT("ParseSingleExample");

}  // namespace
}  // namespace dflow
