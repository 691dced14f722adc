// Datasets made of other datasets: ZipDataset (the inputs' elements side by
// side), ConcatenateDataset (one input after the other), InterleaveDataset
// and ParallelInterleaveDatasetV4 (a function maps each input element to a
// dataset; cycle_length of them are open at once and block_length elements
// are taken from each in turn, in TensorFlow's order). With TensorFlow's
// OpDefs.
#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow::data {
namespace {

// --- ZipDataset ----------------------------------------------------------------------

DataTypeVector JoinedTypes(const std::vector<std::shared_ptr<const DatasetBase>>& inputs) {
  DataTypeVector out;
  for (const auto& in : inputs) {
    out.insert(out.end(), in->output_dtypes().begin(), in->output_dtypes().end());
  }
  return out;
}

// Ends with the shortest input.
class ZipDataset : public DatasetBase {
 public:
  explicit ZipDataset(std::vector<std::shared_ptr<const DatasetBase>> inputs)
      : DatasetBase(JoinedTypes(inputs)), inputs_(std::move(inputs)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    std::vector<std::string> parts;
    for (const auto& in : inputs_) parts.push_back(in->DebugString());
    return absl::StrCat("ZipDataset(", absl::StrJoin(parts, ", "), ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const ZipDataset* d) : d_(d->shared_from_this()) {
      for (const auto& in : d->inputs_) inputs_.push_back(in->MakeIterator());
    }
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      *end = inputs_.empty();
      if (*end) return absl::OkStatus();
      std::vector<Tensor> joined;
      for (auto& in : inputs_) {
        std::vector<Tensor> e;
        RETURN_IF_ERROR(in->GetNext(ctx, &e, end));
        if (*end) {
          inputs_.clear();  // later calls end too, without reading further
          return absl::OkStatus();
        }
        for (Tensor& t : e) joined.push_back(std::move(t));
      }
      *out = std::move(joined);
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    std::vector<std::unique_ptr<IteratorBase>> inputs_;
  };
  const std::vector<std::shared_ptr<const DatasetBase>> inputs_;
};

class ZipDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    std::vector<std::shared_ptr<const DatasetBase>> inputs;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      ASSIGN_OR_RETURN(auto in, GetDataset(ctx->input(i)));
      inputs.push_back(std::move(in));
    }
    return std::make_shared<ZipDataset>(std::move(inputs));
  }
};

// --- ConcatenateDataset --------------------------------------------------------------

class ConcatenateDataset : public DatasetBase {
 public:
  ConcatenateDataset(std::shared_ptr<const DatasetBase> first,
                     std::shared_ptr<const DatasetBase> second)
      : DatasetBase(first->output_dtypes()), first_(std::move(first)), second_(std::move(second)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat("ConcatenateDataset(", first_->DebugString(), ", ", second_->DebugString(),
                        ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const ConcatenateDataset* d)
        : d_(d->shared_from_this()), c_(d), input_(d->first_->MakeIterator()) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (input_ != nullptr) {
        *end = false;
        RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (!*end) return absl::OkStatus();
        input_ = on_first_ ? c_->second_->MakeIterator() : nullptr;
        on_first_ = false;
      }
      *end = true;
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    const ConcatenateDataset* c_;
    std::unique_ptr<IteratorBase> input_;  // null once both are over
    bool on_first_ = true;
  };
  const std::shared_ptr<const DatasetBase> first_, second_;
};

class ConcatenateDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto first, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(auto second, GetDataset(ctx->input(1)));
    if (first->output_dtypes() != second->output_dtypes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input dataset and dataset to concatenate have different types: ", first->DebugString(),
          " has [", TypesString(first->output_dtypes()), "], ", second->DebugString(), " has [",
          TypesString(second->output_dtypes()), "]"));
    }
    return std::make_shared<ConcatenateDataset>(std::move(first), std::move(second));
  }

 private:
  static std::string TypesString(const DataTypeVector& types) {
    std::vector<std::string> names;
    for (DataType t : types) names.push_back(DataTypeString(t));
    return absl::StrJoin(names, ", ");
  }
};

// --- InterleaveDataset, ParallelInterleaveDatasetV4 ----------------------------------

class InterleaveDataset : public DatasetBase {
 public:
  InterleaveDataset(std::shared_ptr<const DatasetBase> input,
                    std::shared_ptr<const FunctionRunner> fn, std::vector<Tensor> captured,
                    DataTypeVector dtypes, int64_t cycle_length, int64_t block_length,
                    size_t prefetch, std::string what)
      : DatasetBase(std::move(dtypes)),
        input_(std::move(input)),
        fn_(std::move(fn)),
        captured_(std::move(captured)),
        cycle_length_(cycle_length),
        block_length_(block_length),
        prefetch_(prefetch),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    auto it = std::make_unique<Iterator>(this);
    if (prefetch_ == 0) return it;
    return MakePrefetchIterator(shared_from_this(), std::move(it), prefetch_);
  }
  std::string DebugString() const override { return what_; }

 private:
  // One open element of the cycle: its dataset and where it is.
  struct Open {
    std::shared_ptr<const DatasetBase> dataset;
    std::unique_ptr<IteratorBase> it;
  };

  // Walks the cycle as TensorFlow does: a slot that runs out is refilled from
  // the input when the cycle comes back to it, not at once.
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const InterleaveDataset* d)
        : d_(d->shared_from_this()),
          i_(d),
          input_(d->input_->MakeIterator()),
          slots_(static_cast<size_t>(d->cycle_length_)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (!input_end_ || open_ > 0) {
        Open& slot = slots_[cycle_];
        if (slot.it != nullptr) {
          bool slot_end = false;
          RETURN_IF_ERROR(slot.it->GetNext(ctx, out, &slot_end));
          if (!slot_end) {
            *end = false;
            RETURN_IF_ERROR(CheckElementTypes(*out, i_->output_dtypes(), i_->what_));
            if (++block_ == i_->block_length_) Advance();
            return absl::OkStatus();
          }
          slot = Open{};
          --open_;
          Advance();
        } else if (!input_end_) {
          RETURN_IF_ERROR(OpenNext(ctx, &slot));
          if (slot.it == nullptr) Advance();
        } else {
          Advance();
        }
      }
      *end = true;
      return absl::OkStatus();
    }

   private:
    void Advance() {
      block_ = 0;
      cycle_ = (cycle_ + 1) % slots_.size();
    }
    // The dataset of the next input element into *slot, or input_end_.
    absl::Status OpenNext(IteratorContext* ctx, Open* slot) {
      std::vector<Tensor> args;
      RETURN_IF_ERROR(input_->GetNext(ctx, &args, &input_end_));
      if (input_end_) return absl::OkStatus();
      for (const Tensor& c : i_->captured_) args.push_back(c);
      auto results = i_->fn_->Run(std::move(args), ctx->cancellation);
      if (!results.ok()) {
        return WithContext(results.status(), i_->what_);
      }
      if (results->size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            i_->what_, ": the function must return one dataset, got ", results->size(), " values"));
      }
      auto ds = GetDataset((*results)[0]);
      if (!ds.ok())
        return absl::InvalidArgumentError(absl::StrCat(i_->what_, ": ", ds.status().message()));
      slot->dataset = *std::move(ds);
      slot->it = slot->dataset->MakeIterator();
      ++open_;
      return absl::OkStatus();
    }

    std::shared_ptr<const DatasetBase> d_;
    const InterleaveDataset* i_;
    std::unique_ptr<IteratorBase> input_;
    std::vector<Open> slots_;  // cycle_length of them
    size_t cycle_ = 0;         // the slot read next
    int64_t block_ = 0;        // elements taken from it in this turn
    int64_t open_ = 0;         // slots holding an iterator
    bool input_end_ = false;
  };

  const std::shared_ptr<const DatasetBase> input_;
  const std::shared_ptr<const FunctionRunner> fn_;
  const std::vector<Tensor> captured_;
  const int64_t cycle_length_, block_length_;
  const size_t prefetch_;  // elements read ahead on a producer thread; 0: none
  const std::string what_;
};

constexpr int64_t kAutotune = -1;
// Open elements are bounded: each holds an iterator (and its buffers).
constexpr int64_t kMaxCycleLength = 1 << 16;
// The most elements ParallelInterleaveDatasetV4 reads ahead.
constexpr int64_t kMaxReadAhead = 1 << 12;

// kParallel: ParallelInterleaveDatasetV4, whose inputs after cycle_length and
// block_length are buffer_output_elements, prefetch_input_elements and
// num_parallel_calls. dflow runs the interleave on one producer thread that
// reads up to cycle_length * buffer_output_elements (block_length for
// AUTOTUNE, at most kMaxReadAhead) elements ahead of the consumer, in the
// deterministic order (which TensorFlow also gives unless told
// deterministic=false, and which is one of the orders it may give then); the
// cycle's elements are not read concurrently with each other.
template <bool kParallel>
class InterleaveDatasetOp : public DatasetOpKernel {
 public:
  explicit InterleaveDatasetOp(OpKernelConstruction* c)
      : DatasetOpKernel(c), fn_(FunctionFromAttr(c, "f")) {}
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    const int trailing = kParallel ? 5 : 2;
    const int first = ctx->num_inputs() - trailing;
    ASSIGN_OR_RETURN(int64_t cycle_length, ScalarInput(*ctx, first, "cycle_length"));
    ASSIGN_OR_RETURN(int64_t block_length, ScalarInput(*ctx, first + 1, "block_length"));
    if (cycle_length == kAutotune) {
      cycle_length = std::max<int64_t>(1, std::thread::hardware_concurrency());
    }
    if (cycle_length <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cycle_length must be greater than zero, got ", cycle_length));
    }
    if (cycle_length > kMaxCycleLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("cycle_length ", cycle_length, " is over dflow's limit ", kMaxCycleLength));
    }
    if (block_length <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("block_length must be greater than zero, got ", block_length));
    }
    size_t prefetch = 0;
    if (kParallel) {
      ASSIGN_OR_RETURN(int64_t per_element, CheckParallelInputs(*ctx, first + 2));
      if (per_element == kAutotune) per_element = block_length;
      per_element = std::min(per_element, kMaxReadAhead);
      prefetch = static_cast<size_t>(
          std::min(kMaxReadAhead, std::min(cycle_length, kMaxReadAhead) * per_element));
    }
    std::vector<Tensor> captured;
    for (int i = 1; i < first; ++i) captured.push_back(ctx->input(i));
    return std::make_shared<InterleaveDataset>(std::move(input), fn_, std::move(captured),
                                               output_dtypes(), cycle_length, block_length,
                                               prefetch, What());
  }

 private:
  // buffer_output_elements, once the inputs are checked.
  static absl::StatusOr<int64_t> CheckParallelInputs(const OpKernelContext& ctx, int i) {
    ASSIGN_OR_RETURN(int64_t buffer, ScalarInput(ctx, i, "buffer_output_elements"));
    ASSIGN_OR_RETURN(int64_t prefetch, ScalarInput(ctx, i + 1, "prefetch_input_elements"));
    ASSIGN_OR_RETURN(int64_t calls, ScalarInput(ctx, i + 2, "num_parallel_calls"));
    if (buffer <= 0 && buffer != kAutotune) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer_output_elements must be greater than zero or AUTOTUNE, got ", buffer));
    }
    if (prefetch < 0 && prefetch != kAutotune) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prefetch_input_elements must be greater than or equal to zero or AUTOTUNE, got ",
          prefetch));
    }
    if (calls <= 0 && calls != kAutotune) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_parallel_calls must be greater than zero or AUTOTUNE, got ", calls));
    }
    return buffer;
  }

  std::shared_ptr<const FunctionRunner> fn_;
};

// --- registration ------------------------------------------------------------------

REGISTER_OP("ZipDataset")
    .Input("input_datasets: N * variant")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("N: int >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ZipDataset").Device(kDeviceCPU), ZipDatasetOp);

REGISTER_OP("ConcatenateDataset")
    .Input("input_dataset: variant")
    .Input("another_dataset: variant")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ConcatenateDataset").Device(kDeviceCPU), ConcatenateDatasetOp);

REGISTER_OP("InterleaveDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("cycle_length: int64")
    .Input("block_length: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("InterleaveDataset").Device(kDeviceCPU),
                InterleaveDatasetOp</*kParallel=*/false>);

REGISTER_OP("ParallelInterleaveDatasetV4")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("cycle_length: int64")
    .Input("block_length: int64")
    .Input("buffer_output_elements: int64")
    .Input("prefetch_input_elements: int64")
    .Input("num_parallel_calls: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("deterministic: string = 'default'")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ParallelInterleaveDatasetV4").Device(kDeviceCPU),
                InterleaveDatasetOp</*kParallel=*/true>);

}  // namespace
}  // namespace dflow::data
