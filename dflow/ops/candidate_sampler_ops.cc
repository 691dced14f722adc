// Candidate sampling for sampled losses (word2vec's NCE / sampled softmax):
//
//   UniformCandidateSampler(true_classes)     classes drawn from [0, range_max)
//       with P(k) = 1 / range_max
//   LogUniformCandidateSampler(true_classes)  with the Zipfian
//       P(k) = (log(k + 2) - log(k + 1)) / log(range_max + 1)
//       outputs: sampled_candidates [num_sampled], and the expected count of
//       each true class (true_expected_count, true_classes' shape) and of
//       each sampled class (sampled_expected_count) in a draw of num_sampled:
//       p * num_sampled, or with unique=True, when the distinct classes took
//       num_tries > num_sampled draws, 1 - (1 - p)^num_tries
//   ComputeAccidentalHits(true_classes, sampled_candidates)  for each row i and
//       each of its true classes that was also sampled (at its last position
//       j): indices i, ids j, weights -FLT_MAX
//
// The samplers draw with dflow's Philox generator keyed by seed/seed2 (both 0:
// fresh random seeds per kernel); the same seeds give the same stream, but
// not TensorFlow's stream (TensorFlow's exact random sequence is not
// reproduced, only the distribution and the expected counts). OpDefs and
// error texts follow TensorFlow's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/philox.h"

namespace dflow {
namespace {

// The distribution a sampler draws from: P(k) and a draw from u in [0, 1).
struct UniformDistribution {
  explicit UniformDistribution(int64_t range) : range(range) {}
  double Probability(int64_t) const { return 1.0 / static_cast<double>(range); }
  int64_t Sample(double u) const {
    return std::min(static_cast<int64_t>(u * static_cast<double>(range)), range - 1);
  }
  int64_t range;
};

struct LogUniformDistribution {
  explicit LogUniformDistribution(int64_t range)
      : range(range), log_range(std::log1p(static_cast<double>(range))) {}
  double Probability(int64_t k) const {
    return std::log((static_cast<double>(k) + 2.0) / (static_cast<double>(k) + 1.0)) / log_range;
  }
  // exp(u * log(range + 1)) - 1 is in [0, range); its floor is k with
  // probability P(k).
  int64_t Sample(double u) const {
    return static_cast<int64_t>(std::exp(u * log_range) - 1.0) % range;
  }
  int64_t range;
  double log_range;
};

// The expected count of a class of probability p in `num_sampled` classes
// drawn with `num_tries` draws.
float ExpectedCount(double p, int64_t num_sampled, int64_t num_tries) {
  if (num_tries == num_sampled) return static_cast<float>(p * static_cast<double>(num_sampled));
  return static_cast<float>(-std::expm1(static_cast<double>(num_tries) * std::log1p(-p)));
}

template <typename Distribution>
class CandidateSamplerOp : public OpKernel {
 public:
  explicit CandidateSamplerOp(OpKernelConstruction* c) : OpKernel(c), generator_(0, 0) {
    int64_t seed = 0, seed2 = 0;
    c->GetAttr("num_true", &num_true_).IgnoreError();
    c->GetAttr("num_sampled", &num_sampled_).IgnoreError();
    c->GetAttr("unique", &unique_).IgnoreError();
    c->GetAttr("range_max", &range_max_).IgnoreError();
    c->GetAttr("seed", &seed).IgnoreError();
    c->GetAttr("seed2", &seed2).IgnoreError();
    if (num_true_ < 1 || num_sampled_ < 1 || range_max_ < 1) {  // The OpDef's minimums.
      c->SetStatus(absl::InvalidArgumentError(
          "candidate sampler: num_true, num_sampled and range_max must be >= 1"));
    }
    if (seed == 0 && seed2 == 0) {
      absl::BitGen bits;
      seed = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
      seed2 = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
    }
    generator_ = Philox4x32(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& true_classes = ctx->input(0);
    if (true_classes.dims() != 2) return ctx->InvalidArgument("true_classes must be a matrix");
    if (true_classes.dim_size(1) != num_true_) {
      return ctx->InvalidArgument("true_classes must have num_true columns, expected: ", num_true_,
                                  " was: ", true_classes.dim_size(1));
    }
    if (unique_ && num_sampled_ > range_max_) {
      return ctx->InvalidArgument("Sampler's range is too small.");
    }
    auto classes = true_classes.flat<int64_t>();
    for (int64_t i = 0; i < classes.size(); ++i) {
      if (classes[i] < 0 || classes[i] >= range_max_) {
        return ctx->InvalidArgument("`true_candidate` out of range [0, ", range_max_,
                                    "), received ", classes[i]);
      }
    }
    ASSIGN_OR_RETURN(TensorShape sampled_shape,
                     OutputShape({num_sampled_}, DT_INT64, type_string()));
    const Distribution dist(range_max_);
    Tensor* sampled_t = ctx->allocate_output_for_overwrite(0, sampled_shape);
    int64_t* sampled = sampled_t->flat<int64_t>().data();
    ASSIGN_OR_RETURN(const int64_t num_tries, Draw(ctx, dist, sampled));
    Tensor* true_expected = ctx->allocate_output(1, true_classes.shape());
    for (int64_t i = 0; i < classes.size(); ++i) {
      true_expected->flat<float>()[i] =
          ExpectedCount(dist.Probability(classes[i]), num_sampled_, num_tries);
    }
    Tensor* sampled_expected = ctx->allocate_output(2, sampled_shape);
    for (int64_t i = 0; i < num_sampled_; ++i) {
      sampled_expected->flat<float>()[i] =
          ExpectedCount(dist.Probability(sampled[i]), num_sampled_, num_tries);
    }
    return absl::OkStatus();
  }

 private:
  // Writes num_sampled classes (distinct when unique_) to `sampled`; returns
  // the number of draws it took. Unique draws that cannot finish in a
  // sensible number of tries (a range barely larger than num_sampled under
  // a skewed distribution) fail instead of spinning for hours.
  absl::StatusOr<int64_t> Draw(OpKernelContext* ctx, const Distribution& dist, int64_t* sampled) {
    const int64_t max_tries = 1000 * num_sampled_ + 1000000;
    absl::MutexLock l(&mu_);
    PhiloxWords words(&generator_);
    auto draw = [&] {
      const uint32_t hi = words(), lo = words();
      return dist.Sample(Uint64ToDouble(hi, lo));
    };
    if (!unique_) {
      for (int64_t i = 0; i < num_sampled_; ++i) sampled[i] = draw();
      return num_sampled_;
    }
    std::unordered_set<int64_t> seen;
    int64_t tries = 0;
    for (int64_t n = 0; n < num_sampled_; ++tries) {
      if (tries == max_tries) {
        return ctx->InvalidArgument("drew only ", n, " distinct classes of ", num_sampled_, " in ",
                                    tries, " tries: range_max ", range_max_,
                                    " is too small for unique sampling");
      }
      const int64_t k = draw();
      if (seen.insert(k).second) sampled[n++] = k;
    }
    return tries;
  }

  int64_t num_true_ = 1, num_sampled_ = 1, range_max_ = 1;
  bool unique_ = false;
  absl::Mutex mu_;
  Philox4x32 generator_ ABSL_GUARDED_BY(mu_);
};

absl::Status CandidateSamplerShape(InferenceContext* c) {
  int64_t num_sampled = 0, num_true = 0;
  RETURN_IF_ERROR(c->GetAttr("num_sampled", &num_sampled));
  RETURN_IF_ERROR(c->GetAttr("num_true", &num_true));
  PartialShape classes;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &classes));
  int64_t columns = kUnknownDim;
  RETURN_IF_ERROR(c->MergeDim(classes.dim(1), num_true, &columns));
  c->set_output(0, PartialShape({num_sampled}));
  c->set_output(1, PartialShape({classes.dim(0), columns}));
  c->set_output(2, PartialShape({num_sampled}));
  return absl::OkStatus();
}

OpDefBuilder CandidateSamplerOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("true_classes: int64")
      .Output("sampled_candidates: int64")
      .Output("true_expected_count: float")
      .Output("sampled_expected_count: float")
      .Attr("num_true: int >= 1")
      .Attr("num_sampled: int >= 1")
      .Attr("unique: bool")
      .Attr("range_max: int >= 1")
      .Attr("seed: int = 0")
      .Attr("seed2: int = 0")
      .SetIsStateful()
      .SetShapeFn(CandidateSamplerShape);
}

const OpDefBuilderReceiver uniform_sampler_op = CandidateSamplerOpDef("UniformCandidateSampler");
REGISTER_KERNEL(KernelDefBuilder("UniformCandidateSampler").Device(kDeviceCPU),
                CandidateSamplerOp<UniformDistribution>);
const OpDefBuilderReceiver log_uniform_sampler_op =
    CandidateSamplerOpDef("LogUniformCandidateSampler");
REGISTER_KERNEL(KernelDefBuilder("LogUniformCandidateSampler").Device(kDeviceCPU),
                CandidateSamplerOp<LogUniformDistribution>);

// --- ComputeAccidentalHits ---------------------------------------------------------

class ComputeAccidentalHitsOp : public OpKernel {
 public:
  explicit ComputeAccidentalHitsOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("num_true", &num_true_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& true_classes = ctx->input(0);
    const Tensor& sampled_t = ctx->input(1);
    if (true_classes.dims() != 2 || true_classes.dim_size(1) != num_true_) {
      return ctx->InvalidArgument("true_candidates must be a batch_size * num_true matrix, got ",
                                  true_classes.shape().DebugString(), " with num_true ", num_true_);
    }
    if (sampled_t.dims() != 1) {
      return ctx->InvalidArgument(
          "sampled_candidates must be a vector, which is typically an output from "
          "CandidateSampler");
    }
    auto sampled = sampled_t.flat<int64_t>();
    std::unordered_map<int64_t, int64_t> position;  // class -> its last position in sampled
    for (int64_t j = 0; j < sampled.size(); ++j) position[sampled[j]] = j;
    auto classes = true_classes.flat<int64_t>();
    std::vector<int64_t> rows, ids;
    for (int64_t i = 0; i < classes.size(); ++i) {
      auto it = position.find(classes[i]);
      if (it == position.end()) continue;
      rows.push_back(i / num_true_);
      ids.push_back(it->second);
    }
    const TensorShape shape({static_cast<int64_t>(rows.size())});
    Tensor* indices = ctx->allocate_output(0, shape);
    Tensor* ids_out = ctx->allocate_output(1, shape);
    Tensor* weights = ctx->allocate_output(2, shape);
    for (size_t k = 0; k < rows.size(); ++k) {
      indices->flat<int32_t>()[k] = static_cast<int32_t>(rows[k]);
      ids_out->flat<int64_t>()[k] = ids[k];
      weights->flat<float>()[k] = std::numeric_limits<float>::lowest();
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_true_ = 1;
};

absl::Status AccidentalHitsShape(InferenceContext* c) {
  PartialShape unused;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &unused));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
  for (int i = 0; i < 3; ++i) c->set_output(i, PartialShape({kUnknownDim}));
  return absl::OkStatus();
}

REGISTER_OP("ComputeAccidentalHits")
    .Input("true_classes: int64")
    .Input("sampled_candidates: int64")
    .Output("indices: int32")
    .Output("ids: int64")
    .Output("weights: float")
    .Attr("num_true: int")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .SetShapeFn(AccidentalHitsShape);
REGISTER_KERNEL(KernelDefBuilder("ComputeAccidentalHits").Device(kDeviceCPU),
                ComputeAccidentalHitsOp);

REGISTER_NO_GRADIENT("UniformCandidateSampler");
REGISTER_NO_GRADIENT("LogUniformCandidateSampler");
REGISTER_NO_GRADIENT("ComputeAccidentalHits");

}  // namespace
}  // namespace dflow
