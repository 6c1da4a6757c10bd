#pragma once
// The job's directory under /tmp (/tmp/trainrun-RUN-PID): error files,
// the agent's port and token files, the workers' handler sockets, flight
// dumps and, without --log-dir, --redirects logs.
#include <string>

namespace trainrun {

// Removes the directory at the job's end but for what a user may still read
// (flight dumps, logs): files go unless kept, directories when left empty.
void remove_job_directory(const std::string& dir);

}  // namespace trainrun
