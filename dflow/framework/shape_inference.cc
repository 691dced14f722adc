#include "dflow/framework/shape_inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflow {

// --- PartialShape ------------------------------------------------------------

PartialShape PartialShape::FromProto(const tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank()) return Unknown();
  std::vector<int64_t> dims;
  for (const auto& d : p.dim()) dims.push_back(d.size() < 0 ? kUnknownDim : d.size());
  return PartialShape(std::move(dims));
}

bool PartialShape::IsFullyDefined() const {
  return known_rank_ && std::all_of(dims_.begin(), dims_.end(), [](int64_t d) { return d >= 0; });
}

int64_t PartialShape::NumElements() const {
  if (!IsFullyDefined()) return kUnknownDim;
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool PartialShape::IsCompatibleWith(const PartialShape& s) const {
  if (!known_rank_ || !s.known_rank_) return true;
  if (dims_.size() != s.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] >= 0 && s.dims_[i] >= 0 && dims_[i] != s.dims_[i]) return false;
  }
  return true;
}

absl::StatusOr<PartialShape> PartialShape::Merge(const PartialShape& a, const PartialShape& b) {
  if (!a.IsCompatibleWith(b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shapes ", a.DebugString(), " and ", b.DebugString(), " are incompatible"));
  }
  if (!a.known_rank_) return b;
  if (!b.known_rank_) return a;
  std::vector<int64_t> dims = a.dims_;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) dims[i] = b.dims_[i];
  }
  return PartialShape(std::move(dims));
}

absl::StatusOr<TensorShape> PartialShape::ToTensorShape() const {
  if (!IsFullyDefined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", DebugString(), " is not fully defined"));
  }
  return TensorShape::FromDims(dims_);
}

void PartialShape::AsProto(tensorflow::TensorShapeProto* p) const {
  p->Clear();
  if (!known_rank_) {
    p->set_unknown_rank(true);
    return;
  }
  for (int64_t d : dims_) p->add_dim()->set_size(d < 0 ? -1 : d);
}

std::string PartialShape::DebugString() const {
  if (!known_rank_) return "<unknown>";
  return absl::StrCat("[",
                      absl::StrJoin(dims_, ",",
                                    [](std::string* out, int64_t d) {
                                      absl::StrAppend(out,
                                                      d < 0 ? std::string("?") : absl::StrCat(d));
                                    }),
                      "]");
}

// --- InferenceContext --------------------------------------------------------

InferenceContext::InferenceContext(const tensorflow::NodeDef& node, const OpDef& op,
                                   std::vector<PartialShape> input_shapes,
                                   std::vector<const Tensor*> input_tensors,
                                   DataTypeVector input_types, int num_outputs)
    : node_(node),
      op_(op),
      inputs_(std::move(input_shapes)),
      input_tensors_(std::move(input_tensors)),
      input_types_(std::move(input_types)),
      outputs_(num_outputs) {
  input_tensors_.resize(inputs_.size(), nullptr);
  input_types_.resize(inputs_.size(), DT_INVALID);
}

absl::Status InferenceContext::Error(const std::string& message) const {
  return absl::InvalidArgumentError(
      absl::StrCat("[", op_.name, "] ", message, " (node '", node_.name(), "')"));
}

absl::Status InferenceContext::WithRank(const PartialShape& s, int rank, PartialShape* out) const {
  if (!s.rank_known()) {
    *out = PartialShape::UnknownDims(rank);
    return absl::OkStatus();
  }
  if (s.rank() != rank) {
    return Error(absl::StrCat("shape must be rank ", rank, " but is rank ", s.rank(), ": ",
                              s.DebugString()));
  }
  *out = s;
  return absl::OkStatus();
}

absl::Status InferenceContext::WithRankAtLeast(const PartialShape& s, int rank,
                                               PartialShape* out) const {
  if (s.rank_known() && s.rank() < rank) {
    return Error(absl::StrCat("shape must be at least rank ", rank, " but is rank ", s.rank(), ": ",
                              s.DebugString()));
  }
  *out = s;
  return absl::OkStatus();
}

absl::Status InferenceContext::MergeDim(int64_t a, int64_t b, int64_t* out) const {
  if (a >= 0 && b >= 0 && a != b) {
    return Error(absl::StrCat("dimensions must be equal, but are ", a, " and ", b));
  }
  *out = a >= 0 ? a : b;
  return absl::OkStatus();
}

absl::Status InferenceContext::MakeShapeFromShapeTensor(int i, PartialShape* out) const {
  const Tensor* t = input_tensor(i);
  if (t == nullptr) {
    PartialShape vec;
    RETURN_IF_ERROR(WithRank(input(i), 1, &vec));
    *out = vec.dim(0) >= 0 ? PartialShape::UnknownDims(static_cast<int>(vec.dim(0)))
                           : PartialShape::Unknown();
    return absl::OkStatus();
  }
  if (t->dtype() != DT_INT32 && t->dtype() != DT_INT64) {
    return Error(
        absl::StrCat("shape tensor must be int32 or int64, got ", DataTypeString(t->dtype())));
  }
  auto value = [t](int64_t k) -> int64_t {
    return t->dtype() == DT_INT32 ? t->flat<int32_t>()[k] : t->flat<int64_t>()[k];
  };
  if (t->dims() == 0 && value(0) == -1) {  // A scalar -1: unknown rank.
    *out = PartialShape::Unknown();
    return absl::OkStatus();
  }
  if (t->dims() != 1) {
    return Error(absl::StrCat("shape tensor must be 1-D, got shape ", t->shape().DebugString()));
  }
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < t->NumElements(); ++k) {
    int64_t d = value(k);
    if (d < -1) return Error(absl::StrCat("shape tensor has a negative dimension ", d));
    dims.push_back(d);
  }
  *out = PartialShape(std::move(dims));
  return absl::OkStatus();
}

// --- common shape functions ---------------------------------------------------

absl::Status UnknownShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status UnchangedShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

absl::Status ScalarShape(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

absl::Status NoOutputs(InferenceContext* c) { return absl::OkStatus(); }

namespace {

// One output dimension of numpy broadcasting; false when incompatible.
bool BroadcastDim(int64_t a, int64_t b, int64_t* out) {
  if (a >= 0 && b >= 0) {
    if (a != b && a != 1 && b != 1) return false;
    *out = a == 1 ? b : a;
  } else if (a < 0 && b < 0) {
    *out = kUnknownDim;
  } else {
    int64_t known = a >= 0 ? a : b;
    // An unknown dim against 1 stays unknown; against >1 it must equal it.
    *out = known > 1 ? known : kUnknownDim;
  }
  return true;
}

}  // namespace

absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b) {
  if (!a.rank_known() || !b.rank_known()) return PartialShape::Unknown();
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a.dim(ia) : 1;
    int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (!BroadcastDim(da, db, &dims[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "incompatible shapes for broadcasting: ", a.DebugString(), " and ", b.DebugString()));
    }
  }
  return PartialShape(std::move(dims));
}

absl::Status BroadcastBinaryOpShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> out = BroadcastShapes(c->input(0), c->input(1));
  if (!out.ok()) return c->Error(std::string(out.status().message()));
  c->set_output(0, *std::move(out));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PartialShape>> InferShapes(
    const tensorflow::NodeDef& node, const OpDef& op, const std::vector<PartialShape>& input_shapes,
    const std::vector<const Tensor*>& input_tensors, const DataTypeVector& input_types,
    int num_outputs) {
  InferenceContext c(node, op, input_shapes, input_tensors, input_types, num_outputs);
  if (op.shape_fn) RETURN_IF_ERROR(op.shape_fn(&c));
  return c.outputs();
}

}  // namespace dflow
