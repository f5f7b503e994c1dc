// SPDX-License-Identifier: BSD-3-Clause
#include "run_dir.h"

#include <algorithm>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../core/file_io.h"
#include "trainer.h"

namespace remora {
namespace train {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::string kind_of(mode_t m) { return file_kind(unsigned(m)); }

// mkdir -p, then a write probe: an unusable directory is refused before any work.
void make_dirs(const std::string& dir, const std::string& name) {
  std::string cur = dir[0] == '/' ? "/" : "";
  size_t i = 0;
  while (i <= dir.size()) {
    const size_t j = dir.find('/', i);
    const std::string part = dir.substr(i, j == std::string::npos ? std::string::npos : j - i);
    i = j == std::string::npos ? dir.size() + 1 : j + 1;
    if (part.empty()) continue;
    cur += part + "/";
    if (!is_dir(cur) && ::mkdir(cur.c_str(), 0755) != 0 && !is_dir(cur))
      throw SetupError(name + " " + dir + ": cannot create directory " + cur + ": " + std::strerror(errno));
  }
}

// The run's own files: refused when something other than a regular file sits there.
void check_run_files(const std::string& dir, const std::string& name_) {
  for (const char* name : {"last.safetensors", "best.safetensors", "metrics.jsonl", "config.json"}) {
    struct stat st;
    const std::string p = dir + "/" + name;
    if (::lstat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      throw SetupError(name_ + " " + dir + ": " + name + " is " + kind_of(st.st_mode) +
                       ", not a regular file; remove it or choose another directory");
  }
}

// The lock holder's pid as written in the lock file ("" when unreadable).
std::string holder_pid(int fd) {
  char buf[32] = {0};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s = n > 0 ? std::string(buf, size_t(n)) : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

int clean_stale_tmp(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  std::vector<std::string> stale;
  const std::string suffix = ".safetensors.tmp";
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if ((name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) ||
        name == "metrics.jsonl.tmp" || name == "config.json.tmp")
      stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& p : stale) {
    if (::unlink(p.c_str()) == 0) {
      std::fprintf(stderr, "removed %s (an unfinished write left by an interrupted run)\n", p.c_str());
      ++removed;
    } else {
      std::fprintf(stderr, "warning: cannot remove %s (an unfinished write left by an interrupted run; "
                           "it is ignored): %s\n", p.c_str(), std::strerror(errno));
    }
  }
  return removed;
}

// Opens `path` (open(2) flags) refusing anything but a regular file without
// blocking; -1 with errno set when open itself fails.
static int open_regular(const std::string& path, int flags, int mode = 0644) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t m = st.st_mode;
    ::close(fd);
    throw Error(path + " is " + kind_of(m) + ", not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

bool RunDirectory::has_checkpoint(const std::string& dir) { return exists(dir + "/last.safetensors"); }

std::vector<std::string> RunDirectory::kept_best_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const std::string prefix = "best-step", suffix = ".safetensors";
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<RunDirectory> RunDirectory::open(const std::string& dir, const RunDirectoryOptions& o) {
  if (dir.empty()) throw SetupError(o.name + " is empty: name a directory for the checkpoints");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw SetupError(o.name + " " + dir + " is " + kind_of(st.st_mode) + ", not a directory");
  make_dirs(dir, o.name);
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) && std::string(real) == "/")
    throw SetupError(o.name + " " + dir + " is the root directory: name a directory of its own for the run");
  // The lock first: nothing below may touch a directory another training is using.
  const std::string lock = dir + "/.lock";
  int fd = -1;
  try {
    fd = open_regular(lock, O_RDWR | O_CREAT | O_NOFOLLOW);
  } catch (const Error& e) {
    throw SetupError(o.name + " " + dir + ": " + e.what());
  }
  if (fd < 0) {
    const int err = errno;
    throw SetupError(o.name + " " + dir + " is not writable: cannot create " + lock + ": " + std::strerror(err));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = holder_pid(fd);
    ::close(fd);
    throw SetupError(o.name + " " + dir + " is in use by another training" +
                     (pid.empty() ? std::string() : " (pid " + pid + ")") +
                     "; wait for it to finish or choose another directory");
  }
  std::unique_ptr<RunDirectory> rd(new RunDirectory(dir, fd));
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw SetupError(o.name + " " + dir + " is not writable: " + std::strerror(errno));
  check_run_files(dir, o.name);
  // A run file that is one of the run's inputs (a config named config.json in
  // the directory, data named metrics.jsonl) is the user's: never replaced.
  // Resuming from the run's own config.json (the resolved config it wrote) is
  // the one exception: that file is the run's record, rewritten as resumed.
  for (const char* name : {"last.safetensors", "best.safetensors", "metrics.jsonl", "config.json"}) {
    if (o.resume && std::strcmp(name, "config.json") == 0) continue;
    struct stat rs, is;
    if (::stat(rd->file(name).c_str(), &rs) != 0) continue;
    for (const std::string& in : o.inputs)
      if (::stat(in.c_str(), &is) == 0 && is.st_dev == rs.st_dev && is.st_ino == rs.st_ino)
        throw SetupError(o.name + " " + dir + ": " + name + " is " + in +
                         ", an input of this run, which the run would replace; choose another directory");
  }
  clean_stale_tmp(dir);
  const bool has_last = exists(rd->file("last.safetensors"));
  if (o.resume) {
    if (!has_last) throw SetupError(o.resume_flag + ": no checkpoint at " + rd->file("last.safetensors"));
    return rd;
  }
  const bool earlier = has_last || exists(rd->file("best.safetensors")) || exists(rd->file("metrics.jsonl"));
  if (earlier && !o.overwrite)
    throw SetupError(o.name + " " + dir + " already holds a training run (" +
                     (has_last ? "last.safetensors" : exists(rd->file("best.safetensors")) ? "best.safetensors"
                                                                                           : "metrics.jsonl") +
                     "): continue it with " + o.resume_flag + ", replace it with " + o.overwrite_flag +
                     ", or choose another directory");
  std::vector<std::string> files = kept_best_files(dir);
  for (const char* name : {"last.safetensors", "best.safetensors", "metrics.jsonl", "config.json"})
    files.push_back(rd->file(name));
  for (const std::string& f : files)
    if (::unlink(f.c_str()) != 0 && errno != ENOENT)
      throw SetupError(o.name + " " + dir + ": cannot remove the earlier run's " + f.substr(f.rfind('/') + 1) +
                       ": " + std::strerror(errno));
  return rd;
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

}  // namespace train
}  // namespace remora
