#include "launcher/job_directory.h"

#include <ftw.h>
#include <unistd.h>

namespace trainrun {

void remove_job_directory(const std::string& dir) {
  if (dir.empty()) return;
  nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int type, struct FTW*) {
        const std::string p = path;
        const bool kept = p.find("/flight/") != std::string::npos || p.find("/logs/") != std::string::npos;
        if (type == FTW_DP) {
          ::rmdir(path);  // fails, harmlessly, when something kept is inside
        } else if (!kept) {
          ::unlink(path);
        }
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);  // depth first: a directory after what it holds
}

}  // namespace trainrun
