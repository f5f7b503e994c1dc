// SPDX-License-Identifier: BSD-3-Clause
// Helpers shared by the fuzz targets (libFuzzer: one LLVMFuzzerTestOneInput each).
//
// A target swallows the errors a parser is meant to raise on bad input
// (remora::Error and its subclasses: the driver turns them into exit code 2)
// and lets everything else through: a crash, a sanitizer report, a leak, an
// uncaught std::exception of another type (e.g. nlohmann::json's or
// std::bad_alloc) or a broken property (FUZZ_ASSERT) is a finding.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#define FUZZ_ASSERT(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "FUZZ_ASSERT failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

namespace fuzz {

// A private directory for files a target must write (removed at exit).
inline const std::string& temp_dir() {
  static std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/remora_fuzz_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string d(buf.data());
    std::atexit([] { std::string cmd = "rm -rf '" + d + "'"; (void)!std::system(cmd.c_str()); });
    return d;
  }();
  return dir;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f.good()) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Splits at every occurrence of sep.
inline std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t at = s.find(sep, pos);
    if (at == std::string::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
}

}  // namespace fuzz
