// _Send / _Recv: the two ends of an edge cut by partitioning. _Send leaves
// its input in the step's rendezvous under a key built from its attrs; the
// matching _Recv (same attrs) picks it up, asynchronously.
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/framework/shape_inference.h"

namespace dflow {
namespace {

REGISTER_OP("_Send")
    .Input("tensor: T")
    .Attr("T: type")
    .Attr("tensor_name: string")
    .Attr("send_device: string")
    .Attr("send_device_incarnation: int")
    .Attr("recv_device: string")
    .Attr("client_terminated: bool = false")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

REGISTER_OP("_Recv")
    .Output("tensor: tensor_type")
    .Attr("tensor_type: type")
    .Attr("tensor_name: string")
    .Attr("send_device: string")
    .Attr("send_device_incarnation: int")
    .Attr("recv_device: string")
    .Attr("client_terminated: bool = false")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

// Reads the key attrs shared by _Send and _Recv and parses the key once.
absl::StatusOr<Rendezvous::ParsedKey> KeyFromAttrs(OpKernelConstruction* c) {
  std::string tensor_name, send_device, recv_device;
  int64_t incarnation = 0;
  RETURN_IF_ERROR(c->GetAttr("tensor_name", &tensor_name));
  RETURN_IF_ERROR(c->GetAttr("send_device", &send_device));
  RETURN_IF_ERROR(c->GetAttr("send_device_incarnation", &incarnation));
  RETURN_IF_ERROR(c->GetAttr("recv_device", &recv_device));
  absl::StatusOr<Rendezvous::ParsedKey> key = Rendezvous::ParseKey(Rendezvous::CreateKey(
      send_device, static_cast<uint64_t>(incarnation), recv_device, tensor_name));
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[", c->def().op(), " '", c->def().name(), "'] ", key.status().message()));
  }
  return key;
}

// The key of this run: inside a loop, the node's frame and iteration.
Rendezvous::ParsedKey KeyIn(const OpKernelContext* ctx, const Rendezvous::ParsedKey& key) {
  const FrameAndIter fi = ctx->frame_iter();
  return fi.IsRoot() ? key : Rendezvous::InFrame(key, fi);
}

class SendOp : public OpKernel {
 public:
  explicit SendOp(OpKernelConstruction* c) : OpKernel(c) {
    absl::StatusOr<Rendezvous::ParsedKey> key = KeyFromAttrs(c);
    if (key.ok()) {
      key_ = *std::move(key);
    } else {
      c->SetStatus(key.status());
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->rendezvous() == nullptr) {
      return ctx->InvalidArgument("no rendezvous to send '", key_.full_key, "' to");
    }
    static const Tensor kEmpty;
    const Tensor& value = ctx->is_input_dead() ? kEmpty : ctx->input(0);
    return ctx->rendezvous()->Send(KeyIn(ctx, key_), value, ctx->is_input_dead());
  }
  bool IsExpensive() const override { return false; }

 private:
  Rendezvous::ParsedKey key_;
};

// Whoever calls `done` first wins: the rendezvous delivering the value, or
// cancellation of the step. Shared by both callbacks.
struct RecvState {
  std::atomic<bool> claimed{false};
  CancellationManager* cm = nullptr;
  CancellationToken token = kInvalidCancellationToken;
  bool Claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
};

class RecvOp : public AsyncOpKernel {
 public:
  explicit RecvOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    absl::StatusOr<Rendezvous::ParsedKey> key = KeyFromAttrs(c);
    if (key.ok()) {
      key_ = *std::move(key);
    } else {
      c->SetStatus(key.status());
    }
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    if (ctx->rendezvous() == nullptr) {
      done(ctx->InvalidArgument("no rendezvous to receive '", key_.full_key, "' from"));
      return;
    }
    auto state = std::make_shared<RecvState>();
    auto shared_done = std::make_shared<DoneCallback>(std::move(done));
    if (!RegisterCancellation(ctx, state, shared_done)) return;
    ctx->rendezvous()->RecvAsync(
        KeyIn(ctx, key_),
        [ctx, state, shared_done](const absl::Status& s, const Tensor& v, bool dead) {
          if (!state->Claim()) return;  // Cancelled first; ctx may be gone.
          if (state->cm != nullptr) state->cm->Deregister(state->token);
          if (s.ok()) {
            ctx->set_output(0, v);
            ctx->set_is_output_dead(dead);
          }
          (*shared_done)(s);
        });
  }
  bool IsExpensive() const override { return false; }

 private:
  absl::Status CancelledError(OpKernelContext* ctx) const {
    return absl::CancelledError(
        absl::StrCat(ctx->Prefix(), "step cancelled while receiving '", key_.full_key, "'"));
  }

  // Returns false (after calling done) when the step is already cancelled.
  bool RegisterCancellation(OpKernelContext* ctx, const std::shared_ptr<RecvState>& state,
                            const std::shared_ptr<DoneCallback>& done) {
    CancellationManager* cm = ctx->cancellation_manager();
    if (cm == nullptr) return true;
    absl::Status cancelled = CancelledError(ctx);
    state->cm = cm;
    state->token = cm->Register([state, done, cancelled] {
      if (state->Claim()) (*done)(cancelled);
    });
    if (state->token == kInvalidCancellationToken) {
      state->Claim();
      (*done)(cancelled);
      return false;
    }
    return true;
  }

  Rendezvous::ParsedKey key_;
};

REGISTER_KERNEL(KernelDefBuilder("_Send").Device(kDeviceCPU), SendOp);
REGISTER_KERNEL(KernelDefBuilder("_Recv").Device(kDeviceCPU), RecvOp);
// On a GPU both ends work in host memory: the executor copies a _Send's
// input out of device memory (pinned, waited for) before it runs, and a
// consumer of a _Recv's output into device memory, so a rendezvous (local,
// or RecvTensor to another task) only ever holds host tensors.
REGISTER_KERNEL(KernelDefBuilder("_Send").Device(kDeviceGPU).HostMemory("tensor"), SendOp);
REGISTER_KERNEL(KernelDefBuilder("_Recv").Device(kDeviceGPU).HostMemory("tensor"), RecvOp);

}  // namespace
}  // namespace dflow
