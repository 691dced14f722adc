// The kernels that move elements rather than compute (Transpose, ConcatV2,
// Pack, Split, SplitV, Unpack, Slice, StridedSlice, GatherV2, Gather, Pad,
// StridedSliceGrad), UnsortedSegmentSum and L2Loss on a GPU, against the CPU
// kernels on the same graphs. The movers run the CPU's kernels with their
// copies queued on the GPU (Device::CopyStrided: the copy engine for rows,
// the strided-copy kernel otherwise; Device::GatherRows: one kernel;
// Device::ScatterRows: one kernel). Skipped without a GPU.
#include <string>
#include <vector>

#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {

tensorflow::NodeDef* Index(tensorflow::GraphDef* g, const std::string& name,
                           const std::vector<int32_t>& v) {
  return AddHostConst(g, name, Tensor::Vec<int32_t>(v));
}

// xt = Cast(x) to `dtype`, x: [3,5,7,4], and every mover on it.
tensorflow::GraphDef Movers(DataType dtype, std::vector<std::string>* fetches) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  tensorflow::NodeDef* cast = Node(&g, "xt", "Cast", {"x"});
  SetAttr(cast, "SrcT", DT_FLOAT);
  SetAttr(cast, "DstT", dtype);
  Index(&g, "perm_a", {3, 1, 0, 2});
  AddNode(&g, "transpose_a", "Transpose", {"xt", "perm_a"}, dtype);
  Index(&g, "perm_b", {1, 0, 2, 3});  // Whole rows move: [5, 3, 28].
  AddNode(&g, "transpose_b", "Transpose", {"xt", "perm_b"}, dtype);
  Index(&g, "shape5", {3, 5, 7, 2, 2});
  AddNode(&g, "x5", "Reshape", {"xt", "shape5"}, dtype);
  Index(&g, "perm5", {4, 3, 2, 1, 0});
  AddNode(&g, "transpose_5", "Transpose", {"x5", "perm5"}, dtype);
  *fetches = {"transpose_a", "transpose_b", "transpose_5"};
  for (int axis : {0, 2, -1}) {
    const std::string name = "concat_" + std::to_string(axis + 1);
    Index(&g, name + "/axis", {axis});
    SetAttr(AddNode(&g, name, "ConcatV2", {"xt", "xt", name + "/axis"}, dtype), "N", 2);
    fetches->push_back(name);
  }
  Index(&g, "dim1", {1});
  SetAttr(AddNode(&g, "split", "Split", {"dim1", "xt"}, dtype), "num_split", 5);
  Index(&g, "sizes", {3, -1});
  Index(&g, "dim2", {2});
  tensorflow::NodeDef* split_v = AddNode(&g, "split_v", "SplitV", {"xt", "sizes", "dim2"}, dtype);
  SetAttr(split_v, "num_split", 2);
  SetAttr(split_v, "Tlen", DT_INT32);
  tensorflow::NodeDef* unpack = AddNode(&g, "unpack", "Unpack", {"xt"}, dtype);
  SetAttr(unpack, "num", 4);
  SetAttr(unpack, "axis", 3);
  tensorflow::NodeDef* pack = AddNode(&g, "pack", "Pack", {"xt", "xt"}, dtype);
  SetAttr(pack, "N", 2);
  SetAttr(pack, "axis", 2);
  Index(&g, "begin", {1, 0, 2, 1});
  Index(&g, "size", {2, -1, 3, 2});
  SetAttr(AddNode(&g, "slice", "Slice", {"xt", "begin", "size"}, dtype), "Index", DT_INT32);
  Index(&g, "ss_begin", {2, 4, 6, 3});
  Index(&g, "ss_end", {0, 0, 0, 0});
  Index(&g, "ss_strides", {-1, -2, -3, -1});
  SetAttr(AddNode(&g, "reversed", "StridedSlice", {"xt", "ss_begin", "ss_end", "ss_strides"},
                  dtype),
          "Index", DT_INT32);
  Index(&g, "one", {1});
  Index(&g, "two", {2});
  tensorflow::NodeDef* row = AddNode(&g, "row", "StridedSlice", {"xt", "one", "two", "one"}, dtype);
  SetAttr(row, "Index", DT_INT32);
  SetAttr(row, "shrink_axis_mask", 1);
  // Gathers: along axis 2 with repeated indices, with batch_dims 1, and v1.
  Index(&g, "picks", {6, 0, 6, 3});
  AddHostConst(&g, "axis2", Tensor::Scalar(int32_t{2}));
  AddHostConst(&g, "axis1", Tensor::Scalar(int32_t{1}));
  absl::StatusOr<Tensor> per_row = Tensor::Vec<int32_t>({4, 0, 1, 1, 3, 2}).Reshaped({3, 2});
  AddHostConst(&g, "per_row", *per_row);
  Index(&g, "rows", {2, 0});
  tensorflow::NodeDef* gather = Node(&g, "gather", "GatherV2", {"xt", "picks", "axis2"});
  tensorflow::NodeDef* batched = Node(&g, "batched", "GatherV2", {"xt", "per_row", "axis1"});
  SetAttr(batched, "batch_dims", 1);
  for (tensorflow::NodeDef* n : {gather, batched, Node(&g, "gather_v1", "Gather", {"xt", "rows"})}) {
    SetAttr(n, "Tparams", dtype);
    SetAttr(n, "Tindices", DT_INT32);
    if (n->op() == "GatherV2") SetAttr(n, "Taxis", DT_INT32);
  }
  // The gradients of Slice and StridedSlice: Pad (a rank-0 one too), and the
  // reversed slice put back in zeros of x's shape.
  absl::StatusOr<Tensor> paddings =
      Tensor::Vec<int32_t>({0, 2, 1, 1, 0, 0, 3, 0}).Reshaped(TensorShape({4, 2}));
  AddHostConst(&g, "paddings", *paddings);
  SetAttr(AddNode(&g, "pad", "Pad", {"xt", "paddings"}, dtype), "Tpaddings", DT_INT32);
  Index(&g, "zeros4", {0, 0, 0, 0});
  Index(&g, "ones4", {1, 1, 1, 1});
  tensorflow::NodeDef* scalar =
      AddNode(&g, "scalar", "StridedSlice", {"xt", "zeros4", "ones4", "ones4"}, dtype);
  SetAttr(scalar, "Index", DT_INT32);
  SetAttr(scalar, "shrink_axis_mask", 15);  // x[0, 0, 0, 0]
  AddHostConst(&g, "no_paddings", Tensor(DT_INT32, TensorShape({0, 2})));
  SetAttr(AddNode(&g, "pad_scalar", "Pad", {"scalar", "no_paddings"}, dtype), "Tpaddings",
          DT_INT32);
  Index(&g, "x_shape", {3, 5, 7, 4});
  SetAttr(AddNode(&g, "reversed_grad", "StridedSliceGrad",
                  {"x_shape", "ss_begin", "ss_end", "ss_strides", "reversed"}, dtype),
          "Index", DT_INT32);
  tensorflow::NodeDef* row_grad =
      AddNode(&g, "row_grad", "StridedSliceGrad", {"x_shape", "one", "two", "one", "row"}, dtype);
  SetAttr(row_grad, "Index", DT_INT32);
  SetAttr(row_grad, "shrink_axis_mask", 1);
  for (const char* f : {"split:0", "split:4", "split_v:0", "split_v:1", "unpack:0", "unpack:3",
                        "pack", "slice", "reversed", "row", "gather", "batched", "gather_v1",
                        "pad", "pad_scalar", "reversed_grad", "row_grad"}) {
    fetches->push_back(f);
  }
  return g;
}

TEST(GpuArrayTest, OpsThatMoveElementsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Tensor x = RandomTensor(TensorShape({3, 5, 7, 4}), 3, -100, 100, 1);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    std::vector<std::string> fetches;
    const tensorflow::GraphDef g = Movers(dtype, &fetches);
    CompareGpuCpu(g, {{"x", x}}, fetches, 0, 0, DataTypeString(dtype));
  }
}

// Long rows: ConcatV2 and Split of [256, 1000] floats (copy-engine rows).
// UnsortedSegmentSum (a gather's gradient made dense) gives the CPU's sums
// exactly: each segment adds its rows in the ids' order; negative ids are
// dropped; empty segments are zeros.
TEST(GpuArrayTest, UnsortedSegmentSumMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  Tensor ids(DT_INT64, TensorShape({1000}));
  for (int64_t i = 0; i < 1000; ++i) ids.flat<int64_t>()[i] = (i * 7919) % 51 - 1;  // [-1, 50)
  for (const DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x");
    tensorflow::NodeDef* cast = Node(&g, "xt", "Cast", {"x"});
    SetAttr(cast, "SrcT", DT_FLOAT);
    SetAttr(cast, "DstT", dtype);
    AddHostConst(&g, "ids", ids);
    AddHostConst(&g, "num", Tensor::Scalar(int32_t{60}));
    tensorflow::NodeDef* sum = AddNode(&g, "sum", "UnsortedSegmentSum", {"xt", "ids", "num"}, dtype);
    SetAttr(sum, "Tindices", DT_INT64);
    SetAttr(sum, "Tnumsegments", DT_INT32);
    CompareGpuCpu(g, {{"x", RandomTensor(TensorShape({1000, 16}), 5, -100, 100, 0.125f)}},
                  {"sum"}, 0, 0, DataTypeString(dtype));
  }
}

TEST(GpuArrayTest, ConcatAndSplitOfLongRows) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "a");
  AddPlaceholder(&g, "b");
  Index(&g, "axis", {1});
  SetAttr(AddNode(&g, "concat", "ConcatV2", {"a", "b", "axis"}), "N", 2);
  SetAttr(AddNode(&g, "split", "Split", {"axis", "concat"}), "num_split", 4);
  CompareGpuCpu(g,
                {{"a", RandomTensor(TensorShape({256, 1000}), 1)},
                 {"b", RandomTensor(TensorShape({256, 600}), 2)}},
                {"concat", "split:0", "split:3"}, 0, 0, "long rows");
}

TEST(GpuArrayTest, L2LossMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddNode(&g, "loss", "L2Loss", {"x"});
  int seed = 1;
  for (const TensorShape& shape : {TensorShape({0}), TensorShape({7}), TensorShape({300, 500})}) {
    CompareGpuCpu(g, {{"x", RandomTensor(shape, seed++)}}, {"loss"}, 1e-4, 1e-5,
                  shape.DebugString());
  }
}

}  // namespace
}  // namespace gpu
}  // namespace dflow

