// SIGTERM and SIGINT for the long-running commands (server, train, cluster).
// A signal may land on any thread (OpenBLAS starts its threads when the
// library loads, before main), so the handler only writes the signal number
// to a pipe; the command reads it where it is ready to shut down.
#ifndef DFLOW_TOOLS_DFLOW_SIGNALS_H_
#define DFLOW_TOOLS_DFLOW_SIGNALS_H_

#include "absl/status/statusor.h"

namespace dflow::cli {

// Installs the handlers (once) and returns the pipe's read end.
absl::StatusOr<int> ShutdownSignalFd();
// Blocks until a signal arrives; returns it (SIGTERM or SIGINT).
int WaitForShutdownSignal(int fd);
// "SIGTERM" or "SIGINT".
const char* SignalName(int sig);

}  // namespace dflow::cli

#endif  // DFLOW_TOOLS_DFLOW_SIGNALS_H_
