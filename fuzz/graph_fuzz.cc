// Fuzzes GraphDef import and placement, as a master does them for a client's
// graph: Graph::FromGraphDef, placement on a two-task cluster's devices (soft
// and strict), topological order, partitioning by task and the GraphDef round
// trip. The input is a binary GraphDef.
#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/proto/config.pb.h"
#include "dflow/runtime/device_mgr.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/partition.h"
#include "dflow/runtime/placer.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

struct Cluster {
  Cluster() {
    tensorflow::ConfigProto config;
    (*config.mutable_device_count())["CPU"] = 2;
    for (const char* job : {"worker", "ps"}) {
      auto d = CreateLocalDevices(config, job, 0, 0);
      if (!d.ok()) std::abort();
      for (auto& dev : *d) devices.push_back(std::move(dev));
    }
    for (auto& d : devices) ptrs.push_back(d.get());
  }
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> ptrs;
};
Cluster* cluster;

tensorflow::NodeDef* Add(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                         std::vector<std::string> inputs, const std::string& device = "") {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  n->set_device(device);
  return n;
}

}  // namespace

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  tensorflow::GraphDef g;
  SetAttr(Add(&g, "x", "Placeholder", {}), "dtype", DT_FLOAT);
  tensorflow::NodeDef* c = Add(&g, "c", "Const", {}, "/job:ps/task:0");
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", Tensor::Vec<float>({1, 2, 3}));
  SetAttr(Add(&g, "y", "Mul", {"x", "c"}, "/job:worker/device:CPU:1"), "T", DT_FLOAT);
  SetAttr(Add(&g, "s", "Sum", {"y", "i"}), "T", DT_FLOAT);
  tensorflow::NodeDef* i = Add(&g, "i", "Const", {});
  SetAttr(i, "dtype", DT_INT32);
  SetAttr(i, "value", Tensor::Scalar<int32_t>(0));
  seeds.push_back(g.SerializeAsString());
  // A resource variable with its colocated readers and an update.
  tensorflow::GraphDef v;
  tensorflow::NodeDef* h = Add(&v, "v", "VarHandleOp", {}, "/job:ps");
  SetAttr(h, "dtype", DT_FLOAT);
  SetAttr(h, "shape", TensorShape({3}));
  SetAttr(Add(&v, "read", "ReadVariableOp", {"v"}), "dtype", DT_FLOAT);
  SetAttr(Add(&v, "assign", "AssignVariableOp", {"v", "c", "^read"}), "dtype", DT_FLOAT);
  *v.add_node() = *c;
  v.mutable_node(3)->set_device("");
  seeds.push_back(v.SerializeAsString());
  // A while loop (Enter/Merge/Switch/NextIteration/Exit).
  tensorflow::GraphDef w;
  *w.add_node() = *i;
  tensorflow::NodeDef* e = Add(&w, "enter", "Enter", {"i"});
  SetAttr(e, "T", DT_INT32);
  SetAttr(e, "frame_name", "loop");
  tensorflow::NodeDef* m = Add(&w, "merge", "Merge", {"enter", "next"});
  SetAttr(m, "T", DT_INT32);
  SetAttr(m, "N", 2);
  tensorflow::NodeDef* lim = Add(&w, "limit", "Const", {"^merge"});
  SetAttr(lim, "dtype", DT_INT32);
  SetAttr(lim, "value", Tensor::Scalar<int32_t>(3));
  SetAttr(Add(&w, "less", "Less", {"merge", "limit"}), "T", DT_INT32);
  Add(&w, "cond", "LoopCond", {"less"});
  SetAttr(Add(&w, "switch", "Switch", {"merge", "cond"}), "T", DT_INT32);
  SetAttr(Add(&w, "next", "NextIteration", {"switch:1"}, "/job:ps"), "T", DT_INT32);
  SetAttr(Add(&w, "exit", "Exit", {"switch"}), "T", DT_INT32);
  seeds.push_back(w.SerializeAsString());
  return seeds;
}

}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dflow::fuzz::InitCommon();
  dflow::fuzz::cluster = new dflow::fuzz::Cluster();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  if (size > fuzz::kMaxInputBytes) return -1;
  tensorflow::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return -1;
  (void)UnsupportedOps(def, /*functions=*/true);
  auto graph = Graph::FromGraphDef(def);
  if (!graph.ok()) return 0;
  (void)(*graph)->TopologicalOrder();
  for (bool soft : {false, true}) {
    std::unique_ptr<Graph> g = (*graph)->Clone();
    PlacerOptions opts;
    opts.allow_soft_placement = soft;
    if (!Place(g.get(), fuzz::cluster->ptrs, fuzz::cluster->ptrs[0], opts).ok()) continue;
    PartitionOptions popts;
    popts.node_to_loc = [](const Node* n) {
      const std::string& d = n->assigned_device_name();
      return d.substr(0, d.find("/device:"));
    };
    (void)Partition(*g, popts);
    tensorflow::GraphDef out;
    g->ToGraphDef(&out);
  }
  return 0;
}
