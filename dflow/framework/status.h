// Status helpers shared by every layer: absl::Status is the one error system.
#ifndef DFLOW_FRAMEWORK_STATUS_H_
#define DFLOW_FRAMEWORK_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

#define DFLOW_CONCAT_INNER(a, b) a##b
#define DFLOW_CONCAT(a, b) DFLOW_CONCAT_INNER(a, b)

// Returns from the current function when `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    ::absl::Status dflow_status_ = (expr);                      \
    if (!dflow_status_.ok()) return dflow_status_;              \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  DFLOW_ASSIGN_OR_RETURN_IMPL(DFLOW_CONCAT(dflow_statusor_, __LINE__), lhs, expr)
#define DFLOW_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

namespace dflow {

// The one way to add context to an error on its way up. Each keeps a
// non-OK status's code and its payloads (the executor's "derived error" mark
// among them) and returns OK unchanged.
//
//   return WithPrefix(s, "[Worker RunGraph] ");
//   return WithContext(s, absl::StrCat("tensor '", name, "'"));  // "tensor 'x': <message>"

// `s` with its message replaced by `message`.
inline absl::Status WithMessage(const absl::Status& s, std::string_view message) {
  if (s.ok()) return s;
  absl::Status out(s.code(), absl::string_view(message.data(), message.size()));
  s.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

// `prefix` + `s`'s message.
inline absl::Status WithPrefix(const absl::Status& s, std::string_view prefix) {
  if (s.ok()) return s;
  absl::string_view p(prefix.data(), prefix.size());  // Debian's absl is not std.
  return WithMessage(s, absl::StrCat(p, s.message()));
}

// `context` + ": " + `s`'s message.
inline absl::Status WithContext(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  absl::string_view ctx(context.data(), context.size());
  return WithMessage(s, absl::StrCat(ctx, ": ", s.message()));
}

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_STATUS_H_
