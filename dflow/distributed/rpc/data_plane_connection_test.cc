// The TLS data plane's sealed records (data_plane_connection.h) on a socket
// pair: bytes cross bit-exact however the reads are cut, and a record that
// was damaged, forged, replayed, reordered or oversized is refused.
#include "dflow/distributed/rpc/data_plane_connection.h"

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "dflow/distributed/rpc/data_connection_pair_test_util.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

constexpr size_t kRecordOverhead = 4 + 16;  // Length header and tag.

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    s[i] = static_cast<char>(seed >> 24);
  }
  return s;
}

std::shared_ptr<const DataPlaneTls> Context(const ThrowawayTls& tls, DataPlaneTls::Role role) {
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made =
      DataPlaneTls::Create(tls.security(), role);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *made : nullptr;
}

// A handshaken pair, and a forger's hands on the wire between its ends.
struct Pair : DataConnectionPair {
  using DataConnectionPair::DataConnectionPair;
  // What the sender put on the wire for `plaintext`, taken off before the
  // receiver sees it (`n` bytes expected).
  std::string Intercept(const std::string& plaintext, size_t n) {
    EXPECT_TRUE(sender->Send(plaintext.data(), plaintext.size(), Deadline()).ok());
    std::string wire(n, '\0');
    EXPECT_EQ(::recv(receiver->fd(), wire.data(), n, MSG_WAITALL), static_cast<ssize_t>(n));
    return wire;
  }
  // Puts `wire` where the receiver reads next, as if the sender had sent it.
  void Inject(const std::string& wire) {
    EXPECT_EQ(::send(sender->fd(), wire.data(), wire.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(wire.size()));
  }
  static absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }
};

class SealedRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ThrowawayTls> made = MakeThrowawayTls();
    ASSERT_TRUE(made.ok()) << made.status();
    tls_ = *made;
    pair_ = std::make_unique<Pair>(Context(tls_, DataPlaneTls::kServer),
                                   Context(tls_, DataPlaneTls::kClient));
    ASSERT_EQ(pair_->sender_handshake, DataConnection::Io::kDone) << pair_->sender->error();
    ASSERT_TRUE(pair_->receiver_handshake.ok()) << pair_->receiver_handshake;
  }
  // The receiver's next `n` bytes, in one Recv.
  absl::Status Receive(size_t n, std::string* out = nullptr) {
    std::string got(n, '\0');
    absl::Status s = pair_->receiver->Recv(got.data(), n, Pair::Deadline());
    if (out != nullptr) *out = got;
    return s;
  }

  ThrowawayTls tls_;
  std::unique_ptr<Pair> pair_;
};

TEST_F(SealedRecordsTest, BytesCrossBitExactHoweverTheReadsAreCut) {
  // A frame header, a tensor of several records, a small trailer: received in
  // pieces across record boundaries, then whole (straight into the buffer).
  const std::string header = Pattern(24, 1), tensor = Pattern((600 << 10) + 7, 2),
                    trailer = Pattern(5, 3);
  for (int round = 0; round < 2; ++round) {
    const iovec pieces[] = {{const_cast<char*>(header.data()), header.size()},
                            {const_cast<char*>(tensor.data()), tensor.size()},
                            {const_cast<char*>(trailer.data()), trailer.size()}};
    std::thread sending([&] {
      size_t total = header.size() + tensor.size() + trailer.size(), done = 0;
      int i = 0;
      while (done < total && i < 100) {
        std::vector<iovec> left;
        size_t skip = done;
        for (const iovec& v : pieces) {
          if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
          }
          left.push_back({static_cast<char*>(v.iov_base) + skip, v.iov_len - skip});
          skip = 0;
        }
        size_t wrote = 0;
        const DataConnection::Io io =
            pair_->sender->Write(left.data(), static_cast<int>(left.size()), &wrote);
        ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantWrite);
        done += wrote;
        size_t sent = 0;
        while (pair_->sender->HasPendingWrite()) pair_->sender->FlushPendingWrite(&sent);
        ++i;
      }
    });
    std::string got;
    if (round == 0) {  // Cut anywhere: 3 + 21 + (tensor - 1000) + 1000 + 5.
      for (size_t cut : {size_t{3}, size_t{21}, tensor.size() - 1000, size_t{1000}, size_t{5}}) {
        std::string piece;
        ASSERT_TRUE(Receive(cut, &piece).ok());
        got += piece;
      }
    } else {
      ASSERT_TRUE(Receive(header.size() + tensor.size() + trailer.size(), &got).ok());
    }
    sending.join();
    EXPECT_EQ(got, header + tensor + trailer) << round;
    EXPECT_FALSE(pair_->receiver->HasBuffered());
  }
}

TEST_F(SealedRecordsTest, ADamagedCiphertextOrTagIsRefused) {
  // A small record (opened in the receiver's buffer) and a large one (opened
  // in the caller's): a bit flipped at the body's start, middle, or in the tag.
  for (size_t n : {size_t{100}, size_t{100 << 10}}) {
    for (size_t flip : {size_t{4}, 4 + n / 2, 4 + n + 3}) {
      SetUp();
      std::string wire = pair_->Intercept(Pattern(n, 4), n + kRecordOverhead);
      wire[flip] ^= 1;
      std::thread injecting([&] { pair_->Inject(wire); });
      const absl::Status s = Receive(n);
      injecting.join();
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << n << " " << flip;
      EXPECT_THAT(s.message(), HasSubstr("failed to authenticate")) << n << " " << flip;
    }
  }
}

TEST_F(SealedRecordsTest, ARecordWhoseLengthWasChangedIsRefused) {
  std::string wire = pair_->Intercept(Pattern(100, 5), 100 + kRecordOverhead);
  wire[3] = 90;  // The header is authenticated: 90 bytes fail.
  pair_->Inject(wire);
  EXPECT_THAT(Receive(90).message(), HasSubstr("failed to authenticate"));
}

TEST_F(SealedRecordsTest, AReplayedRecordIsRefused) {
  const std::string first = pair_->Intercept(Pattern(64, 6), 64 + kRecordOverhead);
  pair_->Inject(first);
  pair_->Inject(first);
  std::string got;
  ASSERT_TRUE(Receive(64, &got).ok());
  EXPECT_EQ(got, Pattern(64, 6));
  EXPECT_THAT(Receive(64).message(), HasSubstr("failed to authenticate"));
}

TEST_F(SealedRecordsTest, RecordsInAnotherOrderAreRefused) {
  const std::string first = pair_->Intercept(Pattern(64, 7), 64 + kRecordOverhead);
  const std::string second = pair_->Intercept(Pattern(64, 8), 64 + kRecordOverhead);
  pair_->Inject(second + first);
  EXPECT_THAT(Receive(64).message(), HasSubstr("failed to authenticate"));
}

TEST_F(SealedRecordsTest, ARecordFromTheOtherDirectionIsRefused) {
  // What the receiver sealed for the sender, reflected back to the receiver.
  const std::string request = Pattern(32, 9);
  ASSERT_TRUE(pair_->receiver->Send(request.data(), request.size(), Pair::Deadline()).ok());
  std::string wire(32 + kRecordOverhead, '\0');
  ASSERT_EQ(::recv(pair_->sender->fd(), wire.data(), wire.size(), MSG_WAITALL),
            static_cast<ssize_t>(wire.size()));
  pair_->Inject(wire);
  EXPECT_THAT(Receive(32).message(), HasSubstr("failed to authenticate"));
}

TEST_F(SealedRecordsTest, AnOversizedOrEmptyRecordIsRefusedBeforeItsBytesAreRead) {
  pair_->Inject(std::string("\x7f\xff\xff\xff", 4));
  absl::Status s = Receive(16);
  EXPECT_THAT(s.message(), HasSubstr("announced 2147483647 bytes"));
  SetUp();
  pair_->Inject(std::string(4, '\0'));
  EXPECT_THAT(Receive(16).message(), HasSubstr("announced 0 bytes"));
}

TEST_F(SealedRecordsTest, ARecordOfTheLargestSizeOpensInEitherBufferAndOneByteMoreIsRefused) {
  const std::string largest = Pattern(256 << 10, 16);  // One record (Send seals 256 KiB a turn).
  for (int whole = 0; whole < 2; ++whole) {
    absl::Status sent;
    std::thread sending(
        [&] { sent = pair_->sender->Send(largest.data(), largest.size(), Pair::Deadline()); });
    std::string first, second;
    if (whole) {  // Straight into the caller's buffer.
      EXPECT_TRUE(Receive(largest.size(), &first).ok());
    } else {  // Opened in the receiver's own buffer, then copied out in two pieces.
      EXPECT_TRUE(Receive(1000, &first).ok());
      EXPECT_TRUE(Receive(largest.size() - 1000, &second).ok());
    }
    sending.join();
    ASSERT_TRUE(sent.ok()) << sent;
    EXPECT_EQ(first + second, largest) << whole;
  }
  pair_->Inject(std::string("\x00\x04\x00\x01", 4));  // 256 KiB + 1.
  EXPECT_THAT(Receive(16).message(), HasSubstr("announced 262145 bytes (1 to 262144 allowed)"));
}

TEST_F(SealedRecordsTest, AfterARecordFailsTheConnectionStaysFailedAndKeepsNoneOfIt) {
  const size_t n = 100 << 10;  // Opened in the caller's buffer.
  std::string damaged = pair_->Intercept(Pattern(n, 14), n + kRecordOverhead);
  damaged[4 + 10] ^= 1;
  const std::string genuine = pair_->Intercept(Pattern(64, 15), 64 + kRecordOverhead);
  std::thread injecting([&] { pair_->Inject(damaged + genuine); });
  std::string got(n, 'x');
  const absl::Status s = pair_->receiver->Recv(got.data(), n, Pair::Deadline());
  injecting.join();
  EXPECT_THAT(s.message(), HasSubstr("failed to authenticate"));
  EXPECT_EQ(got, std::string(n, '\0'));  // Not the forger's plaintext.
  // The genuine record after it is never delivered: the stream is out of step.
  EXPECT_THAT(Receive(64).message(), HasSubstr("failed earlier"));
  EXPECT_TRUE(pair_->receiver->Worn());         // Not pooled,
  EXPECT_TRUE(pair_->receiver->HasBuffered());  // and an idle check closes it.
}

TEST_F(SealedRecordsTest, ASecondHandshakeDerivesNoKeysAgain) {
  // Keys derived again would restart the receiver's nonces: its next record
  // would then fail to open at the sender (and repeat a nonce).
  const std::string first = "first", second = "second";
  ASSERT_TRUE(pair_->receiver->Send(first.data(), first.size(), Pair::Deadline()).ok());
  ASSERT_TRUE(pair_->receiver->Handshake(Pair::Deadline()).ok());
  EXPECT_EQ(pair_->sender->StepHandshake(), DataConnection::Io::kDone);
  ASSERT_TRUE(pair_->receiver->Send(second.data(), second.size(), Pair::Deadline()).ok());
  std::string got;
  char buf[64];
  for (int i = 0; i < 100 && got.size() < first.size() + second.size(); ++i) {
    size_t n = 0;
    const DataConnection::Io io = pair_->sender->Read(buf, sizeof(buf), &n);
    ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantRead)
        << pair_->sender->error();
    got.append(buf, n);
  }
  EXPECT_EQ(got, first + second);
}

TEST_F(SealedRecordsTest, BytesDrippingInDoNotStretchTheDeadline) {
  // A record's bytes one at a time, 200 ms apart, against a 1 s deadline:
  // into the caller's buffer (100 KiB) and into the receiver's (1000 bytes).
  for (size_t n : {size_t{100 << 10}, size_t{1000}}) {
    SetUp();
    const std::string wire = pair_->Intercept(Pattern(n, 17), n + kRecordOverhead);
    std::atomic<bool> stop{false};
    std::thread dripping([&] {
      for (size_t i = 0; i < 50 && !stop; ++i) {
        pair_->Inject(wire.substr(i, 1));
        absl::SleepFor(absl::Milliseconds(200));
      }
    });
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + absl::Seconds(1);
    std::string got(n, '\0');
    ASSERT_TRUE(pair_->receiver->SetDeadline(deadline).ok());  // As the data plane's receiver does.
    const absl::Status s = pair_->receiver->Recv(got.data(), n, deadline);
    const absl::Duration took = absl::Now() - start;
    stop = true;
    dripping.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << n << ": " << s;
    EXPECT_LT(took, absl::Milliseconds(1800)) << n;
  }
}

TEST_F(SealedRecordsTest, ASenderThatDiesInsideARecordFailsTheReceiveAtOnce) {
  // Half of a record that would go straight into the caller's buffer, then
  // the sender's process is gone (its socket closed): the receive ends with
  // the close, long before its 10 s deadline, and the connection is done.
  const size_t n = 100 << 10;
  const std::string wire = pair_->Intercept(Pattern(n, 18), n + kRecordOverhead);
  pair_->Inject(wire.substr(0, wire.size() / 2));
  std::thread dying([&] {
    absl::SleepFor(absl::Milliseconds(100));
    pair_->sender.reset();
  });
  const absl::Time start = absl::Now();
  std::string got(n, '\0');
  ASSERT_TRUE(pair_->receiver->SetDeadline(Pair::Deadline()).ok());
  const absl::Status s = pair_->receiver->Recv(got.data(), n, Pair::Deadline());
  dying.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("closed by the peer"));
  EXPECT_TRUE(pair_->receiver->closed());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(pair_->receiver->Worn());
}

TEST_F(SealedRecordsTest, RequestsCrossToTheSendersNonBlockingReads) {
  const std::string request = Pattern(70 << 10, 10);  // Over one read-ahead.
  ASSERT_TRUE(pair_->receiver->Send(request.data(), request.size(), Pair::Deadline()).ok());
  std::string got;
  char buf[4096];
  for (int i = 0; i < 10000 && got.size() < request.size(); ++i) {
    size_t n = 0;
    const DataConnection::Io io = pair_->sender->Read(buf, sizeof(buf), &n);
    ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantRead);
    got.append(buf, n);
  }
  EXPECT_EQ(got, request);
  EXPECT_FALSE(pair_->sender->HasBuffered());
}

TEST_F(SealedRecordsTest, AConnectionIsWornOnceItsKeysSealedHalfTheirLimit) {
  ScopedKeyLimit limit(800 << 10);
  const std::string data = Pattern(300 << 10, 11);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(pair_->receiver->Worn()) << i;
    absl::Status sent;
    std::thread sending(
        [&] { sent = pair_->sender->Send(data.data(), data.size(), Pair::Deadline()); });
    EXPECT_TRUE(Receive(data.size()).ok());
    sending.join();
    ASSERT_TRUE(sent.ok()) << sent;
  }
  EXPECT_TRUE(pair_->receiver->Worn());
  EXPECT_TRUE(pair_->sender->Worn());
  // Past the limit the sender seals nothing more.
  std::string more = Pattern(300 << 10, 12);
  const absl::Status s = pair_->sender->Send(more.data(), more.size(), Pair::Deadline());
  EXPECT_THAT(s.message(), HasSubstr("usage limit"));
}

// A receiver that does not offer the sealed records (a dflow from before
// them: TLS records after the handshake) fails the handshake at both ends, so
// its calls go to gRPC.
TEST(SealedRecordsHandshakeTest, APeerWithoutTheProtocolIsRefusedAtBothEnds) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  std::shared_ptr<const DataPlaneTls> older = Context(*tls, DataPlaneTls::kClient);
  SSL_CTX_set_alpn_protos(older->ctx(), nullptr, 0);  // Offers none.
  Pair pair(Context(*tls, DataPlaneTls::kServer), older);
  EXPECT_EQ(pair.sender_handshake, DataConnection::Io::kError);
  EXPECT_THAT(pair.sender->error(), HasSubstr("TLS handshake failed"));
  // Refused at its first message, with the alert that says why, not accepted
  // (a ticket) and then dropped.
  EXPECT_FALSE(pair.receiver_handshake.ok());
  EXPECT_THAT(pair.receiver_handshake.message(), HasSubstr("no application protocol"));
}

}  // namespace
}  // namespace dflow
