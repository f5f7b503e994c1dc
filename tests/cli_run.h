// SPDX-License-Identifier: BSD-3-Clause
// `remora ARGS...` run in-process for the driver tests (header only; not a test
// file): stdout and stderr captured, the thread count restored, and an
// exception escaping run_cli (which it must never let happen) a failure.
#pragma once
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "cli/cli.h"

namespace remora_test {

// What one run of the driver gave.
struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs `remora ARGS...` (args without the program name) in this process.
inline CliRun run_remora(std::vector<std::string> args) {
  args.insert(args.begin(), "remora");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  char out_path[] = "/tmp/remora_cli_outXXXXXX";
  char err_path[] = "/tmp/remora_cli_errXXXXXX";
  const int ofd = ::mkstemp(out_path), efd = ::mkstemp(err_path);
  REQUIRE(ofd >= 0);
  REQUIRE(efd >= 0);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(ofd, 1);
  ::dup2(efd, 2);
  const int threads = remora::get_num_threads();
  CliRun r;
  std::string crash;
  try {
    r.code = remora::driver::run_cli(int(args.size()), argv.data());
  } catch (const std::exception& e) {
    crash = e.what();
  } catch (...) {
    crash = "unknown exception";
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  ::close(ofd);
  ::close(efd);
  remora::set_num_threads(threads);
  r.out = read_whole_file(out_path);
  r.err = read_whole_file(err_path);
  ::unlink(out_path);
  ::unlink(err_path);
  std::string cmdline;
  for (size_t i = 1; i < args.size(); ++i) cmdline += " " + args[i];
  INFO("remora" << cmdline);
  INFO("stderr: " << r.err);
  REQUIRE(crash == "");  // run_cli never lets an exception escape
  return r;
}

}  // namespace remora_test
