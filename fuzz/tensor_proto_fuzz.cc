// Fuzzes TensorProto decoding: Tensor::FromProto (every tensor a request,
// feed, attr or checkpoint carries) and the gRPC RecvTensorResponse decoder
// (tensor_coding.h) that parses straight into a tensor. First input byte: 0..127
// a TensorProto follows; 128..255 a RecvTensorResponse follows, cut into two
// gRPC slices at (byte - 128) to exercise the split-buffer paths.
// A decoded tensor (up to 64K elements) must re-encode (both encodings) and
// decode again.
#include <cstdlib>
#include <string>
#include <vector>

#include "dflow/distributed/rpc/tensor_coding.h"
#include "dflow/proto/tensor.pb.h"
#include "fuzz/fuzz_util.h"
#include "grpcpp/support/byte_buffer.h"

namespace dflow::fuzz {

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  std::vector<Tensor> tensors = {Tensor::Vec<float>({1, 2, 3}), Tensor::Scalar<int64_t>(-7),
                                 Tensor::Vec<std::string>({"a", "", "bc"}),
                                 Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})),
                                 Tensor::Vec<bool>({true, false})};
  for (const Tensor& t : tensors) {
    tensorflow::TensorProto content, field;
    t.AsProtoTensorContent(&content);
    t.AsProtoField(&field);
    seeds.push_back(std::string(1, '\0') + content.SerializeAsString());
    seeds.push_back(std::string(1, '\1') + field.SerializeAsString());
    RecvTensorResult r;
    r.tensor = t;
    r.send_start_micros = 12345;
    grpc::ByteBuffer wire;
    if (!EncodeRecvTensorResponse(r, &wire).ok()) continue;
    std::vector<grpc::Slice> slices;
    if (!wire.Dump(&slices).ok()) continue;
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    seeds.push_back(std::string(1, static_cast<char>(128 + 5)) + bytes);
  }
  return seeds;
}

namespace {

void CheckRoundTrip(const Tensor& t) {
  // A few bytes can broadcast one value to millions of elements: re-encoding
  // those as typed fields is legitimate but takes seconds, not a finding.
  if (t.NumElements() > (1 << 16)) return;
  tensorflow::TensorProto content, field;
  t.AsProtoTensorContent(&content);
  t.AsProtoField(&field);
  for (const auto* p : {&content, &field}) {
    auto again = Tensor::FromProto(*p);
    if (!again.ok() || again->dtype() != t.dtype() || again->shape() != t.shape()) {
      std::fprintf(stderr, "re-encoded tensor does not decode: %s\n",
                   std::string(again.status().message()).c_str());
      std::abort();
    }
  }
}

}  // namespace
}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dflow::fuzz::InitCommon();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  if (size < 1 || size > fuzz::kMaxInputBytes) return -1;
  const uint8_t mode = data[0];
  ++data;
  --size;
  if (mode < 128) {
    tensorflow::TensorProto proto;
    if (!proto.ParseFromArray(data, static_cast<int>(size))) return -1;
    auto t = Tensor::FromProto(proto);
    if (t.ok()) fuzz::CheckRoundTrip(*t);
    return 0;
  }
  size_t cut = std::min<size_t>(mode - 128, size);
  grpc::Slice slices[2] = {grpc::Slice(data, cut), grpc::Slice(data + cut, size - cut)};
  grpc::ByteBuffer wire(slices, 2);
  RecvTensorResult result;
  if (DecodeRecvTensorResponse(wire, &result).ok() && !result.is_dead) {
    fuzz::CheckRoundTrip(result.tensor);
  }
  return 0;
}
