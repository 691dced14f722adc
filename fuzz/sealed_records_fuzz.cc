// Fuzzes the TLS data plane's sealed records (data_plane_connection.h) as a
// forger on the wire between two ends would: after a real handshake on a
// socket pair, an input is a sequence of calls (fuzz_util.h's CallReader):
//   0: the sender seals its bytes (Send);
//   1: raw bytes go onto the wire toward the receiver, as if the sender sent them;
//   2: everything on the wire toward the receiver is taken off, one bit (at the
//      call's first two bytes, little-endian) flipped, and put back;
//   3: the receiver receives as many bytes as its first two bytes say, plus
//      64 KiB times its third byte's low two bits (Recv, 20 ms deadline);
//   4: the receiver seals its bytes toward the sender, which reads them
//      without blocking (Read);
//   5: raw bytes go toward the sender, which reads without blocking.
// The oracle: whatever either end receives without an error is exactly the
// next bytes its peer sealed, in order; forged, damaged, replayed or
// reordered bytes only ever fail. After the first failure at an end, that
// end is not used again.
#include <sys/socket.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "dflow/distributed/rpc/data_connection_pair_test_util.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

std::shared_ptr<const DataPlaneTls> server_tls;
std::shared_ptr<const DataPlaneTls> client_tls;

constexpr int kMaxReceives = 4;  // Each may wait its 20 ms.

std::string Le16(int n) { return std::string{static_cast<char>(n & 0xff), static_cast<char>(n >> 8)}; }

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "sealed_records_fuzz: %s\n", what);
    std::abort();
  }
}

// One end's stream: what its peer sealed toward it and it has not yet taken.
struct Stream {
  std::string expected;
  bool broken = false;
  // Bytes just received without an error must be the next ones sealed.
  void Took(const std::string& got) {
    Check(expected.compare(0, got.size(), got) == 0 && got.size() <= expected.size(),
          "an end received bytes its peer did not seal");
    expected.erase(0, got.size());
  }
};

bool Send(DataConnection& conn, const std::string& bytes) {
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  return conn.SetDeadline(deadline).ok() && conn.Send(bytes.data(), bytes.size(), deadline).ok();
}

void RunInput(DataConnectionPair& pair, CallReader calls) {
  Stream to_receiver, to_sender;
  int receives = 0;
  int method;
  std::string bytes;
  while (calls.Next(&method, &bytes)) {
    switch (method % 6) {
      case 0:
        if (Send(*pair.sender, bytes)) to_receiver.expected += bytes;
        break;
      case 1:
        ::send(pair.sender->fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        break;
      case 2: {
        std::string wire(256 << 10, '\0');
        const ssize_t n = ::recv(pair.receiver->fd(), wire.data(), wire.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        wire.resize(static_cast<size_t>(n));
        const size_t bit = bytes.size() >= 2 ? (uint8_t(bytes[0]) | uint8_t(bytes[1]) << 8) : 0;
        if (bit / 8 < wire.size()) wire[bit / 8] ^= static_cast<char>(1 << (bit % 8));
        ::send(pair.sender->fd(), wire.data(), wire.size(), MSG_NOSIGNAL);
        break;
      }
      case 3: {
        if (to_receiver.broken || ++receives > kMaxReceives) break;
        // Up to 256 KiB: the third byte's low bits reach receives that read no
        // further ahead than a record's header.
        size_t n = bytes.size() >= 2 ? (uint8_t(bytes[0]) | uint8_t(bytes[1]) << 8) : 1;
        if (bytes.size() >= 3) n |= size_t{uint8_t(bytes[2]) & 3u} << 16;
        std::string got(n, '\0');
        // As the data plane's receiver does, the socket's waits are bounded first.
        const absl::Time deadline = absl::Now() + absl::Milliseconds(20);
        if (pair.receiver->SetDeadline(deadline).ok() &&
            pair.receiver->Recv(got.data(), n, deadline).ok()) {
          to_receiver.Took(got);
        } else {
          to_receiver.broken = true;
        }
        break;
      }
      case 4:
      case 5: {
        if (method % 6 == 4) {
          if (!Send(*pair.receiver, bytes)) break;
          to_sender.expected += bytes;
        } else {
          ::send(pair.receiver->fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        char buf[4096];  // Read never blocks (its records are read MSG_DONTWAIT).
        for (int i = 0; i < 1000 && !to_sender.broken; ++i) {
          size_t got = 0;
          const DataConnection::Io io = pair.sender->Read(buf, sizeof(buf), &got);
          if (io == DataConnection::Io::kWantRead) break;
          if (io != DataConnection::Io::kDone) {
            to_sender.broken = true;
            break;
          }
          to_sender.Took(std::string(buf, got));
        }
        break;
      }
    }
  }
}

}  // namespace

std::vector<std::string> Seeds() {
  const std::string tensor(60000, 't');  // Opened in the receiver's buffer, not in_.
  return {
      Call(0, "hello") + Call(3, Le16(5)),
      Call(0, std::string(1000, 'a')) + Call(2, Le16(8 * 100)) + Call(3, Le16(1000)),
      Call(0, "one") + Call(0, "two") + Call(3, Le16(2)) + Call(3, Le16(4)),
      Call(1, std::string("\x7f\xff\xff\xff", 4)) + Call(3, Le16(10)),
      Call(1, std::string("\x00\x00\x00\x05" "abcde0123456789abcdef", 25)) + Call(3, Le16(5)),
      Call(0, tensor) + Call(3, Le16(static_cast<int>(tensor.size()))),
      Call(4, "a request") + Call(5, std::string("\x00\x00\x00\x01xyzxyzxyzxyzxyzxyz", 21)),
  };
}

}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace dflow;
  fuzz::InitCommon();
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  if (!tls.ok()) std::abort();
  auto server = DataPlaneTls::Create(tls->security(), DataPlaneTls::kServer);
  auto client = DataPlaneTls::Create(tls->security(), DataPlaneTls::kClient);
  if (!server.ok() || !client.ok()) std::abort();
  fuzz::server_tls = *server;
  fuzz::client_tls = *client;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  if (size > fuzz::kMaxInputBytes) return -1;
  DataConnectionPair pair(fuzz::server_tls, fuzz::client_tls, absl::Seconds(5));
  fuzz::Check(pair.ok(), "the handshake failed");
  fuzz::RunInput(pair, fuzz::CallReader(data, size));
  return 0;
}
