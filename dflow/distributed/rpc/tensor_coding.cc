#include "dflow/distributed/rpc/tensor_coding.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/wire_format.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// Field numbers of tensorflow.RecvTensorResponse and tensorflow.TensorProto
// (facts of TensorFlow's wire format), with their wire types.
using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::PutVarint;
using wire::Tag;
constexpr uint32_t kResponseTensor = 1, kResponseIsDead = 2, kResponseSendStart = 3;
constexpr uint32_t kTensorDtype = 1, kTensorShape = 2, kTensorContent = 4;

// --- encoding ---------------------------------------------------------------------------

void DeleteTensor(void* tensor) { delete static_cast<Tensor*>(tensor); }

// A slice over the tensor's buffer that keeps the buffer alive until gRPC lets go.
grpc::Slice BorrowTensorBytes(const Tensor& t) {
  return grpc::Slice(t.raw_data(), t.TotalBytes(), &DeleteTensor, new Tensor(t));
}

absl::Status EncodeWithProtobuf(const RecvTensorResult& result, grpc::ByteBuffer* out) {
  tensorflow::RecvTensorResponse proto;
  proto.set_is_dead(result.is_dead);
  proto.set_send_start_micros(result.send_start_micros);
  if (!result.is_dead) result.tensor.AsProtoTensorContent(proto.mutable_tensor());
  if (proto.ByteSizeLong() > kMaxTensorContentBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("[RecvTensor] ", result.tensor.DebugString(0), " encodes to ",
                     proto.ByteSizeLong(), " bytes, over gRPC's 2 GiB message limit"));
  }
  *out = SerializeToByteBuffer(proto);
  return absl::OkStatus();
}

}  // namespace

absl::Status EncodeRecvTensorResponse(const RecvTensorResult& result, grpc::ByteBuffer* out) {
  const Tensor& t = result.tensor;
  if (result.is_dead || t.dtype() == DT_STRING || t.dtype() == DT_RESOURCE) {
    return EncodeWithProtobuf(result, out);
  }
  const uint64_t content = t.TotalBytes();
  if (content > kMaxTensorContentBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("[RecvTensor] ", DataTypeString(t.dtype()), t.shape().DebugString(),
                     " holds ", content, " bytes, over the ", kMaxTensorContentBytes,
                     " bytes one RecvTensorResponse can carry"));
  }
  tensorflow::TensorShapeProto shape;
  t.shape().AsProto(&shape);
  const std::string shape_bytes = shape.SerializeAsString();
  // TensorProto: dtype, tensor_shape, then tensor_content's tag and length.
  std::string tensor_head;
  PutVarint(Tag(kTensorDtype, kVarint), &tensor_head);
  PutVarint(t.dtype(), &tensor_head);
  PutVarint(Tag(kTensorShape, kLengthDelimited), &tensor_head);
  PutVarint(shape_bytes.size(), &tensor_head);
  tensor_head += shape_bytes;
  if (content > 0) {
    PutVarint(Tag(kTensorContent, kLengthDelimited), &tensor_head);
    PutVarint(content, &tensor_head);
  }
  // RecvTensorResponse: the scalars first, so the content can end the message.
  std::string head;
  head.reserve(tensor_head.size() + 32);
  if (result.send_start_micros != 0) {
    PutVarint(Tag(kResponseSendStart, kVarint), &head);
    PutVarint(static_cast<uint64_t>(result.send_start_micros), &head);
  }
  PutVarint(Tag(kResponseTensor, kLengthDelimited), &head);
  PutVarint(tensor_head.size() + content, &head);
  head += tensor_head;
  if (content < kZeroCopyMinBytes) {
    head.append(static_cast<const char*>(t.raw_data()), content);
    grpc::Slice slice(head);
    *out = grpc::ByteBuffer(&slice, 1);
    return absl::OkStatus();
  }
  grpc::Slice slices[2] = {grpc::Slice(head), BorrowTensorBytes(t)};
  *out = grpc::ByteBuffer(slices, 2);
  return absl::OkStatus();
}

// --- decoding ---------------------------------------------------------------------------

namespace {

// Reads protobuf wire format across gRPC's slices. Every read is bounded by
// the bytes left; a false return means the message ended early.
class SliceReader {
 public:
  struct Position {
    size_t slice = 0;
    size_t offset = 0;
  };

  explicit SliceReader(std::vector<grpc::Slice> slices) : slices_(std::move(slices)) {
    for (const grpc::Slice& s : slices_) remaining_ += s.size();
    SkipEmpty();
  }

  size_t remaining() const { return remaining_; }
  Position position() const { return pos_; }

  bool ReadVarint(uint64_t* v) {
    return wire::ReadVarint(
        [this](uint8_t* b) {
          if (remaining_ == 0) return false;
          *b = slices_[pos_.slice].begin()[pos_.offset];
          Advance(1);
          return true;
        },
        v);
  }

  // Copies (dst != nullptr) or skips the next `n` bytes.
  bool Read(size_t n, char* dst) {
    if (n > remaining_) return false;
    while (n > 0) {
      const grpc::Slice& s = slices_[pos_.slice];
      const size_t chunk = std::min(n, s.size() - pos_.offset);
      if (dst != nullptr) {
        std::memcpy(dst, s.begin() + pos_.offset, chunk);
        dst += chunk;
      }
      Advance(chunk);
      n -= chunk;
    }
    return true;
  }

  // Copies `n` bytes starting at `from` (a position already read past).
  void CopyFrom(Position from, size_t n, char* dst) const {
    SliceReader r(*this);
    r.remaining_ = n;  // Reads are bounded by n, which lies inside the slices.
    r.pos_ = from;
    r.SkipEmpty();
    r.Read(n, dst);
  }

 private:
  SliceReader(const SliceReader&) = default;  // Shares no state but the slices' refs.

  void Advance(size_t n) {
    pos_.offset += n;
    remaining_ -= n;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (pos_.slice < slices_.size() && pos_.offset == slices_[pos_.slice].size()) {
      ++pos_.slice;
      pos_.offset = 0;
    }
  }

  std::vector<grpc::Slice> slices_;
  Position pos_;
  size_t remaining_ = 0;
};

// What the scan of a RecvTensorResponse found. `unusual` means a layout the
// fast path does not handle (then protobuf parses the message).
struct Scan {
  bool unusual = false;
  bool is_dead = false;
  int64_t send_start_micros = 0;
  bool has_tensor = false;
  uint64_t dtype = 0;
  std::string shape_bytes;
  bool has_content = false;
  SliceReader::Position content_at;
  uint64_t content_bytes = 0;
};


absl::Status Truncated(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("[RecvTensor] response is not a RecvTensorResponse: ", what));
}

// Skips one field of `wire_type`.
absl::Status SkipField(uint32_t wire_type, SliceReader* r) {
  uint64_t v = 0;
  switch (wire_type) {
    case kVarint:
      if (!r->ReadVarint(&v)) return Truncated("truncated varint");
      return absl::OkStatus();
    case kFixed64:
      if (!r->Read(8, nullptr)) return Truncated("truncated fixed64");
      return absl::OkStatus();
    case kFixed32:
      if (!r->Read(4, nullptr)) return Truncated("truncated fixed32");
      return absl::OkStatus();
    case kLengthDelimited:
      if (!r->ReadVarint(&v) || !r->Read(v, nullptr)) return Truncated("truncated field");
      return absl::OkStatus();
    default:
      return Truncated(absl::StrCat("wire type ", wire_type));
  }
}

// Scans the `length` bytes of a TensorProto.
absl::Status ScanTensor(uint64_t length, SliceReader* r, Scan* scan) {
  if (length > r->remaining()) return Truncated("tensor field runs past the message");
  const size_t end = r->remaining() - length;
  // The tensor's bytes still unread; 0 once a varint ran past its end.
  auto left = [&] { return r->remaining() > end ? r->remaining() - end : 0; };
  while (r->remaining() > end) {
    uint64_t tag = 0, v = 0;
    if (!r->ReadVarint(&tag)) return Truncated("truncated tag in tensor");
    if (tag == Tag(kTensorDtype, kVarint)) {
      if (!r->ReadVarint(&scan->dtype)) return Truncated("truncated dtype");
    } else if (tag == Tag(kTensorShape, kLengthDelimited) && scan->shape_bytes.empty()) {
      if (!r->ReadVarint(&v) || v > left()) return Truncated("truncated shape");
      scan->shape_bytes.resize(v);
      r->Read(v, scan->shape_bytes.data());
    } else if (tag == Tag(kTensorContent, kLengthDelimited) && !scan->has_content) {
      if (!r->ReadVarint(&v) || v > left()) return Truncated("truncated content");
      scan->has_content = true;
      scan->content_bytes = v;
      scan->content_at = r->position();
      r->Read(v, nullptr);
    } else {
      scan->unusual = true;
      RETURN_IF_ERROR(SkipField(tag & 7, r));
    }
    if (r->remaining() < end) return Truncated("field runs past the tensor");
  }
  return absl::OkStatus();
}

absl::Status ScanResponse(SliceReader* r, Scan* scan) {
  while (r->remaining() > 0) {
    uint64_t tag = 0, v = 0;
    if (!r->ReadVarint(&tag)) return Truncated("truncated tag");
    if (tag == Tag(kResponseTensor, kLengthDelimited) && !scan->has_tensor) {
      scan->has_tensor = true;
      if (!r->ReadVarint(&v)) return Truncated("truncated tensor length");
      RETURN_IF_ERROR(ScanTensor(v, r, scan));
    } else if (tag == Tag(kResponseIsDead, kVarint)) {
      if (!r->ReadVarint(&v)) return Truncated("truncated is_dead");
      scan->is_dead = v != 0;
    } else if (tag == Tag(kResponseSendStart, kVarint)) {
      if (!r->ReadVarint(&v)) return Truncated("truncated send_start_micros");
      scan->send_start_micros = static_cast<int64_t>(v);
    } else {
      if ((tag >> 3) == kResponseTensor) scan->unusual = true;  // Repeated: protobuf merges.
      if ((tag >> 3) == 0) return Truncated("field number 0");
      RETURN_IF_ERROR(SkipField(tag & 7, r));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DataType> CheckDtype(uint64_t dtype) {
  if (dtype > std::numeric_limits<int32_t>::max() ||
      !tensorflow::DataType_IsValid(static_cast<int>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("[RecvTensor] dtype ", dtype, " is not a DataType"));
  }
  const DataType d = static_cast<DataType>(dtype);
  if (!IsSupportedDataType(d) || IsRefType(d)) {
    return absl::UnimplementedError(
        absl::StrCat("[RecvTensor] dtype ", DataTypeString(d), " is not supported"));
  }
  return d;
}

// The fast path: dtype, shape and one tensor_content, as Encode writes them
// (and TensorFlow's senders do for fixed-size dtypes).
absl::StatusOr<Tensor> TensorFromScan(const Scan& scan, const SliceReader& r) {
  ASSIGN_OR_RETURN(DataType dtype, CheckDtype(scan.dtype));
  tensorflow::TensorShapeProto shape_proto;
  if (!shape_proto.ParseFromString(scan.shape_bytes)) {
    return absl::InvalidArgumentError("[RecvTensor] tensor_shape does not parse");
  }
  absl::StatusOr<TensorShape> shape = TensorShape::FromProto(shape_proto);
  if (!shape.ok()) return WithPrefix(shape.status(), "[RecvTensor] ");
  const uint64_t elements = shape->num_elements();
  const uint64_t needed = elements * DataTypeSize(dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / DataTypeSize(dtype) ||
      needed != scan.content_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("[RecvTensor] tensor_content has ", scan.content_bytes, " bytes but ",
                     DataTypeString(dtype), shape->DebugString(), " needs ", needed));
  }
  Tensor t(dtype, *shape);  // Sized by bytes that did arrive: no lying header.
  if (needed == 0) return t;
  r.CopyFrom(scan.content_at, needed, static_cast<char*>(t.raw_data()));
  if (dtype == DT_BOOL) {  // Any nonzero byte is true; other bool bytes are UB.
    auto* b = static_cast<uint8_t*>(t.raw_data());
    for (uint64_t i = 0; i < elements; ++i) b[i] = b[i] != 0;
  }
  return t;
}

// Any other layout, through protobuf. An element takes at least one byte in
// every encoding a sender uses for RecvTensor, so more elements than bytes
// is a lying header (or a splat no sender writes), refused before allocating.
absl::Status DecodeWithProtobuf(const grpc::ByteBuffer& bytes, RecvTensorResult* result) {
  tensorflow::RecvTensorResponse proto;
  RETURN_IF_ERROR(ParseFromByteBuffer(bytes, "[RecvTensor] response", &proto));
  result->is_dead = proto.is_dead();
  result->send_start_micros = proto.send_start_micros();
  result->tensor = Tensor();
  if (proto.is_dead()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckDtype(proto.tensor().dtype()).status());
  absl::StatusOr<TensorShape> shape = TensorShape::FromProto(proto.tensor().tensor_shape());
  if (!shape.ok()) return WithPrefix(shape.status(), "[RecvTensor] ");
  if (static_cast<uint64_t>(shape->num_elements()) > bytes.Length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[RecvTensor] tensor claims shape ", shape->DebugString(), " (",
        shape->num_elements(), " elements) but the response has only ", bytes.Length(),
        " bytes"));
  }
  absl::StatusOr<Tensor> t = Tensor::FromProto(proto.tensor());
  if (!t.ok()) return WithPrefix(t.status(), "[RecvTensor] ");
  result->tensor = *std::move(t);
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeRecvTensorResponse(const grpc::ByteBuffer& bytes, RecvTensorResult* result) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return Truncated("unreadable byte buffer");
  SliceReader reader(std::move(slices));
  Scan scan;
  RETURN_IF_ERROR(ScanResponse(&reader, &scan));
  // Dead tensors, typed *_val fields, zero-element tensors (no content),
  // strings (their content is a length list) and unusual layouts are rare or
  // small: protobuf parses those.
  const bool fixed_size = scan.dtype <= std::numeric_limits<int32_t>::max() &&
                          DataTypeSize(static_cast<DataType>(scan.dtype)) > 0;
  if (scan.unusual || scan.is_dead || !scan.has_tensor || !scan.has_content || !fixed_size) {
    return DecodeWithProtobuf(bytes, result);
  }
  ASSIGN_OR_RETURN(result->tensor, TensorFromScan(scan, reader));
  result->is_dead = false;
  result->send_start_micros = scan.send_start_micros;
  return absl::OkStatus();
}

}  // namespace dflow
