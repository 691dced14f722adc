// Ops TensorFlow 1.x's feature columns build (wide & deep's categorical and
// bucketized columns):
//
//   StringToHashBucketFast(input)   Fingerprint64(s) % num_buckets per string,
//       Fingerprint64 being FarmHash's 64-bit fingerprint (farmhashna), so the
//       buckets equal TensorFlow's
//   Bucketize(input)   the index of the first boundary greater than each value
//       (len(boundaries) when none is; NaN goes last)
//
// OpDefs and error texts follow TensorFlow's.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

// --- Fingerprint64 (FarmHash's farmhashna::Hash64) ------------------------------

constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL;
constexpr uint64_t k1 = 0xb492b66fbe98f273ULL;
constexpr uint64_t k2 = 0x9ae16a3b2f90404fULL;

uint64_t Fetch64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // Little-endian hosts only, as dflow's wire format.
  return v;
}
uint32_t Fetch32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint64_t Rotate(uint64_t v, int shift) {
  return shift == 0 ? v : (v >> shift) | (v << (64 - shift));
}
uint64_t ShiftMix(uint64_t v) { return v ^ (v >> 47); }

uint64_t HashLen16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

uint64_t HashLen0to16(const char* s, size_t len) {
  if (len >= 8) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = Fetch64(s) + k2;
    const uint64_t b = Fetch64(s + len - 8);
    const uint64_t c = Rotate(b, 37) * mul + a;
    const uint64_t d = (Rotate(a, 25) + b) * mul;
    return HashLen16(c, d, mul);
  }
  if (len >= 4) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = Fetch32(s);
    return HashLen16(len + (a << 3), Fetch32(s + len - 4), mul);
  }
  if (len > 0) {
    const uint8_t a = static_cast<uint8_t>(s[0]);
    const uint8_t b = static_cast<uint8_t>(s[len >> 1]);
    const uint8_t c = static_cast<uint8_t>(s[len - 1]);
    const uint32_t y = static_cast<uint32_t>(a) + (static_cast<uint32_t>(b) << 8);
    const uint32_t z = static_cast<uint32_t>(len) + (static_cast<uint32_t>(c) << 2);
    return ShiftMix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

uint64_t HashLen17to32(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = Fetch64(s) * k1;
  const uint64_t b = Fetch64(s + 8);
  const uint64_t c = Fetch64(s + len - 8) * mul;
  const uint64_t d = Fetch64(s + len - 16) * k2;
  return HashLen16(Rotate(a + b, 43) + Rotate(c, 30) + d, a + Rotate(b + k2, 18) + c, mul);
}

uint64_t HashLen33to64(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = Fetch64(s) * k2;
  const uint64_t b = Fetch64(s + 8);
  const uint64_t c = Fetch64(s + len - 8) * mul;
  const uint64_t d = Fetch64(s + len - 16) * k2;
  const uint64_t y = Rotate(a + b, 43) + Rotate(c, 30) + d;
  const uint64_t z = HashLen16(y, a + Rotate(b + k2, 18) + c, mul);
  const uint64_t e = Fetch64(s + 16) * mul;
  const uint64_t f = Fetch64(s + 24);
  const uint64_t g = (y + Fetch64(s + len - 32)) * mul;
  const uint64_t h = (z + Fetch64(s + len - 24)) * mul;
  return HashLen16(Rotate(e + f, 43) + Rotate(g, 30) + h, e + Rotate(f + a, 18) + g, mul);
}

// 16 bytes of state from 32 bytes of input and two seeds.
std::pair<uint64_t, uint64_t> WeakHashLen32WithSeeds(const char* s, uint64_t a, uint64_t b) {
  const uint64_t w = Fetch64(s), x = Fetch64(s + 8), y = Fetch64(s + 16), z = Fetch64(s + 24);
  a += w;
  b = Rotate(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += Rotate(a, 44);
  return {a + z, b + c};
}

uint64_t Fingerprint64(const char* s, size_t len) {
  if (len <= 16) return HashLen0to16(s, len);
  if (len <= 32) return HashLen17to32(s, len);
  if (len <= 64) return HashLen33to64(s, len);
  // 64 bytes at a time, then the last 64 (overlapping) bytes.
  constexpr uint64_t seed = 81;
  uint64_t x = seed;
  uint64_t y = seed * k1 + 113;
  uint64_t z = ShiftMix(y * k2 + 113) * k2;
  std::pair<uint64_t, uint64_t> v = {0, 0}, w = {0, 0};
  x = x * k2 + Fetch64(s);
  const char* end = s + ((len - 1) / 64) * 64;
  const char* last64 = end + ((len - 1) & 63) - 63;
  do {
    x = Rotate(x + y + v.first + Fetch64(s + 8), 37) * k1;
    y = Rotate(y + v.second + Fetch64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + Fetch64(s + 40);
    z = Rotate(z + w.first, 33) * k1;
    v = WeakHashLen32WithSeeds(s, v.second * k1, x + w.first);
    w = WeakHashLen32WithSeeds(s + 32, z + w.second, y + Fetch64(s + 16));
    std::swap(z, x);
    s += 64;
  } while (s != end);
  const uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += ((len - 1) & 63);
  v.first += w.first;
  w.first += v.first;
  x = Rotate(x + y + v.first + Fetch64(s + 8), 37) * mul;
  y = Rotate(y + v.second + Fetch64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + Fetch64(s + 40);
  z = Rotate(z + w.first, 33) * mul;
  v = WeakHashLen32WithSeeds(s, v.second * mul, x + w.first);
  w = WeakHashLen32WithSeeds(s + 32, z + w.second, y + Fetch64(s + 16));
  std::swap(z, x);
  return HashLen16(HashLen16(v.first, w.first, mul) + ShiftMix(y) * k0 + z,
                   HashLen16(v.second, w.second, mul) + x, mul);
}

// --- StringToHashBucketFast --------------------------------------------------------

class StringToHashBucketFastOp : public OpKernel {
 public:
  explicit StringToHashBucketFastOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("num_buckets", &num_buckets_).IgnoreError();
    if (num_buckets_ < 1) {  // The OpDef's minimum; checked again before dividing by it.
      c->SetStatus(absl::InvalidArgumentError("StringToHashBucketFast: num_buckets must be >= 1"));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, input.shape());
    auto in = input.flat<std::string>();
    auto o = out->flat<int64_t>();
    const uint64_t buckets = static_cast<uint64_t>(num_buckets_);
    for (int64_t i = 0; i < in.size(); ++i) {
      o[i] = static_cast<int64_t>(Fingerprint64(in[i].data(), in[i].size()) % buckets);
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_buckets_ = 1;
};

REGISTER_OP("StringToHashBucketFast")
    .Input("input: string")
    .Output("output: int64")
    .Attr("num_buckets: int >= 1")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("StringToHashBucketFast").Device(kDeviceCPU),
                StringToHashBucketFastOp);

// --- Bucketize ---------------------------------------------------------------------

template <typename T>
class BucketizeOp : public OpKernel {
 public:
  explicit BucketizeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("boundaries", &boundaries_).IgnoreError();
    if (!std::is_sorted(boundaries_.begin(), boundaries_.end())) {
      c->SetStatus(absl::InvalidArgumentError("Bucketize: Expected sorted boundaries"));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, input.shape());
    auto in = input.flat<T>();
    auto o = out->flat<int32_t>();
    for (int64_t i = 0; i < in.size(); ++i) {  // Compared as C++ compares T with float.
      o[i] = static_cast<int32_t>(std::upper_bound(boundaries_.begin(), boundaries_.end(), in[i]) -
                                  boundaries_.begin());
    }
    return absl::OkStatus();
  }

 private:
  std::vector<float> boundaries_;
};

REGISTER_OP("Bucketize")
    .Input("input: T")
    .Output("output: int32")
    .Attr("T: {int32, int64, float, double}")
    .Attr("boundaries: list(float)")
    .SetShapeFn(UnchangedShape);
const CpuKernels<BucketizeOp, int32_t, int64_t, float, double> bucketize_kernels("Bucketize");

REGISTER_NO_GRADIENT("StringToHashBucketFast");
REGISTER_NO_GRADIENT("Bucketize");

}  // namespace
}  // namespace dflow
