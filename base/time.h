#pragma once
// Durations and deadlines: every blocking call in trainrun takes a timeout
// and turns it into a deadline once, so that retries and loops never extend
// the caller's budget.
#include <chrono>
#include <cstdint>

namespace trainrun {

using Milliseconds = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Now + timeout, saturating: Milliseconds::max() means "no deadline" instead
// of overflowing into the past.
Deadline deadline_after(Milliseconds timeout);
// Milliseconds until the deadline, rounded up (a poll never returns early), never negative.
int64_t ms_left(Deadline deadline);
// True once the deadline has passed.
inline bool passed(Deadline deadline) { return Clock::now() >= deadline; }

}  // namespace trainrun
