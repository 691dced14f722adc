#include "dflow/train/stall_watch.h"

#include <ostream>
#include <set>
#include <streambuf>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A stream the watch writes to (on its thread) while the test reads it: the buffer takes a
// lock for every write and for the read, as std::stringstream alone does not (ThreadSanitizer
// reported the watch's write racing with Text()).
class Log {
 public:
  std::ostream* stream() { return &out_; }
  // Waits up to `timeout` for a line, then returns everything written.
  std::string WaitForLine(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      if (Text().find('\n') != std::string::npos) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return Text();
  }
  std::string Text() { return buf_.Text(); }

 private:
  // No put area: every write reaches xsputn or overflow, under the lock.
  class LockedBuf : public std::streambuf {
   public:
    std::string Text() {
      absl::MutexLock l(&mu_);
      return text_;
    }

   protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      absl::MutexLock l(&mu_);
      text_.append(s, static_cast<size_t>(n));
      return n;
    }
    int_type overflow(int_type c) override {
      if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
      absl::MutexLock l(&mu_);
      text_.push_back(traits_type::to_char_type(c));
      return c;
    }

   private:
    absl::Mutex mu_;
    std::string text_;
  };
  LockedBuf buf_;
  std::ostream out_{&buf_};
};

const std::vector<StallWatch::Task> kTasks = {
    {"/job:ps/replica:0/task:0", "127.0.0.1:1000"},
    {"/job:worker/replica:0/task:1", "127.0.0.1:1001"},
};

TEST(StallWatch, NamesTheTaskThatDoesNotAnswer) {
  Log log;
  absl::Mutex mu;
  std::vector<std::string> asked;
  StallWatch watch({.after = absl::Milliseconds(50),
                    .tasks = kTasks,
                    .ping = [&](const std::string& task, absl::Duration timeout) {
                      absl::MutexLock l(&mu);
                      asked.push_back(task);
                      return task == kTasks[1].name
                                 ? absl::DeadlineExceededError("no reply in 1 s")
                                 : absl::OkStatus();
                    },
                    .log = log.stream()});
  watch.Stepped(212);
  const std::string text = log.WaitForLine(absl::Seconds(10));
  EXPECT_THAT(text, HasSubstr("since global step 212: waiting for "
                              "/job:worker/replica:0/task:1 at 127.0.0.1:1001, which does not "
                              "answer (DEADLINE_EXCEEDED: no reply in 1 s)"));
  EXPECT_THAT(text, Not(HasSubstr("/job:ps")));
  // Both tasks were asked; a loaded machine may let a second report's round
  // start (after 100 ms more) before the watch is stopped.
  absl::MutexLock l(&mu);
  EXPECT_THAT(std::set<std::string>(asked.begin(), asked.end()),
              ::testing::UnorderedElementsAre(kTasks[0].name, kTasks[1].name));
}

TEST(StallWatch, SaysWhenEveryTaskAnswers) {
  EXPECT_EQ(StallWatch::Describe(absl::Seconds(12), 7, kTasks,
                                 {absl::OkStatus(), absl::OkStatus()}),
            "[train] no step for 12.0 s since global step 7; every task answers (2 asked): the "
            "step waits for a slow task, e.g. a sync step for a straggler's gradients");
  EXPECT_EQ(StallWatch::Describe(absl::Seconds(3), 7, kTasks, {}),
            "[train] no step for 3.0 s since global step 7");
}

TEST(StallWatch, StepsKeepItQuietAndItReportsLessOftenAsTheStallLasts) {
  Log log;
  StallWatch watch({.after = absl::Milliseconds(500), .tasks = kTasks, .log = log.stream()});
  for (int i = 0; i < 20; ++i) {  // Stepping every 50 ms for 1 s: never a stall.
    watch.Stepped(i);
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(log.Text(), "");
  // A stall of 2.6 s: reports at 0.5, 1 and 2 s (each wait twice the last).
  absl::SleepFor(absl::Milliseconds(2600));
  const std::string text = log.Text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  EXPECT_THAT(text, HasSubstr("since global step 19"));
}

TEST(StallWatch, NeverReportsWhenOff) {
  Log log;
  StallWatch watch({.after = absl::ZeroDuration(), .tasks = kTasks, .log = log.stream()});
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(log.Text(), "");
}

}  // namespace
}  // namespace dflow
