#include "dflow/framework/types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dflow {
namespace {

using ::testing::HasSubstr;

TEST(TypesTest, NamesMatchTensorFlow) {
  EXPECT_EQ(DataTypeString(DT_FLOAT), "float");
  EXPECT_EQ(DataTypeString(DT_DOUBLE), "double");
  EXPECT_EQ(DataTypeString(DT_INT32), "int32");
  EXPECT_EQ(DataTypeString(DT_INT64), "int64");
  EXPECT_EQ(DataTypeString(DT_UINT8), "uint8");
  EXPECT_EQ(DataTypeString(DT_BOOL), "bool");
  EXPECT_EQ(DataTypeString(DT_STRING), "string");
  EXPECT_EQ(DataTypeString(DT_RESOURCE), "resource");
  EXPECT_EQ(DataTypeString(tensorflow::DT_FLOAT_REF), "float_ref");
  EXPECT_EQ(DataTypeString(tensorflow::DT_HALF), "half");
}

TEST(TypesTest, EnumValuesAreTensorFlows) {
  // Wire compatibility: the numbers in GraphDefs written by TensorFlow.
  EXPECT_EQ(DT_FLOAT, 1);
  EXPECT_EQ(DT_DOUBLE, 2);
  EXPECT_EQ(DT_INT32, 3);
  EXPECT_EQ(DT_UINT8, 4);
  EXPECT_EQ(DT_STRING, 7);
  EXPECT_EQ(DT_INT64, 9);
  EXPECT_EQ(DT_BOOL, 10);
  EXPECT_EQ(DT_RESOURCE, 20);
  EXPECT_EQ(tensorflow::DT_FLOAT_REF, 101);
}

TEST(TypesTest, ParsesNames) {
  for (DataType d : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL, DT_STRING,
                     DT_RESOURCE, tensorflow::DT_INT32_REF}) {
    absl::StatusOr<DataType> back = DataTypeFromString(DataTypeString(d));
    ASSERT_TRUE(back.ok()) << DataTypeString(d);
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(*DataTypeFromString("DT_FLOAT"), DT_FLOAT);
  EXPECT_EQ(*DataTypeFromString("DT_INT64"), DT_INT64);
  absl::Status s = DataTypeFromString("floaty").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'floaty'"));
  EXPECT_FALSE(DataTypeFromString("").ok());
  EXPECT_FALSE(DataTypeFromString("_ref").ok());
}

TEST(TypesTest, Sizes) {
  EXPECT_EQ(DataTypeSize(DT_FLOAT), 4);
  EXPECT_EQ(DataTypeSize(DT_DOUBLE), 8);
  EXPECT_EQ(DataTypeSize(DT_INT32), 4);
  EXPECT_EQ(DataTypeSize(DT_INT64), 8);
  EXPECT_EQ(DataTypeSize(DT_UINT8), 1);
  EXPECT_EQ(DataTypeSize(DT_BOOL), 1);
  EXPECT_EQ(DataTypeSize(DT_STRING), 0);
  EXPECT_EQ(DataTypeSize(DT_RESOURCE), 0);
  EXPECT_EQ(DataTypeSize(tensorflow::DT_DOUBLE_REF), 8);
}

TEST(TypesTest, RefTypes) {
  EXPECT_FALSE(IsRefType(DT_FLOAT));
  EXPECT_TRUE(IsRefType(tensorflow::DT_FLOAT_REF));
  EXPECT_EQ(MakeRefType(DT_FLOAT), tensorflow::DT_FLOAT_REF);
  EXPECT_EQ(MakeRefType(tensorflow::DT_FLOAT_REF), tensorflow::DT_FLOAT_REF);
  EXPECT_EQ(BaseType(tensorflow::DT_FLOAT_REF), DT_FLOAT);
  EXPECT_EQ(BaseType(DT_INT32), DT_INT32);
}

TEST(TypesTest, SupportedDtypes) {
  for (DataType d :
       {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL, DT_STRING, DT_RESOURCE}) {
    EXPECT_TRUE(IsSupportedDataType(d)) << DataTypeString(d);
  }
  for (DataType d : {tensorflow::DT_HALF, tensorflow::DT_INT16, tensorflow::DT_COMPLEX64,
                     tensorflow::DT_VARIANT, DT_INVALID}) {
    EXPECT_FALSE(IsSupportedDataType(d)) << DataTypeString(d);
  }
}

TEST(TypesTest, ListString) {
  EXPECT_EQ(DataTypeListString({DT_FLOAT, DT_INT32}), "[float, int32]");
  EXPECT_EQ(DataTypeListString({}), "[]");
}

TEST(TypesTest, DataTypeToEnumMapsCppTypes) {
  EXPECT_EQ(DataTypeToEnum<float>::value, DT_FLOAT);
  EXPECT_EQ(DataTypeToEnum<int64_t>::value, DT_INT64);
  EXPECT_EQ(DataTypeToEnum<std::string>::value, DT_STRING);
  EXPECT_EQ(DataTypeToEnum<bool>::value, DT_BOOL);
}

TEST(TypesTest, SwitchNumericDispatchesAndRejects) {
  for (DataType d : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL}) {
    DataType seen = DT_INVALID;
    absl::Status s = SwitchNumeric(d, "Op", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      seen = DataTypeToEnum<T>::value;
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(seen, d);
  }
  absl::Status s =
      SwitchNumeric(DT_STRING, "AddV2", [](auto) -> absl::Status { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("AddV2"));
  EXPECT_THAT(s.message(), HasSubstr("string"));
  bool was_string = false;
  EXPECT_TRUE(SwitchAll(DT_STRING, "Op", [&](auto tag) -> absl::Status {
                was_string = std::is_same_v<typename decltype(tag)::type, std::string>;
                return absl::OkStatus();
              }).ok());
  EXPECT_TRUE(was_string);
}

}  // namespace
}  // namespace dflow
