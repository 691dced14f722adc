#include "dflow/distributed/rpc/tensor_coding.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/worker_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::RandomBits;
using worker_test::SameBytes;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

grpc::ByteBuffer Encode(const RecvTensorResult& r) {
  grpc::ByteBuffer out;
  absl::Status s = EncodeRecvTensorResponse(r, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// `bytes` split into slices of `chunk` bytes, as gRPC hands a message over.
grpc::ByteBuffer Chunked(const std::string& bytes, size_t chunk) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    slices.emplace_back(bytes.data() + i, std::min(chunk, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(TensorCodingTest, LargeTensorIsSentFromItsOwnBufferAndParsesAsProtobuf) {
  RecvTensorResult in;
  in.tensor = RandomBits(3 << 18, 1);  // 3 MiB.
  in.send_start_micros = 1234567;
  const long uses = in.tensor.BufferUseCount();
  grpc::ByteBuffer wire = Encode(in);
  EXPECT_EQ(in.tensor.BufferUseCount(), uses + 1);  // The wire bytes hold a reference.
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), static_cast<const uint8_t*>(in.tensor.raw_data()));  // No copy.

  // A TensorFlow peer (protobuf) reads the same message.
  tensorflow::RecvTensorResponse proto;
  ASSERT_TRUE(proto.ParseFromString(Flatten(wire)));
  EXPECT_EQ(proto.send_start_micros(), 1234567);
  EXPECT_FALSE(proto.is_dead());
  absl::StatusOr<Tensor> via_proto = Tensor::FromProto(proto.tensor());
  ASSERT_TRUE(via_proto.ok()) << via_proto.status();
  EXPECT_TRUE(SameBytes(*via_proto, in.tensor));

  RecvTensorResult out;
  absl::Status s = DecodeRecvTensorResponse(wire, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(SameBytes(out.tensor, in.tensor));
  EXPECT_FALSE(out.tensor.SharesBufferWith(in.tensor));
  EXPECT_EQ(out.send_start_micros, 1234567);
  wire.Clear();
  slices.clear();
  EXPECT_EQ(in.tensor.BufferUseCount(), uses);  // Released with the bytes.
}

TEST(TensorCodingTest, ProtobufEncodedResponsesDecodeWhateverTheSlicing) {
  // What a TensorFlow sender writes, cut at every awkward boundary.
  for (int64_t n : {0, 1, 5, 300, 4096}) {
    RecvTensorResult in;
    in.tensor = RandomBits(n, 7);
    tensorflow::RecvTensorResponse proto;
    in.tensor.AsProtoTensorContent(proto.mutable_tensor());
    proto.set_send_start_micros(99);
    const std::string bytes = proto.SerializeAsString();
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{64}, bytes.size() + 1}) {
      RecvTensorResult out;
      absl::Status s = DecodeRecvTensorResponse(Chunked(bytes, chunk), &out);
      ASSERT_TRUE(s.ok()) << "n=" << n << " chunk=" << chunk << ": " << s;
      EXPECT_TRUE(SameBytes(out.tensor, in.tensor)) << "n=" << n << " chunk=" << chunk;
      EXPECT_EQ(out.send_start_micros, 99);
    }
  }
}

TEST(TensorCodingTest, SmallDeadStringAndBoolTensorsRoundTrip) {
  RecvTensorResult small;
  small.tensor = Tensor::FromVector<int64_t>({1, -2, 3}, TensorShape({3, 1}));
  RecvTensorResult out;
  ASSERT_TRUE(DecodeRecvTensorResponse(Encode(small), &out).ok());
  EXPECT_EQ(out.tensor.dtype(), DT_INT64);
  EXPECT_EQ(out.tensor.shape(), TensorShape({3, 1}));
  EXPECT_EQ(out.tensor.flat<int64_t>()[1], -2);

  RecvTensorResult dead;
  dead.is_dead = true;
  out = {};
  ASSERT_TRUE(DecodeRecvTensorResponse(Encode(dead), &out).ok());
  EXPECT_TRUE(out.is_dead);

  RecvTensorResult text;
  text.tensor = Tensor::Vec<std::string>({"a", std::string(5000, 'b')});
  out = {};
  ASSERT_TRUE(DecodeRecvTensorResponse(Encode(text), &out).ok());
  ASSERT_EQ(out.tensor.dtype(), DT_STRING);
  EXPECT_EQ(out.tensor.flat<std::string>()[1], std::string(5000, 'b'));

  // Bool bytes other than 0/1 from a peer read as true.
  tensorflow::RecvTensorResponse proto;
  proto.mutable_tensor()->set_dtype(DT_BOOL);
  proto.mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(2);
  proto.mutable_tensor()->set_tensor_content(std::string("\x00\x07", 2));
  out = {};
  ASSERT_TRUE(DecodeRecvTensorResponse(SerializeToByteBuffer(proto), &out).ok());
  EXPECT_EQ(out.tensor.flat<bool>()[0], false);
  EXPECT_EQ(out.tensor.flat<bool>()[1], true);
}

// A TensorFlow peer may send a string tensor as tensor_content (varint32
// lengths, then bytes). The fast path once divided by the dtype's size (0).
TEST(TensorCodingTest, StringTensorContentFromAPeerDecodes) {
  tensorflow::RecvTensorResponse proto;
  proto.mutable_tensor()->set_dtype(DT_STRING);
  proto.mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(3);
  proto.mutable_tensor()->set_tensor_content(std::string("\x02\x00\x03" "abxyz", 8));
  RecvTensorResult out;
  absl::Status s = DecodeRecvTensorResponse(SerializeToByteBuffer(proto), &out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.tensor.dtype(), DT_STRING);
  EXPECT_EQ(out.tensor.flat<std::string>()[0], "ab");
  EXPECT_EQ(out.tensor.flat<std::string>()[1], "");
  EXPECT_EQ(out.tensor.flat<std::string>()[2], "xyz");

  proto.mutable_tensor()->set_tensor_content(std::string("\x09\x00\x03" "abxyz", 8));
  s = DecodeRecvTensorResponse(SerializeToByteBuffer(proto), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("lengths add up to 12 bytes but 5 follow"));
}

// A response whose header claims `dims` of `dtype` and carries `content`.
grpc::ByteBuffer Lying(tensorflow::DataType dtype, std::vector<int64_t> dims,
                       const std::string& content) {
  tensorflow::RecvTensorResponse proto;
  proto.mutable_tensor()->set_dtype(dtype);
  for (int64_t d : dims) proto.mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(d);
  if (!content.empty()) proto.mutable_tensor()->set_tensor_content(content);
  return SerializeToByteBuffer(proto);
}

TEST(TensorCodingTest, LyingOrBrokenResponsesAreClearErrors) {
  struct Case {
    grpc::ByteBuffer bytes;
    std::string expected;
  };
  const std::string four(4, 'x');
  std::vector<Case> cases;
  // Shape x dtype disagrees with the bytes sent, in both directions.
  cases.push_back({Lying(DT_FLOAT, {int64_t{1} << 40}, four), "needs 4398046511104"});
  cases.push_back({Lying(DT_FLOAT, {2}, four), "needs 8"});
  // Elements that would overflow, negative dimensions.
  cases.push_back({Lying(DT_DOUBLE, {int64_t{1} << 31, int64_t{1} << 31}, four), "needs"});
  cases.push_back({Lying(DT_FLOAT, {-3}, four), "negative"});
  // A huge shape with no content at all: refused before allocating.
  cases.push_back({Lying(DT_FLOAT, {int64_t{1} << 30, 16}, ""), "has only"});
  cases.push_back({Lying(static_cast<tensorflow::DataType>(999), {1}, four), "999"});
  // Garbage and a message cut short.
  cases.push_back({Chunked(std::string(11, '\xff'), 4), "not a RecvTensorResponse"});
  RecvTensorResult big;
  big.tensor = RandomBits(1 << 16, 3);
  const std::string whole = Flatten(Encode(big));
  cases.push_back({Chunked(whole.substr(0, whole.size() / 2), 1000), "not a RecvTensorResponse"});
  // A tag whose (overlong) varint runs past the tensor's end, then a huge
  // shape length: found by fuzz/tensor_proto_fuzz (it allocated the length).
  cases.push_back({Chunked(std::string("\x0a\x01\x92\x00\x80\x80\x80\x80\x80\x80\x01", 11), 3),
                   "not a RecvTensorResponse"});
  for (size_t i = 0; i < cases.size(); ++i) {
    RecvTensorResult out;
    absl::Status s = DecodeRecvTensorResponse(cases[i].bytes, &out);
    EXPECT_THAT(s.code(), testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                         absl::StatusCode::kUnimplemented))
        << i << ": " << s;
    EXPECT_THAT(Msg(s), HasSubstr("[RecvTensor]")) << i;
    EXPECT_THAT(Msg(s), HasSubstr(cases[i].expected)) << i << ": " << s;
  }
}

TEST(TensorCodingTest, RandomBytesNeverCrash) {
  std::mt19937 rng(5);
  RecvTensorResult big;
  big.tensor = RandomBits(2048, 4);
  const std::string valid = Flatten(Encode(big));
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = valid;
    for (int k = 0; k < 4; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    RecvTensorResult out;
    absl::Status s = DecodeRecvTensorResponse(Chunked(bytes, 1 + rng() % 700), &out);
    if (s.ok()) {
      EXPECT_LE(static_cast<size_t>(out.tensor.NumElements()), bytes.size());
    } else {
      EXPECT_THAT(Msg(s), HasSubstr("[RecvTensor]")) << s;
    }
  }
}

}  // namespace
}  // namespace dflow
