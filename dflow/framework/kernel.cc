#include "dflow/framework/kernel.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"

namespace dflow {

OpKernelConstruction::OpKernelConstruction(const tensorflow::NodeDef& def, const OpDef& op_def,
                                           DataTypeVector input_types, DataTypeVector output_types,
                                           Device* device)
    : def_(def),
      op_def_(op_def),
      input_types_(std::move(input_types)),
      output_types_(std::move(output_types)),
      device_(device) {}

namespace {

tensorflow::NodeDef WithoutDevice(const tensorflow::NodeDef& def) {
  tensorflow::NodeDef copy = def;
  delete copy.release_device();  // clear_device() would keep its buffer.
  return copy;
}

}  // namespace

OpKernel::OpKernel(OpKernelConstruction* c)
    : def_(WithoutDevice(c->def())),
      input_types_(c->input_types()),
      output_types_(c->output_types()),
      input_memory_(c->input_memory_types()),
      output_memory_(c->output_memory_types()) {}

absl::Status AsyncOpKernel::Compute(OpKernelContext* ctx) {
  absl::Notification done;
  absl::Status status;
  ComputeAsync(ctx, [&](absl::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

// --- OpKernelContext -----------------------------------------------------------

OpKernelContext::OpKernelContext(Params* params)
    : params_(params),
      owned_outputs_(params->op_kernel->num_outputs()),
      outputs_(params->op_kernel->num_outputs()) {}

Tensor* OpKernelContext::AllocateDeviceOutput(int i, const TensorShape& shape, bool zero_fill) {
  absl::StatusOr<Tensor> t =
      Tensor::Allocate(device()->device_allocator(), op_kernel().output_type(i), shape);
  if (t.ok() && zero_fill) {
    absl::Status s = device()->ZeroFill(&*t);
    if (!s.ok()) t = s;
  }
  if (!t.ok()) {
    if (allocation_status_.ok()) {
      allocation_status_ = absl::Status(t.status().code(), absl::StrCat(Prefix(), "output ", i,
                                                                         ": ", t.status().message()));
    }
    owned_outputs_[i] = Tensor();
  } else {
    owned_outputs_[i] = *std::move(t);
  }
  outputs_[i] = TensorValue{&owned_outputs_[i], nullptr};
  return &owned_outputs_[i];
}

Tensor* OpKernelContext::allocate_output(int i, const TensorShape& shape) {
  if (op_kernel().output_memory_type(i) == MemoryType::kDevice) {
    return AllocateDeviceOutput(i, shape, /*zero_fill=*/true);
  }
  owned_outputs_[i] = Tensor(BaseType(op_kernel().output_type(i)), shape);
  outputs_[i] = TensorValue{&owned_outputs_[i], nullptr};
  return &owned_outputs_[i];
}

Tensor* OpKernelContext::allocate_output_for_overwrite(int i, const TensorShape& shape) {
  if (op_kernel().output_memory_type(i) == MemoryType::kDevice) {
    return AllocateDeviceOutput(i, shape, /*zero_fill=*/false);
  }
  owned_outputs_[i] = Tensor::ForOverwrite(BaseType(op_kernel().output_type(i)), shape);
  outputs_[i] = TensorValue{&owned_outputs_[i], nullptr};
  return &owned_outputs_[i];
}

void OpKernelContext::set_output(int i, Tensor value) {
  owned_outputs_[i] = std::move(value);
  outputs_[i] = TensorValue{&owned_outputs_[i], nullptr};
}

void OpKernelContext::set_output_ref(int i, absl::Mutex* mu, Tensor* tensor) {
  outputs_[i] = TensorValue{tensor, mu};
}

TensorValue OpKernelContext::release_output(int i) { return outputs_[i]; }

std::string OpKernelContext::Prefix() const {
  return absl::StrCat("[", op_kernel().type_string(), " '", op_kernel().name(), "'] ");
}

// --- KernelRegistry --------------------------------------------------------------

namespace {

// The node with its op's default attrs added, so constraints on defaulted
// attrs match (a copy only when the op is registered).
tensorflow::NodeDef WithDefaults(const tensorflow::NodeDef& node) {
  tensorflow::NodeDef copy = node;
  absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(node.op());
  if (op.ok()) AddDefaultAttrs(**op, &copy);
  return copy;
}

bool Allowed(const DataTypeVector& allowed, DataType t) {
  return std::find(allowed.begin(), allowed.end(), t) != allowed.end();
}

// True when the node's value of `attr` (a type or list(type)) is allowed.
bool MatchesConstraint(const tensorflow::NodeDef& node, const std::string& attr,
                       const DataTypeVector& allowed) {
  auto it = node.attr().find(attr);
  if (it == node.attr().end()) return false;
  const tensorflow::AttrValue& v = it->second;
  if (v.value_case() == tensorflow::AttrValue::kType) return Allowed(allowed, v.type());
  if (v.value_case() != tensorflow::AttrValue::kList) return false;
  for (int t : v.list().type()) {
    if (!Allowed(allowed, static_cast<DataType>(t))) return false;
  }
  return true;
}

std::string DescribeKernel(const KernelDef& def) {
  std::string out = absl::StrCat("device='", def.device_type, "'");
  for (const auto& [attr, types] : def.type_constraints) {
    absl::StrAppend(&out, "; ", attr, " in ", DataTypeListString(types));
  }
  return out;
}

// "T=int8" for one attr of the node.
std::string DescribeNodeAttr(const tensorflow::NodeDef& node, const std::string& attr) {
  auto it = node.attr().find(attr);
  if (it == node.attr().end()) return absl::StrCat(attr, "=<missing>");
  const tensorflow::AttrValue& v = it->second;
  if (v.value_case() == tensorflow::AttrValue::kType) {
    return absl::StrCat(attr, "=", DataTypeString(v.type()));
  }
  std::vector<DataType> types;
  for (int t : v.list().type()) types.push_back(static_cast<DataType>(t));
  return absl::StrCat(attr, "=", DataTypeListString(types));
}

}  // namespace

KernelRegistry* KernelRegistry::Global() {
  static KernelRegistry* registry = new KernelRegistry;
  return registry;
}

void KernelRegistry::Register(KernelDef def, KernelFactory factory) {
  absl::MutexLock l(&mu_);
  std::string op = def.op;
  kernels_.emplace(std::move(op), Entry{std::move(def), std::move(factory)});
}

const KernelRegistry::Entry* KernelRegistry::FindEntry(const std::string& device_type,
                                                       const tensorflow::NodeDef& node) const {
  auto range = kernels_.equal_range(node.op());
  for (auto it = range.first; it != range.second; ++it) {
    const KernelDef& def = it->second.def;
    if (def.device_type != device_type) continue;
    bool ok = true;
    for (const auto& [attr, allowed] : def.type_constraints) {
      ok = ok && MatchesConstraint(node, attr, allowed);
    }
    if (ok) return &it->second;
  }
  return nullptr;
}

absl::StatusOr<const KernelDef*> KernelRegistry::Find(const std::string& device_type,
                                                      const tensorflow::NodeDef& node) const {
  {
    absl::ReaderMutexLock l(&mu_);
    if (const Entry* e = FindEntry(device_type, node)) return &e->def;
  }
  // Constraints may name attrs the node leaves to their defaults.
  tensorflow::NodeDef full = WithDefaults(node);
  absl::ReaderMutexLock l(&mu_);
  if (const Entry* e = FindEntry(device_type, full)) return &e->def;
  std::set<std::string> attrs;
  std::vector<std::string> registered;
  auto range = kernels_.equal_range(node.op());
  for (auto it = range.first; it != range.second; ++it) {
    for (const auto& [attr, types] : it->second.def.type_constraints) attrs.insert(attr);
    registered.push_back(DescribeKernel(it->second.def));
  }
  std::vector<std::string> values;
  for (const std::string& attr : attrs) values.push_back(DescribeNodeAttr(full, attr));
  return absl::NotFoundError(absl::StrCat(
      "No kernel for op '", node.op(), "' on device ", device_type, values.empty() ? "" : " with ",
      absl::StrJoin(values, ", "),
      "; registered: ", registered.empty() ? "<none>" : absl::StrJoin(registered, " | ")));
}

std::vector<KernelDef> KernelRegistry::ListKernels() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<KernelDef> out;
  for (const auto& [op, entry] : kernels_) out.push_back(entry.def);
  return out;
}

namespace {

// Where a kernel on a device with its own memory reads its inputs (or makes
// its outputs): device memory, except the registration's HostMemory args and
// the types only CPU code handles.
absl::Status MemoryTypes(const tensorflow::NodeDef& node, const OpDef& op,
                         const std::vector<std::string>& host_memory_args, bool inputs,
                         const DataTypeVector& types, std::vector<MemoryType>* out) {
  out->assign(types.size(), MemoryType::kDevice);
  for (size_t i = 0; i < types.size(); ++i) {
    const DataType t = BaseType(types[i]);
    if (t == DT_STRING || t == DT_RESOURCE || t == tensorflow::DT_VARIANT) {
      (*out)[i] = MemoryType::kHost;
    }
  }
  const std::vector<OpArg>& args = inputs ? op.inputs : op.outputs;
  for (const std::string& name : host_memory_args) {
    if (std::none_of(args.begin(), args.end(), [&](const OpArg& a) { return a.name == name; })) {
      continue;  // The other direction's arg.
    }
    int start = 0, stop = 0;
    RETURN_IF_ERROR(inputs ? InputRange(node, op, name, &start, &stop)
                           : OutputRange(node, op, name, &start, &stop));
    for (int k = start; k < stop; ++k) (*out)[k] = MemoryType::kHost;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernel(
    Device* device, const tensorflow::NodeDef& node) const {
  ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(node.op()));
  tensorflow::NodeDef full = node;
  AddDefaultAttrs(*op, &full);
  RETURN_IF_ERROR(ValidateNodeDef(full, *op));
  DataTypeVector inputs, outputs;
  RETURN_IF_ERROR(InOutTypesForNode(full, *op, &inputs, &outputs));
  const std::string device_type = device == nullptr ? kDeviceCPU : device->device_type();
  KernelFactory factory;
  std::vector<std::string> host_memory_args;
  {
    absl::ReaderMutexLock l(&mu_);
    if (const Entry* e = FindEntry(device_type, full)) {
      factory = e->factory;
      host_memory_args = e->def.host_memory_args;
    }
  }
  if (!factory) {  // NotFound listing what is registered.
    absl::Status s = Find(device_type, full).status();
    return s.ok() ? absl::InternalError("kernel registry changed during lookup") : s;
  }
  OpKernelConstruction c(full, *op, std::move(inputs), std::move(outputs), device);
  if (device != nullptr && device->device_allocator() != nullptr) {
    std::vector<MemoryType> in_mem, out_mem;
    RETURN_IF_ERROR(MemoryTypes(full, *op, host_memory_args, /*inputs=*/true, c.input_types(),
                                &in_mem));
    RETURN_IF_ERROR(MemoryTypes(full, *op, host_memory_args, /*inputs=*/false, c.output_types(),
                                &out_mem));
    c.set_memory_types(std::move(in_mem), std::move(out_mem));
  }
  std::unique_ptr<OpKernel> kernel = factory(&c);
  if (!c.status().ok()) {
    return WithContext(c.status(), absl::StrCat("node '", node.name(), "'"));
  }
  return kernel;
}

}  // namespace dflow
