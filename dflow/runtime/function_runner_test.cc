// FunctionRunner runs a library function (the way tf.data runs a map
// function) and reports its errors naming the function.
#include "dflow/runtime/function_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dflow/proto/config.pb.h"
#include "dflow/runtime/device_mgr.h"
#include "google/protobuf/text_format.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// f(x: float, y: int32) = (x * 2, y + 1), as TensorFlow writes a map lambda;
// g() calls f through a PartitionedCall, the way nested tf.functions do.
constexpr char kLibrary[] = R"pb(
  function {
    signature {
      name: "f"
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "y" type: DT_INT32 }
      output_arg { name: "mul_out" type: DT_FLOAT }
      output_arg { name: "add_out" type: DT_INT32 }
    }
    node_def {
      name: "two"
      op: "Const"
      attr {
        key: "dtype"
        value { type: DT_FLOAT }
      }
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_FLOAT
            tensor_shape {}
            float_val: 2
          }
        }
      }
    }
    node_def {
      name: "one"
      op: "Const"
      attr {
        key: "dtype"
        value { type: DT_INT32 }
      }
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_INT32
            tensor_shape {}
            int_val: 1
          }
        }
      }
    }
    node_def {
      name: "mul"
      op: "Mul"
      input: "x"
      input: "two:output:0"
      attr {
        key: "T"
        value { type: DT_FLOAT }
      }
    }
    node_def {
      name: "add"
      op: "AddV2"
      input: "y"
      input: "one:output:0"
      attr {
        key: "T"
        value { type: DT_INT32 }
      }
    }
    ret { key: "mul_out" value: "mul:z:0" }
    ret { key: "add_out" value: "add:z:0" }
  }
)pb";

class FunctionRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kLibrary, &library_));
    auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
    ASSERT_TRUE(devices.ok()) << devices.status();
    mgr_ = std::make_unique<DeviceMgr>(*std::move(devices));
    device_ = mgr_->ListDevices()[0];
  }
  tensorflow::NameAttrList Fn(const std::string& name) {
    tensorflow::NameAttrList f;
    f.set_name(name);
    return f;
  }
  tensorflow::FunctionDefLibrary library_;
  std::unique_ptr<DeviceMgr> mgr_;
  Device* device_ = nullptr;
};

TEST_F(FunctionRunnerTest, RunsOncePerCall) {
  auto fn = FunctionRunner::Create(library_, Fn("f"), device_);
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ((*fn)->arg_types(), DataTypeVector({DT_FLOAT, DT_INT32}));
  for (int i = 0; i < 3; ++i) {
    auto out = (*fn)->Run({Tensor::Scalar<float>(1.5f * i), Tensor::Scalar<int32_t>(i)});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].scalar<float>(), 3.0f * i);
    EXPECT_EQ((*out)[1].scalar<int32_t>(), i + 1);
  }
}

TEST_F(FunctionRunnerTest, MissingFunctionIsNotFound) {
  auto fn = FunctionRunner::Create(library_, Fn("nope"), device_);
  EXPECT_TRUE(absl::IsNotFound(fn.status())) << fn.status();
  EXPECT_THAT(fn.status().message(), HasSubstr("'nope'"));
}

TEST_F(FunctionRunnerTest, WrongArgumentsNameTheFunction) {
  auto fn = FunctionRunner::Create(library_, Fn("f"), device_);
  ASSERT_TRUE(fn.ok()) << fn.status();
  auto few = (*fn)->Run({Tensor::Scalar<float>(1)});
  EXPECT_TRUE(absl::IsInvalidArgument(few.status()));
  EXPECT_THAT(few.status().message(), HasSubstr("function 'f': takes 2 argument(s), got 1"));
  auto typed = (*fn)->Run({Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(1)});
  EXPECT_THAT(typed.status().message(), HasSubstr("argument 0 must be float, got int32"));
}

}  // namespace
}  // namespace dflow
