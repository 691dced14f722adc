// TensorFlow 1.x's readers: TextLineReaderV2, TFRecordReaderV2,
// FixedLengthRecordReaderV2, WholeFileReaderV2 and IdentityReaderV2 create a
// reader resource; ReaderReadV2 / ReaderReadUpToV2 take file names ("work
// units") from a string queue and return (key, value) records;
// ReaderNumRecordsProducedV2, ReaderNumWorkUnitsCompletedV2 and ReaderResetV2
// inspect and reset it. Also the small ops of the input producers that feed
// them: MatchingFiles, RandomShuffle and (Resource)CountUpTo (num_epochs).
//
// Keys are TensorFlow's: "file:line" (1-based, header lines counted) for text
// lines, "file:offset" for TFRecords, "file:record" (0-based) for fixed-length
// records, the file name for whole files. A read that needs a new file waits
// for the queue without blocking a thread (Queue::Dequeue's callback resumes
// it), so the step's cancellation and deadline bound it; a closed, empty
// queue ends it with OUT_OF_RANGE, what QueueRunner and Coordinator expect.
// A reader with an empty shared_name is named after its node, as the queues
// are (data_flow_ops.cc), and so outlives its session as they do.
// File reading itself is dflow/io/record_readers.h and tfrecord.h.
#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/status.h"
#include "dflow/io/file.h"
#include "dflow/io/record_readers.h"
#include "dflow/io/tfrecord.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/data_flow_ops.h"
#include "dflow/ops/philox.h"
#include "dflow/ops/resource_lookup.h"
#include "dflow/ops/state_ops.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace {

// One file's records, opened when its work unit starts.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // The next record; OUT_OF_RANGE at the end of the file.
  virtual absl::Status Next(std::string* key, std::string* value) = 0;
  // Known to hold no more records (without another Next).
  virtual bool Done() const { return false; }
};

// Opens the records of a work unit (a file name); one per reader kind.
using SourceFactory =
    std::function<absl::StatusOr<std::unique_ptr<RecordSource>>(const std::string& work)>;

// A reader: the current work unit and its record source, and counters.
// Thread-safe; reads through one reader are serialized by its mutex.
class Reader : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "Reader";
  Reader(std::string kind, SourceFactory factory)
      : kind_(std::move(kind)), factory_(std::move(factory)) {}

  // Up to `n` records of the current work unit into keys/values, starting the
  // next work unit first when there is none. *need_work: none is left; give
  // one with AddWork. Records never span two work units.
  absl::Status ReadLocked(int64_t n, std::vector<std::string>* keys,
                          std::vector<std::string>* values, bool* need_work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    *need_work = false;
    while (true) {
      if (source_ == nullptr) {
        if (pending_.empty()) {
          *need_work = true;
          return absl::OkStatus();
        }
        work_ = std::move(pending_.front());
        pending_.pop_front();
        ++work_units_started_;
        absl::StatusOr<std::unique_ptr<RecordSource>> s = factory_(work_);
        if (!s.ok()) {  // The work unit is spent; a later read takes the next.
          work_.clear();
          return s.status();
        }
        source_ = *std::move(s);
      }
      while (static_cast<int64_t>(keys->size()) < n) {
        std::string key, value;
        absl::Status s = source_->Next(&key, &value);
        if (absl::IsOutOfRange(s)) {
          source_.reset();  // work_ stays the last work unit, as TensorFlow's
          ++work_units_completed_;
          break;
        }
        RETURN_IF_ERROR(s);
        keys->push_back(std::move(key));
        values->push_back(std::move(value));
        ++records_produced_;
        if (source_->Done()) {  // finished with its record, as TensorFlow counts it
          source_.reset();
          ++work_units_completed_;
          break;
        }
      }
      if (!keys->empty()) return absl::OkStatus();
    }
  }
  // Whether a read can proceed without a new work unit.
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return source_ != nullptr || !pending_.empty();
  }
  void AddWorkLocked(std::string work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    pending_.push_back(std::move(work));
  }
  void ResetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    source_.reset();
    work_.clear();
    pending_.clear();
    records_produced_ = 0;
    work_units_started_ = 0;
    work_units_completed_ = 0;
  }
  // TensorFlow's ReaderBaseState message of this reader's progress. Only
  // readers whose work units are one record (IdentityReaderV2) can save and
  // restore it, as in TensorFlow.
  std::string SerializeStateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Restores a SerializeStateLocked() string; INVALID_ARGUMENT naming `what`
  // (the reader) for one that does not parse, holds a negative count or a
  // work unit in progress.
  absl::Status RestoreStateLocked(const std::string& state, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  int64_t records_produced() const {
    absl::MutexLock l(&mu);
    return records_produced_;
  }
  int64_t work_units_completed() const {
    absl::MutexLock l(&mu);
    return work_units_completed_;
  }
  const std::string& kind() const { return kind_; }
  std::string DebugString() const override {
    absl::MutexLock l(&mu);
    return absl::StrCat(kind_, "<work '", work_, "', ", records_produced_, " records>");
  }

  mutable absl::Mutex mu;

 private:
  const std::string kind_;
  const SourceFactory factory_;
  std::string work_ ABSL_GUARDED_BY(mu);
  std::unique_ptr<RecordSource> source_ ABSL_GUARDED_BY(mu);
  // Work units dequeued but not started (two reads may each dequeue one).
  std::deque<std::string> pending_ ABSL_GUARDED_BY(mu);
  int64_t records_produced_ ABSL_GUARDED_BY(mu) = 0;
  int64_t work_units_started_ ABSL_GUARDED_BY(mu) = 0;
  int64_t work_units_completed_ ABSL_GUARDED_BY(mu) = 0;
};

// --- ReaderBaseState, TensorFlow's reader state message -------------------------------
//
// Fields: work_started = 1, work_finished = 2, num_records_produced = 3
// (int64 varints), current_work = 4 (bytes); zeros and "" are left out.

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

std::string Reader::SerializeStateLocked() const {
  std::string out;
  const int64_t counts[] = {work_units_started_, work_units_completed_, records_produced_};
  for (int field = 1; field <= 3; ++field) {
    if (counts[field - 1] == 0) continue;
    PutVarint(static_cast<uint64_t>(field) << 3, &out);
    PutVarint(static_cast<uint64_t>(counts[field - 1]), &out);
  }
  if (!work_.empty()) {
    PutVarint((4 << 3) | 2, &out);
    PutVarint(work_.size(), &out);
    out += work_;
  }
  return out;
}

absl::Status Reader::RestoreStateLocked(const std::string& state, const std::string& what) {
  int64_t counts[3] = {0, 0, 0};
  std::string work;
  absl::string_view in(state);
  const auto unparsable = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("Could not parse state for ", what, ": ", absl::CEscape(state)));
  };
  while (!in.empty()) {
    uint64_t tag = 0, v = 0;
    if (!GetVarint(&in, &tag)) return unparsable();
    const uint64_t field = tag >> 3, wire = tag & 7;
    if (wire == 0) {
      if (!GetVarint(&in, &v)) return unparsable();
      if (field >= 1 && field <= 3) counts[field - 1] = static_cast<int64_t>(v);
    } else if (wire == 2) {
      if (!GetVarint(&in, &v) || v > in.size()) return unparsable();
      if (field == 4) work = std::string(in.substr(0, v));
      in.remove_prefix(v);
    } else if (wire == 1 || wire == 5) {
      const size_t n = wire == 1 ? 8 : 4;
      if (in.size() < n) return unparsable();
      in.remove_prefix(n);
    } else {
      return unparsable();
    }
  }
  const std::string shown = absl::StrCat("work_started: ", counts[0], " work_finished: ", counts[1],
                                         " num_records_produced: ", counts[2], " current_work: \"",
                                         absl::CEscape(work), "\"");
  if (counts[0] < 0 || counts[1] < 0 || counts[2] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Unexpected negative value when restoring in ", what, ": ", shown));
  }
  if (counts[0] > counts[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Inconsistent work started vs. finished when restoring in ", what, ": ", shown));
  }
  source_.reset();
  work_units_started_ = counts[0];
  work_units_completed_ = counts[1];
  records_produced_ = counts[2];
  work_ = std::move(work);
  return absl::OkStatus();
}

// --- record sources ---

class LineSource : public RecordSource {
 public:
  LineSource(std::string work, std::unique_ptr<io::LineReader> r)
      : work_(std::move(work)), r_(std::move(r)) {}
  absl::Status Next(std::string* key, std::string* value) override {
    RETURN_IF_ERROR(r_->ReadLine(value));
    *key = absl::StrCat(work_, ":", r_->line_number());
    return absl::OkStatus();
  }

 private:
  const std::string work_;
  std::unique_ptr<io::LineReader> r_;
};

class TFRecordSource : public RecordSource {
 public:
  TFRecordSource(std::string work, std::unique_ptr<io::TFRecordReader> r)
      : work_(std::move(work)), r_(std::move(r)) {}
  absl::Status Next(std::string* key, std::string* value) override {
    const uint64_t offset = r_->offset();
    RETURN_IF_ERROR(r_->ReadRecord(value));
    *key = absl::StrCat(work_, ":", offset);
    return absl::OkStatus();
  }

 private:
  const std::string work_;
  std::unique_ptr<io::TFRecordReader> r_;
};

class FixedLengthSource : public RecordSource {
 public:
  FixedLengthSource(std::string work, std::unique_ptr<io::FixedLengthRecordReader> r)
      : work_(std::move(work)), r_(std::move(r)) {}
  absl::Status Next(std::string* key, std::string* value) override {
    const int64_t number = r_->record_number();
    RETURN_IF_ERROR(r_->ReadRecord(value));
    *key = absl::StrCat(work_, ":", number);
    return absl::OkStatus();
  }

 private:
  const std::string work_;
  std::unique_ptr<io::FixedLengthRecordReader> r_;
};

// One record per work unit: (work, value).
class SingleSource : public RecordSource {
 public:
  SingleSource(std::string key, std::string value)
      : key_(std::move(key)), value_(std::move(value)) {}
  bool Done() const override { return done_; }
  absl::Status Next(std::string* key, std::string* value) override {
    if (done_) return absl::OutOfRangeError("end of work unit");
    done_ = true;
    *key = std::move(key_);
    *value = std::move(value_);
    return absl::OkStatus();
  }

 private:
  std::string key_, value_;
  bool done_ = false;
};

// The factory of the reader op `c` describes; null (and `c` failed) for bad attrs.
SourceFactory FactoryFromAttrs(OpKernelConstruction* c) {
  const std::string& op = c->def().op();
  if (op == "TextLineReaderV2") {
    int64_t skip = 0;
    c->GetAttr("skip_header_lines", &skip).IgnoreError();
    return [skip](const std::string& work) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
      ASSIGN_OR_RETURN(std::unique_ptr<io::LineReader> r, io::LineReader::Open(work));
      std::string header;
      for (int64_t i = 0; i < skip; ++i) {
        absl::Status s = r->ReadLine(&header);
        if (absl::IsOutOfRange(s)) break;
        RETURN_IF_ERROR(s);
      }
      return std::make_unique<LineSource>(work, std::move(r));
    };
  }
  if (op == "TFRecordReaderV2") {
    std::string type;
    c->GetAttr("compression_type", &type).IgnoreError();
    absl::StatusOr<io::TFRecordCompression> compression = io::ParseTFRecordCompression(type);
    if (!compression.ok()) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[", op, " '", c->def().name(), "'] ", compression.status().message())));
      return nullptr;
    }
    return [compression = *compression](
               const std::string& work) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
      ASSIGN_OR_RETURN(std::unique_ptr<io::TFRecordReader> r,
                       io::TFRecordReader::Open(work, compression));
      return std::make_unique<TFRecordSource>(work, std::move(r));
    };
  }
  if (op == "FixedLengthRecordReaderV2") {
    io::FixedLengthFormat f;
    c->GetAttr("header_bytes", &f.header_bytes).IgnoreError();
    c->GetAttr("record_bytes", &f.record_bytes).IgnoreError();
    c->GetAttr("footer_bytes", &f.footer_bytes).IgnoreError();
    c->GetAttr("hop_bytes", &f.hop_bytes).IgnoreError();
    std::string encoding;
    c->GetAttr("encoding", &encoding).IgnoreError();
    if (!encoding.empty()) {
      c->SetStatus(
          absl::UnimplementedError(absl::StrCat("[", op, " '", c->def().name(), "'] encoding '",
                                                encoding, "' is not supported; only ''")));
      return nullptr;
    }
    if (f.record_bytes <= 0 || f.header_bytes < 0 || f.footer_bytes < 0 || f.hop_bytes < 0) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[", op, " '", c->def().name(), "'] record_bytes must be > 0 (got ",
                       f.record_bytes, ") and header_bytes, footer_bytes, hop_bytes >= 0")));
      return nullptr;
    }
    return [f](const std::string& work) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
      ASSIGN_OR_RETURN(std::unique_ptr<io::FixedLengthRecordReader> r,
                       io::FixedLengthRecordReader::Open(work, f));
      return std::make_unique<FixedLengthSource>(work, std::move(r));
    };
  }
  if (op == "WholeFileReaderV2") {
    return [](const std::string& work) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
      ASSIGN_OR_RETURN(std::string contents, io::ReadWholeFile(work));
      return std::make_unique<SingleSource>(work, std::move(contents));
    };
  }
  return [](const std::string& work) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
    return std::make_unique<SingleSource>(work, work);  // IdentityReaderV2
  };
}

// --- kernels ---

class ReaderOp : public OpKernel {
 public:
  explicit ReaderOp(OpKernelConstruction* c) : OpKernel(c), factory_(FactoryFromAttrs(c)) {
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
    kind_ = c->def().op();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = ContainerOr(*ctx, container_);
    RETURN_IF_ERROR(LookupOrCreateShared<Reader>(
                        *ctx, container, name_,
                        [&] { return std::make_shared<Reader>(kind_, factory_); },
                        [&](const Reader& r) -> absl::Status {
                          if (r.kind() == kind_) return absl::OkStatus();
                          return absl::InvalidArgumentError(absl::StrCat(
                              "Shared reader '", name_, "' is a ", r.kind(), ", not a ", kind_));
                        })
                        .status());
    ctx->set_output(0, ResourceHandleTensor<Reader>(ctx->device()->name(), container, name_));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  SourceFactory factory_;
  std::string kind_;
  std::string container_;
  std::string name_;
};

// One ReaderRead(UpTo) in flight: reads, and when the reader needs a work
// unit dequeues one and resumes from the queue's callback.
class ReadCall : public std::enable_shared_from_this<ReadCall> {
 public:
  ReadCall(OpKernelContext* ctx, std::shared_ptr<Reader> reader, std::shared_ptr<Queue> queue,
           int64_t n, bool up_to, AsyncOpKernel::DoneCallback done)
      : ctx_(ctx),
        reader_(std::move(reader)),
        queue_(std::move(queue)),
        n_(n),
        up_to_(up_to),
        done_(std::move(done)) {}

  void Step() {
    std::vector<std::string> keys, values;
    bool need_work = false;
    absl::Status s;
    {
      absl::MutexLock l(&reader_->mu);
      s = reader_->ReadLocked(n_, &keys, &values, &need_work);
    }
    if (!s.ok()) return Fail(s);
    if (!need_work) return Succeed(keys, values);
    std::shared_ptr<ReadCall> self = shared_from_this();
    queue_->Dequeue(Waiter{ctx_->cancellation_manager(), ctx_->deadline()},
                    [self](absl::Status s, Queue::Tuple work) { self->GotWork(s, work); });
  }

 private:
  void GotWork(const absl::Status& s, const Queue::Tuple& work) {
    if (!s.ok()) {
      // A concurrent read may have started a work unit meanwhile: read from
      // it, as TensorFlow's reads (serialized by a lock) would.
      bool has_work;
      {
        absl::MutexLock l(&reader_->mu);
        has_work = reader_->HasWorkLocked();
      }
      return has_work && absl::IsOutOfRange(s) ? Step() : Fail(s);
    }
    if (work.size() != 1 || work[0].dtype() != DT_STRING || work[0].NumElements() != 1) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("Expected to dequeue a one-element string tensor from ", queue_->name(),
                       ", got ", work.empty() ? "nothing" : work[0].DebugString())));
    }
    {
      absl::MutexLock l(&reader_->mu);
      reader_->AddWorkLocked(work[0].flat<std::string>()[0]);
    }
    Step();
  }
  void Fail(const absl::Status& s) { done_(WithPrefix(s, ctx_->Prefix())); }
  void Succeed(std::vector<std::string>& keys, std::vector<std::string>& values) {
    if (up_to_) {
      ctx_->set_output(0, Tensor::Vec<std::string>(keys));
      ctx_->set_output(1, Tensor::Vec<std::string>(values));
    } else {
      ctx_->set_output(0, Tensor::Scalar<std::string>(std::move(keys[0])));
      ctx_->set_output(1, Tensor::Scalar<std::string>(std::move(values[0])));
    }
    done_(absl::OkStatus());
  }

  OpKernelContext* const ctx_;  // not owned; alive until done_
  const std::shared_ptr<Reader> reader_;
  const std::shared_ptr<Queue> queue_;
  const int64_t n_;
  const bool up_to_;
  AsyncOpKernel::DoneCallback done_;
};

// ReaderReadV2 and ReaderReadUpToV2.
class ReaderReadOp : public AsyncOpKernel {
 public:
  explicit ReaderReadOp(OpKernelConstruction* c)
      : AsyncOpKernel(c), up_to_(c->def().op() == "ReaderReadUpToV2") {}
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Reader>> reader = LookupFromHandle<Reader>(*ctx, 0);
    if (!reader.ok()) return done(reader.status());
    absl::StatusOr<std::shared_ptr<Queue>> queue = LookupFromHandle<Queue>(*ctx, 1);
    if (!queue.ok()) return done(queue.status());
    int64_t n = 1;
    if (up_to_) {
      const Tensor& t = ctx->input(2);
      if (t.dims() != 0) {
        return done(ctx->InvalidArgument("num_records must be a scalar, got shape ",
                                         t.shape().DebugString()));
      }
      n = t.scalar<int64_t>();
      if (n <= 0) return done(ctx->InvalidArgument("num_records must be > 0, got ", n));
    }
    std::make_shared<ReadCall>(ctx, *std::move(reader), *std::move(queue), n, up_to_,
                               std::move(done))
        ->Step();
  }
  bool IsExpensive() const override { return false; }

 private:
  const bool up_to_;
};

// ReaderNumRecordsProducedV2, ReaderNumWorkUnitsCompletedV2 and ReaderResetV2.
class ReaderInfoOp : public OpKernel {
 public:
  explicit ReaderInfoOp(OpKernelConstruction* c) : OpKernel(c), op_(c->def().op()) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Reader> r, LookupFromHandle<Reader>(*ctx, 0));
    if (op_ == "ReaderNumRecordsProducedV2") {
      ctx->set_output(0, Tensor::Scalar<int64_t>(r->records_produced()));
    } else if (op_ == "ReaderNumWorkUnitsCompletedV2") {
      ctx->set_output(0, Tensor::Scalar<int64_t>(r->work_units_completed()));
    } else {
      absl::MutexLock l(&r->mu);
      r->ResetLocked();
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  const std::string op_;
};

// ReaderSerializeStateV2 and ReaderRestoreStateV2: IdentityReaderV2's state
// only, as in TensorFlow; the other readers are UNIMPLEMENTED.
class ReaderStateOp : public OpKernel {
 public:
  explicit ReaderStateOp(OpKernelConstruction* c)
      : OpKernel(c), restore_(c->def().op() == "ReaderRestoreStateV2") {}
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Reader> r, LookupFromHandle<Reader>(*ctx, 0));
    // "IdentityReader 'name'", as TensorFlow names a reader.
    std::string kind = r->kind();
    if (absl::EndsWith(kind, "V2")) kind.resize(kind.size() - 2);
    const std::string what =
        absl::StrCat(kind, " '", ctx->input(0).scalar<ResourceHandle>().name, "'");
    if (r->kind() != "IdentityReaderV2") {
      return absl::UnimplementedError(
          absl::StrCat(ctx->Prefix(), what, " cannot ", restore_ ? "restore" : "save",
                       " its state (only IdentityReader can, as in TensorFlow): Reader ",
                       restore_ ? "RestoreState" : "SerializeState"));
    }
    absl::MutexLock l(&r->mu);
    if (!restore_) {
      ctx->set_output(0, Tensor::Scalar<std::string>(r->SerializeStateLocked()));
      return absl::OkStatus();
    }
    const Tensor& state = ctx->input(1);
    if (state.dtype() != DT_STRING || state.dims() != 0) {
      return ctx->InvalidArgument("state must be a string scalar, got ", state.DebugString());
    }
    return r->RestoreStateLocked(state.scalar<std::string>(), what);
  }
  bool IsExpensive() const override { return false; }

 private:
  const bool restore_;
};

// The names of the files matching the glob patterns of input 0, sorted.
class MatchingFilesOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& patterns = ctx->input(0);
    if (patterns.dtype() != DT_STRING || patterns.dims() > 1) {
      return ctx->InvalidArgument("pattern must be a string scalar or vector, got ",
                                  patterns.DebugString());
    }
    std::vector<std::string> files;
    for (const std::string& pattern : patterns.flat<std::string>()) {
      absl::StatusOr<std::vector<std::string>> matched = io::MatchFiles(pattern);
      if (!matched.ok()) return WithPrefix(matched.status(), ctx->Prefix());
      files.insert(files.end(), matched->begin(), matched->end());
    }
    std::sort(files.begin(), files.end());  // All together, as TensorFlow.
    ctx->set_output(0, Tensor::Vec<std::string>(files));
    return absl::OkStatus();
  }
};

// Shuffles input 0 along its first dimension, as TensorFlow's kernel does:
// each run reserves ceil((n - 1) / 4) Philox blocks of the op's stream
// (seeded by seed/seed2, random when both are 0) and swaps row i with row
// i + word % (n - i), for i = 0 .. n - 2. An input of at most one row or
// element is passed through and takes no blocks.
class RandomShuffleOp : public OpKernel {
 public:
  explicit RandomShuffleOp(OpKernelConstruction* c) : OpKernel(c), generator_(0, 0) {
    int64_t seed = 0, seed2 = 0;
    c->GetAttr("seed", &seed).IgnoreError();
    c->GetAttr("seed2", &seed2).IgnoreError();
    if (seed == 0 && seed2 == 0) {
      absl::BitGen bits;
      seed = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
      seed2 = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
    }
    generator_ = Philox4x32(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    if (in.NumElements() <= 1 || in.dims() == 0 || in.dim_size(0) <= 1) {
      ctx->set_output(0, in);
      return absl::OkStatus();
    }
    const int64_t n = in.dim_size(0);
    Philox4x32 gen = Reserve((static_cast<uint64_t>(n - 1) + 3) / 4);
    PhiloxWords words(&gen);
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    for (int64_t i = 0; i + 1 < n; ++i) {
      std::swap(order[i], order[i + words() % static_cast<uint64_t>(n - i)]);
    }
    Tensor out(in.dtype(), in.shape());
    const int64_t row = in.NumElements() / n;
    RETURN_IF_ERROR(SwitchAll(in.dtype(), "RandomShuffle", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      auto src = in.flat<T>();
      auto dst = out.flat<T>();
      for (int64_t i = 0; i < n; ++i) {
        std::copy(src.begin() + order[i] * row, src.begin() + (order[i] + 1) * row,
                  dst.begin() + i * row);
      }
      return absl::OkStatus();
    }));
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  // The generator at its current state; advances the state by `blocks`.
  Philox4x32 Reserve(uint64_t blocks) {
    absl::MutexLock l(&mu_);
    Philox4x32 base = generator_;
    generator_.Skip(blocks);
    return base;
  }

  absl::Mutex mu_;
  Philox4x32 generator_ ABSL_GUARDED_BY(mu_);
};

// Outputs *counter's value and increments it; OUT_OF_RANGE "Reached limit of
// N" once it has reached `limit` (how the input producers count epochs).
absl::Status CountUp(OpKernelContext* ctx, Tensor* counter, int64_t limit) {
  if (counter->dims() != 0) {
    return ctx->InvalidArgument("the counter must be a scalar, got shape ",
                                counter->shape().DebugString());
  }
  return SwitchAll(counter->dtype(), "CountUpTo", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      const T before = counter->scalar<T>();
      if (before >= limit) {
        return absl::OutOfRangeError(absl::StrCat(ctx->Prefix(), "Reached limit of ", limit));
      }
      counter->scalar<T>() = before + 1;
      ctx->set_output(0, Tensor::Scalar<T>(before));
      return absl::OkStatus();
    } else {
      return ctx->InvalidArgument("the counter must be int32 or int64, got ",
                                  DataTypeString(counter->dtype()));
    }
  });
}

// ResourceCountUpTo (a resource variable) and CountUpTo (a ref variable).
template <bool kResource>
class CountUpToOp : public OpKernel {
 public:
  explicit CountUpToOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("limit", &limit_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    if constexpr (kResource) {
      ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
      absl::MutexLock l(var->mu());
      return CountUp(ctx, var->MutableTensor(), limit_);
    } else {
      RefInputsLock lock(*ctx, {0});
      RETURN_IF_ERROR(CheckRefInitialized(*ctx, 0));
      return CountUp(ctx, MutableRefInput(ctx, 0), limit_);
    }
  }

 private:
  int64_t limit_ = 0;
};

absl::Status KeyValueShapes(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  c->set_output(1, PartialShape::Scalar());
  return absl::OkStatus();
}

absl::Status KeyValueVectors(InferenceContext* c) {
  c->set_output(0, PartialShape::UnknownDims(1));
  c->set_output(1, PartialShape::UnknownDims(1));
  return absl::OkStatus();
}

absl::Status VectorShape(InferenceContext* c) {
  c->set_output(0, PartialShape::UnknownDims(1));
  return absl::OkStatus();
}

absl::Status SameShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

// --- registration ---

REGISTER_OP("TextLineReaderV2")
    .Output("reader_handle: resource")
    .Attr("skip_header_lines: int = 0")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TextLineReaderV2").Device(kDeviceCPU), ReaderOp);

REGISTER_OP("TFRecordReaderV2")
    .Output("reader_handle: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("compression_type: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("TFRecordReaderV2").Device(kDeviceCPU), ReaderOp);

REGISTER_OP("FixedLengthRecordReaderV2")
    .Output("reader_handle: resource")
    .Attr("header_bytes: int = 0")
    .Attr("record_bytes: int")
    .Attr("footer_bytes: int = 0")
    .Attr("hop_bytes: int = 0")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("encoding: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FixedLengthRecordReaderV2").Device(kDeviceCPU), ReaderOp);

REGISTER_OP("WholeFileReaderV2")
    .Output("reader_handle: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("WholeFileReaderV2").Device(kDeviceCPU), ReaderOp);

REGISTER_OP("IdentityReaderV2")
    .Output("reader_handle: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IdentityReaderV2").Device(kDeviceCPU), ReaderOp);

REGISTER_OP("ReaderReadV2")
    .Input("reader_handle: resource")
    .Input("queue_handle: resource")
    .Output("key: string")
    .Output("value: string")
    .SetIsStateful()
    .SetShapeFn(KeyValueShapes);
REGISTER_KERNEL(KernelDefBuilder("ReaderReadV2").Device(kDeviceCPU), ReaderReadOp);

REGISTER_OP("ReaderReadUpToV2")
    .Input("reader_handle: resource")
    .Input("queue_handle: resource")
    .Input("num_records: int64")
    .Output("keys: string")
    .Output("values: string")
    .SetIsStateful()
    .SetShapeFn(KeyValueVectors);
REGISTER_KERNEL(KernelDefBuilder("ReaderReadUpToV2").Device(kDeviceCPU), ReaderReadOp);

REGISTER_OP("ReaderNumRecordsProducedV2")
    .Input("reader_handle: resource")
    .Output("records_produced: int64")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ReaderNumRecordsProducedV2").Device(kDeviceCPU), ReaderInfoOp);

REGISTER_OP("ReaderNumWorkUnitsCompletedV2")
    .Input("reader_handle: resource")
    .Output("units_completed: int64")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ReaderNumWorkUnitsCompletedV2").Device(kDeviceCPU), ReaderInfoOp);

REGISTER_OP("ReaderResetV2").Input("reader_handle: resource").SetIsStateful().SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("ReaderResetV2").Device(kDeviceCPU), ReaderInfoOp);

REGISTER_OP("ReaderSerializeStateV2")
    .Input("reader_handle: resource")
    .Output("state: string")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ReaderSerializeStateV2").Device(kDeviceCPU), ReaderStateOp);

REGISTER_OP("ReaderRestoreStateV2")
    .Input("reader_handle: resource")
    .Input("state: string")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("ReaderRestoreStateV2").Device(kDeviceCPU), ReaderStateOp);

REGISTER_OP("MatchingFiles")
    .Input("pattern: string")
    .Output("filenames: string")
    .SetShapeFn(VectorShape);
REGISTER_KERNEL(KernelDefBuilder("MatchingFiles").Device(kDeviceCPU), MatchingFilesOp);

REGISTER_OP("RandomShuffle")
    .Input("value: T")
    .Output("output: T")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Attr("T: type")
    .SetIsStateful()
    .SetShapeFn(SameShape);
REGISTER_KERNEL(KernelDefBuilder("RandomShuffle").Device(kDeviceCPU), RandomShuffleOp);

REGISTER_OP("ResourceCountUpTo")
    .Input("resource: resource")
    .Output("output: T")
    .Attr("limit: int")
    .Attr("T: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ResourceCountUpTo").Device(kDeviceCPU), CountUpToOp<true>);

REGISTER_OP("CountUpTo")
    .Input("ref: Ref(T)")
    .Output("output: T")
    .Attr("limit: int")
    .Attr("T: {int32, int64}")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("CountUpTo").Device(kDeviceCPU), CountUpToOp<false>);

}  // namespace
}  // namespace dflow
