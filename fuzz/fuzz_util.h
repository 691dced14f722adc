// Shared pieces of the libFuzzer targets in fuzz/ (built with DFLOW_FUZZ).
//
// Every target bounds what one input may cost: inputs over kMaxInputBytes are
// ignored (scripts/fuzz.sh also passes -max_len), every tensor built from an
// input obeys a small TensorByteLimit (the limit the servers enforce), and every
// call carries a short deadline. Each target lists its seeds in Seeds(); with
// DFLOW_FUZZ_WRITE_SEEDS=DIR set, LLVMFuzzerInitialize writes them to DIR and exits
// (scripts/fuzz.sh seeds regenerates fuzz/corpus/ this way).
#ifndef DFLOW_FUZZ_FUZZ_UTIL_H_
#define DFLOW_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dflow/framework/tensor.h"
#include "google/protobuf/stubs/logging.h"

namespace dflow::fuzz {

inline constexpr size_t kMaxInputBytes = 64 << 10;
// Tensors an input may make: enough for real graphs' constants, far below
// libFuzzer's -rss_limit_mb.
inline constexpr uint64_t kTensorBytes = 16 << 20;

// The target's seed inputs (defined by each target).
std::vector<std::string> Seeds();

// Reads an input as a sequence of calls: [u8 method][u16 little-endian length][bytes]...
class CallReader {
 public:
  CallReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  // False at the end (or a truncated call).
  bool Next(int* method, std::string* bytes) {
    if (end_ - p_ < 3) return false;
    *method = p_[0];
    size_t n = p_[1] | (size_t{p_[2]} << 8);
    p_ += 3;
    if (static_cast<size_t>(end_ - p_) < n) n = end_ - p_;
    bytes->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// One call of a CallReader input.
inline std::string Call(int method, const std::string& bytes) {
  std::string out(3, '\0');
  out[0] = static_cast<char>(method);
  out[1] = static_cast<char>(bytes.size() & 0xff);
  out[2] = static_cast<char>((bytes.size() >> 8) & 0xff);
  return out + bytes;
}

inline void InitCommon() {
  SetTensorByteLimit(kTensorBytes);
  // Inputs are malformed on purpose: protobuf's parse warnings would be noise.
  google::protobuf::SetLogHandler(nullptr);
  if (const char* dir = std::getenv("DFLOW_FUZZ_WRITE_SEEDS")) {
    int i = 0;
    for (const std::string& seed : Seeds()) {
      char name[32];
      std::snprintf(name, sizeof(name), "/seed-%03d", i++);
      std::ofstream(std::string(dir) + name, std::ios::binary) << seed;
    }
    std::exit(0);
  }
}

}  // namespace dflow::fuzz

#endif  // DFLOW_FUZZ_FUZZ_UTIL_H_
