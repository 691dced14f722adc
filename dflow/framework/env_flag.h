// dflow's DFLOW_* switches that are on unless turned off: true unless the
// environment sets `name` to "0" (DFLOW_DATA_PLANE, DFLOW_POOL_SPIN, ...).
#ifndef DFLOW_FRAMEWORK_ENV_FLAG_H_
#define DFLOW_FRAMEWORK_ENV_FLAG_H_

#include <cstdlib>
#include <string_view>

namespace dflow {

inline bool NotOffInEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string_view(v) != "0";
}

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_ENV_FLAG_H_
