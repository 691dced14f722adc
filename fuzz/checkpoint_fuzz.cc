// Fuzzes the checkpoint reader (io/tensor_bundle.h, its table format and
// crc32c): an input is [u16 little-endian index length][PREFIX.index bytes]
// [PREFIX.data-00000-of-00001 bytes], written to a private temporary
// directory; BundleReader::Open, then every tensor (at most 16) is read whole
// and its first slice entry read by slice. Seeds: TensorFlow-written
// checkpoints from tests/data (DFLOW_TEST_DATA_DIR, default tests/data) and
// one written by BundleWriter.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dflow/io/tensor_bundle.h"
#include "dflow/io/tensor_slice.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

std::string dir;  // A private temporary directory (in /dev/shm when there is one).

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Pack(const std::string& index, const std::string& data) {
  std::string out(2, '\0');
  out[0] = static_cast<char>(index.size() & 0xff);
  out[1] = static_cast<char>((index.size() >> 8) & 0xff);
  return out + index + data;
}

void MakeDir() {
  std::string tmpl = (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  tmpl += "/dflow_ckpt_fuzz_XXXXXX";
  if (!::mkdtemp(tmpl.data())) std::abort();
  dir = tmpl;
}

}  // namespace

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  const char* env = std::getenv("DFLOW_TEST_DATA_DIR");
  const std::string data_dir = env ? env : "tests/data";
  for (const char* name : {"basic", "partitioned"}) {
    std::string prefix = data_dir + "/checkpoints/" + name + "/model";
    seeds.push_back(Pack(ReadAll(prefix + ".index"), ReadAll(prefix + ".data-00000-of-00001")));
  }
  MakeDir();
  const std::string prefix = dir + "/seed";
  auto w = io::BundleWriter::Create(prefix);
  if (!w.ok()) std::abort();
  (void)(*w)->Add("f", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  (void)(*w)->Add("s", Tensor::Vec<std::string>({"ab", "", "cde"}));
  (void)(*w)->Add("i", Tensor::Scalar<int64_t>(42));
  auto slice = io::TensorSlice::Parse("0,1:-");
  if (slice.ok()) {
    (void)(*w)->AddSlice("p", TensorShape({2, 2}), *slice, Tensor::FromVector<float>({5, 6}, TensorShape({1, 2})));
  }
  if (!(*w)->Finish().ok()) std::abort();
  seeds.push_back(Pack(ReadAll(prefix + ".index"), ReadAll(prefix + ".data-00000-of-00001")));
  return seeds;
}

}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dflow::fuzz::InitCommon();
  dflow::fuzz::MakeDir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  if (size < 2 || size > fuzz::kMaxInputBytes) return -1;
  size_t index_len = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  const std::string prefix = fuzz::dir + "/in";
  std::ofstream(prefix + ".index", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 2), index_len);
  std::ofstream(prefix + ".data-00000-of-00001", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 2 + index_len), size - 2 - index_len);
  auto reader = io::BundleReader::Open(prefix);
  if (!reader.ok()) return 0;
  int n = 0;
  for (const auto& [key, entry] : (*reader)->Tensors()) {
    if (++n > 16) break;
    (void)(*reader)->Read(key);
    if (entry.slices_size() > 0) {
      auto slice = io::TensorSlice::FromProto(entry.slices(0));
      if (slice.ok()) (void)(*reader)->ReadSlice(key, *slice);
    }
  }
  return 0;
}
