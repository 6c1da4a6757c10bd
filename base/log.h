#pragma once
// Log lines from trainrun's own threads (store server, launcher, process
// groups): "trainrun <who>: <line>" on stderr, written with one write() so
// that lines from several threads or ranks never interleave mid-line.
#include <functional>
#include <string>
#include <string_view>

namespace trainrun {

void log_line(std::string_view who, std::string_view line);

// How log_line formats a line (default: "trainrun <who>: <line>"); the
// launcher's --log-format json installs one that writes a JSON object. An
// empty function restores the default. Set it before other threads log.
using LogLineFormat = std::function<std::string(std::string_view who, std::string_view line)>;
void set_log_line_format(LogLineFormat format);

}  // namespace trainrun
