#include "dflow/runtime/placer.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

constexpr char kColocationPrefix[] = "loc:@";

std::string Label(const Node* n) {
  return absl::StrCat("node '", n->name(), "' (", n->type_string(), ")");
}

class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<int> parent_;
};

// A set of nodes that must share a device, and what they ask for.
struct Group {
  std::vector<Node*> members;   // In id order.
  std::vector<std::pair<Node*, DeviceName>> requests;  // Members that ask.
  DeviceName spec;              // The requests merged.
};

// Higher is preferred.
int TypePriority(const std::string& type) {
  if (type == kDeviceGPU) return 2;
  if (type == kDeviceCPU) return 1;
  return 0;
}

// Merges `request` into `into`, dropping a conflicting device type (and id)
// or id instead of failing; job, replica and task must still agree.
absl::Status SoftMerge(DeviceName* into, DeviceName request) {
  if (into->has_type && request.has_type && into->type != request.type) {
    into->has_type = into->has_id = false;
    request.has_type = request.has_id = false;
  }
  if (into->has_id && request.has_id && into->id != request.id) {
    into->has_id = request.has_id = false;
  }
  return into->MergeFrom(request);
}

class Placer {
 public:
  Placer(Graph* graph, const std::vector<Device*>& devices, const Device* default_device,
         const PlacerOptions& opts)
      : graph_(graph), devices_(devices), default_(default_device), opts_(opts) {}

  absl::Status Run();

 private:
  absl::Status BuildGroups();
  absl::Status Colocate(UnionFind* uf);
  absl::Status MergeRequest(Group* g, Node* n, const DeviceName& request);
  absl::Status PlaceGroup(const Group& g);
  bool IsGenerator(const Group& g) const;
  bool PlaceGenerator(Node* n);
  bool HasKernel(const Node* n, const std::string& type);
  std::vector<Device*> Candidates(const Group& g);
  const Device* Choose(std::vector<Device*> matching) const;
  absl::Status NoDeviceError(const Group& g, const std::vector<Device*>& candidates);
  std::string DevicesString() const;
  void Assign(Node* n, const Device* d);

  Graph* graph_;
  const std::vector<Device*>& devices_;
  const Device* default_;
  const PlacerOptions& opts_;
  std::vector<Group> groups_;
  std::map<std::pair<int, std::string>, bool> kernel_cache_;
};

// --- colocation groups ------------------------------------------------------

// An IdentityN (what a lowered While, If or function call leaves under the
// call's name) only forwards its inputs: reading a resource does not pin it
// to the resource's device, as in TensorFlow's placer, so a loop's other
// results stay where the loop runs.
bool ForwardsResources(const Node* n) { return n->type_string() == "IdentityN"; }

// The node whose resource or reference `e` carries, looking through the
// IdentityN nodes that forward it: a consumer runs beside that node.
const Node* ResourceOrigin(const Edge* e) {
  const Node* src = e->src;
  int output = e->src_output;
  while (ForwardsResources(src)) {
    const Edge* in = nullptr;
    for (const Edge* c : src->in_edges()) {
      if (c->dst_input == output) in = c;
    }
    if (in == nullptr) break;
    src = in->src;
    output = in->src_output;
  }
  return src;
}

absl::Status Placer::Colocate(UnionFind* uf) {
  for (Node* n : graph_->nodes()) {
    if (HasNodeAttr(n->def(), "_class")) {
      std::vector<std::string> classes;
      RETURN_IF_ERROR(GetNodeAttr(n->def(), "_class", &classes));
      for (const std::string& c : classes) {
        if (!absl::StartsWith(c, kColocationPrefix)) continue;
        std::string other_name = c.substr(sizeof(kColocationPrefix) - 1);
        Node* other = graph_->FindNode(other_name);
        // A missing target was pruned away for this run: nothing to follow.
        if (other == nullptr) continue;
        uf->Union(n->id(), other->id());
      }
    }
    if (ForwardsResources(n)) continue;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) continue;
      DataType t = n->input_type(e->dst_input);
      if (t == DT_RESOURCE || IsRefType(t)) uf->Union(ResourceOrigin(e)->id(), n->id());
    }
  }
  return absl::OkStatus();
}

// Merges one member's request into the group's spec. Job, replica and task
// must agree; with soft placement a conflicting type or id is dropped.
absl::Status Placer::MergeRequest(Group* g, Node* n, const DeviceName& request) {
  DeviceName merged = g->spec;
  absl::Status s = merged.MergeFrom(request);
  if (!s.ok() && opts_.allow_soft_placement) {
    merged = g->spec;
    s = SoftMerge(&merged, request);
  }
  if (!s.ok()) {
    // Name the member whose request clashes with this one.
    const std::pair<Node*, DeviceName>* other = &g->requests.front();
    for (const auto& r : g->requests) {
      DeviceName probe = r.second;
      if (!probe.MergeFrom(request).ok()) {
        other = &r;
        break;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "[Placer] cannot colocate ", Label(n), " requesting '", request.ToString(),
        "' with ", Label(other->first), " requesting '", other->second.ToString(),
        "': ", s.message()));
  }
  g->spec = merged;
  g->requests.emplace_back(n, request);
  return absl::OkStatus();
}

// True when `n` reads a resource or ref input: it must run beside that
// variable, whatever it requested.
bool ConsumesResourceOrRef(const Node* n) {
  if (ForwardsResources(n)) return false;
  for (const Edge* e : n->in_edges()) {
    if (e->IsControlEdge()) continue;
    const DataType t = n->input_type(e->dst_input);
    if (t == DT_RESOURCE || IsRefType(t)) return true;
  }
  return false;
}

absl::Status Placer::BuildGroups() {
  UnionFind uf(graph_->num_node_ids());
  RETURN_IF_ERROR(Colocate(&uf));
  std::map<int, int> group_of_root;
  // Requests of resource/ref consumers merge last; one that conflicts with
  // its variable's is ignored, as TensorFlow's placer does ("the input edge
  // is a reference connection and already has a device field set"): e.g.
  // replica_device_setter puts VarIsInitializedOp on the worker, its variable
  // on a ps.
  std::vector<std::tuple<int, Node*, DeviceName>> consumers;
  for (Node* n : graph_->nodes()) {
    auto [it, added] = group_of_root.emplace(uf.Find(n->id()), groups_.size());
    if (added) groups_.emplace_back();
    Group& g = groups_[it->second];
    g.members.push_back(n);
    const std::string& want =
        n->assigned_device_name().empty() ? n->requested_device() : n->assigned_device_name();
    if (want.empty()) continue;
    absl::StatusOr<DeviceName> request = DeviceName::Parse(want);
    if (!request.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("[Placer] ", Label(n),
                                                     " has a malformed device: ",
                                                     request.status().message()));
    }
    if (ConsumesResourceOrRef(n)) {
      consumers.emplace_back(it->second, n, *request);
      continue;
    }
    RETURN_IF_ERROR(MergeRequest(&g, n, *request));
  }
  for (auto& [group, n, request] : consumers) {
    if (absl::Status s = MergeRequest(&groups_[group], n, request);
        !s.ok() && opts_.log_device_placement) {
      std::cerr << "[Placer] ignoring the device requested by " << Label(n)
                << ": it reads a variable placed elsewhere (" << s.message() << ")\n";
    }
  }
  return absl::OkStatus();
}

// --- choosing a device ------------------------------------------------------

bool Placer::HasKernel(const Node* n, const std::string& type) {
  auto key = std::make_pair(n->id(), type);
  auto it = kernel_cache_.find(key);
  if (it != kernel_cache_.end()) return it->second;
  bool has = KernelRegistry::Global()->HasKernel(type, n->def());
  kernel_cache_.emplace(key, has);
  return has;
}

// Devices on which every member of `g` has a kernel.
std::vector<Device*> Placer::Candidates(const Group& g) {
  std::vector<Device*> out;
  for (Device* d : devices_) {
    bool ok = std::all_of(g.members.begin(), g.members.end(),
                          [&](const Node* n) { return HasKernel(n, d->device_type()); });
    if (ok) out.push_back(d);
  }
  return out;
}

// The preferred device among `matching` (non-empty): best type first, then
// the default device, then a device of the default device's task, then the
// lowest (job, replica, task, id).
const Device* Placer::Choose(std::vector<Device*> matching) const {
  auto rank = [this](const Device* d) {
    const DeviceName& p = d->parsed_name();
    bool is_default = d == default_;
    bool same_task = default_ != nullptr && p.job == default_->parsed_name().job &&
                     p.replica == default_->parsed_name().replica &&
                     p.task == default_->parsed_name().task;
    return std::make_tuple(-TypePriority(p.type), !is_default, !same_task, p.job, p.replica,
                           p.task, p.type, p.id);
  };
  return *std::min_element(matching.begin(), matching.end(),
                           [&](const Device* a, const Device* b) { return rank(a) < rank(b); });
}

std::string Placer::DevicesString() const {
  std::vector<std::string> names;
  for (const Device* d : devices_) names.push_back(d->name());
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

// Explains why no device suits `g`: no kernel anywhere, no device matching
// the request, or matching devices without a kernel for some member.
absl::Status Placer::NoDeviceError(const Group& g, const std::vector<Device*>& candidates) {
  const Node* who = g.requests.empty() ? g.members.front() : g.requests.front().first;
  std::string colocated;
  if (g.members.size() > 1) {
    std::vector<std::string> names;
    for (const Node* m : g.members) names.push_back(absl::StrCat("'", m->name(), "'"));
    colocated = absl::StrCat(" (colocated with ", absl::StrJoin(names, ", "), ")");
  }
  const Device* match = nullptr;
  for (const Device* d : devices_) {
    if (g.spec.Matches(d->parsed_name())) {
      match = d;
      break;
    }
  }
  std::string why = "no device matches it";
  if (match != nullptr || candidates.empty()) {
    // Name a member lacking a kernel on the matching device (or on any).
    for (const Node* m : g.members) {
      bool has_any = false;
      for (const Device* d : devices_) has_any = has_any || HasKernel(m, d->device_type());
      if (!has_any) {
        why = absl::StrCat("no available device type has a kernel for ", Label(m));
        break;
      }
      if (match != nullptr && !HasKernel(m, match->device_type())) {
        why = absl::StrCat("no ", match->device_type(), " kernel for ", Label(m));
        break;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "[Placer] cannot assign a device for ", Label(who), colocated, ": requested '",
      g.spec.ToString(), "', but ", why, "; available devices: ", DevicesString()));
}

void Placer::Assign(Node* n, const Device* d) {
  n->set_assigned_device_name(d->name());
  if (opts_.log_device_placement) {
    std::fprintf(stderr, "%s: (%s): %s\n", n->name().c_str(), n->type_string().c_str(),
                 d->name().c_str());
  }
}

absl::Status Placer::PlaceGroup(const Group& g) {
  std::vector<Device*> candidates = Candidates(g);
  auto matching_for = [&](const DeviceName& spec) {
    std::vector<Device*> out;
    for (Device* d : candidates) {
      if (spec.Matches(d->parsed_name())) out.push_back(d);
    }
    return out;
  };
  std::vector<Device*> matching = matching_for(g.spec);
  if (matching.empty() && opts_.allow_soft_placement) {
    DeviceName relaxed = g.spec;
    relaxed.has_type = relaxed.has_id = false;
    matching = matching_for(relaxed);
  }
  if (matching.empty()) return NoDeviceError(g, candidates);
  const Device* d = Choose(std::move(matching));
  for (Node* n : g.members) Assign(n, d);
  return absl::OkStatus();
}

// A lone, unconstrained node with no inputs whose one output feeds exactly
// one data edge (a Const, a random op): it should live with its consumer.
bool Placer::IsGenerator(const Group& g) const {
  if (g.members.size() != 1 || !g.requests.empty()) return false;
  const Node* n = g.members.front();
  if (!n->in_edges().empty() || n->num_outputs() != 1 || n->out_edges().size() != 1) {
    return false;
  }
  DataType t = n->output_type(0);
  return !IsRefType(t) && t != DT_RESOURCE && !n->out_edges().front()->IsControlEdge();
}

bool Placer::PlaceGenerator(Node* n) {
  const std::string& target = n->out_edges().front()->dst->assigned_device_name();
  for (const Device* d : devices_) {
    if (d->name() == target && HasKernel(n, d->device_type())) {
      Assign(n, d);
      return true;
    }
  }
  return false;
}

absl::Status Placer::Run() {
  if (devices_.empty()) {
    return absl::FailedPreconditionError("[Placer] no devices to place the graph on");
  }
  RETURN_IF_ERROR(BuildGroups());
  std::vector<const Group*> generators;
  for (const Group& g : groups_) {
    if (IsGenerator(g)) {
      generators.push_back(&g);
    } else {
      RETURN_IF_ERROR(PlaceGroup(g));
    }
  }
  // Consumers are placed now; generators without a usable consumer device
  // fall back to the usual rules. A chain of generators cannot occur: a
  // generator's consumer has an input, so it is not a generator.
  for (const Group* g : generators) {
    if (!PlaceGenerator(g->members.front())) RETURN_IF_ERROR(PlaceGroup(*g));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Place(Graph* graph, const std::vector<Device*>& devices,
                   const Device* default_device, const PlacerOptions& opts) {
  return Placer(graph, devices, default_device, opts).Run();
}

}  // namespace dflow
