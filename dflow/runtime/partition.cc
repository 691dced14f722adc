#include "dflow/runtime/partition.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/control_flow.h"

namespace dflow {
namespace {

const std::string& DeviceOf(const Node* n) {
  return n->assigned_device_name().empty() ? n->requested_device() : n->assigned_device_name();
}

std::string DataInput(const std::string& node, int output) {
  return output == 0 ? node : absl::StrCat(node, ":", output);
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const PartitionOptions& opts) : g_(g), opts_(opts) {}

  absl::StatusOr<std::map<std::string, tensorflow::GraphDef>> Run();

 private:
  // The inputs of one node's copy, filled edge by edge.
  struct Inputs {
    std::vector<std::string> data;
    std::vector<std::string> control;
  };

  absl::Status AddNodeCopies();
  absl::Status ConnectEdge(const Edge* e);
  absl::StatusOr<std::string> RecvFor(const Edge* e);
  // Returns the _Recv.
  tensorflow::NodeDef* AddSendRecv(const Edge* e, const std::string& input, DataType type,
                                   const std::string& send_name, const std::string& recv_name);
  std::string NewName(const std::string& prefix);

  const Graph& g_;
  const PartitionOptions& opts_;
  std::vector<std::string> loc_;  // By node id.
  ControlFlowInfo frames_;
  std::map<std::string, tensorflow::GraphDef> parts_;
  std::vector<tensorflow::NodeDef*> copy_;  // By node id; owned by parts_.
  std::vector<Inputs> inputs_;              // By node id.
  // (source node id, output or kControlSlot, destination location) -> _Recv.
  std::map<std::tuple<int, int, std::string>, std::string> recvs_;
  // The control inputs a node takes from one other location outside loops
  // travel as one dummy Const that waits for all of them; nodes of one
  // location waiting for the same set share it.
  // (destination node id, source location): the node waits on its group.
  absl::flat_hash_set<std::pair<int, std::string>> control_waits_;
  // (source location, destination location, source node ids) -> the _Recv.
  std::map<std::tuple<std::string, std::string, std::vector<int>>, std::string> control_groups_;
  absl::flat_hash_set<std::string> made_names_;
  int counter_ = 0;
};

std::string Partitioner::NewName(const std::string& prefix) {
  if (opts_.new_name) return opts_.new_name(prefix);
  std::string name;
  do {
    name = absl::StrCat(prefix, "/_", counter_++);
  } while (g_.FindNode(name) != nullptr || made_names_.contains(name));
  made_names_.insert(name);
  return name;
}

absl::Status Partitioner::AddNodeCopies() {
  loc_.assign(g_.num_node_ids(), "");
  copy_.assign(g_.num_node_ids(), nullptr);
  inputs_.assign(g_.num_node_ids(), Inputs());
  for (const Node* n : g_.nodes()) {
    std::string loc = opts_.node_to_loc ? opts_.node_to_loc(n) : n->assigned_device_name();
    if (loc.empty() || DeviceOf(n).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[Partition] node '", n->name(), "' (", n->type_string(),
          ") has no device; place the graph first"));
    }
    tensorflow::GraphDef& part = parts_[loc];
    tensorflow::NodeDef* copy = part.add_node();
    *copy = n->def();
    copy->clear_input();
    copy->set_device(DeviceOf(n));
    loc_[n->id()] = std::move(loc);
    copy_[n->id()] = copy;
    inputs_[n->id()].data.resize(n->num_inputs());
  }
  return absl::OkStatus();
}

// Adds a _Send of `input` (of `type`) on the source side of `e` and the
// matching _Recv on the destination side.
tensorflow::NodeDef* Partitioner::AddSendRecv(const Edge* e, const std::string& input,
                                              DataType type, const std::string& send_name,
                                              const std::string& recv_name) {
  const std::string tensor_name = absl::StrCat("edge_", e->id, "_", e->src->name());
  const std::string& send_device = DeviceOf(e->src);
  const std::string& recv_device = DeviceOf(e->dst);
  const int64_t incarnation =
      opts_.get_incarnation ? static_cast<int64_t>(opts_.get_incarnation(send_device)) : 0;
  auto common = [&](tensorflow::NodeDef* def) {
    SetAttr(def, "tensor_name", tensor_name);
    SetAttr(def, "send_device", send_device);
    SetAttr(def, "send_device_incarnation", incarnation);
    SetAttr(def, "recv_device", recv_device);
    SetAttr(def, "client_terminated", false);
  };
  tensorflow::NodeDef* send = parts_[loc_[e->src->id()]].add_node();
  send->set_name(send_name);
  send->set_op("_Send");
  send->set_device(send_device);
  send->add_input(input);
  SetAttr(send, "T", type);
  common(send);
  tensorflow::NodeDef* recv = parts_[loc_[e->dst->id()]].add_node();
  recv->set_name(recv_name);
  recv->set_op("_Recv");
  recv->set_device(recv_device);
  SetAttr(recv, "tensor_type", type);
  common(recv);
  // Inside a loop spanning devices, the destination waits on its device's
  // control loop (AddControlLoops); so does the _Recv, once per iteration.
  for (const Edge* in : e->dst->in_edges()) {
    if (in->IsControlEdge() && IsControlLoopMerge(*in->src) &&
        loc_[in->src->id()] == loc_[e->dst->id()]) {
      recv->add_input(absl::StrCat("^", in->src->name()));
    }
  }
  return recv;
}

// The _Recv delivering e's source (tensor or control) to e's destination
// location, created on first use.
absl::StatusOr<std::string> Partitioner::RecvFor(const Edge* e) {
  auto key = std::make_tuple(e->src->id(), e->src_output, loc_[e->dst->id()]);
  auto it = recvs_.find(key);
  if (it != recvs_.end()) return it->second;
  const std::string& src = e->src->name();
  std::string recv_name;
  tensorflow::NodeDef* recv = nullptr;
  if (e->IsControlEdge()) {
    tensorflow::NodeDef* dummy = parts_[loc_[e->src->id()]].add_node();
    *dummy = ControlSignalConst(NewName(absl::StrCat(src, "/ctrl")), DeviceOf(e->src));
    dummy->add_input(absl::StrCat("^", src));
    std::string send_name = NewName(src);
    recv_name = NewName(src);
    recv = AddSendRecv(e, dummy->name(), DT_FLOAT, send_name, recv_name);
  } else {
    if (IsRefType(e->dst->input_type(e->dst_input))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[Partition] node '", e->dst->name(), "' on ", DeviceOf(e->dst),
          " takes a reference to '", src, "' on ", DeviceOf(e->src),
          ": references cannot cross locations; colocate them"));
    }
    std::string send_name = NewName(src);
    recv_name = NewName(src);
    recv = AddSendRecv(e, DataInput(src, e->src_output),
                       BaseType(e->src->output_type(e->src_output)), send_name, recv_name);
  }
  const int frame = frames_.frame_of[e->dst->id()];
  if (frame > 0 && recv->input_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "[Partition] while loop '", frames_.frames[frame].name, "' spans ", loc_[e->src->id()],
        " ('", src, "') and ", loc_[e->dst->id()], " ('", e->dst->name(),
        "') without a control loop there: run AddControlLoops before partitioning"));
  }
  recvs_.emplace(key, recv_name);
  return recv_name;
}

absl::Status Partitioner::ConnectEdge(const Edge* e) {
  Inputs& in = inputs_[e->dst->id()];
  const bool local = loc_[e->src->id()] == loc_[e->dst->id()];
  // A node's control inputs from one other location (outside loops) travel
  // as one dummy tensor that waits for all of them: a train op waiting for a
  // ps's updates receives one tensor a step, not one per update; and the
  // nodes there that wait for the same set share that tensor.
  if (!local && e->IsControlEdge() && frames_.frame_of[e->dst->id()] == 0 &&
      frames_.frame_of[e->src->id()] == 0) {
    const std::string& src_loc = loc_[e->src->id()];
    if (!control_waits_.emplace(e->dst->id(), src_loc).second) return absl::OkStatus();
    std::vector<int> sources;  // Node ids, sorted: the group's key.
    for (const Edge* c : e->dst->in_edges()) {
      const int id = c->src->id();
      if (c->IsControlEdge() && loc_[id] == src_loc && frames_.frame_of[id] == 0) {
        sources.push_back(id);
      }
    }
    std::sort(sources.begin(), sources.end());
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    auto [group, fresh] =
        control_groups_.try_emplace(std::make_tuple(src_loc, loc_[e->dst->id()], sources), "");
    if (fresh) {
      tensorflow::NodeDef* dummy = parts_[src_loc].add_node();
      *dummy =
          ControlSignalConst(NewName(absl::StrCat(e->dst->name(), "/ctrl")), DeviceOf(e->src));
      for (int id : sources) dummy->add_input(absl::StrCat("^", g_.node(id)->name()));
      const std::string send_name = NewName(e->src->name());
      group->second = NewName(e->src->name());
      AddSendRecv(e, dummy->name(), DT_FLOAT, send_name, group->second);
    }
    in.control.push_back(absl::StrCat("^", group->second));
    return absl::OkStatus();
  }
  std::string src = e->src->name();
  if (!local) {
    ASSIGN_OR_RETURN(src, RecvFor(e));
  }
  if (e->IsControlEdge()) {
    in.control.push_back(absl::StrCat("^", src));
  } else {
    in.data[e->dst_input] = local ? DataInput(src, e->src_output) : src;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, tensorflow::GraphDef>> Partitioner::Run() {
  RETURN_IF_ERROR(AddNodeCopies());
  ASSIGN_OR_RETURN(frames_, BuildControlFlowInfo(g_));
  for (const Node* n : g_.nodes()) {
    for (const Edge* e : n->in_edges()) RETURN_IF_ERROR(ConnectEdge(e));
  }
  for (const Node* n : g_.nodes()) {
    const Inputs& in = inputs_[n->id()];
    tensorflow::NodeDef* copy = copy_[n->id()];
    for (const std::string& s : in.data) {
      if (s.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "[Partition] node '", n->name(), "' has an unconnected data input"));
      }
      copy->add_input(s);
    }
    for (const std::string& s : in.control) copy->add_input(s);
  }
  for (auto& [loc, part] : parts_) *part.mutable_versions() = g_.versions();
  return std::move(parts_);
}

}  // namespace

absl::StatusOr<std::map<std::string, tensorflow::GraphDef>> Partition(
    const Graph& g, const PartitionOptions& opts) {
  return Partitioner(g, opts).Run();
}

namespace {

// The device type of a full device name ("CPU"); "" when it does not parse.
std::string DeviceType(const std::string& device) {
  absl::StatusOr<DeviceName> name = DeviceName::Parse(device);
  return name.ok() ? name->type : "";
}

// The node `n` should move to, when every edge joins it to nodes of one other
// location and it is a node that may follow them (see the header); else null.
const Node* RelayTarget(const Node* n, const std::function<std::string(const Node*)>& node_to_loc) {
  const bool noop = n->type_string() == "NoOp";
  if (noop ? n->in_edges().empty() : !n->IsConstant() || !n->in_edges().empty()) return nullptr;
  const Node* first = noop ? n->in_edges().front()->src
                           : (n->out_edges().empty() ? nullptr : n->out_edges().front()->dst);
  if (first == nullptr) return nullptr;
  const std::string there = node_to_loc(first);
  if (there == node_to_loc(n)) return nullptr;
  for (const auto* edges : {&n->in_edges(), &n->out_edges()}) {
    for (const Edge* e : *edges) {
      // A NoOp has only control edges; a Const moves for its data consumers.
      if (e->IsControlEdge() != noop) return nullptr;
      if (node_to_loc(e->src == n ? e->dst : e->src) != there) return nullptr;
    }
  }
  if (!noop && DeviceType(first->assigned_device_name()) != DeviceType(n->assigned_device_name())) {
    return nullptr;  // A kernel for the value's dtype may be missing there.
  }
  return first;
}

}  // namespace

int ColocateRelaysAndConstants(Graph* g,
                               const std::function<std::string(const Node*)>& node_to_loc) {
  // In topological order, each decision seeing the moves before it: a NoOp
  // that followed its inputs is home for the NoOp after it.
  absl::StatusOr<std::vector<Node*>> order = g->TopologicalOrder();
  if (!order.ok()) return 0;  // A cycle, which FromGraphDef rejects: left as placed.
  int moved = 0;
  for (Node* n : *order) {
    if (const Node* target = RelayTarget(n, node_to_loc)) {
      n->set_assigned_device_name(target->assigned_device_name());
      ++moved;
    }
  }
  return moved;
}

}  // namespace dflow
