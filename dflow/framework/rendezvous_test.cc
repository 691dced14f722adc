#include "dflow/framework/rendezvous.h"

#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

constexpr char kPs[] = "/job:ps/replica:0/task:0/device:CPU:0";
constexpr char kWorker[] = "/job:worker/replica:0/task:0/device:CPU:0";

// A minimal table: enough to drive the base class's blocking Recv.
class TableRendezvous : public Rendezvous {
 public:
  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override {
    DoneCallback waiter;
    {
      absl::MutexLock l(&mu_);
      if (!abort_.ok()) return abort_;
      auto it = waiters_.find(key.full_key);
      if (it == waiters_.end()) {
        sent_[key.full_key] = {value, is_dead};
        return absl::OkStatus();
      }
      waiter = std::move(it->second);
      waiters_.erase(it);
    }
    waiter(absl::OkStatus(), value, is_dead);
    return absl::OkStatus();
  }
  void RecvAsync(const ParsedKey& key, DoneCallback done) override {
    std::pair<Tensor, bool> item;
    absl::Status status;
    {
      absl::MutexLock l(&mu_);
      status = abort_;
      auto it = sent_.find(key.full_key);
      if (status.ok() && it == sent_.end()) {
        waiters_[key.full_key] = std::move(done);
        return;
      }
      if (status.ok()) {
        item = it->second;
        sent_.erase(it);
      }
    }
    done(status, item.first, item.second);
  }
  void StartAbort(const absl::Status& status) override {
    std::map<std::string, DoneCallback> waiters;
    {
      absl::MutexLock l(&mu_);
      abort_ = status;
      waiters.swap(waiters_);
    }
    for (auto& [k, cb] : waiters) cb(status, Tensor(), false);
  }

 private:
  absl::Mutex mu_;
  absl::Status abort_;
  std::map<std::string, std::pair<Tensor, bool>> sent_;
  std::map<std::string, DoneCallback> waiters_;
};

Rendezvous::ParsedKey MustParse(const std::string& key) {
  absl::StatusOr<Rendezvous::ParsedKey> k = Rendezvous::ParseKey(key);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *k : Rendezvous::ParsedKey();
}

TEST(RendezvousKeyTest, CreateKeyMatchesTensorFlowFormat) {
  EXPECT_EQ(Rendezvous::CreateKey(kPs, 1, kWorker, "edge_5_w"),
            "/job:ps/replica:0/task:0/device:CPU:0;0000000000000001;"
            "/job:worker/replica:0/task:0/device:CPU:0;edge_5_w;0:0");
  EXPECT_EQ(Rendezvous::CreateKey(kPs, 0xdeadbeef12345678ULL, kWorker, "x"),
            std::string(kPs) + ";deadbeef12345678;" + kWorker + ";x;0:0");
}

TEST(RendezvousKeyTest, ParseRoundTrips) {
  const uint64_t inc = 0xfedcba9876543210ULL;
  std::string key = Rendezvous::CreateKey(kPs, inc, kWorker, "edge_5_w:0");
  Rendezvous::ParsedKey p = MustParse(key);
  EXPECT_EQ(p.full_key, key);
  EXPECT_EQ(p.src_device, kPs);
  EXPECT_EQ(p.src_incarnation, inc);
  EXPECT_EQ(p.dst_device, kWorker);
  EXPECT_EQ(p.edge_name, "edge_5_w:0");
  EXPECT_EQ(p.src.job, "ps");
  EXPECT_EQ(p.dst.job, "worker");
  EXPECT_EQ(p.dst.type, "CPU");
}

// Inside a loop the key names the loop instance and iteration, so each
// iteration's value has its own slot.
TEST(RendezvousKeyTest, KeysInsideALoopNameFrameAndIteration) {
  EXPECT_EQ(Rendezvous::CreateKey(kPs, 1, kWorker, "e", FrameAndIter{77, 3}),
            std::string(kPs) + ";0000000000000001;" + kWorker + ";e;77:3");
  Rendezvous::ParsedKey root = MustParse(Rendezvous::CreateKey(kPs, 1, kWorker, "e"));
  Rendezvous::ParsedKey in_loop = Rendezvous::InFrame(root, FrameAndIter{77, 3});
  EXPECT_EQ(in_loop.full_key, Rendezvous::CreateKey(kPs, 1, kWorker, "e", FrameAndIter{77, 3}));
  EXPECT_EQ(in_loop.edge_name, "e");
  EXPECT_EQ(in_loop.src_device, kPs);
  EXPECT_NE(Rendezvous::InFrame(root, FrameAndIter{77, 4}).full_key, in_loop.full_key);
  EXPECT_TRUE(FrameAndIter{}.IsRoot());
  EXPECT_FALSE((FrameAndIter{77, 0}).IsRoot());
}

TEST(RendezvousKeyTest, ParseAcceptsUpperCaseAndShortHex) {
  std::string key = std::string(kPs) + ";00000000000000AB;" + kWorker + ";t;0:0";
  EXPECT_EQ(MustParse(key).src_incarnation, 0xabu);
  key = std::string(kPs) + ";1f;" + kWorker + ";t;0:0";
  EXPECT_EQ(MustParse(key).src_incarnation, 0x1fu);
}

TEST(RendezvousKeyTest, MalformedKeysAreInvalidArgumentQuotingTheKey) {
  const std::string ps = kPs, w = kWorker;
  for (const std::string& key : {
           std::string(""),
           ps + ";0000000000000001;" + w + ";edge",                // 4 parts
           ps + ";0000000000000001;" + w + ";edge;0:0;extra",      // 6 parts
           ps + ";00000000000000zz;" + w + ";edge;0:0",            // bad hex
           ps + ";;" + w + ";edge;0:0",                            // empty hex
           ps + ";-1;" + w + ";edge;0:0",                          // signed
           ps + ";0x1;" + w + ";edge;0:0",                         // prefix
           ps + ";00000000000000001;" + w + ";edge;0:0",           // 17 digits
           "/job:ps/bogus:0;0000000000000001;" + w + ";edge;0:0",  // unparsable
           "/job:ps;0000000000000001;" + w + ";edge;0:0",          // partial src
           ps + ";0000000000000001;/cpu:0;edge;0:0",               // partial dst
           ps + ";0000000000000001;" + w + ";;0:0",                // empty name
       }) {
    absl::StatusOr<Rendezvous::ParsedKey> p = Rendezvous::ParseKey(key);
    ASSERT_FALSE(p.ok()) << key;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(p.status().message(), HasSubstr("'" + key + "'"));
  }
}

TEST(RendezvousRecvTest, ReturnsValueSentEarlier) {
  TableRendezvous r;
  auto key = MustParse(Rendezvous::CreateKey(kPs, 1, kWorker, "a"));
  ASSERT_TRUE(r.Send(key, Tensor::Scalar(3.5f), false).ok());
  Tensor v;
  bool dead = true;
  ASSERT_TRUE(r.Recv(key, absl::Seconds(5), &v, &dead).ok());
  EXPECT_FALSE(dead);
  EXPECT_EQ(v.scalar<float>(), 3.5f);
}

TEST(RendezvousRecvTest, WaitsForALaterSendAndPassesIsDead) {
  TableRendezvous r;
  auto key = MustParse(Rendezvous::CreateKey(kPs, 1, kWorker, "b"));
  Tensor sent = Tensor::Vec<int32_t>({1, 2, 3});
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_TRUE(r.Send(key, sent, true).ok());
  });
  Tensor v;
  bool dead = false;
  ASSERT_TRUE(r.Recv(key, absl::Seconds(10), &v, &dead).ok());
  sender.join();
  EXPECT_TRUE(dead);
  EXPECT_TRUE(v.SharesBufferWith(sent));  // Handed over, not copied.
}

TEST(RendezvousRecvTest, TimeoutIsDeadlineExceededNamingTheKeyAndLateSendIsSafe) {
  TableRendezvous r;
  auto key = MustParse(Rendezvous::CreateKey(kPs, 1, kWorker, "late"));
  Tensor v;
  bool dead = false;
  absl::Status s = r.Recv(key, absl::Milliseconds(20), &v, &dead);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr(key.full_key));
  // The abandoned callback fires after Recv returned: must not touch its stack.
  ASSERT_TRUE(r.Send(key, Tensor::Scalar(1.0f), false).ok());
  EXPECT_FALSE(v.IsInitialized());
}

TEST(RendezvousRecvTest, AbortFailsAPendingRecv) {
  TableRendezvous r;
  auto key = MustParse(Rendezvous::CreateKey(kPs, 1, kWorker, "c"));
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    r.StartAbort(absl::CancelledError("step cancelled"));
  });
  Tensor v;
  bool dead = false;
  absl::Status s = r.Recv(key, absl::InfiniteDuration(), &v, &dead);
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(s.message(), "step cancelled");
}

}  // namespace
}  // namespace dflow
