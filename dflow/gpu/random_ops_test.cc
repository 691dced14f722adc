// RandomUniform on the GPU draws the CPU kernel's values (TensorFlow's) bit
// for bit, run after run, for float and double. Skipped without a GPU.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {

tensorflow::GraphDef UniformGraph(DataType dtype, int64_t seed, int64_t seed2) {
  tensorflow::GraphDef g;
  AddHostConst(&g, "shape", Tensor::Vec<int64_t>({3, 1367}));  // Not a multiple of 4.
  AddHostConst(&g, "tiny", Tensor::Vec<int32_t>({1}));
  for (const std::string in : {"shape", "tiny"}) {
    tensorflow::NodeDef* n = Node(&g, "u_" + in, "RandomUniform", {in});
    SetAttr(n, "dtype", dtype);
    SetAttr(n, "T", in == "shape" ? DT_INT64 : DT_INT32);
    SetAttr(n, "seed", seed);
    SetAttr(n, "seed2", seed2);
  }
  return g;
}

TEST(GpuRandomTest, UniformDrawsTheCpusValues) {
  DFLOW_SKIP_WITHOUT_GPU();
  // seed2 near 2^32: the counter's upper words carry.
  for (const auto& [seed, seed2] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 2}, {87654321, 0xffffffffLL}, {-5, 123456789012LL}}) {
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
      const tensorflow::GraphDef g = UniformGraph(dtype, seed, seed2);
      DeviceSession gpu(g, "/device:GPU:0");
      DeviceSession cpu(g, "/device:CPU:0");
      for (int run = 0; run < 3; ++run) {  // Each run continues the generator.
        const std::string what = absl::StrCat("seed ", seed, "/", seed2, " ",
                                              DataTypeString(dtype), " run ", run);
        absl::StatusOr<std::vector<Tensor>> a = gpu.Run({}, {"u_shape", "u_tiny"});
        absl::StatusOr<std::vector<Tensor>> b = cpu.Run({}, {"u_shape", "u_tiny"});
        ASSERT_TRUE(a.ok()) << what << ": " << a.status();
        ASSERT_TRUE(b.ok()) << what << ": " << b.status();
        for (int i = 0; i < 2; ++i) ExpectSame((*a)[i], (*b)[i], 0, 0, what);
      }
    }
  }
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
