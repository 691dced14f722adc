// Checkpoint save and restore throughput against the machine's own file I/O,
// measured in the same run: a 256 MiB model (16 float tensors of 16 MiB)
// saved with BundleWriter (data file, crc32c, index, fsync, renames) against
// write()+fsync() of the same bytes to one file, and restored with
// BundleReader (pread into the tensors, crc32c checked) against pread() of
// that file. Rounds alternate the four so the VM's drifting speed cancels;
// the counters are medians over rounds.
//
//   build/bench/checkpoint_bench [--benchmark_min_time=...]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "dflow/io/tensor_bundle.h"

namespace dflow {
namespace {

constexpr int kTensors = 16;
constexpr int64_t kFloatsPerTensor = int64_t{4} << 20;  // 16 MiB each, 256 MiB in all.
constexpr int kRounds = 5;

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void RawWrite(const std::string& path, const std::vector<Tensor>& tensors) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (const Tensor& t : tensors) {
    const char* p = static_cast<const char*>(t.raw_data());
    size_t left = t.TotalBytes();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n <= 0) break;
      p += n;
      left -= n;
    }
  }
  ::fsync(fd);
  ::close(fd);
}

void RawRead(const std::string& path, std::vector<Tensor>* into) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  off_t offset = 0;
  for (Tensor& t : *into) {
    char* p = static_cast<char*>(t.raw_data());
    size_t left = t.TotalBytes();
    while (left > 0) {
      const ssize_t n = ::pread(fd, p, left, offset);
      if (n <= 0) break;
      p += n;
      offset += n;
      left -= n;
    }
  }
  ::close(fd);
}

void BM_CheckpointOverRawIo(benchmark::State& state) {
  const std::string dir = std::filesystem::temp_directory_path() / "dflow_checkpoint_bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<Tensor> tensors;
  for (int i = 0; i < kTensors; ++i) {
    Tensor t(DT_FLOAT, TensorShape({kFloatsPerTensor}));
    for (int64_t k = 0; k < kFloatsPerTensor; ++k) t.flat<float>()[k] = float(k % 1000) * 0.5f + i;
    tensors.push_back(t);
  }
  const double bytes = double(kTensors) * kFloatsPerTensor * sizeof(float);
  std::vector<Tensor> scratch;
  for (int i = 0; i < kTensors; ++i) scratch.push_back(Tensor(DT_FLOAT, TensorShape({kFloatsPerTensor})));
  std::vector<double> write_s, save_s, read_s, restore_s;
  for (auto _ : state) {
    for (int round = 0; round < kRounds; ++round) {
      auto start = Clock::now();
      RawWrite(dir + "/raw", tensors);
      write_s.push_back(Seconds(start));

      start = Clock::now();
      auto w = io::BundleWriter::Create(dir + "/model");
      for (int i = 0; i < kTensors; ++i) {
        if (!w.ok() || !(*w)->Add(absl::StrCat("layer", i, "/kernel"), tensors[i]).ok()) {
          state.SkipWithError("save failed");
          return;
        }
      }
      if (!(*w)->Finish().ok()) {
        state.SkipWithError("finish failed");
        return;
      }
      save_s.push_back(Seconds(start));

      start = Clock::now();
      RawRead(dir + "/raw", &scratch);
      read_s.push_back(Seconds(start));

      start = Clock::now();
      auto r = io::BundleReader::Open(dir + "/model");
      for (int i = 0; i < kTensors; ++i) {
        if (!r.ok() || !(*r)->Read(absl::StrCat("layer", i, "/kernel")).ok()) {
          state.SkipWithError("restore failed");
          return;
        }
      }
      restore_s.push_back(Seconds(start));
    }
  }
  const double gb = bytes / 1e9;
  state.counters["raw_write_GBps"] = gb / Median(write_s);
  state.counters["save_GBps"] = gb / Median(save_s);
  state.counters["save_over_raw"] = Median(write_s) / Median(save_s);
  state.counters["raw_read_GBps"] = gb / Median(read_s);
  state.counters["restore_GBps"] = gb / Median(restore_s);
  state.counters["restore_over_raw"] = Median(read_s) / Median(restore_s);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_CheckpointOverRawIo)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace dflow
