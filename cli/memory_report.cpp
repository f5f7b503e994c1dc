// SPDX-License-Identifier: BSD-3-Clause
#include "memory_report.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace remora {
namespace driver {

ResidentMemory resident_memory() {
  ResidentMemory m;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kb) == 1) m.rss = double(kb) * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kb) == 1) m.peak = double(kb) * 1024;
  }
  return m;
}

void MemoryReport::mark(const std::string& stage) {
  if (!on_) return;
  samples_.push_back({stage, resident_memory(), backend(dev_).memory_stats()});
}

namespace {
std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%8.1f", bytes / 1048576.0);
  return buf;
}
}  // namespace

std::string MemoryReport::table() const {
  if (!on_ || samples_.empty()) return "";
  std::ostringstream os;
  os << "memory report (MiB; RSS = resident set of this process, /proc/self/status)\n";
  os << "  stage                                         RSS    added   peak RSS  allocator: reserved     live\n";
  double prev = 0;
  for (const Sample& s : samples_) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-40s %s %s %s            %s %s\n", s.stage.c_str(), mib(s.mem.rss).c_str(),
                  mib(s.mem.rss - prev).c_str(), mib(s.mem.peak).c_str(), mib(double(s.alloc.reserved)).c_str(),
                  mib(double(s.alloc.in_use + s.alloc.small_in_use)).c_str());
    os << line;
    prev = s.mem.rss;
  }
  const Sample& last = samples_.back();
  const MemoryStats& a = last.alloc;
  os << "  exact sizes: parameters" << mib(params_) << ", gradients" << mib(grads_)
     << ", optimizer state" << mib(opt_state_) << "\n";
  os << "  " << dev_.str() << " allocator: peak live" << mib(double(a.peak_live)) << " (blocks >= "
     << a.min_cached / 1024 << " KiB:" << mib(double(a.peak_in_use)) << "), peak reserved"
     << mib(double(a.peak_reserved)) << ", cached now" << mib(double(a.cached)) << " (cap"
     << mib(double(a.cap)) << ")\n";
  os << "  peak RSS" << mib(last.mem.peak) << " = startup" << mib(samples_.front().mem.rss)
     << " + the rest" << mib(last.mem.peak - samples_.front().mem.rss) << "\n";
  return os.str();
}

}  // namespace driver
}  // namespace remora
