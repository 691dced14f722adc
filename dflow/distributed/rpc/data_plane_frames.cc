#include "dflow/distributed/rpc/data_plane_frames.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "dflow/distributed/rpc/wire_format.h"
#include "dflow/framework/env_flag.h"
#include "google/protobuf/any.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

bool DataPlaneEnabledByEnv() { return NotOffInEnv("DFLOW_DATA_PLANE"); }

bool LocalDataPlaneEnabledByEnv() { return NotOffInEnv("DFLOW_DATA_PLANE_LOCAL"); }

bool SharedDataPlaneEnabledByEnv() { return NotOffInEnv("DFLOW_DATA_PLANE_SHARED"); }

namespace data_plane {

namespace {
constexpr int kSocketBufferBytes = 4 << 20;
}  // namespace

// A whole MiB-sized tensor fits in the socket buffers, so the sender writes it
// without waiting for the receiver's window (rpc_bench, 1 MiB: ~0.8 -> ~0.95
// of raw TCP). Only where the kernel allows 4 MiB (net.core.[rw]mem_max): a smaller
// fixed size would be worse than the kernel's autotuning.
void SetBufferSize(int fd, int option) {
  static const bool allowed = [] {
    for (const char* path : {"/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max"}) {
      FILE* f = std::fopen(path, "r");
      long max = 0;
      if (f == nullptr) return false;
      const bool read = std::fscanf(f, "%ld", &max) == 1;
      std::fclose(f);
      if (!read || max < kSocketBufferBytes) return false;
    }
    return true;
  }();
  if (!allowed) return;
  const int bytes = kSocketBufferBytes;
  setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes));
}

socklen_t LocalAddress(const std::string& name, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  if (name.empty() || name.size() >= sizeof(addr->sun_path)) return 0;
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Both ends: no Nagle delay, and TCP keepalive so a connection to a host that
// vanished without closing it (a parked call has no deadline) fails within
// about a minute.
void ConfigureSocket(int fd) {
  int one = 1, idle = 30, interval = 10, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace data_plane

// --- Negotiation helpers ----------------------------------------------------------------

namespace {

using wire::PutVarint;

// Reads protobuf fields across gRPC's slices.
class FieldReader {
 public:
  explicit FieldReader(std::vector<grpc::Slice> slices) : slices_(std::move(slices)) {}
  bool Byte(uint8_t* b) {
    while (i_ < slices_.size() && off_ >= slices_[i_].size()) ++i_, off_ = 0;
    if (i_ >= slices_.size()) return false;
    *b = slices_[i_].begin()[off_++];
    return true;
  }
  bool Varint(uint64_t* v) {
    return wire::ReadVarint([this](uint8_t* b) { return Byte(b); }, v);
  }
  // Skips n bytes, or copies them to `out` when given.
  bool Take(uint64_t n, std::string* out) {
    while (n > 0) {
      while (i_ < slices_.size() && off_ >= slices_[i_].size()) ++i_, off_ = 0;
      if (i_ >= slices_.size()) return false;
      const uint64_t k = std::min<uint64_t>(n, slices_[i_].size() - off_);
      if (out != nullptr) {
        out->append(reinterpret_cast<const char*>(slices_[i_].begin()) + off_, k);
      }
      off_ += k;
      n -= k;
    }
    return true;
  }

 private:
  std::vector<grpc::Slice> slices_;
  size_t i_ = 0;
  size_t off_ = 0;
};

}  // namespace

std::string EncodeDataPlaneOffer(const DataPlanePort& offer) {
  google::protobuf::Any any;
  any.set_type_url(kDataPlanePortTypeUrl);
  any.set_value(offer.SerializeAsString());
  std::string field;  // RecvTensorResponse.transport_options = 4
  field.push_back(0x22);
  PutVarint(any.ByteSizeLong(), &field);
  return field + any.SerializeAsString();
}

void AppendDataPlaneOffer(const std::string& encoded_offer, grpc::ByteBuffer* response) {
  std::vector<grpc::Slice> slices;
  if (response->Length() > 0 && !response->Dump(&slices).ok()) return;
  slices.emplace_back(encoded_offer);
  *response = grpc::ByteBuffer(slices.data(), slices.size());
}

namespace {

// A local name the client may connect to: short, printable, no NUL.
bool ValidLocalName(const std::string& name) {
  return name.size() < sizeof(sockaddr_un::sun_path) - 1 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

DataPlanePort FindDataPlaneOffer(const grpc::ByteBuffer& response) {
  DataPlanePort none;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return none;
  FieldReader r(std::move(slices));
  DataPlanePort found;
  uint64_t tag = 0, v = 0;
  // Scans the response's top-level fields without parsing the tensor.
  while (r.Varint(&tag)) {
    switch (tag & 7) {
      case 0:
        if (!r.Varint(&v)) return none;
        break;
      case 1:
        if (!r.Take(8, nullptr)) return none;
        break;
      case 5:
        if (!r.Take(4, nullptr)) return none;
        break;
      case 2: {
        if (!r.Varint(&v)) return none;
        if ((tag >> 3) != 4) {
          if (!r.Take(v, nullptr)) return none;
          break;
        }
        std::string bytes;
        if (v > 4096 || !r.Take(v, &bytes)) return none;
        google::protobuf::Any any;
        DataPlanePort offer;
        if (any.ParseFromString(bytes) && any.type_url() == kDataPlanePortTypeUrl &&
            offer.ParseFromString(any.value()) && offer.port() > 0 && offer.port() <= 65535 &&
            ValidLocalName(offer.local_name())) {
          found = std::move(offer);
        }
        break;
      }
      default:
        return none;
    }
  }
  return found;
}

std::string HostOfGrpcPeer(const std::string& peer) {
  std::string rest;
  if (peer.rfind("ipv4:", 0) == 0) {
    rest = peer.substr(5);
  } else if (peer.rfind("ipv6:", 0) == 0) {
    rest = peer.substr(5);
  } else {
    return "";
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // gRPC may percent-encode the IPv6 brackets: "%5B::1%5D".
  if (host.rfind("%5B", 0) == 0 && host.size() >= 6 && host.substr(host.size() - 3) == "%5D") {
    host = host.substr(3, host.size() - 6);
  }
  return host;
}

}  // namespace dflow
