// Where `dflow train`'s training steps (MLP and CNN, Adam) run when the
// worker has a GPU, checked without one: the graph is placed on a CPU and a
// GPU-typed test device, and each node's kernel is made for its device (none
// runs) to read the memory every edge leaves and arrives in. A step crosses
// between host and device memory only where the GPU must wait or the
// executor must copy, so this bounds the host round trips of a GPU step.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/client/graph_io.h"
#include "dflow/client/scope.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/runtime/device_test_util.h"
#include "dflow/runtime/function.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/placer.h"
#include "dflow/train/models.h"
#include "dflow/train/optimizer.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

struct StepCrossings {
  std::set<std::string> cpu_nodes;  // Nodes of the step placed on the CPU.
  // "src -> dst" per data edge whose tensor changes memory or device.
  std::vector<std::string> host_to_device, device_to_host, host_between_devices;  // Sorted.
};

// Places `def` on a CPU and a GPU-typed device (GPU-first, as a worker with
// a GPU places) and lists where the nodes `roots` depend on cross.
StepCrossings PlaceStep(const tensorflow::GraphDef& def, const std::vector<std::string>& roots) {
  StepCrossings out;
  absl::StatusOr<std::unique_ptr<Graph>> g = GraphFromGraphDef(def);  // Functional ops lowered.
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return out;

  Device cpu(*DeviceName::Parse("/job:worker/replica:0/task:0/device:CPU:0"), 1, int64_t{1} << 30);
  testing_util::HostMemoryGpu gpu(*DeviceName::Parse("/job:worker/replica:0/task:0/device:GPU:0"));
  absl::Status placed = Place(g->get(), {&cpu, &gpu}, &cpu, PlacerOptions());
  EXPECT_TRUE(placed.ok()) << placed;

  // The step: everything the roots depend on.
  std::set<const Node*> step;
  std::vector<const Node*> todo;
  for (const std::string& root : roots) {
    todo.push_back((*g)->FindNode(root));
    EXPECT_NE(todo.back(), nullptr) << root;
  }
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !step.insert(n).second) continue;
    for (const Edge* e : n->in_edges()) todo.push_back(e->src);
  }
  auto on_gpu = [](const Node* n) { return absl::StrContains(n->assigned_device_name(), "GPU"); };
  std::map<const Node*, std::unique_ptr<OpKernel>> kernels;
  for (const Node* n : step) {
    absl::StatusOr<std::unique_ptr<OpKernel>> k =
        KernelRegistry::Global()->CreateKernel(on_gpu(n) ? &gpu : &cpu, n->def());
    EXPECT_TRUE(k.ok()) << k.status();
    if (k.ok()) kernels[n] = *std::move(k);
    if (!on_gpu(n)) out.cpu_nodes.insert(n->name());
  }
  for (const Node* n : step) {
    for (const Edge* e : n->out_edges()) {
      if (e->IsControlEdge() || !kernels.count(e->src) || !kernels.count(e->dst)) continue;
      const MemoryType from = kernels[e->src]->output_memory_type(e->src_output);
      const MemoryType to = kernels[e->dst]->input_memory_type(e->dst_input);
      const std::string edge = absl::StrCat(e->src->name(), " -> ", e->dst->name());
      if (from == MemoryType::kHost && to == MemoryType::kDevice) {
        out.host_to_device.push_back(edge);
      } else if (from == MemoryType::kDevice && to == MemoryType::kHost) {
        out.device_to_host.push_back(edge);
      } else if (on_gpu(e->src) != on_gpu(e->dst)) {
        out.host_between_devices.push_back(edge);
      }
    }
  }
  // Sorted: `step` is ordered by node address, which differs between runs.
  for (auto* edges : {&out.host_to_device, &out.device_to_host, &out.host_between_devices}) {
    std::sort(edges->begin(), edges->end());
  }
  return out;
}

// The training step of `dflow train`'s `model` ("mlp" or "cnn") with Adam:
// the ancestors of its train op and loss.
StepCrossings PlaceTrainingStep(const std::string& model) {
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Model> m = model == "cnn" ? BuildCnn(root) : BuildMlp(root);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  AdamOptimizer adam;
  absl::StatusOr<Operation> train = adam.Minimize(root, m->loss, m->variables);
  EXPECT_TRUE(train.ok()) << train.status();
  tensorflow::GraphDef def;
  EXPECT_TRUE(root.ToGraphDef(&def).ok());
  if (!train.ok()) return {};
  return PlaceStep(def, {train->name(), m->loss.op().name()});
}

// Every node of a training step but its two feeds runs on the GPU (the
// int32 shape arithmetic of the gradients in host memory, as TensorFlow
// runs it), nothing goes back to the host, and the host sends the GPU the
// feeds and one scalar: the count Mean's gradient divides by (a copy queued
// on the stream without waiting for it). Before session 29 the count and
// every shape of the loss's gradient crossed to the CPU and back mid-step,
// and the copy of the count waited for the whole forward pass.
TEST(GpuStepPlacementTest, ATrainingStepCrossesToTheHostOnlyForItsFeeds) {
  for (const std::string model : {"mlp", "cnn"}) {
    SCOPED_TRACE(model);
    const StepCrossings s = PlaceTrainingStep(model);
    EXPECT_EQ(s.cpu_nodes, (std::set<std::string>{"features", "labels"}));
    EXPECT_TRUE(s.device_to_host.empty()) << absl::StrJoin(s.device_to_host, "; ");
    std::vector<std::string> mid_step;
    for (const std::string& edge : s.host_to_device) {
      if (!absl::StartsWith(edge, "features ->") && !absl::StartsWith(edge, "labels ->")) {
        mid_step.push_back(edge);
      }
    }
    EXPECT_EQ(mid_step, (std::vector<std::string>{
                            "gradients/metrics/loss_grad/FloorDiv -> "
                            "gradients/metrics/loss_grad/Cast"}));
    EXPECT_TRUE(s.host_between_devices.empty()) << absl::StrJoin(s.host_between_devices, "; ");
  }
}

// Places every node of tests/data/tf1_corpus/NAME.pbtxt, devices cleared
// (as on one worker).
StepCrossings PlaceCorpusGraph(const std::string& name) {
  absl::StatusOr<tensorflow::GraphDef> def =
      LoadGraphDef(TestDataDir() + "/tf1_corpus/" + name + ".pbtxt");
  EXPECT_TRUE(def.ok()) << def.status();
  if (!def.ok()) return {};
  std::vector<std::string> roots;
  for (tensorflow::NodeDef& n : *def->mutable_node()) {
    n.clear_device();
    roots.push_back(n.name());
  }
  return PlaceStep(*def, roots);
}

// TF1 training steps from tests/data/tf1_corpus (devices cleared, as on one
// worker) run on the GPU but for their feeds, nothing returns to the host,
// and the host sends the GPU only the feeds and the counts of their Means.
//  - RNNs: their TensorArrays, the LSTM cell's concat and split, the
//    transposes, slices and gathers, L2Loss (of clip_by_global_norm) and the
//    int32 shape arithmetic of their gradients have GPU kernels.
//    dynamic_rnn's loop condition's LogicalAnd stays on the CPU, reading
//    bools from host memory (no copy). Before session 30, dynamic_rnn_lstm
//    kept 113 of its 554 nodes on the CPU, nested_while_v1 36 of 345 and
//    rnn_while_v1 95 of 415, and each loop iteration's values crossed to the
//    host and back.
//  - RNNs in control flow v2 loops (While, lowered as the executor lowers
//    it): their TensorLists (tf.TensorArray and the gradient loop's
//    accumulators) keep their elements on the GPU, the lowered call's
//    IdentityN keeps int32 counters in host memory, and the gradient loop's
//    condition (an int32 Less through an Identity) stays a host bool. Before
//    session 31 every TensorList op ran on the CPU.
//  - CNNs with batch norm: FusedBatchNormV3 and its gradient, tf.losses'
//    Select and dropout's RandomUniform have GPU kernels. Before session 31
//    the batch norm ran on the CPU, its activations and their gradients
//    crossing both ways each step, and dropout's mask was drawn on the host.
TEST(GpuStepPlacementTest, TF1StepsRunOnTheGpu) {
  struct Case {
    std::string graph;
    std::set<std::string> cpu_nodes;  // The feeds, and what stays on the CPU.
    std::vector<std::string> mid_step_to_device;
  };
  const std::vector<Case> cases = {
      {"dynamic_rnn_lstm",
       {"rnn/while/LogicalAnd", "x", "y"},
       {"gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
      {"nested_while_v1",
       {"x", "y"},
       {"gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
      {"rnn_while_v1",
       {"x", "y"},
       {"gradients/Mean_1_grad/Prod -> gradients/Mean_1_grad/Cast",
        "gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
      {"cnn_batch_norm",
       {"images", "labels"},
       {"gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
      {"layers_batch_norm", {"images", "labels"}, {}},
      {"while_v2",
       {"x", "y"},
       {"gradients/Mean_1_grad/Prod -> gradients/Mean_1_grad/Cast",
        "gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
      {"while_v2_resource",
       {"x", "y"},
       {"gradients/Mean_1_grad/Prod -> gradients/Mean_1_grad/Cast",
        "gradients/Mean_grad/Prod -> gradients/Mean_grad/Cast"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.graph);
    const StepCrossings s = PlaceCorpusGraph(c.graph);
    EXPECT_EQ(s.cpu_nodes, c.cpu_nodes);
    EXPECT_TRUE(s.device_to_host.empty()) << absl::StrJoin(s.device_to_host, "; ");
    std::vector<std::string> mid_step;  // But from the feeds and in the variables' initializers.
    for (const std::string& edge : s.host_to_device) {
      const std::string src = edge.substr(0, edge.find(" -> "));
      if (!c.cpu_nodes.count(src) && !absl::StrContains(edge, "/Initializer/")) {
        mid_step.push_back(edge);
      }
    }
    EXPECT_EQ(mid_step, c.mid_step_to_device);
  }
}

// TensorFlow's CIFAR-10 multi-GPU model (two towers; devices cleared): its
// LRNs and their gradients run on the GPU (before session 31 each tower's
// pooled activations and their gradient crossed to the CPU and back). What
// stays on the CPU is the feeds and the summaries (the histograms read the
// activations), and of tf.nn.zero_fraction only the int64 Sum of its branch
// for tensors past 2^31 elements; its int64 comparison and subtraction run
// on the GPU since session 32 (41 nodes on the CPU before session 31, 37
// before session 32).
TEST(GpuStepPlacementTest, CifarTowersNormalizeOnTheGpu) {
  const StepCrossings s = PlaceCorpusGraph("cifar_towers");
  for (const std::string& n : s.cpu_nodes) {
    EXPECT_TRUE(absl::EndsWith(n, "Placeholder") || absl::EndsWith(n, "Placeholder_1") ||
                absl::EndsWith(n, "zero_fraction/cond/count_nonzero_1/nonzero_count") ||
                absl::StrContains(n, "/activations") || absl::StrContains(n, "/sparsity") ||
                n == "Merge/MergeSummary")
        << n;
  }
  EXPECT_EQ(s.cpu_nodes.size(), 25u);
  for (const std::string& edge : s.device_to_host) {
    EXPECT_TRUE(absl::StrContains(edge, "zero_fraction") || absl::StrContains(edge, "/activations") ||
                absl::StrContains(edge, "/sparsity"))
        << edge;
  }
}

// tf.metrics and a classifier's accuracy (devices cleared): ArgMax of the
// logits and the int64 comparisons with the labels run on the GPU, so the
// logits stay there; what reads them on the CPU is InTopKV2 (no GPU kernel,
// as in TensorFlow). Before session 32 the logits crossed to the CPU for
// ArgMax too.
TEST(GpuStepPlacementTest, MetricsCompareOnTheGpu) {
  const StepCrossings s = PlaceCorpusGraph("metrics");
  // tf.metrics.accuracy and mean_per_class_accuracy of ArgMax against the
  // int64 labels.
  for (const std::string n : {"ArgMax", "Equal_1", "Equal_2", "Cast", "accuracy/Sum",
                              "accuracy/AssignAdd", "mean_accuracy/Equal", "mean_accuracy/Cast"}) {
    EXPECT_EQ(s.cpu_nodes.count(n), 0u) << n;
  }
  std::vector<std::string> logits_to_host;
  for (const std::string& edge : s.device_to_host) {
    if (absl::StartsWith(edge, "MatMul -> ")) logits_to_host.push_back(edge);
  }
  EXPECT_EQ(logits_to_host, (std::vector<std::string>{"MatMul -> in_top_k/InTopKV2"}));
}

// word2vec (partitioned embeddings, NCE loss, SGD; devices cleared): the
// embedding and NCE weight partitions, their lookups and their sparse SGD
// updates (ScatterSub) run on the GPU (before session 32 the variables and
// everything colocated with them ran on the CPU: 95 nodes). What stays on
// the CPU partitions the ids (DynamicPartition, int64 floordiv and mod),
// stitches the looked-up rows back (ParallelDynamicStitch, CPU-only in
// TensorFlow too), and samples the NCE candidates.
TEST(GpuStepPlacementTest, Word2vecEmbeddingsUpdateOnTheGpu) {
  const StepCrossings s = PlaceCorpusGraph("word2vec");
  for (const std::string n :
       {"embeddings/part_0", "embeddings/part_1", "nce_w/part_0", "nce_b",
        "GradientDescent/update_embeddings/part_0/ScatterSub",
        "GradientDescent/update_nce_w/part_1/ScatterSub", "GradientDescent/update_nce_b/ScatterSub",
        "gradients/nce_loss/Slice_grad/Pad"}) {
    EXPECT_EQ(s.cpu_nodes.count(n), 0u) << n;
  }
  EXPECT_EQ(s.cpu_nodes.size(), 22u) << absl::StrJoin(s.cpu_nodes, ", ");
}

// A channels_first CNN (tests/data/gpu/tf_cnn_nchw_gpu.pbtxt, made by
// TensorFlow with data_format="NCHW", pinned to the GPU): the layout rewrite
// (runtime/layout_rewrite.h) gives each convolution and pool an NHWC form
// between transposes, and every node of the step, helpers included, has a GPU
// kernel: only the feeds are on the CPU and nothing returns to the host.
TEST(GpuStepPlacementTest, AChannelsFirstCnnRunsOnTheGpu) {
  absl::StatusOr<tensorflow::GraphDef> def =
      LoadGraphDef(TestDataDir() + "/gpu/tf_cnn_nchw_gpu.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status();
  const StepCrossings s =
      PlaceStep(*def, {"loss", "grads/filter", "grads/bias", "grads/dense"});
  EXPECT_EQ(s.cpu_nodes, (std::set<std::string>{"x", "labels"}));
  EXPECT_TRUE(s.device_to_host.empty()) << absl::StrJoin(s.device_to_host, "; ");
}

}  // namespace
}  // namespace dflow
