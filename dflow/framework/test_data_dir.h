// Where tests find the reference data of tests/data: $DFLOW_TEST_DATA_DIR
// when set (CTest sets it), else tests/data beside the build directory that
// holds the test binary (build/ inside the checkout). The path is read at
// run time, not compiled in, so no object depends on where the checkout
// lives and ccache shares objects between clones.
#ifndef DFLOW_FRAMEWORK_TEST_DATA_DIR_H_
#define DFLOW_FRAMEWORK_TEST_DATA_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace dflow {

inline std::string TestDataDir() {
  const char* env = std::getenv("DFLOW_TEST_DATA_DIR");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / ".." / "tests" / "data").lexically_normal().string();
}

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_TEST_DATA_DIR_H_
