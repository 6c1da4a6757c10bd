#pragma once
// The worker side of the launcher agent's DumpStacks and GetFlightRecord for
// programs without Python (a C++ training program linking c10d): under
// `trainrun --agent-port`, init_process_group starts a daemon thread that
// listens on $TRAINRUN_STACKS_DIR/rank<RANK>.sock and answers one request
// line per connection, as the trainrun Python package's handler does
// (python/trainrun/_stack_handler.py, which binds the socket first in Python
// workers, at import):
//   stacks  every thread's native stack, innermost call first
//   flight  this process's flight record (c10d/flight_recorder.h)
#include <string>

namespace trainrun {
namespace c10d {

// Starts the handler once per process, when TRAINRUN_STACKS_DIR and RANK are
// set and no live handler answers at the socket's path. Never throws.
void start_worker_handler();

// Every thread's native stack ("Thread 1234 "name":" then "#0 function+0x1f
// (binary)" lines), taken by signalling each thread in turn
// (SIGRTMIN+7, whose handler only records the return addresses; system calls
// the signal interrupts are restarted). Names come from the dynamic symbol
// table: link with -rdynamic to see a program's own functions.
std::string native_stacks();

}  // namespace c10d
}  // namespace trainrun
