#include "tools/dflow/signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>

namespace dflow::cli {

namespace {

int signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(signal_pipe[1], &byte, 1);
}

}  // namespace

absl::StatusOr<int> ShutdownSignalFd() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    if (pipe2(signal_pipe, O_CLOEXEC) != 0) return;
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    ok = sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0;
  });
  if (!ok) return absl::InternalError("cannot install the SIGTERM/SIGINT handlers");
  return signal_pipe[0];
}

int WaitForShutdownSignal(int fd) {
  char sig = 0;
  while (read(fd, &sig, 1) < 0 && errno == EINTR) {
  }
  return sig;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGHUP: return "SIGHUP";
    default: return sigabbrev_np(sig) != nullptr ? sigabbrev_np(sig) : "a signal";
  }
}

}  // namespace dflow::cli
