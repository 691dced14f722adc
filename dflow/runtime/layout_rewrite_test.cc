#include "dflow/runtime/layout_rewrite.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/runtime/direct_session.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

tensorflow::NodeDef* Add(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                         std::vector<std::string> inputs) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (std::string& in : inputs) n->add_input(std::move(in));
  return n;
}

void Int32Const(tensorflow::GraphDef* g, const std::string& name, std::vector<int32_t> v) {
  tensorflow::NodeDef* n = Add(g, name, "Const", {});
  SetAttr(n, "dtype", DT_INT32);
  SetAttr(n, "value", Tensor::Vec<int32_t>(v));
}

// A convolution or pool in `format`: the NCHW attrs are the NHWC ones with
// the depth dimension moved to position 1 (strides [1, 1, 2, 1] is a
// vertical stride of 2 in both).
tensorflow::NodeDef* Layered(tensorflow::GraphDef* g, const std::string& name,
                             const std::string& op, std::vector<std::string> inputs,
                             const std::string& format, std::vector<int64_t> strides,
                             std::vector<int64_t> ksize = {}) {
  tensorflow::NodeDef* n = Add(g, name, op, std::move(inputs));
  SetAttr(n, "T", DT_FLOAT);
  SetAttr(n, "data_format", format);
  SetAttr(n, "padding", "SAME");
  auto order = [&](std::vector<int64_t> nhwc) {
    if (format == "NHWC") return nhwc;
    return std::vector<int64_t>{nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
  };
  SetAttr(n, "strides", order(strides));
  if (!ksize.empty()) SetAttr(n, "ksize", order(ksize));
  return n;
}

// Every op the rewrite covers, in `format`, on x (fed NHWC, transposed when
// the graph is NCHW) and a fed HWIO filter w; outputs are NHWC (transposed
// back when NCHW) so that both graphs' fetches compare directly.
tensorflow::GraphDef AllOps(const std::string& format) {
  tensorflow::GraphDef g;
  SetAttr(Add(&g, "x", "Placeholder", {}), "dtype", DT_FLOAT);
  SetAttr(Add(&g, "w", "Placeholder", {}), "dtype", DT_FLOAT);
  const bool nchw = format == "NCHW";
  Int32Const(&g, "to_nchw", {0, 3, 1, 2});
  Int32Const(&g, "to_nhwc", {0, 2, 3, 1});
  auto in_format = [&](const std::string& nhwc_name) {
    if (!nchw) return nhwc_name;
    tensorflow::NodeDef* t = Add(&g, nhwc_name + "_nchw", "Transpose", {nhwc_name, "to_nchw"});
    SetAttr(t, "T", DT_FLOAT);
    return t->name();
  };
  auto out_nhwc = [&](const std::string& name) {
    if (!nchw) return name;
    tensorflow::NodeDef* t = Add(&g, name + "_nhwc", "Transpose", {name, "to_nhwc"});
    SetAttr(t, "T", DT_FLOAT);
    return t->name();
  };
  const std::string x = in_format("x");
  Layered(&g, "conv", "Conv2D", {x, "w"}, format, {1, 2, 1, 1});
  Layered(&g, "max_pool", "MaxPool", {"conv"}, format, {1, 2, 2, 1}, {1, 2, 3, 1});
  Layered(&g, "avg_pool", "AvgPool", {"conv"}, format, {1, 1, 2, 1}, {1, 3, 2, 1});
  SetAttr(Add(&g, "x_shape", "Shape", {x}), "T", DT_FLOAT);
  SetAttr(Add(&g, "conv_shape", "Shape", {"conv"}), "T", DT_FLOAT);
  Int32Const(&g, "w_shape", {3, 2, 3, 4});
  Layered(&g, "dx", "Conv2DBackpropInput", {"x_shape", "w", "conv"}, format, {1, 2, 1, 1});
  Layered(&g, "dw", "Conv2DBackpropFilter", {x, "w_shape", "conv"}, format, {1, 2, 1, 1});
  Layered(&g, "max_pool_grad", "MaxPoolGrad", {"conv", "max_pool", "max_pool"}, format,
          {1, 2, 2, 1}, {1, 2, 3, 1});
  Layered(&g, "avg_pool_grad", "AvgPoolGrad", {"conv_shape", "avg_pool"}, format, {1, 1, 2, 1},
          {1, 3, 2, 1});
  // Fetched under one name in both graphs.
  for (const std::string name : {"conv", "max_pool", "avg_pool", "dx", "max_pool_grad",
                                 "avg_pool_grad"}) {
    SetAttr(Add(&g, "out_" + name, "Identity", {out_nhwc(name)}), "T", DT_FLOAT);
  }
  SetAttr(Add(&g, "out_dw", "Identity", {"dw"}), "T", DT_FLOAT);
  return g;
}

std::vector<Tensor> RunGraph(const tensorflow::GraphDef& g,
                             const std::vector<std::string>& fetches) {
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(SessionOptions());
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  absl::Status created = (*s)->Create(g);
  EXPECT_TRUE(created.ok()) << created;
  Tensor x(DT_FLOAT, TensorShape({2, 7, 6, 3})), w(DT_FLOAT, TensorShape({3, 2, 3, 4}));
  for (int64_t i = 0; i < x.NumElements(); ++i) x.flat<float>()[i] = std::sin(0.7f * i);
  for (int64_t i = 0; i < w.NumElements(); ++i) w.flat<float>()[i] = std::cos(0.3f * i);
  std::vector<Tensor> out;
  absl::Status ran = (*s)->Run(tensorflow::RunOptions(), {{"x", x}, {"w", w}}, fetches, {}, &out,
                               nullptr);
  EXPECT_TRUE(ran.ok()) << ran;
  return out;
}

// A channels_first graph (as TensorFlow 1.x builds for GPUs) runs, on the
// CPU here, and gives exactly what the NHWC graph gives: the rewrite feeds
// the same NHWC kernels the same values.
TEST(LayoutRewriteTest, NchwGraphsComputeWhatNhwcOnesDo) {
  const std::vector<std::string> fetches = {"out_conv", "out_max_pool",      "out_avg_pool",
                                            "out_dx",   "out_max_pool_grad", "out_avg_pool_grad",
                                            "out_dw"};
  std::vector<Tensor> nchw = RunGraph(AllOps("NCHW"), fetches);
  std::vector<Tensor> nhwc = RunGraph(AllOps("NHWC"), fetches);
  ASSERT_EQ(nchw.size(), fetches.size());
  ASSERT_EQ(nhwc.size(), fetches.size());
  for (size_t i = 0; i < fetches.size(); ++i) {
    SCOPED_TRACE(fetches[i]);
    ASSERT_EQ(nchw[i].shape(), nhwc[i].shape());
    EXPECT_GT(nchw[i].NumElements(), 0);
    for (int64_t k = 0; k < nchw[i].NumElements(); ++k) {
      ASSERT_EQ(nchw[i].flat<float>()[k], nhwc[i].flat<float>()[k]) << "element " << k;
    }
  }
}

// The node keeps its name (now the output's transpose back to NCHW) and
// its NHWC form takes the permuted attrs; a filter gradient is not
// transposed; NHWC nodes are left alone.
TEST(LayoutRewriteTest, TheNodeKeepsItsNameAndItsAttrsArePermuted) {
  tensorflow::GraphDef g = AllOps("NCHW");
  ASSERT_TRUE(HasNchwConvolutions(g));
  EXPECT_FALSE(HasNchwConvolutions(AllOps("NHWC")));
  tensorflow::NodeDef* conv = nullptr;
  for (tensorflow::NodeDef& n : *g.mutable_node()) {
    if (n.name() == "conv") conv = &n;
  }
  ASSERT_NE(conv, nullptr);
  conv->set_device("/device:GPU:0");
  RewriteNchwToNhwc(&g);
  EXPECT_FALSE(HasNchwConvolutions(g));
  std::map<std::string, const tensorflow::NodeDef*> by_name;
  for (const tensorflow::NodeDef& n : g.node()) by_name[n.name()] = &n;
  ASSERT_TRUE(by_name.count("conv") && by_name.count("conv/nhwc"));
  EXPECT_EQ(by_name["conv"]->op(), "Transpose");
  EXPECT_EQ(by_name["conv"]->input(0), "conv/nhwc");
  const tensorflow::NodeDef& nhwc = *by_name["conv/nhwc"];
  EXPECT_EQ(nhwc.op(), "Conv2D");
  EXPECT_EQ(nhwc.attr().at("data_format").s(), "NHWC");
  const auto& strides = nhwc.attr().at("strides").list().i();
  EXPECT_EQ(std::vector<int64_t>(strides.begin(), strides.end()),
            (std::vector<int64_t>{1, 2, 1, 1}));
  // Its input, its transposes and their permutations are on its device.
  const tensorflow::NodeDef& input = *by_name[nhwc.input(0)];
  EXPECT_EQ(input.op(), "Transpose");
  for (const tensorflow::NodeDef* n :
       {by_name["conv"], &nhwc, &input, by_name[input.input(1)]}) {
    EXPECT_EQ(n->device(), "/device:GPU:0") << n->name();
  }
  EXPECT_EQ(by_name["dw"]->op(), "Conv2DBackpropFilter");  // HWIO: no transpose back.
  EXPECT_EQ(by_name[by_name["dx/nhwc"]->input(0)]->op(), "DataFormatVecPermute");
}

}  // namespace
}  // namespace dflow
