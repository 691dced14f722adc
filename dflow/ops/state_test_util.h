// Test helpers for kernels with ref inputs (VariableV2, Assign, Apply*), and
// a one-line text of an OpDef to compare with TensorFlow's.
//
//   TestRef v(Tensor::Vec<float>({1, 2}));
//   Tensor lr = Tensor::Scalar(0.1f);
//   absl::StatusOr<KernelOutputs> out =
//       RunWithRefs(kernel.get(), device, {v.value(), TensorValue{&lr}});
#ifndef DFLOW_OPS_STATE_TEST_UTIL_H_
#define DFLOW_OPS_STATE_TEST_UTIL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {

// A variable's storage as VariableV2 would hold it: a tensor (left
// uninitialized by the default constructor) and its mutex.
struct TestRef {
  TestRef() = default;
  explicit TestRef(Tensor t) : tensor(std::move(t)) {}
  TensorValue value() { return TensorValue{&tensor, &mu}; }

  absl::Mutex mu;
  Tensor tensor;
};

// What one kernel run produced: each output's value (refs read after the
// run) and, for ref outputs, the storage it points at.
struct KernelOutputs {
  std::vector<Tensor> values;
  std::vector<Tensor*> refs;  // nullptr for non-ref outputs
};

// Runs `kernel` once with `inputs` (ref inputs carry their mutex).
inline absl::StatusOr<KernelOutputs> RunWithRefs(OpKernel* kernel, Device* device,
                                                 std::vector<TensorValue> inputs) {
  OpKernelContext::Params params;
  params.device = device;
  params.op_kernel = kernel;
  params.step_id = 1;
  params.runner = [](std::function<void()> fn) { fn(); };
  params.inputs = std::move(inputs);
  OpKernelContext ctx(&params);
  RETURN_IF_ERROR(kernel->Compute(&ctx));
  KernelOutputs out;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    TensorValue v = ctx.release_output(i);
    if (v.tensor == nullptr) return absl::InternalError(absl::StrCat("output ", i, " not set"));
    out.values.push_back(*v.tensor);
    out.refs.push_back(v.is_ref() ? v.tensor : nullptr);
  }
  return out;
}

// A handle naming resource variable `name` (container "localhost") on
// `device`, whether or not it exists.
inline Tensor ResourceVarHandle(Device* device, const std::string& name) {
  Tensor h(DT_RESOURCE);
  h.scalar<ResourceHandle>() = MakeResourceHandle<Var>(device->name(), "localhost", name);
  return h;
}

// Creates resource variable `name` on `device` holding `value`; its handle.
inline Tensor NewResourceVar(Device* device, const std::string& name, const Tensor& value) {
  auto var = std::make_shared<Var>(value.dtype());
  {
    absl::MutexLock l(var->mu());
    var->SetValue(value);
  }
  absl::Status s = device->resource_manager()->Create<Var>("localhost", name, var);
  if (!s.ok()) return Tensor();  // The test's later checks fail on it.
  return ResourceVarHandle(device, name);
}

// The value of resource variable `name` on `device` (empty when missing).
inline Tensor ResourceVarValue(Device* device, const std::string& name) {
  absl::StatusOr<std::shared_ptr<Var>> var =
      device->resource_manager()->Lookup<Var>("localhost", name);
  if (!var.ok()) return Tensor();
  return (*var)->Snapshot().value_or(Tensor());
}

// "(var:T&, alpha:T) -> (out:T&) [T:type, use_locking:bool=false] stateful":
// args with '&' for refs, attrs sorted with bool/string defaults.
inline std::string OpSignature(const OpDef& op) {
  auto arg = [](const OpArg& a) {
    std::string type = a.type_attr.empty() ? DataTypeString(a.type) : a.type_attr;
    return absl::StrCat(a.name, ":", type, a.is_ref ? "&" : "");
  };
  std::vector<std::string> ins, outs, attrs;
  for (const OpArg& a : op.inputs) ins.push_back(arg(a));
  for (const OpArg& a : op.outputs) outs.push_back(arg(a));
  for (const OpAttr& a : op.attrs) {
    std::string text = absl::StrCat(a.name, ":", a.type);
    if (a.default_value.has_value()) {
      const tensorflow::AttrValue& d = *a.default_value;
      if (d.value_case() == tensorflow::AttrValue::kB) {
        absl::StrAppend(&text, "=", d.b() ? "true" : "false");
      } else if (d.value_case() == tensorflow::AttrValue::kS) {
        absl::StrAppend(&text, "='", d.s(), "'");
      } else {
        absl::StrAppend(&text, "=?");
      }
    }
    attrs.push_back(text);
  }
  std::sort(attrs.begin(), attrs.end());
  return absl::StrCat("(", absl::StrJoin(ins, ", "), ") -> (", absl::StrJoin(outs, ", "), ") [",
                      absl::StrJoin(attrs, ", "), "]", op.is_stateful ? " stateful" : "");
}

}  // namespace dflow

#endif  // DFLOW_OPS_STATE_TEST_UTIL_H_
