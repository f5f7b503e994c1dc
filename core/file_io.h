// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Reading files that people hand to Remora, safely: no read blocks forever on a
/// FIFO, a terminal or a device, no read runs out of memory on an endless or
/// oversized input, and every refusal says what the path is ("does not exist",
/// "is a directory", "is a FIFO (named pipe)", "permission denied").
///
/// \code
///   std::string text = read_regular_file(path, 16 << 20, "config");
///   int fd = open_regular_file(path, "checkpoint", &size);  // then read(fd, ...), close(fd)
/// \endcode
///
/// Every problem is a remora::Error whose message starts with `what` and the
/// path. The file is opened with O_NONBLOCK (so opening a FIFO returns at once),
/// checked with fstat on the opened descriptor (no window between the check and
/// the open) and only then read, without O_NONBLOCK.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace remora {

/// What a path is, from stat(2): "a regular file", "a directory", "a FIFO (named
/// pipe)", "a character device", "a block device", "a socket", "a symbolic link",
/// "a special file"; "" when stat fails (errno is set). stat follows symbolic
/// links, so a link is described by its target.
std::string file_kind(const std::string& path);
/// What a stat(2) st_mode describes, in the words of file_kind(path).
std::string file_kind(unsigned mode);

/// Why `path` cannot be read as a regular file, or "" when it can be opened:
/// "is an empty path", "does not exist", "is a directory, not a file", "is a
/// FIFO (named pipe), not a regular file", "permission denied", ... (no file is
/// opened; a check for messages and for config validation, not a substitute for
/// open_regular_file).
std::string regular_file_problem(const std::string& path);
/// Why `path` is not a usable directory, or "" when it is one ("does not exist",
/// "is a regular file, not a directory", ...; nothing is opened).
std::string directory_problem(const std::string& path);

/// Opens `path` for reading when it is a regular file (O_RDONLY | O_CLOEXEC;
/// O_NONBLOCK only while opening) and returns the descriptor, which the caller
/// closes; *size (when size is not null) gets its size in bytes. Anything else
/// is an Error `what 'path': cannot open: problem`.
int open_regular_file(const std::string& path, const std::string& what, uint64_t* size = nullptr);

/// The whole of a regular file of at most max_bytes bytes (larger: an Error
/// that gives both sizes). A file that grows past max_bytes while it is read is
/// refused too (an Error). `what` names the file in errors ("config", ...).
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what);

/// Calls f(line, line_number) for each line of a regular file (without its
/// newline; a carriage return before it is kept; line numbers from 1; a last
/// line without a newline is passed too), reading it in chunks: memory stays bounded by
/// max_line_bytes whatever the file's size; a longer line is an Error naming
/// the line number. Exceptions thrown by f propagate (the file is closed).
void for_each_line(const std::string& path, uint64_t max_line_bytes, const std::string& what,
                   const std::function<void(const std::string& line, int64_t number)>& f);

/// Writes `bytes` to `path` atomically: a fresh temporary beside it (whatever
/// was at `path.tmp` is removed first; created with O_EXCL | O_NOFOLLOW, so
/// neither a FIFO nor a link there is followed), fsync, rename over `path`. A
/// directory at `path` is an Error. Errors name `what` and the path.
void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& what);

/// Opens `path` for appending (created 0644 when absent), refusing anything but
/// a regular file without blocking (a FIFO, a device, a symbolic link to one;
/// an Error naming `what` and the path); returns the descriptor (O_WRONLY |
/// O_APPEND | O_CLOEXEC), which the caller closes.
int open_append_regular(const std::string& path, const std::string& what);

/// A byte count for messages: "512 bytes" below 1 KiB, else one decimal in
/// binary units: "12.0 KiB", "3.5 GiB", "1.0 TiB" (up to EiB).
std::string human_bytes(double bytes);

/// How many bytes this process may still allocate before the system or its
/// limits refuse it: the least of MemAvailable (/proc/meminfo), the cgroup's
/// memory limit less its usage (cgroup v2 memory.max, v1 memory.limit_in_bytes,
/// the tightest over the cgroup and its ancestors) and RLIMIT_AS / RLIMIT_DATA
/// less what the process holds (VmSize / VmData). `source` (when given) names
/// the limit that decided ("MemAvailable in /proc/meminfo", "the cgroup memory
/// limit", "RLIMIT_AS (ulimit -v)", "RLIMIT_DATA (ulimit -d)"). UINT64_MAX (and
/// source "") when nothing could be read.
uint64_t available_memory(std::string* source = nullptr);

}  // namespace remora
