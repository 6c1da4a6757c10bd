#pragma once
// Log lines from trainrun's own threads (store server, launcher, process
// groups): "trainrun <who>: <line>" on stderr, written with one write() so
// that lines from several threads or ranks never interleave mid-line.
#include <string_view>

namespace trainrun {

void log_line(std::string_view who, std::string_view line);

}  // namespace trainrun
