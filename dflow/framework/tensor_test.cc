#include "dflow/framework/tensor.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using tensorflow::TensorProto;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  auto f = t.flat<T>();
  return std::vector<T>(f.begin(), f.end());
}

TensorProto ProtoOf(DataType dtype, std::vector<int64_t> dims) {
  TensorProto p;
  p.set_dtype(dtype);
  for (int64_t d : dims) p.mutable_tensor_shape()->add_dim()->set_size(d);
  return p;
}

ResourceHandle Handle(const std::string& name) {
  ResourceHandle h;
  h.device = "/job:localhost/replica:0/task:0/device:CPU:0";
  h.container = "localhost";
  h.name = name;
  h.hash_code = 99;
  h.maybe_type_name = "Var";
  return h;
}

// Both encodings must reproduce dtype, shape and every value.
template <typename T>
void ExpectRoundTrips(const std::vector<T>& values, const TensorShape& shape) {
  Tensor t = Tensor::FromVector(values, shape);
  for (bool content : {true, false}) {
    SCOPED_TRACE(content ? "tensor_content" : "typed field");
    TensorProto p;
    if (content) {
      t.AsProtoTensorContent(&p);
    } else {
      t.AsProtoField(&p);
      EXPECT_TRUE(p.tensor_content().empty());
    }
    absl::StatusOr<Tensor> back = Tensor::FromProto(p);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype(), DataTypeToEnum<T>::value);
    EXPECT_EQ(back->shape(), shape);
    EXPECT_EQ(Values<T>(*back), values);
  }
}

TEST(TensorTest, RoundTripsEverySupportedDtype) {
  const TensorShape s23({2, 3});
  ExpectRoundTrips<float>({1.5f, -2.f, 0.f, 3.25f, std::numeric_limits<float>::max(), -0.f},
                          s23);
  ExpectRoundTrips<double>({1e300, -2.5, 0, 1.0 / 3, 7, -8}, s23);
  ExpectRoundTrips<int32_t>({1, -2, 3, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max(), 0},
                            s23);
  ExpectRoundTrips<int64_t>({1LL << 40, -(1LL << 50), 0, 1, -1, 123456789012345LL}, s23);
  ExpectRoundTrips<uint8_t>({0, 1, 127, 128, 254, 255}, s23);
  ExpectRoundTrips<bool>({true, false, true, true, false, false}, s23);
  ExpectRoundTrips<std::string>({"a", "", std::string("nul\0byte", 8), "xyz", "é", "long"},
                                s23);
  ExpectRoundTrips<ResourceHandle>({Handle("v0"), Handle("v1")}, TensorShape({2}));
  ExpectRoundTrips<float>({4.f}, TensorShape());  // Scalar.
  ExpectRoundTrips<int32_t>({}, TensorShape({0, 3}));  // Empty.
}

TEST(TensorTest, ABorrowedBufferKeepsItsOwnerUntilTheLastTensorGoes) {
  struct alignas(kTensorAlignment) Block {
    float v[6] = {1, 2, 3, 4, 5, 6};
  };
  auto owner = std::make_shared<Block>();
  const std::weak_ptr<Block> watch = owner;
  Tensor t = Tensor::Borrow(DT_FLOAT, TensorShape({2, 3}), owner->v, owner);
  owner.reset();
  EXPECT_TRUE(t.IsBorrowed());
  EXPECT_EQ(t.raw_data(), watch.lock()->v);  // No copy.
  absl::StatusOr<Tensor> reshaped = t.Reshaped(TensorShape({6}));
  ASSERT_TRUE(reshaped.ok());
  EXPECT_TRUE(reshaped->IsBorrowed());
  EXPECT_EQ(reshaped->flat<float>()[5], 6);
  const Tensor copy = t.DeepCopy();
  EXPECT_FALSE(copy.IsBorrowed());
  t = Tensor();
  EXPECT_FALSE(watch.expired());  // `reshaped` still shares the buffer.
  reshaped = Tensor();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(copy.flat<float>()[4], 5);
  EXPECT_FALSE(Tensor::Vec<float>({1}).IsBorrowed());
}

// Bytes written by TensorFlow 2.x's tf.make_tensor_proto(...).SerializeToString().
TEST(TensorTest, ParsesProtosWrittenByTensorFlow) {
  struct Case {
    std::string hex;
    DataType dtype;
    TensorShape shape;
  };
  TensorProto p;
  // [[1,2],[3,4]] int32, via tensor_content.
  ASSERT_TRUE(p.ParseFromString(absl::HexStringToBytes(
      "080312081202080212020802221001000000020000000300000004000000")));
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), TensorShape({2, 2}));
  EXPECT_THAT(Values<int32_t>(*t), ElementsAre(1, 2, 3, 4));
  TensorProto mine;
  t->AsProtoTensorContent(&mine);
  EXPECT_EQ(absl::BytesToHexString(mine.SerializeAsString()),
            "080312081202080212020802221001000000020000000300000004000000");

  // [1.5, -2.0] float.
  ASSERT_TRUE(p.ParseFromString(absl::HexStringToBytes("080112041202080222080000c03f000000c0")));
  t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<float>(*t), ElementsAre(1.5f, -2.0f));

  // ["ab", "", "xyz"] string, via string_val.
  ASSERT_TRUE(p.ParseFromString(absl::HexStringToBytes("0807120412020803420261624200420378797a")));
  t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<std::string>(*t), ElementsAre("ab", "", "xyz"));
  t->AsProtoTensorContent(&mine);
  EXPECT_EQ(absl::BytesToHexString(mine.SerializeAsString()),
            "0807120412020803420261624200420378797a");

  // [True, False, True] bool, via bool_val.
  ASSERT_TRUE(p.ParseFromString(absl::HexStringToBytes("080a1204120208035a03010001")));
  t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<bool>(*t), ElementsAre(true, false, true));
  t->AsProtoField(&mine);
  EXPECT_EQ(absl::BytesToHexString(mine.SerializeAsString()), "080a1204120208035a03010001");
}

TEST(TensorTest, ShortTypedListRepeatsTheLastValue) {
  TensorProto p = ProtoOf(DT_FLOAT, {4});
  p.add_float_val(1);
  p.add_float_val(2);
  EXPECT_THAT(Values<float>(*Tensor::FromProto(p)), ElementsAre(1, 2, 2, 2));

  p = ProtoOf(DT_DOUBLE, {2, 2});
  p.add_double_val(0.5);
  EXPECT_THAT(Values<double>(*Tensor::FromProto(p)), ElementsAre(0.5, 0.5, 0.5, 0.5));

  p = ProtoOf(DT_INT32, {3});
  p.add_int_val(-7);
  EXPECT_THAT(Values<int32_t>(*Tensor::FromProto(p)), ElementsAre(-7, -7, -7));

  p = ProtoOf(DT_UINT8, {3});
  p.add_int_val(200);
  p.add_int_val(9);
  EXPECT_THAT(Values<uint8_t>(*Tensor::FromProto(p)), ElementsAre(200, 9, 9));

  p = ProtoOf(DT_INT64, {3});
  p.add_int64_val(1LL << 40);
  EXPECT_THAT(Values<int64_t>(*Tensor::FromProto(p)),
              ElementsAre(1LL << 40, 1LL << 40, 1LL << 40));

  p = ProtoOf(DT_BOOL, {3});
  p.add_bool_val(false);
  p.add_bool_val(true);
  EXPECT_THAT(Values<bool>(*Tensor::FromProto(p)), ElementsAre(false, true, true));

  p = ProtoOf(DT_STRING, {3});
  p.add_string_val("a");
  p.add_string_val("b");
  EXPECT_THAT(Values<std::string>(*Tensor::FromProto(p)), ElementsAre("a", "b", "b"));
}

TEST(TensorTest, NoValuesMeansZeros) {
  absl::StatusOr<Tensor> t = Tensor::FromProto(ProtoOf(DT_INT32, {2, 2}));
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<int32_t>(*t), ElementsAre(0, 0, 0, 0));
  t = Tensor::FromProto(ProtoOf(DT_STRING, {2}));
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<std::string>(*t), ElementsAre("", ""));
  t = Tensor::FromProto(ProtoOf(DT_FLOAT, {}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->scalar<float>(), 0.f);
}

TEST(TensorTest, TooManyTypedValuesFail) {
  TensorProto p = ProtoOf(DT_INT32, {2});
  for (int v : {1, 2, 3}) p.add_int_val(v);
  absl::Status s = Tensor::FromProto(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3 values in int_val"));

  p = ProtoOf(DT_STRING, {1});
  p.add_string_val("a");
  p.add_string_val("b");
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);

  p = ProtoOf(DT_RESOURCE, {1});
  Handle("a").AsProto(p.add_resource_handle_val());
  Handle("b").AsProto(p.add_resource_handle_val());
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, ContentSizeMismatchFails) {
  TensorProto p = ProtoOf(DT_FLOAT, {2, 2});
  p.set_tensor_content(std::string(12, '\0'));  // Needs 16.
  absl::Status s = Tensor::FromProto(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("12 bytes"));
  EXPECT_THAT(s.message(), HasSubstr("16"));
  p.set_tensor_content(std::string(20, '\0'));
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p = ProtoOf(DT_INT64, {0});
  p.set_tensor_content(std::string(8, '\0'));
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, ContentWithHugeShapeFailsWithoutAllocating) {
  TensorProto p = ProtoOf(DT_FLOAT, {1LL << 40, 1LL << 20});  // 2^60 floats.
  p.set_tensor_content(std::string(4, '\0'));
  absl::Status s = Tensor::FromProto(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("4 bytes"));
}

// Found by UBSan (SparseCross's size check): the element count of a shape
// past int64 saturates instead of overflowing, and the byte check refuses it.
TEST(TensorTest, ElementCountPastInt64SaturatesAndIsRefused) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(TensorShape({max, 2}).num_elements(), max);
  EXPECT_EQ(TensorShape({int64_t{1} << 40, int64_t{1} << 40}).num_elements(), max);
  EXPECT_EQ(TensorShape({max, 2, 0}).num_elements(), 0);
  EXPECT_EQ(TensorShape({3, 4}).num_elements(), 12);
  TensorProto p = ProtoOf(DT_FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  p.add_float_val(1.0f);
  EXPECT_FALSE(Tensor::FromProto(p).ok());
  EXPECT_EQ(CheckTensorBytes(DT_FLOAT, TensorShape({int64_t{1} << 40, int64_t{1} << 40})).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TensorTest, SplatWithAbsurdShapeFailsWithoutAllocating) {
  TensorProto p = ProtoOf(DT_FLOAT, {1LL << 20, 1LL << 20});  // 2^40 floats = 4 TiB.
  p.add_float_val(1.0f);
  absl::Status s = Tensor::FromProto(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("[1048576,1048576]"));
  EXPECT_THAT(s.message(), HasSubstr("8 GiB"));
  // A large but plausible splat still works.
  TensorProto ok = ProtoOf(DT_FLOAT, {1000, 1000});
  ok.add_float_val(2.0f);
  absl::StatusOr<Tensor> t = Tensor::FromProto(ok);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->flat<float>()[999999], 2.0f);
}

TEST(TensorTest, BoolContentNormalisesNonzeroBytes) {
  TensorProto p = ProtoOf(DT_BOOL, {3});
  p.set_tensor_content(std::string("\x00\x02\xff", 3));
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Values<bool>(*t), ElementsAre(false, true, true));
  EXPECT_EQ(static_cast<const uint8_t*>(t->raw_data())[1], 1);
}

// TensorFlow's client sends string feeds in tensor_content: the varint32
// length of every element, then all their bytes.
TEST(TensorTest, StringContentDecodesTensorFlowsStringList) {
  const std::string big(200, 'x');  // Its length takes two varint bytes: c8 01.
  TensorProto p = ProtoOf(DT_STRING, {2, 2});
  p.set_tensor_content(absl::StrCat(std::string("\x02\x00\xc8\x01\x09", 5), "ab", big,
                                    "h\xc3\xa9llo\xe2\x9c\x93"));
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), TensorShape({2, 2}));
  EXPECT_THAT(Values<std::string>(*t), ElementsAre("ab", "", big, "héllo✓"));

  p = ProtoOf(DT_STRING, {2});
  p.set_tensor_content(std::string("\x00\x00", 2));  // Two empty strings.
  t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Values<std::string>(*t), ElementsAre("", ""));
}

TEST(TensorTest, BadStringContentFailsNamingTheProblem) {
  struct Case {
    std::vector<int64_t> dims;
    std::string content;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{2}, std::string("\x02\x01" "abcd", 6), "lengths add up to 3 bytes but 4 follow"},
           {{2}, std::string("\x05\x01" "ab", 4), "lengths add up to 6 bytes but 2 follow"},
           {{1}, std::string("\xff\xff", 2), "bad length of element 0"},
           {{1}, std::string("\xff\xff\xff\xff\xff\x01", 6), "bad length of element 0"},
           {{1LL << 33}, "abcd", "cannot hold [8589934592]"},
       }) {
    TensorProto p = ProtoOf(DT_STRING, c.dims);
    p.set_tensor_content(c.content);
    absl::Status s = Tensor::FromProto(p).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.error));
  }
}

TEST(TensorTest, ContentForResourcesFails) {
  TensorProto p = ProtoOf(DT_RESOURCE, {1});
  p.set_tensor_content("abcd");
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

// A 50-byte request once killed a server: a string Const of shape [2^33]
// with no values counted one byte an element and died in std::bad_alloc.
TEST(TensorTest, HugeStringShapeIsRefusedBeforeAllocating) {
  absl::Status s = Tensor::FromProto(ProtoOf(DT_STRING, {1LL << 33})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("string[8589934592]"));
}

// A short string_val repeats its last value: every repeat's bytes count.
TEST(TensorTest, StringSplatCountsEveryRepeatsBytes) {
  const uint64_t saved = TensorByteLimit();
  SetTensorByteLimit(uint64_t{64} << 20);
  TensorProto p = ProtoOf(DT_STRING, {300});
  p.add_string_val(std::string(1 << 20, 'a'));  // 300 x 1 MiB.
  absl::Status s = Tensor::FromProto(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("314572800 bytes of strings"));
  EXPECT_THAT(s.message(), HasSubstr("over the 67108864 bytes limit"));
  p.mutable_tensor_shape()->mutable_dim(0)->set_size(30);  // 30 MiB fits.
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->flat<std::string>()[29].size(), size_t{1} << 20);
  SetTensorByteLimit(saved);
}

TEST(TensorTest, UnsupportedDtypesAndBadShapesFail) {
  for (DataType d : {tensorflow::DT_HALF, tensorflow::DT_INVALID, tensorflow::DT_COMPLEX64,
                     tensorflow::DT_FLOAT_REF}) {
    absl::Status s = Tensor::FromProto(ProtoOf(d, {1})).status();
    EXPECT_FALSE(s.ok()) << DataTypeString(d);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << DataTypeString(d);
  }
  EXPECT_EQ(Tensor::FromProto(ProtoOf(DT_FLOAT, {2, -1})).status().code(),
            absl::StatusCode::kInvalidArgument);
  TensorProto p = ProtoOf(DT_FLOAT, {});
  p.mutable_tensor_shape()->set_unknown_rank(true);
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p = ProtoOf(DT_FLOAT, {1LL << 40, 1LL << 40});
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, BuffersAre64ByteAligned) {
  for (int64_t n : {0, 1, 3, 17, 64, 1000}) {
    for (DataType d : {DT_FLOAT, DT_DOUBLE, DT_UINT8, DT_BOOL, DT_STRING, DT_INT64}) {
      Tensor t(d, TensorShape({n}));
      ASSERT_NE(t.raw_data(), nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u)
          << DataTypeString(d) << " n=" << n;
    }
  }
}

TEST(TensorTest, NewTensorsAreZeroAndSized) {
  Tensor t(DT_DOUBLE, TensorShape({3, 4}));
  EXPECT_TRUE(t.IsInitialized());
  EXPECT_EQ(t.NumElements(), 12);
  EXPECT_EQ(t.dims(), 2);
  EXPECT_EQ(t.dim_size(1), 4);
  EXPECT_EQ(t.TotalBytes(), 96u);
  for (double v : t.flat<double>()) EXPECT_EQ(v, 0.0);
  Tensor s(DT_STRING, TensorShape({2}));
  EXPECT_THAT(Values<std::string>(s), ElementsAre("", ""));
}

TEST(TensorTest, DefaultTensorIsUninitialized) {
  Tensor t;
  EXPECT_FALSE(t.IsInitialized());
  EXPECT_EQ(t.raw_data(), nullptr);
  Tensor copy = t.DeepCopy();
  EXPECT_FALSE(copy.IsInitialized());
  EXPECT_THAT(t.DebugString(), HasSubstr("[]"));
}

TEST(TensorTest, CopySharesTheBuffer) {
  Tensor a = Tensor::Vec<float>({1, 2, 3});
  EXPECT_EQ(a.BufferUseCount(), 1);
  Tensor b = a;
  EXPECT_TRUE(a.SharesBufferWith(b));
  EXPECT_EQ(a.BufferUseCount(), 2);
  b.flat<float>()[0] = 10;
  EXPECT_EQ(a.flat<float>()[0], 10);  // Same memory.
  Tensor c(DT_FLOAT, TensorShape({3}));
  EXPECT_FALSE(a.SharesBufferWith(c));
  EXPECT_FALSE(Tensor().SharesBufferWith(Tensor()));
}

TEST(TensorTest, DeepCopyIsIndependent) {
  Tensor a = Tensor::FromVector<int64_t>({1, 2, 3, 4}, TensorShape({2, 2}));
  Tensor b = a.DeepCopy();
  EXPECT_FALSE(a.SharesBufferWith(b));
  EXPECT_EQ(b.shape(), a.shape());
  b.flat<int64_t>()[0] = 100;
  EXPECT_THAT(Values<int64_t>(a), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>(b), ElementsAre(100, 2, 3, 4));

  Tensor s = Tensor::Vec<std::string>({"x", "yy"});
  Tensor s2 = s.DeepCopy();
  s2.flat<std::string>()[1] = "changed";
  EXPECT_THAT(Values<std::string>(s), ElementsAre("x", "yy"));

  Tensor r = Tensor::Vec<ResourceHandle>({Handle("v")});
  EXPECT_EQ(r.DeepCopy().flat<ResourceHandle>()[0], Handle("v"));
  Tensor empty(DT_FLOAT, TensorShape({0}));
  EXPECT_EQ(empty.DeepCopy().NumElements(), 0);
}

TEST(TensorTest, ReshapedSharesAndChecksTheCount) {
  Tensor a = Tensor::Vec<int32_t>({1, 2, 3, 4, 5, 6});
  absl::StatusOr<Tensor> r = a.Reshaped(TensorShape({2, 3}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), TensorShape({2, 3}));
  EXPECT_TRUE(r->SharesBufferWith(a));
  EXPECT_EQ(a.shape(), TensorShape({6}));  // Original unchanged.
  absl::Status s = a.Reshaped(TensorShape({4, 2})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("6 elements"));
  EXPECT_THAT(s.message(), HasSubstr("[4,2]"));
  EXPECT_FALSE(a.Reshaped(TensorShape()).ok());
}

TEST(TensorTest, StringTensorsHoldArbitraryBytes) {
  std::string big(100000, 'q');
  Tensor t = Tensor::Vec<std::string>({big, std::string("\0\xff", 2)});
  EXPECT_EQ(t.flat<std::string>()[0].size(), 100000u);
  Tensor copy = t;  // Shares: the strings are destroyed once, with the buffer.
  t = Tensor();
  EXPECT_EQ(copy.flat<std::string>()[1], std::string("\0\xff", 2));
  EXPECT_EQ(Tensor::Scalar<std::string>("hi").scalar<std::string>(), "hi");
}

TEST(TensorTest, DebugStringShowsDtypeShapeAndFirstValues) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, TensorShape({2, 4}));
  EXPECT_EQ(t.DebugString(), "Tensor<float, [2,4]>: [1 2 3 4 5 6 ...]");
  EXPECT_EQ(t.DebugString(2), "Tensor<float, [2,4]>: [1 2 ...]");
  EXPECT_EQ(Tensor::Scalar<bool>(true).DebugString(), "Tensor<bool, []>: [true]");
  EXPECT_EQ(Tensor::Vec<std::string>({"a"}).DebugString(), "Tensor<string, [1]>: [a]");
  EXPECT_EQ(Tensor::Vec<uint8_t>({255}).ValueString(0), "255");
  EXPECT_EQ(Tensor::Scalar<double>(0.1).ValueString(0), "0.10000000000000001");
}

}  // namespace
}  // namespace dflow
