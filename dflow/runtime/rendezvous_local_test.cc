#include "dflow/runtime/rendezvous_local.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

constexpr char kSrc[] = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr char kDst[] = "/job:localhost/replica:0/task:0/device:CPU:1";

Rendezvous::ParsedKey Key(const std::string& name) {
  return *Rendezvous::ParseKey(Rendezvous::CreateKey(kSrc, 7, kDst, name));
}

struct Received {
  absl::Notification done;
  absl::Status status;
  Tensor value;
  bool is_dead = false;
  Rendezvous::DoneCallback Callback() {
    return [this](const absl::Status& s, const Tensor& v, bool dead) {
      status = s;
      value = v;
      is_dead = dead;
      done.Notify();
    };
  }
};

TEST(RendezvousLocalTest, SendThenRecvSharesBuffer) {
  LocalRendezvous r;
  Tensor t = Tensor::Vec<float>({1, 2, 3});
  ASSERT_TRUE(r.Send(Key("a"), t, false).ok());
  Received got;
  r.RecvAsync(Key("a"), got.Callback());
  ASSERT_TRUE(got.done.HasBeenNotified());  // Value was waiting: immediate.
  ASSERT_TRUE(got.status.ok());
  EXPECT_TRUE(got.value.SharesBufferWith(t));
  EXPECT_FALSE(got.is_dead);
}

TEST(RendezvousLocalTest, RecvThenSendWakesWaiter) {
  LocalRendezvous r;
  Received got;
  r.RecvAsync(Key("b"), got.Callback());
  EXPECT_FALSE(got.done.HasBeenNotified());
  EXPECT_EQ(r.PendingRecvKeys(), std::vector<std::string>{Key("b").full_key});
  Tensor t = Tensor::Scalar<int32_t>(5);
  std::thread sender([&] { ASSERT_TRUE(r.Send(Key("b"), t, true).ok()); });
  sender.join();
  ASSERT_TRUE(got.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(got.status.ok());
  EXPECT_TRUE(got.value.SharesBufferWith(t));
  EXPECT_TRUE(got.is_dead);
  EXPECT_TRUE(r.PendingRecvKeys().empty());
}

TEST(RendezvousLocalTest, KeysAreIndependent) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send(Key("x"), Tensor::Scalar<int32_t>(1), false).ok());
  ASSERT_TRUE(r.Send(Key("y"), Tensor::Scalar<int32_t>(2), false).ok());
  Tensor v;
  bool dead;
  ASSERT_TRUE(r.Recv(Key("y"), absl::Seconds(1), &v, &dead).ok());
  EXPECT_EQ(v.scalar<int32_t>(), 2);
  ASSERT_TRUE(r.Recv(Key("x"), absl::Seconds(1), &v, &dead).ok());
  EXPECT_EQ(v.scalar<int32_t>(), 1);
}

TEST(RendezvousLocalTest, DuplicateSendFails) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send(Key("d"), Tensor::Scalar<int32_t>(1), false).ok());
  absl::Status s = r.Send(Key("d"), Tensor::Scalar<int32_t>(2), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find(Key("d").full_key), std::string::npos) << s;
  // Also after the first value was consumed.
  Tensor v;
  bool dead;
  ASSERT_TRUE(r.Recv(Key("d"), absl::Seconds(1), &v, &dead).ok());
  EXPECT_EQ(v.scalar<int32_t>(), 1);
  EXPECT_EQ(r.Send(Key("d"), v, false).code(), absl::StatusCode::kAlreadyExists);
}

TEST(RendezvousLocalTest, AbortFailsWaitersAndLaterCalls) {
  LocalRendezvous r;
  Received w1, w2;
  r.RecvAsync(Key("p"), w1.Callback());
  r.RecvAsync(Key("q"), w2.Callback());
  r.StartAbort(absl::UnavailableError("peer died"));
  ASSERT_TRUE(w1.done.HasBeenNotified() && w2.done.HasBeenNotified());
  EXPECT_EQ(w1.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(w2.status.message(), "peer died");
  EXPECT_EQ(r.Send(Key("p"), Tensor(), false).code(), absl::StatusCode::kUnavailable);
  Received late;
  r.RecvAsync(Key("z"), late.Callback());
  ASSERT_TRUE(late.done.HasBeenNotified());
  EXPECT_EQ(late.status.code(), absl::StatusCode::kUnavailable);
  // A second abort does not replace the first status.
  r.StartAbort(absl::CancelledError("later"));
  EXPECT_EQ(r.Send(Key("p2"), Tensor(), false).message(), "peer died");
}

TEST(RendezvousLocalTest, DestructionFailsPendingRecv) {
  Received got;
  {
    LocalRendezvous r;
    r.RecvAsync(Key("never"), got.Callback());
  }
  ASSERT_TRUE(got.done.HasBeenNotified());
  EXPECT_EQ(got.status.code(), absl::StatusCode::kCancelled);
}

TEST(RendezvousLocalTest, BlockingRecvTimesOut) {
  LocalRendezvous r;
  Tensor v;
  bool dead;
  absl::Status s = r.Recv(Key("late"), absl::Milliseconds(20), &v, &dead);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(RendezvousLocalTest, ManyConcurrentPairs) {
  LocalRendezvous r;
  constexpr int kN = 2000;
  std::atomic<int> ok{0};
  std::thread receiver([&] {
    for (int i = 0; i < kN; ++i) {
      r.RecvAsync(Key(absl::StrCat("k", i)),
                  [&ok, i](const absl::Status& s, const Tensor& v, bool) {
                    if (s.ok() && v.scalar<int32_t>() == i) ++ok;
                  });
    }
  });
  std::thread sender([&] {
    for (int i = kN - 1; i >= 0; --i) {
      ASSERT_TRUE(r.Send(Key(absl::StrCat("k", i)), Tensor::Scalar<int32_t>(i), false).ok());
    }
  });
  sender.join();
  receiver.join();
  EXPECT_EQ(ok.load(), kN);
}

}  // namespace
}  // namespace dflow
