// Two ends of a TLS data-plane connection (data_plane_connection.h) on a
// socket pair, for data_plane_connection_test.cc and
// fuzz/sealed_records_fuzz.cc.
#ifndef DFLOW_DISTRIBUTED_RPC_DATA_CONNECTION_PAIR_TEST_UTIL_H_
#define DFLOW_DISTRIBUTED_RPC_DATA_CONNECTION_PAIR_TEST_UTIL_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "dflow/distributed/rpc/data_plane_connection.h"

namespace dflow {

// A sender (TLS server, its handshake stepped as its event loop would) and a
// receiver (TLS client, a blocking handshake on a thread of its own), both
// sockets blocking once the handshakes are over (within `timeout`).
struct DataConnectionPair {
  DataConnectionPair(std::shared_ptr<const DataPlaneTls> server,
                     std::shared_ptr<const DataPlaneTls> client,
                     absl::Duration timeout = absl::Seconds(20)) {
    int fds[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      receiver_handshake = absl::InternalError("socketpair failed");
      return;
    }
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    sender = std::make_unique<DataConnection>(fds[0], std::move(server));
    receiver = std::make_unique<DataConnection>(fds[1], std::move(client));
    const absl::Time deadline = absl::Now() + timeout;
    std::thread receiving([&] { receiver_handshake = receiver->Handshake(deadline); });
    DataConnection::Io io;
    while ((io = sender->StepHandshake()) == DataConnection::Io::kWantRead ||
           io == DataConnection::Io::kWantWrite) {
      if (absl::Now() > deadline) break;
      pollfd p{fds[0], static_cast<short>(io == DataConnection::Io::kWantRead ? POLLIN : POLLOUT),
               0};
      ::poll(&p, 1, 100);
    }
    receiving.join();
    sender_handshake = io;
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) & ~O_NONBLOCK);
  }
  bool ok() const {
    return sender_handshake == DataConnection::Io::kDone && receiver_handshake.ok();
  }

  std::unique_ptr<DataConnection> sender;
  std::unique_ptr<DataConnection> receiver;
  DataConnection::Io sender_handshake = DataConnection::Io::kError;
  absl::Status receiver_handshake;
};

// Lowers the bytes a connection's keys may seal each way while in scope.
struct ScopedKeyLimit {
  explicit ScopedKeyLimit(uint64_t bytes) { DataConnection::SetKeyLimitForTest(bytes); }
  ~ScopedKeyLimit() { DataConnection::SetKeyLimitForTest(uint64_t{1} << 36); }
  ScopedKeyLimit(const ScopedKeyLimit&) = delete;
  ScopedKeyLimit& operator=(const ScopedKeyLimit&) = delete;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_DATA_CONNECTION_PAIR_TEST_UTIL_H_
