// Wire coding of RecvTensor's response for the gRPC transport, without
// protobuf's copies of the tensor bytes. On the wire it is an ordinary
// tensorflow.RecvTensorResponse, so TensorFlow peers read and write it as
// usual (fields may come in any order; dflow writes the scalars first):
//
//   RecvTensorResponse { is_dead = 2; send_start_micros = 3;
//                        tensor = 1 { dtype = 1; tensor_shape = 2; tensor_content = 4 } }
//
// The sender writes the small fields by hand into one slice and points a
// second slice at the tensor's own buffer (holding a reference until gRPC is
// done with it). The receiver scans the fields and copies tensor_content once,
// from gRPC's slices straight into a fresh tensor.
//
//   grpc::ByteBuffer wire = EncodeRecvTensorResponse(result);   // sender
//   RETURN_IF_ERROR(DecodeRecvTensorResponse(wire, &out));      // receiver
#ifndef DFLOW_DISTRIBUTED_RPC_TENSOR_CODING_H_
#define DFLOW_DISTRIBUTED_RPC_TENSOR_CODING_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "dflow/distributed/worker_interface.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

// Tensors of at least this many bytes are sent from their own buffer; smaller
// ones are copied next to the header (a slice costs more than the copy).
inline constexpr size_t kZeroCopyMinBytes = 1024;

// The largest tensor_content one gRPC message carries: protobuf parsers
// (TensorFlow's included) refuse messages of 2 GiB or more.
inline constexpr uint64_t kMaxTensorContentBytes = (uint64_t{2} << 30) - 4096;

// `result` as RecvTensorResponse bytes. Fixed-size dtypes are hand-encoded
// (content not copied from kZeroCopyMinBytes on); string and resource tensors
// go through protobuf. InvalidArgument when the content exceeds
// kMaxTensorContentBytes (it would not parse on the other side).
absl::Status EncodeRecvTensorResponse(const RecvTensorResult& result, grpc::ByteBuffer* out);

// Parses RecvTensorResponse bytes into `result` (a fresh tensor; one copy of
// the content). InvalidArgument, naming what is wrong, for bytes that are not
// a RecvTensorResponse, a content size that does not match dtype x shape, or
// a header claiming more elements than the message carries (so a lying
// header never causes a large allocation); Unimplemented for a dtype dflow
// lacks. Layouts other than the one Encode writes (fields repeated or
// reordered, typed *_val fields) are parsed with protobuf.
absl::Status DecodeRecvTensorResponse(const grpc::ByteBuffer& bytes, RecvTensorResult* result);

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_TENSOR_CODING_H_
