// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: driver config loading (cli/config.cpp load_config),
// including --set overrides. Input: the config file's bytes, then any number
// of --set assignments ("key.path=value"), each after a NUL byte. The bytes
// go to a file and through load_config, the function `remora train` calls.
#include "../../cli/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora::driver;
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts = fuzz::split(in, std::string(1, '\0'));
  const std::string path = fuzz::temp_dir() + "/config.json";
  fuzz::write_file(path, parts[0]);
  const std::vector<std::string> sets(parts.begin() + 1, parts.end());
  try {
    Config c = load_config(path, sets);
    FUZZ_ASSERT(c.resolved.is_object());
    FUZZ_ASSERT(!c.model.type.empty() && !c.data.type.empty());
    // What validated is re-validated the same way (the resolved config is what
    // a checkpoint stores and `info` / --resume read back).
    // (data.path is stored joined to the base folder, so it is compared as the file it names.)
    Config again = parse_config(c.resolved, ".");
    json a = again.resolved, b = c.resolved;
    if (a["data"].contains("path")) {
      FUZZ_ASSERT(b["data"].contains("path"));
      const std::string pb = b["data"]["path"].get<std::string>();
      FUZZ_ASSERT(a["data"]["path"].get<std::string>() == (pb.rfind('/', 0) == 0 ? pb : "./" + pb));
      a["data"].erase("path");
      b["data"].erase("path");
    }
    FUZZ_ASSERT(a == b);
  } catch (const remora::Error&) {
  }
  return 0;
}
