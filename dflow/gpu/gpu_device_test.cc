#include "dflow/gpu/gpu_device.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dflow/framework/attr_util.h"
#include "dflow/gpu/gpu_test_util.h"
#include "dflow/gpu/scatter_rows.h"
#include "dflow/runtime/device_mgr.h"

namespace dflow {
namespace gpu {
namespace {

TEST(GpuDeviceTest, TheGpuFactoryIsRegistered) {
  std::vector<std::string> types = RegisteredDeviceTypes();
  EXPECT_NE(std::find(types.begin(), types.end(), "GPU"), types.end());
}

TEST(GpuDeviceTest, WithoutAGpuOnlyCpusAreCreated) {
  if (VisibleGpuCount() > 0) GTEST_SKIP() << "a GPU is visible";
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
      CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0]->device_type(), "CPU");
}

TEST(GpuDeviceTest, GpusAreListedWithTheirMemory) {
  DFLOW_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
      CreateLocalDevices(tensorflow::ConfigProto(), "worker", 0, 3);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u + VisibleGpuCount());
  const Device& gpu = *(*devices)[1];
  EXPECT_EQ(gpu.name(), "/job:worker/replica:0/task:3/device:GPU:0");
  EXPECT_EQ(gpu.device_type(), "GPU");
  EXPECT_GT(gpu.memory_limit(), int64_t{1} << 30);
}

TEST(GpuDeviceTest, DeviceCountAndVisibleDeviceListAreHonoured) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::ConfigProto none;
  (*none.mutable_device_count())["GPU"] = 0;
  auto devices = CreateLocalDevices(none, "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->size(), 1u);

  tensorflow::ConfigProto bad;
  bad.mutable_gpu_options()->set_visible_device_list("0,99");
  devices = CreateLocalDevices(bad, "localhost", 0, 0);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(devices.status().message(), "'99'")) << devices.status();

  tensorflow::ConfigProto small;
  small.mutable_gpu_options()->set_per_process_gpu_memory_fraction(0.01);
  devices = CreateLocalDevices(small, "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ((*devices)[1]->memory_limit(), static_cast<int64_t>(total * 0.01));
}

TEST(GpuDeviceTest, TensorsCopyToTheDeviceAndBack) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device* gpu = (*devices)[1].get();
  for (int64_t n : {1, 255, 4097, 1 << 20}) {
    Tensor host = RandomTensor(TensorShape({n}), static_cast<int>(n));
    absl::StatusOr<Tensor> on_gpu = gpu->CopyTensor(host, MemoryType::kDevice);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    EXPECT_EQ(on_gpu->memory_type(), MemoryType::kDevice);
    absl::StatusOr<Tensor> back = gpu->CopyTensor(*on_gpu, MemoryType::kHost);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->memory_type(), MemoryType::kHost);
    ASSERT_EQ(back->shape(), host.shape());
    EXPECT_TRUE(std::equal(host.flat<float>().begin(), host.flat<float>().end(),
                           back->flat<float>().begin()))
        << n;
  }
  ASSERT_TRUE(gpu->Sync().ok());
}

// CopyPieces moves pieces of every alignment (whole floats at 16-byte
// boundaries, odd bytes at odd offsets, none), one cut into 64 KiB chunks
// with an odd tail, and one of over a MiB (the copy engine's) as the host
// does: bytes of a source tensor into a destination tensor, the gaps left
// alone.
TEST(GpuDeviceTest, CopyPiecesMatchesTheHost) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device* gpu = (*devices)[1].get();
  constexpr int64_t kFloats = 1 << 19;  // 2 MiB
  const Tensor src = RandomTensor(TensorShape({kFloats}), 3);
  const Tensor dst = RandomTensor(TensorShape({kFloats}), 4);
  const struct {
    int64_t from, to, bytes;
  } spans[] = {{0, 64, 4096}, {7, 5001, 13}, {4, 20004, 8}, {100, 30000, 0},
               {40000, 40000, 1}, {(1 << 20) - 12, 65536, (1 << 20) + 4},
               {8192, 1200000, 200003}};
  absl::StatusOr<Tensor> src_gpu = gpu->CopyTensor(src, MemoryType::kDevice);
  absl::StatusOr<Tensor> dst_gpu = gpu->CopyTensor(dst, MemoryType::kDevice);
  ASSERT_TRUE(src_gpu.ok() && dst_gpu.ok());
  Tensor expected = dst.DeepCopy();
  std::vector<CopyPiece> on_gpu, on_host;
  for (const auto& p : spans) {
    on_gpu.push_back({static_cast<const char*>(src_gpu->raw_data()) + p.from,
                      static_cast<char*>(dst_gpu->raw_data()) + p.to, p.bytes});
    on_host.push_back({static_cast<const char*>(src.raw_data()) + p.from,
                       static_cast<char*>(expected.raw_data()) + p.to, p.bytes});
  }
  ASSERT_TRUE(gpu->CopyPieces(on_gpu).ok());
  CopyPiecesOnHost(on_host);
  absl::StatusOr<Tensor> back = gpu->CopyTensor(*dst_gpu, MemoryType::kHost);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::memcmp(back->raw_data(), expected.raw_data(), expected.TotalBytes()), 0);
  ASSERT_TRUE(gpu->Sync().ok());
}

// AddTensors adds float, double and int64 in device memory as the host
// adds them (exactly: one rounding per element either way); int32, which a
// GPU keeps in host memory, is left to the host (Unimplemented).
TEST(GpuDeviceTest, AddTensorsMatchesTheHost) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device* gpu = (*devices)[1].get();
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (const DataType t : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    SCOPED_TRACE(DataTypeString(t));
    Tensor a(t, TensorShape({1000, 3})), b(t, TensorShape({1000, 3}));
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      if (t == DT_FLOAT) {
        a.flat<float>()[i] = static_cast<float>(u(gen));
        b.flat<float>()[i] = static_cast<float>(u(gen));
      } else if (t == DT_DOUBLE) {
        a.flat<double>()[i] = u(gen);
        b.flat<double>()[i] = u(gen);
      } else {
        a.flat<int64_t>()[i] = static_cast<int64_t>(u(gen)) << 20;
        b.flat<int64_t>()[i] = static_cast<int64_t>(u(gen)) << 20;
      }
    }
    Tensor expected(t, a.shape());
    ASSERT_TRUE(AddTensorsOnHost(a, b, &expected).ok());
    absl::StatusOr<Tensor> a_gpu = gpu->CopyTensor(a, MemoryType::kDevice);
    absl::StatusOr<Tensor> b_gpu = gpu->CopyTensor(b, MemoryType::kDevice);
    absl::StatusOr<Tensor> sum = gpu->CopyTensor(Tensor(t, a.shape()), MemoryType::kDevice);
    ASSERT_TRUE(a_gpu.ok() && b_gpu.ok() && sum.ok());
    ASSERT_TRUE(gpu->AddTensors(*a_gpu, *b_gpu, &*sum).ok());
    absl::StatusOr<Tensor> back = gpu->CopyTensor(*sum, MemoryType::kHost);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(std::memcmp(back->raw_data(), expected.raw_data(), expected.TotalBytes()), 0);
  }
  Tensor ints(DT_INT32, TensorShape({4}));
  EXPECT_TRUE(absl::IsUnimplemented(gpu->AddTensors(ints, ints, &ints)));
  ASSERT_TRUE(gpu->Sync().ok());
}

// Runs without a GPU: the table ScatterRows hands its kernel, applied as the
// kernel applies it (each destination row's updates in turn), gives the
// host's ScatterRowsOnHost for every op, with repeated, negative and
// unsorted indices.
TEST(ScatterRowsTableTest, AppliedAsTheKernelDoesItMatchesTheHost) {
  const std::vector<int64_t> indices = {3, 0, 3, -1, 5, 0, 3, 2};
  const ScatterRowsTable plan = MakeScatterRowsTable(indices);
  ASSERT_EQ(plan.num_dest, 4);  // Rows 0, 2, 3, 5.
  const int64_t* dest = plan.table.data();
  const int64_t* starts = dest + plan.num_dest;
  const int64_t* sources = starts + plan.num_dest + 1;
  EXPECT_EQ(std::vector<int64_t>(dest, dest + 4), (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(std::vector<int64_t>(sources, sources + 7), (std::vector<int64_t>{1, 5, 7, 0, 2, 6, 4}));
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-2, 2);
  for (const ScatterOp op : {ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kMul, ScatterOp::kDiv,
                             ScatterOp::kMin, ScatterOp::kMax, ScatterOp::kUpdate}) {
    Tensor ref(DT_FLOAT, TensorShape({6, 3})), updates(DT_FLOAT, TensorShape({8, 3}));
    for (float& v : ref.flat<float>()) v = u(gen);
    for (float& v : updates.flat<float>()) v = u(gen);
    Tensor expected = ref.DeepCopy();
    ASSERT_TRUE(ScatterRowsOnHost(op, updates, indices, &expected).ok());
    float* r = ref.flat<float>().data();
    const float* in = updates.flat<float>().data();
    for (int64_t d = 0; d < plan.num_dest; ++d) {
      for (int64_t j = 0; j < 3; ++j) {
        // The element, combined with each of its updates in turn (one
        // host scatter of one element each: the host's arithmetic).
        Tensor acc = Tensor::Vec<float>({r[dest[d] * 3 + j]});
        for (int64_t k = starts[d]; k < starts[d + 1]; ++k) {
          const Tensor v = Tensor::Vec<float>({in[sources[k] * 3 + j]});
          ASSERT_TRUE(ScatterRowsOnHost(op, v, std::vector<int64_t>{0}, &acc).ok());
        }
        r[dest[d] * 3 + j] = acc.flat<float>()[0];
      }
    }
    EXPECT_EQ(std::memcmp(ref.raw_data(), expected.raw_data(), ref.TotalBytes()), 0)
        << static_cast<int>(op);
  }
}

// ScatterRows on a GPU gives the host's values for each op and dtype, with
// repeated indices (applied in order), a skipped negative one and a scalar
// update.
TEST(GpuDeviceTest, ScatterRowsMatchesTheHost) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device* gpu = (*devices)[1].get();
  std::mt19937 gen(7);
  std::uniform_int_distribution<int64_t> row(-1, 299);
  std::vector<int64_t> indices(5000);
  for (int64_t& i : indices) i = row(gen);
  auto random = [&](DataType t, const TensorShape& shape) {
    const Tensor f = RandomTensor(shape, static_cast<int>(gen() % 1000), 0.5f, 2.0f);
    Tensor out(t, shape);
    for (int64_t i = 0; i < f.NumElements(); ++i) {
      const float v = f.flat<float>()[i];
      if (t == DT_FLOAT) out.flat<float>()[i] = v;
      if (t == DT_DOUBLE) out.flat<double>()[i] = v;
      if (t == DT_INT64) out.flat<int64_t>()[i] = static_cast<int64_t>(v * 4);
    }
    return out;
  };
  for (const DataType t : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    for (const ScatterOp op : {ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kMul,
                               ScatterOp::kDiv, ScatterOp::kMin, ScatterOp::kMax,
                               ScatterOp::kUpdate}) {
      if (op == ScatterOp::kDiv && t == DT_INT64) continue;  // Not on a GPU.
      for (const bool scalar : {false, true}) {
        SCOPED_TRACE(absl::StrCat(DataTypeString(t), " op ", static_cast<int>(op), " scalar ",
                                  scalar));
        const Tensor ref = random(t, TensorShape({300, 7}));
        const Tensor updates =
            random(t, scalar ? TensorShape({}) : TensorShape({static_cast<int64_t>(indices.size()), 7}));
        Tensor expected = ref.DeepCopy();
        ASSERT_TRUE(ScatterRowsOnHost(op, updates, indices, &expected).ok());
        absl::StatusOr<Tensor> ref_gpu = gpu->CopyTensor(ref, MemoryType::kDevice);
        absl::StatusOr<Tensor> updates_gpu = gpu->CopyTensor(updates, MemoryType::kDevice);
        ASSERT_TRUE(ref_gpu.ok() && updates_gpu.ok());
        ASSERT_TRUE(gpu->ScatterRows(op, *updates_gpu, indices, &*ref_gpu).ok());
        absl::StatusOr<Tensor> back = gpu->CopyTensor(*ref_gpu, MemoryType::kHost);
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(std::memcmp(back->raw_data(), expected.raw_data(), expected.TotalBytes()), 0);
      }
    }
  }
  ASSERT_TRUE(gpu->Sync().ok());
}

// Blocks the compute stream until `released` is notified (or 10 s pass);
// records whether it was.
struct StreamGate {
  absl::Notification released;
  bool was_released = false;
  static void CUDART_CB Wait(void* gate) {
    auto* g = static_cast<StreamGate*>(gate);
    g->was_released = g->released.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
};

// A host -> device copy is queued behind the stream's work without waiting
// for it, and copies its source when called: later writes to the host
// tensor do not reach the device.
TEST(GpuDeviceTest, AHostToDeviceCopyNeitherWaitsForQueuedWorkNorSeesLaterWrites) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto* gpu = static_cast<GpuDevice*>((*devices)[1].get());
  ASSERT_EQ(cudaSetDevice(gpu->cuda_ordinal()), cudaSuccess);
  StreamGate gate;
  ASSERT_EQ(cudaLaunchHostFunc(gpu->stream(), &StreamGate::Wait, &gate), cudaSuccess);
  Tensor host = RandomTensor(TensorShape({1000}), 1);
  const Tensor expected = RandomTensor(TensorShape({1000}), 1);
  absl::StatusOr<Tensor> on_gpu = gpu->CopyTensor(host, MemoryType::kDevice);
  gate.released.Notify();  // Only now can the stream run the copy.
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  for (float& v : host.flat<float>()) v = -7;
  absl::StatusOr<Tensor> back = gpu->CopyTensor(*on_gpu, MemoryType::kHost);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(gate.was_released) << "the copy waited for the stream's queued work";
  EXPECT_TRUE(std::equal(expected.flat<float>().begin(), expected.flat<float>().end(),
                         back->flat<float>().begin()));
  ASSERT_TRUE(gpu->Sync().ok());
}

// More staged bytes than the bound (256 MiB) in one step: the copies wait
// for the stream once over it, and every value arrives.
TEST(GpuDeviceTest, StagedCopiesOverTheBoundAllArrive) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto devices = CreateLocalDevices(tensorflow::ConfigProto(), "localhost", 0, 0);
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device* gpu = (*devices)[1].get();
  constexpr int64_t kFloats = int64_t{8} << 20;  // 32 MiB each, 320 MiB in all.
  Tensor host(DT_FLOAT, TensorShape({kFloats}));
  std::vector<Tensor> copies;
  for (int i = 0; i < 10; ++i) {
    std::fill(host.flat<float>().begin(), host.flat<float>().end(), static_cast<float>(i));
    absl::StatusOr<Tensor> on_gpu = gpu->CopyTensor(host, MemoryType::kDevice);
    ASSERT_TRUE(on_gpu.ok()) << i << ": " << on_gpu.status();
    copies.push_back(*std::move(on_gpu));
  }
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Tensor> back = gpu->CopyTensor(copies[i], MemoryType::kHost);
    ASSERT_TRUE(back.ok()) << back.status();
    const auto v = back->flat<float>();
    EXPECT_EQ(std::count(v.begin(), v.end(), static_cast<float>(i)), kFloats) << i;
  }
  ASSERT_TRUE(gpu->Sync().ok());
}

TEST(GpuDeviceTest, TheAllocatorReusesFreedBlocks) {
  DFLOW_SKIP_WITHOUT_GPU();
  GpuAllocator a(0, uint64_t{1} << 30);
  void* p = a.Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.bytes_in_use(), 1024u);
  a.Deallocate(p, 1000);
  EXPECT_EQ(a.bytes_in_use(), 0u);
  EXPECT_EQ(a.bytes_cached(), 1024u);
  EXPECT_EQ(a.Allocate(900), p);  // Same size class, no cudaMalloc.
  a.Deallocate(p, 900);
  EXPECT_EQ(a.Allocate(size_t{2} << 30), nullptr);  // Over the limit.
}

tensorflow::GraphDef MatMulGraph(bool ta, bool tb) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "a");
  AddPlaceholder(&g, "b");
  tensorflow::NodeDef* mm = Node(&g, "mm", "MatMul", {"a", "b"});
  SetAttr(mm, "T", DT_FLOAT);
  SetAttr(mm, "transpose_a", ta);
  SetAttr(mm, "transpose_b", tb);
  // A consumer on the same device: the product stays in device memory.
  SetAttr(Node(&g, "sq", "Identity", {"mm"}), "T", DT_FLOAT);
  return g;
}

TEST(GpuMatMulTest, MatchesTheCpuWithEveryTranspose) {
  DFLOW_SKIP_WITHOUT_GPU();
  const int64_t m = 37, k = 301, n = 29;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = RandomTensor(ta ? TensorShape({k, m}) : TensorShape({m, k}), 1);
      Tensor b = RandomTensor(tb ? TensorShape({n, k}) : TensorShape({k, n}), 2);
      std::vector<std::pair<std::string, Tensor>> feeds = {{"a", a}, {"b", b}};
      auto gpu = RunPinned(MatMulGraph(ta, tb), "/device:GPU:0", feeds, {"sq"});
      auto cpu = RunPinned(MatMulGraph(ta, tb), "/device:CPU:0", feeds, {"sq"});
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ExpectSame((*gpu)[0], (*cpu)[0], 1e-4f, 1e-4f, absl::StrCat("ta=", ta, " tb=", tb));
    }
  }
}

TEST(GpuMatMulTest, EmptyInnerDimensionGivesZeros) {
  DFLOW_SKIP_WITHOUT_GPU();
  auto out = RunPinned(MatMulGraph(false, false), "/device:GPU:0",
                       {{"a", Tensor(DT_FLOAT, TensorShape({3, 0}))},
                        {"b", Tensor(DT_FLOAT, TensorShape({0, 4}))}},
                       {"sq"});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), TensorShape({3, 4}));
  for (float v : (*out)[0].flat<float>()) EXPECT_EQ(v, 0.0f);
}

tensorflow::GraphDef BatchMatMulGraph(bool ax, bool ay) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "a");
  AddPlaceholder(&g, "b");
  tensorflow::NodeDef* mm = Node(&g, "mm", "BatchMatMulV2", {"a", "b"});
  SetAttr(mm, "T", DT_FLOAT);
  SetAttr(mm, "adj_x", ax);
  SetAttr(mm, "adj_y", ay);
  SetAttr(Node(&g, "out", "Identity", {"mm"}), "T", DT_FLOAT);
  return g;
}

TEST(GpuMatMulTest, BatchMatMulMatchesTheCpuBatchedSharedAndBroadcast) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    TensorShape a, b;
    bool ax, ay;
  };
  for (const Case& c : std::vector<Case>{
           {TensorShape({5, 17, 33}), TensorShape({5, 33, 9}), false, false},   // strided
           {TensorShape({5, 33, 17}), TensorShape({33, 9}), true, false},       // b shared
           {TensorShape({17, 33}), TensorShape({4, 9, 33}), false, true},       // a shared
           {TensorShape({2, 1, 17, 33}), TensorShape({3, 9, 33}), false, true},  // broadcast
       }) {
    Tensor a = RandomTensor(c.a, 5), b = RandomTensor(c.b, 6);
    auto gpu = RunPinned(BatchMatMulGraph(c.ax, c.ay), "/device:GPU:0", {{"a", a}, {"b", b}},
                         {"out"});
    auto cpu = RunPinned(BatchMatMulGraph(c.ax, c.ay), "/device:CPU:0", {{"a", a}, {"b", b}},
                         {"out"});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ExpectSame((*gpu)[0], (*cpu)[0], 1e-4f, 1e-4f, c.a.DebugString() + " x " + c.b.DebugString());
  }
}

TEST(GpuPlacementTest, UnpinnedNodesWithAGpuKernelRunOnTheGpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  std::unique_ptr<DirectSession> s = NewGpuSession();
  ASSERT_TRUE(s->Create(MatMulGraph(false, false)).ok());
  tensorflow::RunOptions opts;
  opts.set_output_partition_graphs(true);
  tensorflow::RunMetadata meta;
  std::vector<Tensor> out;
  ASSERT_TRUE(s->Run(opts, {{"a", RandomTensor(TensorShape({2, 2}), 3)}, {"b", RandomTensor(TensorShape({2, 2}), 4)}},
                     {"mm"}, {}, &out, &meta)
                  .ok());
  bool mm_on_gpu = false;
  for (const auto& part : meta.partition_graphs()) {
    for (const auto& node : part.node()) {
      if (node.name() == "mm") mm_on_gpu = absl::StrContains(node.device(), "GPU:0");
    }
  }
  EXPECT_TRUE(mm_on_gpu);
}

TEST(GpuDeviceTest, AnOutputOverTheMemoryLimitIsResourceExhausted) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::ConfigProto small;
  small.mutable_gpu_options()->set_per_process_gpu_memory_fraction(0.0001);  // ~14 MB
  std::unique_ptr<DirectSession> s = NewGpuSession(small);
  ASSERT_TRUE(s->Create(PinnedTo(MatMulGraph(false, false), "/device:GPU:0")).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run(tensorflow::RunOptions(),
                           {{"a", Tensor(DT_FLOAT, TensorShape({4096, 1}))},
                            {"b", Tensor(DT_FLOAT, TensorShape({1, 4096}))}},
                           {"sq"}, {}, &out, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "GPU:0 memory")) << st;
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
