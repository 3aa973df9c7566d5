#include "config/job.h"

namespace sc::config {

SourceLoc TrainingJob::loc(const std::string& field) const {
  auto it = where.find(field);
  return it != where.end() ? it->second : file;
}

}  // namespace sc::config
