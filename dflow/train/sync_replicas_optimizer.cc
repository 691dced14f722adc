#include "dflow/train/sync_replicas_optimizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/client/data_flow_ops_wrappers.h"
#include "dflow/client/ops.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

Output Fill(const Scope& s, int count, const Output& value) {
  return ops::Fill(s, Tensor::Vec<int32_t>({count}), value);
}

}  // namespace

SessionRunner RunOn(const ClientSession* session) {
  return [session](const std::function<absl::Status(const ClientSession&)>& call) {
    return call(*session);
  };
}

SyncReplicasOptimizer::SyncReplicasOptimizer(Optimizer* opt, SyncReplicasOptions options)
    : opt_(opt), options_(options) {}

SyncReplicasOptimizer::~SyncReplicasOptimizer() = default;

absl::StatusOr<Operation> SyncReplicasOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                          const std::vector<Variable>& var_list,
                                                          const Variable* global_step) {
  ASSIGN_OR_RETURN(std::vector<GradAndVar> grads, opt_->ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, grads, global_step);
}

absl::StatusOr<Operation> SyncReplicasOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads, const Variable* global_step) {
  if (global_step == nullptr) {
    return absl::InvalidArgumentError("[SyncReplicasOptimizer] needs a global step");
  }
  if (options_.replicas_to_aggregate < 1 || options_.total_num_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[SyncReplicasOptimizer] replicas_to_aggregate (", options_.replicas_to_aggregate,
        ") and total_num_replicas (", options_.total_num_replicas, ") must be >= 1"));
  }
  Scope s = scope.NewSubScope("sync_replicas");
  // This worker's local step lives on the worker (the device function keeps a
  // device of another job), not on the ps where every replica would share it.
  ASSIGN_OR_RETURN(local_step_, MakeVariable(s.WithDevice(options_.local_device),
                                             "sync_rep_local_step", Tensor::Scalar<int64_t>(0)));
  Scope at_step = s.ColocateWith(global_step->op());
  global_step_before_ = global_step->Read(at_step.WithOpName("global_step_before"));
  local_step_before_ = local_step_.Read(s.WithOpName("local_step_before"));
  local_step_init_ = local_step_.Assign(s.WithOpName("local_step_init"), global_step->value());

  // Each gradient goes to its variable's accumulator, tagged with the local step.
  std::vector<Operation> applies, set_steps;
  std::vector<GradAndVar> aggregated;
  const Output global_step_now = global_step->Read(at_step.WithOpName("global_step_now"));
  for (const GradAndVar& gv : grads) {
    if (!gv.grad.valid()) continue;
    Scope at_var = s.NewSubScope(gv.var.name()).ColocateWith(gv.var.op());
    Output accumulator = ops::ResourceConditionalAccumulator(
        at_var.WithOpName("grad_accum"), gv.var.dtype(),
        PartialShape(std::vector<int64_t>(gv.var.shape().dim_sizes().begin(),
                                          gv.var.shape().dim_sizes().end())),
        {.shared_name = gv.var.name() + "/grad_accum"});
    applies.push_back(ops::ResourceAccumulatorApplyGradient(
        at_var.WithControlDependencies({global_step_before_.op(), local_step_before_.op()}),
        accumulator, local_step_before_, gv.grad));
    aggregated.push_back(
        {ops::ResourceAccumulatorTakeGradient(
             at_var, accumulator, Tensor::Scalar<int32_t>(options_.replicas_to_aggregate),
             gv.var.dtype()),
         gv.var});
    set_steps.push_back(
        ops::ResourceAccumulatorSetGlobalStep(at_var, accumulator, global_step_now));
  }
  if (applies.empty()) {
    return absl::InvalidArgumentError("[SyncReplicasOptimizer] no variable has a gradient");
  }

  // The token queue beside the global step: the barrier between steps.
  Output queue = ops::FIFOQueue(at_step.WithOpName("sync_token_q"), {DT_INT64},
                                {.shared_name = "sync_token_q"});
  Output token = ops::QueueDequeue(at_step.WithControlDependencies(applies), queue, {DT_INT64})[0];
  train_op_ = local_step_.Assign(s.WithOpName("train_op"), token);

  // The chief: apply the averages, then hand out the next step's tokens.
  ASSIGN_OR_RETURN(Operation update, opt_->ApplyGradients(s, aggregated, global_step));
  global_step_after_ =
      global_step->Read(at_step.WithOpName("global_step_after").WithControlDependencies({update}));
  const int tokens_per_step = std::max(options_.total_num_replicas, options_.replicas_to_aggregate);
  sync_op_ = ops::QueueEnqueueMany(at_step.WithOpName("sync_op"), queue,
                                   {Fill(at_step, tokens_per_step, global_step_after_)});
  chief_init_ = ops::NoOp(s.WithOpName("chief_init").WithControlDependencies(set_steps));
  const int initial_tokens =
      options_.initial_tokens < 0 ? options_.replicas_to_aggregate : options_.initial_tokens;
  if (initial_tokens > 0) {
    init_tokens_ = ops::QueueEnqueueMany(at_step.WithOpName("init_tokens"), queue,
                                         {Fill(at_step, initial_tokens, global_step_now)});
  }
  close_queue_ = ops::QueueClose(at_step.WithOpName("close_token_q"), queue);
  RETURN_IF_ERROR(scope.status());
  return train_op_;
}

absl::Status SyncReplicasOptimizer::InitLocalStep(const ClientSession& session) {
  return session.Run({}, {}, {local_step_init_}, nullptr);
}

absl::Status SyncReplicasOptimizer::RunTrainStep(const ClientSession& session,
                                                 const ClientSession::FeedType& feeds,
                                                 const std::vector<Output>& fetches,
                                                 std::vector<Tensor>* outputs,
                                                 const tensorflow::RunOptions& options,
                                                 tensorflow::RunMetadata* metadata) {
  std::vector<Output> all = fetches;
  all.push_back(global_step_before_);
  all.push_back(local_step_before_);
  RETURN_IF_ERROR(session.Run(options, feeds, all, {train_op_}, outputs, metadata));
  const int64_t local = outputs->back().scalar<int64_t>();
  outputs->pop_back();
  const int64_t global = outputs->back().scalar<int64_t>();
  outputs->pop_back();
  if (global > local) stale_.fetch_add(1);
  return absl::OkStatus();
}

absl::Status SyncReplicasOptimizer::InitChief(const ClientSession& session) {
  std::vector<Operation> init = {chief_init_};
  if (init_tokens_.valid()) init.push_back(init_tokens_);
  return session.Run({}, {}, init, nullptr);
}

std::unique_ptr<SyncReplicasOptimizer::ChiefLoop> SyncReplicasOptimizer::StartChiefLoop(
    SessionRunner run, int64_t total_steps) {
  auto loop = std::make_unique<ChiefLoop>();
  ChiefLoop* raw = loop.get();
  loop->thread_ = std::thread([this, run = std::move(run), total_steps, raw] {
    absl::Status s;
    for (int64_t step = 0; s.ok() && step < total_steps;) {
      s = run([&](const ClientSession& session) {
        std::vector<Tensor> out;
        RETURN_IF_ERROR(session.Run({}, {global_step_after_}, {sync_op_}, &out));
        step = out[0].scalar<int64_t>();
        return absl::OkStatus();
      });
    }
    // Ends the workers' waits for a token, whatever happened.
    absl::Status closed = run([&](const ClientSession& session) { return EndTraining(session); });
    raw->status_ = s.ok() ? closed : s;
  });
  return loop;
}

absl::Status SyncReplicasOptimizer::EndTraining(const ClientSession& session) {
  return session.Run({}, {}, {close_queue_}, nullptr);
}

SyncReplicasOptimizer::ChiefLoop::~ChiefLoop() { Stop().IgnoreError(); }

absl::Status SyncReplicasOptimizer::ChiefLoop::Stop() {
  if (!joined_ && thread_.joinable()) thread_.join();
  joined_ = true;
  return status_;
}

bool SyncReplicasOptimizer::IsEndOfTraining(const absl::Status& status) {
  return absl::IsOutOfRange(status);
}

}  // namespace dflow
