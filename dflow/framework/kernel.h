// OpKernel: the code that computes one node on one device type, and the
// registry that finds it.
//
//   class MatMulOp : public OpKernel {
//    public:
//     explicit MatMulOp(OpKernelConstruction* c) : OpKernel(c) {
//       c->GetAttr("transpose_a", &transpose_a_);  // records failures on c
//     }
//     absl::Status Compute(OpKernelContext* ctx) override {
//       const Tensor& a = ctx->input(0);
//       if (a.dims() != 2) return ctx->InvalidArgument("a is not a matrix: ", ...);
//       Tensor* out = ctx->allocate_output(0, TensorShape({m, n}));
//       ...
//     }
//   };
//   REGISTER_KERNEL(KernelDefBuilder("MatMul").Device(kDeviceCPU)
//                       .TypeConstraint("T", {DT_FLOAT, DT_DOUBLE}),
//                   MatMulOp);
#ifndef DFLOW_FRAMEWORK_KERNEL_H_
#define DFLOW_FRAMEWORK_KERNEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/device.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"

namespace dflow {

class OpKernelContext;
class AsyncOpKernel;

// The feeds and fetches of one executor run: _Arg kernels read argument i,
// _Retval kernels write return value i. Implementations are thread-safe.
class CallFrameInterface {
 public:
  virtual ~CallFrameInterface() = default;
  virtual int num_args() const = 0;
  virtual int num_retvals() const = 0;
  // OutOfRange naming the index when it is not an argument.
  virtual absl::StatusOr<Tensor> GetArg(int index) const = 0;
  // Fails when the index is out of range or already set.
  virtual absl::Status SetRetval(int index, const Tensor& value) = 0;
};

// A value flowing along an edge. For reference-typed edges (TensorFlow 1.x
// variables) `tensor` points at the variable's storage and `mutex` guards it.
struct TensorValue {
  Tensor* tensor = nullptr;  // not owned
  absl::Mutex* mutex = nullptr;  // not owned; set only for ref edges
  bool is_ref() const { return mutex != nullptr; }
};

class OpKernelConstruction {
 public:
  OpKernelConstruction(const tensorflow::NodeDef& def, const OpDef& op_def,
                       DataTypeVector input_types, DataTypeVector output_types,
                       Device* device);

  const tensorflow::NodeDef& def() const { return def_; }
  const OpDef& op_def() const { return op_def_; }
  Device* device() const { return device_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const DataTypeVector& input_types() const { return input_types_; }
  const DataTypeVector& output_types() const { return output_types_; }
  // Where each input and output lives (see OpKernel::input_memory_type).
  const std::vector<MemoryType>& input_memory_types() const { return input_memory_; }
  const std::vector<MemoryType>& output_memory_types() const { return output_memory_; }
  void set_memory_types(std::vector<MemoryType> inputs, std::vector<MemoryType> outputs) {
    input_memory_ = std::move(inputs);
    output_memory_ = std::move(outputs);
  }

  // Reads an attr; a failure is also recorded here (so constructors need not
  // check) and returned.
  template <typename T>
  absl::Status GetAttr(const std::string& name, T* value) {
    absl::Status s = GetNodeAttr(def_, name, value);
    SetStatus(s);
    return s;
  }
  bool HasAttr(const std::string& name) const { return HasNodeAttr(def_, name); }
  // Records the first non-OK status; kernel creation then fails with it.
  void SetStatus(const absl::Status& s) {
    if (status_.ok()) status_ = s;
  }
  const absl::Status& status() const { return status_; }

 private:
  const tensorflow::NodeDef& def_;
  const OpDef& op_def_;
  DataTypeVector input_types_;
  DataTypeVector output_types_;
  std::vector<MemoryType> input_memory_;   // Empty: all host memory.
  std::vector<MemoryType> output_memory_;  // Empty: all host memory.
  Device* device_;
  absl::Status status_;
};

class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction* c);
  virtual ~OpKernel() = default;
  OpKernel(const OpKernel&) = delete;
  OpKernel& operator=(const OpKernel&) = delete;

  // Computes the outputs from the inputs. Errors should start with the
  // op's type (ctx->InvalidArgument does) and show the offending values.
  virtual absl::Status Compute(OpKernelContext* ctx) = 0;
  // Cheap kernels run inline on the executor's thread; expensive ones go to
  // the inter-op pool.
  virtual bool IsExpensive() const { return true; }
  virtual AsyncOpKernel* AsAsync() { return nullptr; }

  // The node the kernel was made for, without its device (the kernel runs
  // on OpKernelContext::device(); a large graph need not hold one full
  // device name per kernel).
  const tensorflow::NodeDef& def() const { return def_; }
  const std::string& name() const { return def_.name(); }
  const std::string& type_string() const { return def_.op(); }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const DataTypeVector& input_types() const { return input_types_; }
  const DataTypeVector& output_types() const { return output_types_; }
  // On a device with its own memory (a GPU), where the kernel reads input i
  // and makes output i: host memory for the args its registration names
  // HostMemory and for strings, resources and variants; device memory for
  // the rest. Always host on a CPU.
  MemoryType input_memory_type(int i) const {
    return input_memory_.empty() ? MemoryType::kHost : input_memory_[i];
  }
  MemoryType output_memory_type(int i) const {
    return output_memory_.empty() ? MemoryType::kHost : output_memory_[i];
  }

 private:
  const tensorflow::NodeDef def_;
  const DataTypeVector input_types_;
  const DataTypeVector output_types_;
  const std::vector<MemoryType> input_memory_;
  const std::vector<MemoryType> output_memory_;
};

// A kernel that finishes later (Recv, queue dequeue): it must call `done`
// exactly once, and must not block a pool thread while waiting.
class AsyncOpKernel : public OpKernel {
 public:
  using DoneCallback = std::function<void(absl::Status)>;
  using OpKernel::OpKernel;
  virtual void ComputeAsync(OpKernelContext* ctx, DoneCallback done) = 0;
  // Runs ComputeAsync and waits for it (for callers without an executor).
  absl::Status Compute(OpKernelContext* ctx) final;
  AsyncOpKernel* AsAsync() final { return this; }
};

class OpKernelContext {
 public:
  // Everything a kernel may use during one step. Pointers are borrowed.
  struct Params {
    int64_t step_id = 0;
    Device* device = nullptr;
    OpKernel* op_kernel = nullptr;
    std::vector<TensorValue> inputs;
    bool is_input_dead = false;
    Rendezvous* rendezvous = nullptr;
    CancellationManager* cancellation_manager = nullptr;
    // Runs a closure on the inter-op pool.
    std::function<void(std::function<void()>)> runner;
    // Deadline for blocking waits inside the step (Recv, queues).
    absl::Time deadline = absl::InfiniteFuture();
    CallFrameInterface* call_frame = nullptr;
    // What lives for this step only, on this device (stacks, TensorArrays);
    // null outside an executor.
    ResourceMgr* step_resources = nullptr;
    // The loop instance and iteration the node runs in (root: 0:0).
    FrameAndIter frame_iter;
  };

  explicit OpKernelContext(Params* params);

  // --- inputs ---
  int num_inputs() const { return static_cast<int>(params_->inputs.size()); }
  // The value of input i (for ref inputs, the current value of the variable).
  const Tensor& input(int i) const { return *params_->inputs[i].tensor; }
  // False only for a Merge input that is not the live one.
  bool has_input(int i) const { return params_->inputs[i].tensor != nullptr; }
  DataType input_dtype(int i) const { return op_kernel().input_type(i); }
  bool input_is_ref(int i) const { return params_->inputs[i].is_ref(); }
  // REQUIRES: input_is_ref(i). The variable's storage and its lock.
  Tensor* mutable_input(int i) const { return params_->inputs[i].tensor; }
  absl::Mutex* input_ref_mutex(int i) const { return params_->inputs[i].mutex; }

  // --- outputs ---
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // Allocates output i (zero-filled) and returns it; owned by the context.
  // On a device with its own memory the output is in the memory
  // OpKernel::output_memory_type names; there an allocation can fail: the
  // context remembers it, the returned tensor is empty, and the executor
  // fails the node with RESOURCE_EXHAUSTED whatever Compute returns.
  Tensor* allocate_output(int i, const TensorShape& shape);
  // As allocate_output, without the zero-fill: for kernels that write every
  // element of the output before returning OK.
  Tensor* allocate_output_for_overwrite(int i, const TensorShape& shape);
  // A failed device allocation (see allocate_output); OK otherwise.
  const absl::Status& allocation_status() const { return allocation_status_; }
  void set_output(int i, Tensor value);
  // Forwards a ref edge: consumers see `tensor` guarded by `mu`.
  void set_output_ref(int i, absl::Mutex* mu, Tensor* tensor);
  // Output i as produced (ref outputs point at the variable).
  TensorValue release_output(int i);
  bool output_set(int i) const { return outputs_[i].tensor != nullptr; }
  bool is_output_dead() const { return is_output_dead_; }
  void set_is_output_dead(bool dead) { is_output_dead_ = dead; }

  // --- environment ---
  const OpKernel& op_kernel() const { return *params_->op_kernel; }
  int64_t step_id() const { return params_->step_id; }
  Device* device() const { return params_->device; }
  ResourceMgr* resource_manager() const { return params_->device->resource_manager(); }
  ResourceMgr* step_resources() const { return params_->step_resources; }
  ThreadPool* intra_op_pool() const { return params_->device->intra_op_pool(); }
  Rendezvous* rendezvous() const { return params_->rendezvous; }
  CancellationManager* cancellation_manager() const {
    return params_->cancellation_manager;
  }
  bool is_input_dead() const { return params_->is_input_dead; }
  FrameAndIter frame_iter() const { return params_->frame_iter; }
  CallFrameInterface* call_frame() const { return params_->call_frame; }
  absl::Time deadline() const { return params_->deadline; }
  const std::function<void(std::function<void()>)>& runner() const {
    return params_->runner;
  }

  // InvalidArgument "[<Op> '<node>'] " + message pieces.
  template <typename... Args>
  absl::Status InvalidArgument(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(Prefix(), args...));
  }
  std::string Prefix() const;

 private:
  Params* params_;
  std::vector<Tensor> owned_outputs_;
  std::vector<TensorValue> outputs_;
  bool is_output_dead_ = false;
  absl::Status allocation_status_;

  // allocate_output's path on a device with its own memory.
  Tensor* AllocateDeviceOutput(int i, const TensorShape& shape, bool zero_fill);
};

// --- kernel registry ---------------------------------------------------------

struct KernelDef {
  std::string op;
  std::string device_type;
  // attr name -> allowed types.
  std::map<std::string, DataTypeVector> type_constraints;
  // Inputs/outputs that stay in host memory on non-CPU devices.
  std::vector<std::string> host_memory_args;
};

class KernelDefBuilder {
 public:
  explicit KernelDefBuilder(std::string op) { def_.op = std::move(op); }
  KernelDefBuilder& Device(std::string type) {
    def_.device_type = std::move(type);
    return *this;
  }
  KernelDefBuilder& TypeConstraint(std::string attr, DataTypeVector types) {
    def_.type_constraints[std::move(attr)] = std::move(types);
    return *this;
  }
  template <typename T>
  KernelDefBuilder& TypeConstraint(std::string attr) {
    return TypeConstraint(std::move(attr), {DataTypeToEnum<T>::value});
  }
  KernelDefBuilder& HostMemory(std::string arg) {
    def_.host_memory_args.push_back(std::move(arg));
    return *this;
  }
  const KernelDef& Build() const { return def_; }

 private:
  KernelDef def_;
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(OpKernelConstruction*)>;

// Thread-safe.
class KernelRegistry {
 public:
  static KernelRegistry* Global();
  void Register(KernelDef def, KernelFactory factory);
  // The kernel for `node` on `device_type`: NotFound listing the registered
  // device/type combinations when none matches the node's attrs.
  absl::StatusOr<const KernelDef*> Find(const std::string& device_type,
                                        const tensorflow::NodeDef& node) const;
  bool HasKernel(const std::string& device_type, const tensorflow::NodeDef& node) const {
    return Find(device_type, node).ok();
  }
  std::vector<KernelDef> ListKernels() const;

  // Finds the OpDef and kernel, validates `node`, and constructs the kernel.
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(Device* device,
                                                         const tensorflow::NodeDef& node) const;

 private:
  struct Entry {
    KernelDef def;
    KernelFactory factory;
  };
  const Entry* FindEntry(const std::string& device_type, const tensorflow::NodeDef& node) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  mutable absl::Mutex mu_;
  std::multimap<std::string, Entry> kernels_ ABSL_GUARDED_BY(mu_);  // by op name
};

struct KernelRegistrar {
  KernelRegistrar(const KernelDefBuilder& b, KernelFactory f) {
    KernelRegistry::Global()->Register(b.Build(), std::move(f));
  }
};

#define REGISTER_KERNEL(builder, ...)                                          \
  static ::dflow::KernelRegistrar DFLOW_CONCAT(dflow_kernel_reg_, __COUNTER__)( \
      builder, [](::dflow::OpKernelConstruction* c) -> std::unique_ptr<::dflow::OpKernel> { \
        return std::make_unique<__VA_ARGS__>(c);                                \
      })

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_KERNEL_H_
