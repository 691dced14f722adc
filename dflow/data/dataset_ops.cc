// tf.data's dataset ops: sources (TensorSliceDataset, TensorDataset,
// RangeDataset, TFRecordDataset, plain or GZIP/ZLIB) and transformations (BatchDatasetV2,
// RepeatDataset, TakeDataset, SkipDataset, OptionsDataset, ModelDataset,
// OptimizeDataset(V2), MapDataset, ParallelMapDatasetV2,
// FlatMapDataset, FilterDataset), each
// an op that outputs a dataset variant, with TensorFlow's OpDefs.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/data/unary_dataset.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/io/tfrecord.h"
#include "dflow/ops/array_util.h"

namespace dflow::data {
namespace {

// Row `i` of `t` (shape t.shape[1:]), copied.
absl::StatusOr<Tensor> Row(const Tensor& t, int64_t i) {
  std::vector<int64_t> dims = {1};
  std::vector<int64_t> begin(t.dims(), 0), strides(t.dims(), 1);
  begin[0] = i;
  for (int d = 1; d < t.dims(); ++d) dims.push_back(t.dim_size(d));
  Tensor out(t.dtype(), TensorShape(dims));
  RETURN_IF_ERROR(StridedCopy(t, begin, strides, &out));
  dims.erase(dims.begin());
  return out.Reshaped(TensorShape(dims));
}

// --- TensorSliceDataset / TensorDataset ---------------------------------------

class SliceDataset : public DatasetBase {
 public:
  // slices: one element per row of the components (else the components are
  // the one element).
  SliceDataset(std::vector<Tensor> components, bool slices, std::string what)
      : DatasetBase(Dtypes(components)),
        components_(std::move(components)),
        slices_(slices),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override { return what_; }

 private:
  static DataTypeVector Dtypes(const std::vector<Tensor>& c) {
    DataTypeVector out;
    for (const Tensor& t : c) out.push_back(t.dtype());
    return out;
  }
  int64_t size() const { return slices_ ? components_[0].dim_size(0) : 1; }

  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const SliceDataset* ds) : ds_(ds->shared_from_this()), d_(ds) {}
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      *end = next_ >= d_->size();
      if (*end) return absl::OkStatus();
      std::vector<Tensor> element;
      for (const Tensor& c : d_->components_) {
        if (!d_->slices_) {
          element.push_back(c);
          continue;
        }
        ASSIGN_OR_RETURN(Tensor row, Row(c, next_));
        element.push_back(std::move(row));
      }
      ++next_;
      *out = std::move(element);
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> ds_;  // keeps d_ alive
    const SliceDataset* d_;
    int64_t next_ = 0;
  };

  const std::vector<Tensor> components_;
  const bool slices_;
  const std::string what_;
};

class TensorSliceDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    std::vector<Tensor> components;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      const Tensor& t = ctx->input(i);
      if (t.dims() == 0) {
        return absl::InvalidArgumentError(absl::StrCat("component ", i,
                                                       " is a scalar, "
                                                       "which has no slices"));
      }
      if (t.dim_size(0) != ctx->input(0).dim_size(0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "all components must have the same size in the 0th dimension: component 0 has ",
            ctx->input(0).dim_size(0), ", component ", i, " has ", t.dim_size(0)));
      }
      components.push_back(t);
    }
    return std::make_shared<SliceDataset>(std::move(components), /*slices=*/true, What());
  }
};

class TensorDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    std::vector<Tensor> components;
    for (int i = 0; i < ctx->num_inputs(); ++i) components.push_back(ctx->input(i));
    return std::make_shared<SliceDataset>(std::move(components), /*slices=*/false, What());
  }
};

// --- RangeDataset ------------------------------------------------------------------

class RangeDataset : public DatasetBase {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step)
      : DatasetBase({DT_INT64}), start_(start), stop_(stop), step_(step) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(start_, stop_, step_);
  }
  std::string DebugString() const override {
    return absl::StrCat("RangeDataset(", start_, ", ", stop_, ", ", step_, ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(int64_t next, int64_t stop, int64_t step) : next_(next), stop_(stop), step_(step) {}
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      *end = step_ > 0 ? next_ >= stop_ : next_ <= stop_;
      if (*end) return absl::OkStatus();
      *out = {Tensor::Scalar<int64_t>(next_)};
      // Stop instead of overflowing past the end of int64.
      if (__builtin_add_overflow(next_, step_, &next_)) next_ = stop_;
      return absl::OkStatus();
    }

   private:
    int64_t next_;
    const int64_t stop_, step_;
  };
  const int64_t start_, stop_, step_;
};

class RangeDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t start, ScalarInput(*ctx, 0, "start"));
    ASSIGN_OR_RETURN(int64_t stop, ScalarInput(*ctx, 1, "stop"));
    ASSIGN_OR_RETURN(int64_t step, ScalarInput(*ctx, 2, "step"));
    if (step == 0) return absl::InvalidArgumentError("step must be a non-zero integer.");
    if (output_dtypes() != DataTypeVector{DT_INT64}) {
      return absl::UnimplementedError("only int64 ranges are supported");
    }
    return std::make_shared<RangeDataset>(start, stop, step);
  }
};

// --- TFRecordDataset ---------------------------------------------------------------

class TFRecordDataset : public DatasetBase {
 public:
  TFRecordDataset(std::vector<std::string> files, io::TFRecordCompression compression)
      : DatasetBase({DT_STRING}), files_(std::move(files)), compression_(compression) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat("TFRecordDataset([", absl::StrJoin(files_, ", "), "])");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const TFRecordDataset* ds) : ds_(ds->shared_from_this()), d_(ds) {}
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      while (true) {
        if (reader_ == nullptr) {
          *end = file_ >= d_->files_.size();
          if (*end) return absl::OkStatus();
          ASSIGN_OR_RETURN(reader_, io::TFRecordReader::Open(d_->files_[file_], d_->compression_));
        }
        std::string record;
        absl::Status s = reader_->ReadRecord(&record);
        if (s.ok()) {
          *end = false;  // the caller's flag may hold an earlier end
          Tensor t(DT_STRING, TensorShape());
          t.scalar<std::string>() = std::move(record);
          *out = {std::move(t)};
          return absl::OkStatus();
        }
        if (!absl::IsOutOfRange(s)) return s;
        reader_.reset();
        ++file_;
      }
    }

   private:
    std::shared_ptr<const DatasetBase> ds_;
    const TFRecordDataset* d_;
    size_t file_ = 0;
    std::unique_ptr<io::TFRecordReader> reader_;
  };
  const std::vector<std::string> files_;
  const io::TFRecordCompression compression_;
};

class TFRecordDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    const Tensor& names = ctx->input(0);
    if (names.dtype() != DT_STRING || names.dims() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "`filenames` must be a scalar or a vector of strings, got ", names.DebugString()));
    }
    const Tensor& compression = ctx->input(1);
    if (compression.dtype() != DT_STRING || compression.dims() != 0) {
      return absl::InvalidArgumentError("`compression_type` must be a string scalar");
    }
    ASSIGN_OR_RETURN(io::TFRecordCompression type,
                     io::ParseTFRecordCompression(compression.scalar<std::string>()));
    std::vector<std::string> files(names.flat<std::string>().begin(),
                                   names.flat<std::string>().end());
    return std::make_shared<TFRecordDataset>(std::move(files), type);
  }
};

// --- BatchDatasetV2 ----------------------------------------------------------------

// Stacks the elements' component `c` into one tensor of shape [n] + shape.
absl::StatusOr<Tensor> Stack(const std::vector<std::vector<Tensor>>& elements, int c,
                             const std::string& what) {
  const Tensor& first = elements[0][c];
  std::vector<const Tensor*> rows;
  for (size_t i = 0; i < elements.size(); ++i) {
    const Tensor& t = elements[i][c];
    if (t.shape() != first.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cannot batch tensors with different shapes in component ", c,
                       ". First element had shape ", first.shape().DebugString(), " and element ",
                       i, " had shape ", t.shape().DebugString(), "."));
    }
    rows.push_back(&t);
  }
  std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
  for (int d = 0; d < first.dims(); ++d) dims.push_back(first.dim_size(d));
  ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, first.dtype(), what));
  Tensor out(first.dtype(), shape);
  std::vector<int64_t> sizes(rows.size(), first.NumElements());
  RETURN_IF_ERROR(ConcatRows(rows, sizes, 1, &out, nullptr));
  return out;
}

class BatchDataset : public UnaryDataset<BatchDataset> {
 public:
  BatchDataset(std::shared_ptr<const DatasetBase> input, int64_t size, bool drop, std::string what)
      : UnaryDataset(std::move(input), std::move(what)), size_(size), drop_(drop) {}

  class Iterator : public InputIterator {
   public:
    using InputIterator::InputIterator;
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::vector<std::vector<Tensor>> elements;
      bool input_end = false;
      while (elements.size() < d_->size_ && !input_end) {
        std::vector<Tensor> e;
        RETURN_IF_ERROR(input_->GetNext(ctx, &e, &input_end));
        if (!input_end) elements.push_back(std::move(e));
      }
      *end = elements.empty() || (d_->drop_ && elements.size() < d_->size_);
      if (*end) return absl::OkStatus();
      std::vector<Tensor> batch;
      for (size_t c = 0; c < elements[0].size(); ++c) {
        ASSIGN_OR_RETURN(Tensor t, Stack(elements, c, d_->what_));
        batch.push_back(std::move(t));
      }
      *out = std::move(batch);
      return absl::OkStatus();
    }
  };

 private:
  const int64_t size_;
  const bool drop_;
};

class BatchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t size, ScalarInput(*ctx, 1, "batch_size"));
    if (size <= 0) return absl::InvalidArgumentError("Batch size must be greater than zero.");
    const Tensor& drop = ctx->input(2);
    if (drop.dtype() != DT_BOOL || drop.dims() != 0) {
      return absl::InvalidArgumentError("drop_remainder must be a bool scalar");
    }
    return std::make_shared<BatchDataset>(std::move(input), size, drop.scalar<bool>(), What());
  }
};

// --- RepeatDataset, TakeDataset, SkipDataset -----------------------------------------

class RepeatDataset : public DatasetBase {
 public:
  RepeatDataset(std::shared_ptr<const DatasetBase> input, int64_t count)
      : DatasetBase(input->output_dtypes()), input_(std::move(input)), count_(count) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat("RepeatDataset(", input_->DebugString(), ", ", count_, ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const RepeatDataset* d) : d_(d->shared_from_this()), r_(d) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (true) {
        *end = r_->count_ >= 0 && pass_ >= r_->count_;
        if (*end) return absl::OkStatus();
        if (input_ == nullptr) {
          input_ = r_->input_->MakeIterator();
          pass_had_elements_ = false;
        }
        RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (!*end) {
          pass_had_elements_ = true;
          return absl::OkStatus();
        }
        input_.reset();
        ++pass_;
        // An empty input repeated forever is empty, as in TensorFlow.
        if (!pass_had_elements_) {
          *end = true;
          return absl::OkStatus();
        }
      }
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    const RepeatDataset* r_;
    std::unique_ptr<IteratorBase> input_;
    int64_t pass_ = 0;
    bool pass_had_elements_ = false;
  };
  const std::shared_ptr<const DatasetBase> input_;
  const int64_t count_;  // < 0: forever
};

// Take (keep the first `count`) or Skip (drop them); count < 0 means all.
class TakeSkipDataset : public DatasetBase {
 public:
  TakeSkipDataset(std::shared_ptr<const DatasetBase> input, int64_t count, bool take)
      : DatasetBase(input->output_dtypes()), input_(std::move(input)), count_(count), take_(take) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat(take_ ? "TakeDataset(" : "SkipDataset(", input_->DebugString(), ", ",
                        count_, ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const TakeSkipDataset* d)
        : d_(d->shared_from_this()), t_(d), input_(d->input_->MakeIterator()) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      if (t_->take_) {
        *end = t_->count_ >= 0 && seen_ >= t_->count_;
        if (*end) return absl::OkStatus();
        ++seen_;
        return input_->GetNext(ctx, out, end);
      }
      while (t_->count_ < 0 || seen_ < t_->count_) {
        std::vector<Tensor> dropped;
        RETURN_IF_ERROR(input_->GetNext(ctx, &dropped, end));
        if (*end) return absl::OkStatus();
        ++seen_;
      }
      return input_->GetNext(ctx, out, end);
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    const TakeSkipDataset* t_;
    std::unique_ptr<IteratorBase> input_;
    int64_t seen_ = 0;
  };
  const std::shared_ptr<const DatasetBase> input_;
  const int64_t count_;
  const bool take_;
};

class RepeatDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t count, ScalarInput(*ctx, 1, "count"));
    return std::make_shared<RepeatDataset>(std::move(input), count);
  }
};

template <bool kTake>
class TakeSkipDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t count, ScalarInput(*ctx, 1, "count"));
    return std::make_shared<TakeSkipDataset>(std::move(input), count, kTake);
  }
};

// OptionsDataset (Dataset.with_options), ModelDataset (autotuning) and
// OptimizeDataset(V2) (static rewrites; tf.function graphs put the last two
// before an iterator): they tune TensorFlow's optimizations and threading,
// which dflow does not have; the elements are the input's. OptimizeDataset's
// string inputs are checked to be string vectors and otherwise ignored.
class PassThroughDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      const Tensor& t = ctx->input(i);
      if (t.dtype() != DT_STRING || t.dims() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", i, " must be a vector of optimization names, got ", t.DebugString()));
      }
    }
    return GetDataset(ctx->input(0));
  }
};

// --- MapDataset, ParallelMapDatasetV2, FlatMapDataset, FilterDataset -----------------

// What MapDataset does with the function's results for each input element.
enum class MapMode {
  kMap,      // they are the element
  kFlatMap,  // they are a dataset whose elements follow in turn
  kFilter,   // a scalar bool: keep the input element or drop it
};

// Applies `fn` to each input element followed by the captured arguments.
class MapDataset : public UnaryDataset<MapDataset> {
 public:
  MapDataset(std::shared_ptr<const DatasetBase> input, std::shared_ptr<const FunctionRunner> fn,
             std::vector<Tensor> captured, DataTypeVector dtypes, MapMode mode, std::string what)
      : UnaryDataset(std::move(input), std::move(dtypes), std::move(what)),
        fn_(std::move(fn)),
        captured_(std::move(captured)),
        mode_(mode) {}

  class Iterator : public InputIterator {
   public:
    using InputIterator::InputIterator;
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (true) {
        if (inner_ != nullptr) {
          RETURN_IF_ERROR(inner_->GetNext(ctx, out, end));
          if (!*end) return CheckElementTypes(*out, d_->output_dtypes(), d_->what_);
          inner_.reset();
        }
        std::vector<Tensor> element;
        RETURN_IF_ERROR(input_->GetNext(ctx, &element, end));
        if (*end) return absl::OkStatus();
        std::vector<Tensor> args = element;
        for (const Tensor& c : d_->captured_) args.push_back(c);
        auto results = d_->fn_->Run(std::move(args), ctx->cancellation);
        if (!results.ok()) {
          return WithContext(results.status(), d_->what_);
        }
        switch (d_->mode_) {
          case MapMode::kMap:
            RETURN_IF_ERROR(CheckElementTypes(*results, d_->output_dtypes(), d_->what_));
            *out = *std::move(results);
            return absl::OkStatus();
          case MapMode::kFilter: {
            ASSIGN_OR_RETURN(bool keep, Predicate(*results));
            if (!keep) continue;
            *out = std::move(element);
            return absl::OkStatus();
          }
          case MapMode::kFlatMap: {
            if (results->size() != 1) {
              return absl::InvalidArgumentError(
                  absl::StrCat(d_->what_, ": the function must return one dataset"));
            }
            ASSIGN_OR_RETURN(inner_dataset_, GetDataset((*results)[0]));
            inner_ = inner_dataset_->MakeIterator();
            continue;
          }
        }
      }
    }

   private:
    absl::StatusOr<bool> Predicate(const std::vector<Tensor>& results) const {
      if (results.size() != 1 || results[0].dtype() != DT_BOOL || results[0].dims() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(d_->what_, ": Filter predicate `f` must return a scalar bool."));
      }
      return results[0].scalar<bool>();
    }

    std::shared_ptr<const DatasetBase> inner_dataset_;  // flat map: keeps inner_'s dataset
    std::unique_ptr<IteratorBase> inner_;
  };

 private:
  const std::shared_ptr<const FunctionRunner> fn_;
  const std::vector<Tensor> captured_;
  const MapMode mode_;
};

// kParallel: ParallelMapDatasetV2, whose last input is num_parallel_calls.
// dflow runs its calls one at a time, in order (deterministic either way).
template <MapMode kMode, bool kParallel = false>
class MapDatasetOp : public DatasetOpKernel {
 public:
  explicit MapDatasetOp(OpKernelConstruction* c)
      : DatasetOpKernel(c),
        fn_(FunctionFromAttr(c, kMode == MapMode::kFilter ? "predicate" : "f")) {}
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    int end = ctx->num_inputs();
    if (kParallel) {
      --end;
      ASSIGN_OR_RETURN(int64_t calls, ScalarInput(*ctx, end, "num_parallel_calls"));
      if (calls <= 0 && calls != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat("num_parallel_calls must be greater than zero or AUTOTUNE, got ", calls));
      }
    }
    std::vector<Tensor> captured;
    for (int i = 1; i < end; ++i) captured.push_back(ctx->input(i));
    return std::make_shared<MapDataset>(std::move(input), fn_, std::move(captured), output_dtypes(),
                                        kMode, What());
  }

 private:
  std::shared_ptr<const FunctionRunner> fn_;
};

// --- registration ------------------------------------------------------------------

REGISTER_OP("TensorSliceDataset")
    .Input("components: Toutput_types")
    .Output("handle: variant")
    .Attr("Toutput_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("is_files: bool = false")
    .Attr("metadata: string = ''")
    .Attr("replicate_on_split: bool = false")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TensorSliceDataset").Device(kDeviceCPU), TensorSliceDatasetOp);

REGISTER_OP("TensorDataset")
    .Input("components: Toutput_types")
    .Output("handle: variant")
    .Attr("Toutput_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TensorDataset").Device(kDeviceCPU), TensorDatasetOp);

REGISTER_OP("RangeDataset")
    .Input("start: int64")
    .Input("stop: int64")
    .Input("step: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .Attr("replicate_on_split: bool = false")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("RangeDataset").Device(kDeviceCPU), RangeDatasetOp);

REGISTER_OP("TFRecordDataset")
    .Input("filenames: string")
    .Input("compression_type: string")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TFRecordDataset").Device(kDeviceCPU), TFRecordDatasetOp);

REGISTER_OP("BatchDatasetV2")
    .Input("input_dataset: variant")
    .Input("batch_size: int64")
    .Input("drop_remainder: bool")
    .Output("handle: variant")
    .Attr("parallel_copy: bool = false")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("BatchDatasetV2").Device(kDeviceCPU), BatchDatasetOp);

REGISTER_OP("RepeatDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("RepeatDataset").Device(kDeviceCPU), RepeatDatasetOp);

REGISTER_OP("TakeDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TakeDataset").Device(kDeviceCPU), TakeSkipDatasetOp<true>);

REGISTER_OP("SkipDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("SkipDataset").Device(kDeviceCPU), TakeSkipDatasetOp<false>);

REGISTER_OP("OptionsDataset")
    .Input("input_dataset: variant")
    .Output("handle: variant")
    .Attr("serialized_options: string")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("OptionsDataset").Device(kDeviceCPU), PassThroughDatasetOp);

REGISTER_OP("ModelDataset")
    .Input("input_dataset: variant")
    .Output("handle: variant")
    .Attr("algorithm: int = 0")
    .Attr("cpu_budget: int = 0")
    .Attr("ram_budget: int = 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ModelDataset").Device(kDeviceCPU), PassThroughDatasetOp);

REGISTER_OP("OptimizeDataset")
    .Input("input_dataset: variant")
    .Input("optimizations: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("optimization_configs: list(string) = []")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("OptimizeDataset").Device(kDeviceCPU), PassThroughDatasetOp);

REGISTER_OP("OptimizeDatasetV2")
    .Input("input_dataset: variant")
    .Input("optimizations_enabled: string")
    .Input("optimizations_disabled: string")
    .Input("optimizations_default: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("optimization_configs: list(string) = []")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("OptimizeDatasetV2").Device(kDeviceCPU), PassThroughDatasetOp);

REGISTER_OP("MapDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("use_inter_op_parallelism: bool = true")
    .Attr("preserve_cardinality: bool = false")
    .Attr("force_synchronous: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("MapDataset").Device(kDeviceCPU), MapDatasetOp<MapMode::kMap>);

REGISTER_OP("ParallelMapDatasetV2")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("num_parallel_calls: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("use_inter_op_parallelism: bool = true")
    .Attr("deterministic: string = 'default'")
    .Attr("preserve_cardinality: bool = false")
    .Attr("use_unbounded_threadpool: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ParallelMapDatasetV2").Device(kDeviceCPU),
                MapDatasetOp<MapMode::kMap, /*kParallel=*/true>);

REGISTER_OP("FilterDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("predicate: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FilterDataset").Device(kDeviceCPU),
                MapDatasetOp<MapMode::kFilter>);

REGISTER_OP("FlatMapDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FlatMapDataset").Device(kDeviceCPU),
                MapDatasetOp<MapMode::kFlatMap>);

}  // namespace
}  // namespace dflow::data
