// SPDX-License-Identifier: BSD-3-Clause
// A temporary folder for the tests that write files (header only; not a test file).
#pragma once
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace remora_test {

// A fresh folder /tmp/remora_test_XXXXXX, removed with everything in it at scope
// exit (after giving its owner full permissions back, should a test take them away).
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/remora_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // The path of `name` inside the folder.
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

}  // namespace remora_test
