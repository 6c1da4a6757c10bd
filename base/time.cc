#include "base/time.h"

#include <algorithm>

namespace trainrun {

Deadline deadline_after(Milliseconds timeout) {
  const Deadline now = Clock::now();
  if (timeout <= Milliseconds::zero()) return now;
  const auto room = std::chrono::duration_cast<Milliseconds>(Deadline::max() - now);
  return timeout >= room ? Deadline::max() : now + timeout;
}

int64_t ms_left(Deadline deadline) {
  const Deadline now = Clock::now();
  if (deadline <= now) return 0;
  return std::chrono::ceil<Milliseconds>(deadline - now).count();
}

}  // namespace trainrun
