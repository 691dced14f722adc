// The TensorList ops against TensorFlow 2.21: the programs of
// tests/data/list_ops_golden.json (written by tests/data/gen_list_ops_reference.py)
// give TensorFlow's values and, on bad input, its messages; then what the JSON
// cannot show: in-place forwarding, absurd sizes, shape functions.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/tensor_list.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

DataType TypeFromJson(const std::string& name) {
  if (name == "float32") return DT_FLOAT;
  if (name == "float64") return DT_DOUBLE;
  absl::StatusOr<DataType> t = DataTypeFromString(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.value_or(DT_INVALID);
}

template <typename T>
Tensor Typed(const json& j, const TensorShape& shape) {
  return Tensor::FromVector<T>(j["values"].get<std::vector<T>>(), shape);
}

Tensor TensorFromJson(const json& j) {
  const TensorShape shape(j["shape"].get<std::vector<int64_t>>());
  switch (TypeFromJson(j["dtype"])) {
    case DT_FLOAT:
      return Typed<float>(j, shape);
    case DT_INT32:
      return Typed<int32_t>(j, shape);
    case DT_INT64:
      return Typed<int64_t>(j, shape);
    case DT_STRING:
      return Typed<std::string>(j, shape);
    default:
      ADD_FAILURE() << "unexpected dtype in " << j.dump();
      return Tensor();
  }
}

void ExpectEqualToJson(const Tensor& got, const json& want) {
  const Tensor w = TensorFromJson(want);
  ASSERT_EQ(got.dtype(), w.dtype()) << got.DebugString();
  ASSERT_EQ(got.shape(), w.shape()) << got.DebugString();
  for (int64_t i = 0; i < w.NumElements(); ++i) {
    EXPECT_EQ(got.ValueString(i), w.ValueString(i)) << "element " << i;
  }
}

// Creates `node`'s kernel and runs it once on `inputs` (moved in, so the
// kernel may hold the only reference to one).
absl::StatusOr<std::vector<Tensor>> OpTestRun(const tensorflow::NodeDef& node,
                                              std::vector<Tensor> inputs) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, MakeKernel(node, TestCpuDevice()));
  return RunKernel(kernel.get(), TestCpuDevice(), std::move(inputs));
}

tensorflow::NodeDef StepNode(const json& step, int index) {
  tensorflow::NodeDef node;
  node.set_name("step" + std::to_string(index));
  node.set_op(step["op"].get<std::string>());
  for (size_t i = 0; i < step["inputs"].size(); ++i) node.add_input("in" + std::to_string(i));
  for (const auto& [name, value] : step["attrs"].items()) {
    if (value.is_string()) {
      SetAttr(&node, name, TypeFromJson(value));
    } else if (value.is_boolean()) {
      SetAttr(&node, name, value.get<bool>());
    } else {
      SetAttr(&node, name, value.get<int64_t>());
    }
  }
  return node;
}

// Runs the steps of a golden case in order: the outputs of each, or the
// first failure with the index of the step that failed.
absl::StatusOr<std::vector<std::vector<Tensor>>> RunProgram(const json& c, int* failed_step) {
  std::vector<std::vector<Tensor>> results;
  for (size_t s = 0; s < c["steps"].size(); ++s) {
    const json& step = c["steps"][s];
    std::vector<Tensor> inputs;
    for (const json& in : step["inputs"]) {
      inputs.push_back(in.contains("tensor")
                           ? TensorFromJson(in["tensor"])
                           : results.at(in["step"].get<int>()).at(in["output"].get<int>()));
    }
    absl::StatusOr<std::vector<Tensor>> out =
        OpTestRun(StepNode(step, static_cast<int>(s)), std::move(inputs));
    if (!out.ok()) {
      *failed_step = static_cast<int>(s);
      return out.status();
    }
    results.push_back(*std::move(out));
  }
  return results;
}

json LoadCases() {
  std::ifstream in(TestDataDir() + "/list_ops_golden.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/list_ops_golden.json";
  return in.good() ? json::parse(in)["cases"] : json::array();
}

TEST(ListOpsTest, GoldenProgramsMatchTensorFlow) {
  const json cases = LoadCases();
  EXPECT_GE(cases.size(), 61u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    int failed = -1;
    absl::StatusOr<std::vector<std::vector<Tensor>>> results = RunProgram(c, &failed);
    if (c.contains("error")) {
      if (results.ok()) {
        ADD_FAILURE() << "TensorFlow failed with: " << c["error"];
        continue;
      }
      EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument) << results.status();
      const std::string op = c["steps"][failed]["op"];
      EXPECT_THAT(std::string(results.status().message()),
                  StartsWith("[" + op + " 'step" + std::to_string(failed) + "'] "));
      EXPECT_THAT(std::string(results.status().message()),
                  HasSubstr(c["error"].get<std::string>()));
      continue;
    }
    if (!results.ok()) {
      ADD_FAILURE() << results.status();
      continue;
    }
    ExpectEqualToJson((*results)[c["fetch"]["step"].get<int>()][c["fetch"]["output"].get<int>()],
                      c["out"]);
  }
}

// --- what the JSON cannot show ------------------------------------------------------

Tensor ListOf(std::vector<float> values) {
  OpTest t("TensorListFromTensor");
  t.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT32);
  t.Input(Tensor::Vec<float>(values)).Input(Tensor::Vec<int32_t>({}));
  std::vector<Tensor> out = OutputsOf(t);
  return out.empty() ? Tensor() : out[0];
}

absl::StatusOr<std::vector<Tensor>> PushBack(std::vector<Tensor> inputs) {
  tensorflow::NodeDef node;
  node.set_name("push");
  node.set_op("TensorListPushBack");
  node.add_input("list");
  node.add_input("item");
  SetAttr(&node, "element_dtype", DT_FLOAT);
  return OpTestRun(node, std::move(inputs));
}

TEST(ListOpsTest, ChangesTheListInPlaceOnlyWhenItHoldsTheOnlyReference) {
  Tensor list = ListOf({1, 2});
  const TensorList* original = *GetTensorList(list);
  // Shared (the caller keeps `list`): a new list, the input's unchanged.
  absl::StatusOr<std::vector<Tensor>> shared = PushBack({list, Tensor::Scalar(3.0f)});
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(original->tensors.size(), 2u);
  EXPECT_NE(*GetTensorList((*shared)[0]), original);
  EXPECT_EQ((*GetTensorList((*shared)[0]))->tensors.size(), 3u);
  // The element tensors are shared, not copied.
  EXPECT_TRUE((*GetTensorList((*shared)[0]))->tensors[0].SharesBufferWith(original->tensors[0]));
  // Sole owner: TensorFlow's forwarding, no copy of the vector.
  std::vector<Tensor> inputs;  // Not an initializer list: that would copy `list`.
  inputs.push_back(std::move(list));
  inputs.push_back(Tensor::Scalar(3.0f));
  absl::StatusOr<std::vector<Tensor>> owned = PushBack(std::move(inputs));
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(*GetTensorList((*owned)[0]), original);
  EXPECT_EQ(original->tensors.size(), 3u);
}

TEST(ListOpsTest, AbsurdSizesAreRefusedBeforeAllocating) {
  OpTest reserve("TensorListReserve", "reserve");
  reserve.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT32);
  reserve.Input(Tensor::Vec<int32_t>({})).Input(Tensor::Scalar<int32_t>(2147483647));
  absl::StatusOr<std::vector<Tensor>> out = reserve.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()),
              StartsWith("[TensorListReserve 'reserve'] a list of 2147483647 elements"));

  OpTest resize("TensorListSetItem", "resize");
  resize.Attr("element_dtype", DT_FLOAT).Attr("resize_if_index_out_of_bounds", true);
  resize.Input(ListOf({1})).Input(Tensor::Scalar<int32_t>(2147483646)).Input(Tensor::Scalar(1.f));
  out = resize.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();

  // An unset element of a fully defined but huge shape: zeros refused.
  OpTest huge("TensorListReserve");
  huge.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT64);
  huge.Input(Tensor::Vec<int64_t>({int64_t{1} << 30, int64_t{1} << 30}))
      .Input(Tensor::Scalar<int32_t>(2));
  std::vector<Tensor> reserved = OutputsOf(huge);
  ASSERT_EQ(reserved.size(), 1u);
  OpTest get("TensorListGetItem", "get");
  get.Attr("element_dtype", DT_FLOAT);
  get.Input(reserved[0]).Input(Tensor::Scalar<int32_t>(0)).Input(Tensor::Scalar<int32_t>(-1));
  out = get.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_THAT(std::string(out.status().message()), StartsWith("[TensorListGetItem 'get'] "));
  OpTest stack("TensorListStack", "stack");
  stack.Attr("element_dtype", DT_FLOAT);
  stack.Input(reserved[0]).Input(Tensor::Scalar<int32_t>(-1));
  out = stack.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

TEST(ListOpsTest, ATensorThatIsNotAListIsRefused) {
  OpTest empty_variant("TensorListLength", "len");
  empty_variant.Input(Tensor(tensorflow::DT_VARIANT, TensorShape()));
  EXPECT_THAT(InvalidArgumentOf(empty_variant),
              HasSubstr("[TensorListLength 'len'] Input handle is not a list. Saw: "));
  OpTest vector("TensorListLength", "len");
  vector.Input(Tensor(tensorflow::DT_VARIANT, TensorShape({2})));
  EXPECT_THAT(InvalidArgumentOf(vector), HasSubstr("must be a scalar variant; saw shape [2]"));
  OpTest index("TensorListGetItem", "get");
  index.Attr("element_dtype", DT_FLOAT);
  index.Input(ListOf({1})).Input(Tensor::Vec<int32_t>({0})).Input(Tensor::Scalar<int32_t>(-1));
  EXPECT_THAT(InvalidArgumentOf(index), HasSubstr("index must be a scalar, but got shape [1]"));
}

TEST(ListOpsTest, VariantTensorsAreNotEncodable) {
  const Tensor list = ListOf({1, 2});
  absl::Status s = CheckEncodable(list, "fetch 'l:0'");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("fetch 'l:0' is a variant tensor (TensorList(element_dtype=float"));
  EXPECT_TRUE(CheckEncodable(Tensor::Scalar(1.0f), "x").ok());
  // A TensorProto of a variant never carries the Variant objects' bytes.
  tensorflow::TensorProto proto;
  list.AsProtoTensorContent(&proto);
  EXPECT_TRUE(proto.tensor_content().empty());
  EXPECT_FALSE(Tensor::FromProto(proto).ok());
}

TEST(ListOpsTest, DeepCopyClonesTheList) {
  const Tensor list = ListOf({1, 2});
  const Tensor copy = list.DeepCopy();
  EXPECT_NE(*GetTensorList(copy), *GetTensorList(list));
  EXPECT_EQ((*GetTensorList(copy))->tensors.size(), 2u);
  EXPECT_THAT(copy.DebugString(), HasSubstr("TensorList(element_dtype=float, element_shape=[], "
                                            "size=2)"));
}

TEST(ListOpsTest, ShapeFunctions) {
  tensorflow::NodeDef stack;
  stack.set_op("TensorListStack");
  SetAttr(&stack, "element_dtype", DT_FLOAT);
  SetAttr(&stack, "num_elements", int64_t{3});
  const Tensor element_shape = Tensor::Vec<int32_t>({-1, 2});
  absl::StatusOr<std::vector<PartialShape>> s =
      Infer(stack, {PartialShape::Scalar(), PartialShape({2})}, {nullptr, &element_shape});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape({3, kUnknownDim, 2}));

  tensorflow::NodeDef pop;
  pop.set_op("TensorListPopBack");
  SetAttr(&pop, "element_dtype", DT_FLOAT);
  const Tensor unknown = Tensor::Scalar<int32_t>(-1);
  s = Infer(pop, {PartialShape::Scalar(), PartialShape::Scalar()}, {nullptr, &unknown});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape::Scalar());
  EXPECT_FALSE((*s)[1].rank_known());

  tensorflow::NodeDef get;
  get.set_op("TensorListGetItem");
  SetAttr(&get, "element_dtype", DT_FLOAT);
  s = Infer(get, {PartialShape::Scalar(), PartialShape::Scalar(), PartialShape({2})},
            {nullptr, nullptr, &element_shape});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape({kUnknownDim, 2}));
}

}  // namespace
}  // namespace dflow
