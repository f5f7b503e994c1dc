// SPDX-License-Identifier: BSD-3-Clause
// See file_io.h.
#include "file_io.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.h"

namespace remora {

namespace {

std::string kind_of(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "a special file";
}

std::string errno_problem(int err) {
  switch (err) {
    case ENOENT: return "does not exist";
    case EACCES:
    case EPERM: return "permission denied";
    case ENOTDIR: return "does not exist (a part of the path is not a directory)";
    case ELOOP: return "is a symbolic link loop";
    case ENAMETOOLONG: return "the path is too long";
    default: return std::strerror(err);
  }
}

// The problem of a path that stat(2) describes, for a regular file.
std::string not_regular(mode_t m) {
  if (S_ISDIR(m)) return "is a directory, not a file";
  return "is " + kind_of(m) + ", not a regular file";
}

}  // namespace

std::string file_kind(unsigned mode) { return kind_of(mode_t(mode)); }

std::string file_kind(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of(st.st_mode);
}

std::string regular_file_problem(const std::string& path) {
  if (path.empty()) return "is an empty path";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_problem(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  if (::access(path.c_str(), R_OK) != 0) return errno_problem(errno);
  return "";
}

std::string directory_problem(const std::string& path) {
  if (path.empty()) return "is an empty path";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_problem(errno);
  if (!S_ISDIR(st.st_mode)) return "is " + kind_of(st.st_mode) + ", not a directory";
  return "";
}

int open_regular_file(const std::string& path, const std::string& what, uint64_t* size) {
  const std::string ctx = what + " '" + path + "': cannot open: ";
  REMORA_CHECK(!path.empty(), what << ": the path is empty");
  // stat first: a FIFO or device is refused without being opened at all.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Error(ctx + errno_problem(errno));
  if (!S_ISREG(st.st_mode)) throw Error(ctx + not_regular(st.st_mode));
  // O_NONBLOCK: should the path be swapped for a FIFO after the stat, the open
  // still returns at once; the fstat below then refuses it.
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw Error(ctx + errno_problem(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string p = S_ISREG(st.st_mode) ? std::string(std::strerror(errno)) : not_regular(st.st_mode);
    ::close(fd);
    throw Error(ctx + p);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size) *size = uint64_t(st.st_size);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, what, &size);
  const std::string ctx = what + " '" + path + "': ";
  if (size > max_bytes) {
    ::close(fd);
    throw Error(ctx + "is " + human_bytes(double(size)) + " (" + std::to_string(size) + " bytes), more than the " +
                human_bytes(double(max_bytes)) + " a " + what + " can plausibly be; refusing to read it");
  }
  std::string out;
  out.reserve(size_t(size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(ctx + "read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      throw Error(ctx + "grew past the " + human_bytes(double(max_bytes)) + " a " + what +
                  " can plausibly be while it was read; refusing it");
    }
  }
  ::close(fd);
  return out;
}

void for_each_line(const std::string& path, uint64_t max_line_bytes, const std::string& what,
                   const std::function<void(const std::string& line, int64_t number)>& f) {
  const int fd = open_regular_file(path, what);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string line;
  int64_t number = 1;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(what + " '" + path + "': read failed: " + std::strerror(errno));
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        f(line, number++);
        line.clear();
        continue;
      }
      line += buf[i];
      if (line.size() > max_line_bytes)
        throw Error(what + " '" + path + "': line " + std::to_string(number) + " is longer than " +
                    human_bytes(double(max_line_bytes)) + "; refusing it");
    }
  }
  if (!line.empty()) f(line, number);
}

void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& what) {
  const std::string ctx = what + " '" + path + "': ";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw Error(ctx + "is a directory");
  const std::string tmp = path + ".tmp";
  if (::lstat(tmp.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ctx + "cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(ctx + "write failed: " + std::strerror(err));
    }
    done += size_t(w);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ctx + "cannot write it: " + std::strerror(err));
  }
}

int open_append_regular(const std::string& path, const std::string& what) {
  const std::string ctx = what + " '" + path + "': ";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw Error(ctx + not_regular(st.st_mode));
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw Error(ctx + (errno == ENXIO ? std::string("is a FIFO (named pipe), not a regular file")
                                                : errno_problem(errno)));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ctx + not_regular(st.st_mode));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string human_bytes(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", b);
  else std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

namespace {

// The first unsigned number in a small file (a /sys or /proc entry); false
// when the file cannot be read or holds "max".
bool read_u64(const std::string& path, uint64_t* v) {
  std::ifstream f(path);  // only /proc and /sys entries, never user paths
  std::string s;
  if (!(f >> s) || s.empty() || s[0] < '0' || s[0] > '9') return false;
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

// Bytes the cgroup(s) of this process may still use: the tightest (limit -
// usage) over the cgroup and its ancestors, v2 and v1. UINT64_MAX: no limit.
uint64_t cgroup_room() {
  uint64_t room = UINT64_MAX;
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1; the controller list may hold more names)
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1);
    std::string rel = line.substr(b + 1);
    const bool v2 = ctrl.empty();
    bool v1 = false;
    std::stringstream ss(ctrl);
    for (std::string c; std::getline(ss, c, ',');) v1 = v1 || c == "memory";
    if (!v2 && !v1) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string limit_name = v2 ? "memory.max" : "memory.limit_in_bytes";
    const std::string usage_name = v2 ? "memory.current" : "memory.usage_in_bytes";
    // The cgroup's own folder and every ancestor (a container may see only its
    // own root: then the rel path does not exist and the root is read).
    for (;;) {
      const std::string dir = root + (rel == "/" ? "" : rel);
      uint64_t lim = 0, use = 0;
      if (read_u64(dir + "/" + limit_name, &lim) && lim < (uint64_t(1) << 60)) {
        if (!read_u64(dir + "/" + usage_name, &use)) use = 0;
        room = std::min(room, lim > use ? lim - use : 0);
      }
      if (rel.empty() || rel == "/") break;
      const size_t slash = rel.find_last_of('/');
      rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
    }
  }
  return room;
}

// A line "Key: N kB" of /proc/self/status or /proc/meminfo, in bytes.
bool proc_kb(const std::string& file, const std::string& key, uint64_t* bytes) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str() + key.size() + 1, "%llu", &kb) != 1) return false;
    *bytes = uint64_t(kb) * 1024;
    return true;
  }
  return false;
}

}  // namespace

uint64_t available_memory(std::string* source) {
  uint64_t best = UINT64_MAX;
  std::string who;
  auto consider = [&](uint64_t v, const char* name) {
    if (v < best) {
      best = v;
      who = name;
    }
  };
  uint64_t v = 0;
  if (proc_kb("/proc/meminfo", "MemAvailable", &v)) consider(v, "MemAvailable in /proc/meminfo");
  consider(cgroup_room(), "the cgroup memory limit");
  struct rlimit rl;
  uint64_t vm = 0, data = 0;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    proc_kb("/proc/self/status", "VmSize", &vm);
    consider(uint64_t(rl.rlim_cur) > vm ? uint64_t(rl.rlim_cur) - vm : 0, "RLIMIT_AS (ulimit -v)");
  }
  if (::getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    proc_kb("/proc/self/status", "VmData", &data);
    consider(uint64_t(rl.rlim_cur) > data ? uint64_t(rl.rlim_cur) - data : 0, "RLIMIT_DATA (ulimit -d)");
  }
  if (source) *source = who;
  return best;
}

}  // namespace remora
