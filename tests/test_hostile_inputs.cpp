// SPDX-License-Identifier: BSD-3-Clause
// Hostile inputs to the `remora` binary (docs/reliability.md): special files
// that would block a read forever, endless or oversized inputs, configs whose
// memory cannot fit, shell metacharacters in paths, outputs that would
// overwrite inputs, and the smaller input errors.
//
// Every case runs the built binary (REMORA_CLI_PATH) as a child process with a
// time limit (a case that blocks fails after seconds instead of hanging the
// suite) and, for the memory cases, an address-space limit (RLIMIT_AS), so a
// case that would allocate a terabyte fails fast instead of meeting the OOM
// killer. Everything is tiny: the suite needs a few hundred MiB at most.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sanitizer.h"
#include "temp_dir.h"

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Proc {
  int code = -1;        // exit status; -1 when killed for taking too long or by a signal
  bool timed_out = false;
  int signal = 0;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

struct RunOptions {
  double timeout_s = 30;
  uint64_t address_space = 0;  // RLIMIT_AS in bytes (0: unchanged)
  std::string cwd;             // working directory ("" = unchanged)
  std::vector<std::pair<std::string, std::string>> env;
};

// Runs the remora binary with `args`; stdout and stderr are captured.
// AddressSanitizer reserves terabytes of address space for its shadow memory, so
// a sanitizer build cannot run under RLIMIT_AS: there the limit is left off (the
// time limit still catches a hang) and allocation failures come from ASan's own
// allocator limit instead (see the out-of-memory case).
using remora_test::kAddressSanitizer;

Proc remora(const std::vector<std::string>& args, const RunOptions& o = {}) {
  char out_path[] = "/tmp/remora_hostile_outXXXXXX";
  char err_path[] = "/tmp/remora_hostile_errXXXXXX";
  const int ofd = ::mkstemp(out_path), efd = ::mkstemp(err_path);
  REQUIRE(ofd >= 0);
  REQUIRE(efd >= 0);
  std::vector<std::string> argv_s{REMORA_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(ofd, 1);
    ::dup2(efd, 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (o.address_space && !kAddressSanitizer) {
      struct rlimit rl{rlim_t(o.address_space), rlim_t(o.address_space)};
      ::setrlimit(RLIMIT_AS, &rl);
    }
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
    for (const auto& kv : o.env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Proc r;
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.timeout_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!r.timed_out && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (!r.timed_out && WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  ::close(ofd);
  ::close(efd);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  ::unlink(out_path);
  ::unlink(err_path);
  return r;
}

std::string cmdline(const std::vector<std::string>& args) {
  std::string s = "remora";
  for (const std::string& a : args) s += " " + a;
  return s;
}

// Exit code `code`, in time, one line on stderr holding every fragment.
void expect(const Proc& r, int code, const std::vector<std::string>& fragments) {
  INFO("stderr: " << r.err);
  INFO("stdout: " << r.out.substr(0, 2000));
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.signal == 0);
  CHECK(r.code == code);
  if (code != 0) {
    // Remora's own lines: a sanitizer build's allocator notes ("==PID==WARNING: ...")
    // are not part of the message.
    std::string own;
    std::istringstream lines(r.err);
    for (std::string l; std::getline(lines, l);)
      if (!(kAddressSanitizer && l.rfind("==", 0) == 0)) own += l + "\n";
    REQUIRE(!own.empty());
    CHECK(own.find('\n') == own.size() - 1);  // one line
  }
  for (const std::string& f : fragments) {
    INFO("expected the message to contain: " << f);
    CHECK(r.err.find(f) != std::string::npos);
  }
}

// Runs `remora ARGS` and expects exit code `code` with every fragment.
void check_run(int code, const std::vector<std::string>& fragments, const std::vector<std::string>& args) {
  INFO(cmdline(args));
  expect(remora(args), code, fragments);
}

using remora_test::TempDir;

std::string corpus_text() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and"};
  std::string t;
  uint32_t x = 7;
  while (t.size() < 3000) {
    x = x * 1103515245u + 12345u;
    t += words[(x >> 16) % 10];
    t += ((x >> 8) % 9 == 0) ? ".\n" : " ";
  }
  return t;
}

json tiny_config(const std::string& corpus) {
  json j = json::parse(R"({
    "seed": 3, "device": "cpu",
    "model": {"type": "transformer_xl", "n_layer": 1, "d_model": 16, "n_head": 2, "d_inner": 32, "mem_len": 8},
    "data": {"type": "char", "path": "", "seq_len": 8, "batch_size": 2},
    "train": {"steps": 2, "eval_every": 2, "eval_batches": 1, "log_every": 1, "threads": 1}
  })");
  j["data"]["path"] = corpus;
  return j;
}

// A temporary folder with a corpus, the tiny config and (trained on demand) a checkpoint.
struct World {
  TempDir dir;
  std::string corpus = dir / "corpus.txt", config = dir / "tiny.json", run = dir / "run";
  World() {
    spit(corpus, corpus_text());
    spit(config, tiny_config(corpus).dump(2));
  }
  std::string with(const std::string& name, const json& patch) const {
    json j = tiny_config(corpus);
    j.merge_patch(patch);
    spit(dir / name, j.dump(2));
    return dir / name;
  }
  std::string checkpoint() {
    const std::string ck = run + "/last.safetensors";
    if (!fs::exists(ck)) expect(remora({"train", config, "--out", run}), 0, {});
    return ck;
  }
  std::string fifo(const std::string& name) const {
    const std::string p = dir / name;
    REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
    return p;
  }
};

const std::string kIds = "[1, 2, 3, 4]";

// A safetensors file's bytes with `meta` merged into its header's metadata.
std::string with_metadata(const std::string& bytes, const json& meta) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  json h = json::parse(bytes.substr(8, size_t(n)));
  for (auto it = meta.begin(); it != meta.end(); ++it) h["__metadata__"][it.key()] = it.value();
  std::string hs = h.dump();
  hs.append((8 - hs.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(hs.size()) >> (8 * i)) & 0xff);
  return out + hs + bytes.substr(8 + size_t(n));
}

}  // namespace

TEST_CASE("hostile inputs: a FIFO anywhere is refused at once, never waited on", "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint(), ids = w.dir / "ids.json", out = w.dir / "out.safetensors";
  spit(ids, kIds);
  const std::string fifo = w.fifo("pipe");
  // As the config of every command that reads one.
  for (const char* cmd : {"train", "info"}) check_run(2, {"FIFO", "pipe"}, {cmd, fifo});
  check_run(2, {"FIFO"}, {"eval", fifo, "--checkpoint", ck});
  check_run(2, {"FIFO"}, {"infer", fifo, "--checkpoint", ck, "--input", ids, "--output", out});
  // As a checkpoint, an --input, a data path, a metrics file.
  check_run(2, {"FIFO", "pipe"}, {"eval", w.config, "--checkpoint", fifo});
  check_run(2, {"FIFO", "pipe"}, {"generate", w.config, "--checkpoint", fifo, "--prompt", "the", "--tokens", "2"});
  check_run(2, {"FIFO", "pipe"}, {"infer", w.config, "--checkpoint", fifo, "--input", ids, "--output", out});
  check_run(2, {"--input", "FIFO"}, {"infer", w.config, "--checkpoint", ck, "--input", fifo, "--output", out});
  check_run(2, {"data.path", "FIFO"}, {"train", w.with("fifo_data.json", {{"data", {{"path", fifo}}}})});
  const std::string pdir = w.dir / "plotrun";
  fs::create_directories(pdir);
  REQUIRE(::mkfifo((pdir + "/metrics.jsonl").c_str(), 0644) == 0);
  check_run(2, {"metrics.jsonl", "FIFO"}, {"plot", pdir});
  // A HuggingFace directory whose config.json or weights are FIFOs.
  const std::string hf = w.dir / "hf", src = std::string(REMORA_TEST_DATA) + "/hf_bert_tiny";
  fs::create_directories(hf);
  REQUIRE(::mkfifo((hf + "/config.json").c_str(), 0644) == 0);
  check_run(2, {"FIFO"}, {"infer", hf + "/config.json", "--checkpoint", src + "/model.safetensors", "--input", ids,
                    "--output", out});
  check_run(2, {"FIFO"}, {"infer", src + "/config.json", "--checkpoint", fifo, "--input", ids, "--output", out});
  // A FIFO left at the temporary name of an output is replaced, not opened.
  REQUIRE(::mkfifo((out + ".tmp").c_str(), 0644) == 0);
  check_run(0, {}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", out});
  CHECK(fs::is_regular_file(out));
}

TEST_CASE("hostile inputs: endless and oversized files are refused before they are read", "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint(), out = w.dir / "out.safetensors";
  RunOptions lim;
  lim.address_space = uint64_t(4) << 30;  // the old behaviour (read until memory runs out) fails fast
  auto run = [&](const std::vector<std::string>& args) {
    INFO(cmdline(args));
    return remora(args, lim);
  };
  expect(run({"train", "/dev/zero"}), 2, {"/dev/zero", "character device"});
  expect(run({"info", "/dev/urandom"}), 2, {"/dev/urandom", "character device"});
  expect(run({"infer", w.config, "--checkpoint", ck, "--input", "/dev/zero", "--output", out}), 2,
         {"--input", "/dev/zero", "character device"});
  expect(run({"eval", w.config, "--checkpoint", "/dev/zero"}), 2, {"/dev/zero", "character device"});
  expect(run({"train", w.with("zero_data.json", {{"data", {{"path", "/dev/zero"}}}})}), 2,
         {"data.path", "character device"});
  // A config of 17 MiB: no config is that large.
  const std::string big = w.dir / "big.json";
  spit(big, "{" + std::string(17 << 20, ' ') + "}");
  expect(run({"info", big}), 2, {"big.json", "more than"});
  // An --input of 65 MiB.
  const std::string big_ids = w.dir / "big_ids.json";
  spit(big_ids, "[1" + std::string(65 << 20, ' ') + "]");
  expect(run({"infer", w.config, "--checkpoint", ck, "--input", big_ids, "--output", out}), 2,
         {"--input", "more than"});
}

TEST_CASE("hostile inputs: configs whose memory cannot fit are refused before anything is built", "[hostile][driver][memory]") {
  World w;
  const std::string ck = w.checkpoint();
  RunOptions lim;
  lim.address_space = uint64_t(4) << 30;
  lim.timeout_s = 20;
  struct Case {
    const char* name;
    json patch;
    std::string key;  // a key the message names
  };
  const json lstm_copy = {{"model", {{"type", "lstm"}, {"n_layer", 1}, {"d_model", 16}, {"dropout", 0}, {"n_head", nullptr},
                                     {"d_inner", nullptr}, {"mem_len", nullptr}}},
                          {"data", {{"type", "copy"}, {"path", nullptr}, {"seq_len", nullptr}}}};
  std::vector<Case> cases = {
      {"layers", {{"model", {{"n_layer", 1024}, {"d_model", 65536}, {"n_head", 1}, {"d_inner", 1 << 20}}}}, "model.n_layer"},
      {"heads", {{"model", {{"n_head", 1024}, {"d_head", 65536}}}}, "model.n_head"},
      // Memory grows linearly in mem_len (XL's positional term is never
      // materialised): 2^20 memory rows of width 4096 need tens of GiB.
      {"mem_len", {{"model", {{"mem_len", 1 << 20}, {"d_model", 4096}, {"n_head", 16}}}}, "model.mem_len"},
      {"batch", {{"model", {{"d_model", 4096}, {"n_head", 16}}}, {"data", {{"batch_size", 1 << 20}, {"seq_len", 4096}}}},
       "data.batch_size"},
  };
  json copy = lstm_copy;
  copy["data"]["delay"] = 1 << 20;
  copy["data"]["copy_len"] = 65536;
  copy["data"]["symbols"] = 65536;
  copy["data"]["n_test"] = 1 << 24;
  cases.push_back({"copy", copy, "data.delay"});
  json series = {{"data", {{"type", "timeseries"}, {"path", nullptr}, {"seq_len", nullptr}, {"length", 1 << 30}}}};
  cases.push_back({"series", series, "data.length"});
  json rel = lstm_copy;
  rel["model"]["type"] = "relrnn";
  rel["model"]["d_model"] = 4096;
  rel["model"]["short_term"] = 65536;
  rel["model"]["relevant"] = 65536;
  cases.push_back({"relrnn", rel, "model.short_term"});
  json cls = {{"model", {{"type", "bert"}, {"mem_len", nullptr}}},
              {"data", {{"type", "classify"}, {"path", nullptr}, {"seq_len", nullptr}, {"language", "parity"},
                        {"n_train", 1 << 24}}},
              {"train", {{"max_memory", "1GiB"}}}};
  cases.push_back({"classify", cls, "data.n_train"});
  for (const Case& c : cases) {
    const std::string cfg = w.with(std::string(c.name) + ".json", c.patch);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"train", cfg, "--out", w.dir / "mem_run"}, std::vector<std::string>{"info", cfg}}) {
      INFO(c.name << ": " << cmdline(args));
      const auto t0 = std::chrono::steady_clock::now();
      expect(remora(args, lim), 2, {"needs about", "memory", c.key});
      CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
    }
  }
  // eval and infer refuse too (their estimate has no gradients or optimizer state).
  const std::string huge = w.with("huge.json", cases[0].patch);
  expect(remora({"eval", huge, "--checkpoint", ck}, lim), 2, {"needs about", "model.n_layer"});
  spit(w.dir / "ids.json", kIds);
  expect(remora({"infer", huge, "--checkpoint", ck, "--input", w.dir / "ids.json", "--output", w.dir / "o.safetensors"},
                lim),
         2, {"needs about", "model.n_layer"});
  // train.max_memory overrides the limit both ways.
  check_run(2, {"train.max_memory", "needs about"}, {"info", w.with("small_max.json", {{"train", {{"max_memory", "1KiB"}}}})});
  check_run(0, {}, {"info", w.with("big_max.json", {{"train", {{"max_memory", 1e15}}}})});
  check_run(2, {"train.max_memory"}, {"info", w.with("bad_max.json", {{"train", {{"max_memory", "lots"}}}})});
}

TEST_CASE("hostile inputs: running out of memory is an exit-1 error with a message, never an abort", "[hostile][driver][memory]") {
  World w;
  // train.max_memory lets the config past the estimate; RLIMIT_AS makes the allocation fail.
  const std::string cfg = w.with("oom.json", {{"model", {{"n_layer", 64}, {"d_model", 4096}, {"n_head", 16},
                                                         {"d_inner", 16384}}},
                                              {"train", {{"max_memory", 1e15}}}});
  RunOptions lim;
  lim.address_space = uint64_t(1) << 30;
  lim.timeout_s = 60;
  if (kAddressSanitizer)  // no RLIMIT_AS under ASan: its allocator refuses blocks over 64 MiB instead
    lim.env.emplace_back("ASAN_OPTIONS", "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=64");
  const Proc r = remora({"info", cfg}, lim);
  expect(r, 1, {"out of memory"});
}

TEST_CASE("hostile inputs: a HuggingFace config.json is checked against the weights and memory before building", "[hostile][driver][bert]") {
  TempDir tmp;
  const std::string src = std::string(REMORA_TEST_DATA) + "/hf_bert_tiny", ids = tmp / "ids.json";
  spit(ids, kIds);
  json c = json::parse(slurp(src + "/config.json"));
  c["num_hidden_layers"] = 10000;
  c["hidden_size"] = 768;
  c["num_attention_heads"] = 12;
  c["intermediate_size"] = 3072;
  const std::string hf = tmp / "hf";
  fs::create_directories(hf);
  spit(hf + "/config.json", c.dump());
  fs::copy_file(src + "/model.safetensors", hf + "/model.safetensors");
  RunOptions lim;
  lim.address_space = uint64_t(4) << 30;
  lim.timeout_s = 20;
  expect(remora({"infer", hf + "/config.json", "--checkpoint", hf + "/model.safetensors", "--input", ids, "--output",
                 tmp / "o.safetensors"},
                lim),
         2, {"config.json", "num_hidden_layers 10000", "model.safetensors"});
  // Sizes whose parameter count passes 2^63: the count is printed as such, not wrapped.
  json huge = c;
  huge["hidden_size"] = int64_t(1) << 24;
  huge["num_attention_heads"] = 16;
  huge["intermediate_size"] = int64_t(1) << 24;
  spit(hf + "/config.json", huge.dump());
  const Proc hp = remora({"infer", hf + "/config.json", "--checkpoint", hf + "/model.safetensors", "--input", ids,
                          "--output", tmp / "o.safetensors"},
                         lim);
  INFO(hp.err);
  CHECK(hp.code == 2);
  CHECK(hp.err.find("e+") != std::string::npos);
  CHECK(hp.err.find("-9223372036854775808") == std::string::npos);
  spit(hf + "/config.json", c.dump());
  // Weights large enough on paper (a sparse 4 TiB file) but not in memory.
  const std::string sparse = tmp / "sparse.safetensors";
  { std::ofstream(sparse).flush(); }
  fs::resize_file(sparse, uint64_t(4) << 40);
  expect(remora({"infer", hf + "/config.json", "--checkpoint", sparse, "--input", ids, "--output", tmp / "o.safetensors"},
                lim),
         2, {"config.json", "memory"});
  // A sequence longer than max_position_embeddings (16 here) is an input error.
  std::string long_ids = "[1";
  for (int i = 0; i < 19; ++i) long_ids += ", 1";
  spit(tmp / "long.json", long_ids + "]");
  check_run(2, {"max_position_embeddings"}, {"infer", src + "/config.json", "--checkpoint", src + "/model.safetensors",
                                       "--input", tmp / "long.json", "--output", tmp / "o2.safetensors"});
}

TEST_CASE("hostile inputs: plot runs gnuplot without a shell, whatever the run directory is called", "[hostile][driver]") {
  World w;
  w.checkpoint();
  const std::string cwd = w.dir / "cwd";
  fs::create_directories(cwd);
  const std::string evil = w.dir / "run'$(touch pwned)'`touch pwned2`\"; touch pwned3; '";
  fs::create_directories(evil);
  fs::copy_file(w.run + "/metrics.jsonl", evil + "/metrics.jsonl");
  // A FIFO where the image goes is replaced, not opened.
  REQUIRE(::mkfifo((evil + "/loss.png").c_str(), 0644) == 0);
  RunOptions o;
  o.cwd = cwd;
  const Proc r = remora({"plot", evil}, o);
  INFO("stderr: " << r.err << "\nstdout: " << r.out);
  REQUIRE_FALSE(r.timed_out);
  for (const std::string& where : {cwd, evil, w.dir.path, std::string(".")})
    for (const char* f : {"pwned", "pwned2", "pwned3"}) CHECK_FALSE(fs::exists(where + "/" + f));
  const bool have_gnuplot = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  if (have_gnuplot) {
    REQUIRE(r.code == 0);
    CHECK(fs::is_regular_file(evil + "/loss.png"));
    CHECK(fs::file_size(evil + "/loss.png") > 0);
    CHECK(r.out.find("wrote") != std::string::npos);
  } else {
    CHECK(r.code == 1);
    CHECK(r.err.find("gnuplot") != std::string::npos);
    CHECK(r.out.find("wrote") == std::string::npos);
  }
  // Malformed metrics lines are input errors naming the file and the line.
  const std::string bad = w.dir / "badrun";
  fs::create_directories(bad);
  for (const std::string& line : {std::string(R"({"split": "train", "step": "x", "loss": 1})"),
                                  std::string(R"({"split": "train", "step": 1, "loss": "abc"})"), std::string("[1, 2]"),
                                  std::string(R"({"split": 5})"), std::string("{not json")}) {
    spit(bad + "/metrics.jsonl", R"({"split": "train", "step": 1, "loss": 1.0})" "\n" + line + "\n");
    INFO(line);
    expect(remora({"plot", bad}), 2, {"metrics.jsonl", "line 2"});
  }
}

TEST_CASE("hostile inputs: infer --output never overwrites an input, and an existing file only with --force", "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint(), ids = w.dir / "ids.json";
  spit(ids, kIds);
  const std::string ck_bytes = slurp(ck), cfg_bytes = slurp(w.config);
  check_run(2, {"--checkpoint"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", ck});
  check_run(2, {"--checkpoint"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", w.run + "/../run/./last.safetensors", "--force"});
  const std::string link = w.dir / "cfg_link.json";
  REQUIRE(::link(w.config.c_str(), link.c_str()) == 0);
  check_run(2, {"config"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", link, "--force"});
  const std::string sym = w.dir / "ids_link.json";
  fs::create_symlink(ids, sym);
  check_run(2, {"--input"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", sym, "--force"});
  CHECK(slurp(ck) == ck_bytes);
  CHECK(slurp(w.config) == cfg_bytes);
  CHECK(slurp(ids) == kIds);
  const std::string out = w.dir / "out.safetensors";
  check_run(0, {}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", out});
  check_run(2, {"already exists", "--force"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", out});
  check_run(0, {}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", out, "--force"});
  check_run(2, {"is a directory"}, {"infer", w.config, "--checkpoint", ck, "--input", ids, "--output", w.dir.path, "--force"});
}

TEST_CASE("hostile inputs: infer --input that starts like JSON must be JSON ids; --text reads it as text",
          "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint(), in = w.dir / "in.txt", out = w.dir / "o.safetensors";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[1,2,3", "not valid JSON"}, {"{\"ids\":[1,2]}", "JSON object"}, {"[[1e400]]", "not valid JSON"},
      {"  \n[1, 2,]", "not valid JSON"}, {"\"text\"", ""}};
  for (const auto& b : bad) {
    INFO(b.first);
    spit(in, b.first);
    if (b.second.empty()) {  // a JSON string does not start with [ or {: text, as any other
      check_run(0, {}, {"infer", w.config, "--checkpoint", ck, "--input", in, "--output", out, "--force"});
      continue;
    }
    check_run(2, {"--input", b.second, "--text"}, {"infer", w.config, "--checkpoint", ck, "--input", in, "--output", out,
                                                   "--force"});
    check_run(0, {}, {"infer", w.config, "--checkpoint", ck, "--input", in, "--output", out, "--force", "--text"});
  }
}

TEST_CASE("hostile inputs: a user's config or data in the run directory is never replaced or removed",
          "[hostile][driver]") {
  World w;
  // train X/config.json --out X: the config is an input of the run.
  const std::string x = w.dir / "x", cfg = x + "/config.json";
  fs::create_directories(x);
  const std::string cfg_text = tiny_config(w.corpus).dump(2);
  spit(cfg, cfg_text);
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--overwrite"}}) {
    std::vector<std::string> args = {"train", cfg, "--out", x};
    args.insert(args.end(), extra.begin(), extra.end());
    check_run(2, {"config.json", "input"}, args);
    CHECK(slurp(cfg) == cfg_text);
  }
  // A run resumed from its own config.json (the resolved config it wrote) is not that case.
  const std::string y = w.dir / "y";
  check_run(0, {}, {"train", w.config, "--out", y});
  check_run(0, {}, {"train", y + "/config.json", "--out", y, "--resume", "--set", "train.steps=6"});
  // Data that happens to be named metrics.jsonl in the run directory, with --overwrite.
  const std::string d = w.dir / "d", data = d + "/metrics.jsonl";
  fs::create_directories(d);
  spit(data, corpus_text());
  check_run(2, {"metrics.jsonl", "input"},
            {"train", w.with("data_in_run.json", {{"data", {{"path", data}}}}), "--out", d, "--overwrite"});
  CHECK(slurp(data) == corpus_text());
}

TEST_CASE("hostile inputs: export replaces an earlier export only with --force, and never its inputs",
          "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint(), out = w.dir / "exported";
  check_run(0, {}, {"export", "--checkpoint", ck, "--out", out});
  const std::string first = slurp(out + "/config.json");
  spit(out + "/config.json", "{\"mine\": true}\n");  // the user's file now
  check_run(2, {"already exists", "--force"}, {"export", "--checkpoint", ck, "--out", out});
  CHECK(slurp(out + "/config.json") == "{\"mine\": true}\n");
  check_run(0, {}, {"export", "--checkpoint", ck, "--out", out, "--force"});
  CHECK(slurp(out + "/config.json") == first);
  // Exporting into the folder of its own checkpoint, named model.safetensors: refused even with --force.
  const std::string ck2 = out + "/model.safetensors", bytes = slurp(ck2);
  check_run(2, {"model.safetensors", "input"}, {"export", "--checkpoint", ck2, "--out", out, "--force"});
  CHECK(slurp(ck2) == bytes);
}

TEST_CASE("hostile inputs: input errors exit 2 and say what is wrong", "[hostile][driver]") {
  World w;
  // A corpus too small for one batch.
  const std::string small = w.dir / "small.txt";
  spit(small, corpus_text().substr(0, 100));
  check_run(2, {"data.path", "small.txt"}, {"train", w.with("small.json", {{"data", {{"path", small}, {"batch_size", 16}}}})});
  // A config path that is a directory.
  check_run(2, {"is a directory"}, {"train", w.dir.path});
  // A data path that is a directory or missing says which.
  check_run(2, {"data.path", "is a directory"}, {"train", w.with("dir_data.json", {{"data", {{"path", w.dir.path}}}})});
  check_run(2, {"data.path", "file not found"}, {"train", w.with("no_data.json", {{"data", {{"path", w.dir / "nope"}}}})});
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = w.dir / "locked.txt";
    spit(locked, corpus_text());
    ::chmod(locked.c_str(), 0);
    check_run(2, {"data.path", "permission denied"}, {"train", w.with("locked.json", {{"data", {{"path", locked}}}})});
  }
  // A seed of 2^64 - 1 is reported as written, not as -1.
  check_run(2, {"seed", "18446744073709551615"}, {"info", w.config, "--set", "seed=18446744073709551615"});
  // OMP_NUM_THREADS beyond the cap is capped (with a warning), not 100,000 threads.
  RunOptions o;
  o.env = {{"OMP_NUM_THREADS", "100000"}};
  o.timeout_s = 60;
  const Proc r = remora({"train", w.with("threads.json", {{"train", {{"threads", 0}, {"steps", 1}, {"eval_every", 0}}}}),
                         "--out", w.dir / "threads_run"},
                        o);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(r.err.find("OMP_NUM_THREADS=100000") != std::string::npos);
}

TEST_CASE("hostile inputs: a checkpoint's data_position outside [0, 2^62] is an input error", "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint();
  const std::string bytes = slurp(ck);
  for (const std::string& pos : {std::string("-5"), std::to_string(INT64_MAX)}) {
    const std::string run = w.dir / ("pos" + pos);
    fs::create_directories(run);
    spit(run + "/last.safetensors", with_metadata(bytes, {{"data_position", pos}}));
    INFO("data_position " << pos);
    expect(remora({"train", w.config, "--out", run, "--resume", "--set", "train.steps=4"}), 2, {"data_position", pos});
  }
}

TEST_CASE("hostile inputs: --resume checks the checkpoint's metadata against the config; unreadable metrics are named",
          "[hostile][driver]") {
  World w;
  const std::string ck = w.checkpoint();
  const std::string bytes = slurp(ck);
  // A run directory whose last.safetensors has the metadata `meta` merged in.
  auto run_with = [&](const std::string& name, const json& meta) {
    const std::string run = w.dir / name;
    fs::create_directories(run);
    spit(run + "/last.safetensors", with_metadata(bytes, meta));
    return run;
  };
  const std::vector<std::string> more = {"--resume", "--set", "train.steps=4"};
  auto resume = [&](const std::string& run) {
    std::vector<std::string> args = {"train", w.config, "--out", run};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  check_run(2, {"best_valid", "best"}, resume(run_with("best", {{"best_valid", "best"}})));
  check_run(2, {"world_size", "does not divide"},
            resume(run_with("world", {{"world_size", "1000000"}})));
  check_run(2, {"data_positions", "world_size"}, resume(run_with("positions", {{"world_size", "2"}, {"data_positions", "0"}})));
  check_run(2, {"vocabulary"}, resume(run_with("vocab", {{"vocab", ""}})));
  // A metrics.jsonl with lines no sink wrote: kept aside and named, the run resumes.
  const std::string ok = run_with("metrics", json::object());
  spit(ok + "/metrics.jsonl", R"({"split": "train", "step": 1, "loss": 2.0})" "\nnot json\n[1, 2]\n");
  const Proc r = remora(resume(ok));
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("metrics.jsonl: 2 line(s) are not metrics records (line 2, 3)") != std::string::npos);
  CHECK(slurp(ok + "/metrics.jsonl.unreadable") == "not json\n[1, 2]\n");
}

#include <remora/remora.h>

#include "cli/input_checks.h"
#include "cli/task.h"

TEST_CASE("hostile inputs: a weight stored as I32 is reported as I32, not as the i64 it loads as", "[hostile]") {
  using namespace remora;
  nn::Linear lin(3, 2);
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& kv : lin.named_parameters()) t.emplace_back(kv.first, kv.second);
  std::string bytes = serialize_safetensors(t);
  // Rewrite the weight as I32: same header layout, 4-byte integers.
  Safetensors ok = parse_safetensors(bytes, "ok");
  CHECK_NOTHROW(driver::check_stored_dtypes(ok, lin, "ok"));
  const Tensor w = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector(std::vector<double>{0.5, 0.25}, {2}).to(DType::f32);
  std::string data(6 * 4, '\0');
  for (int i = 0; i < 6; ++i) data[size_t(4 * i)] = char(i + 1);
  std::string header = json{{"weight", {{"dtype", "I32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}},
                            {"bias", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {24, 32}}}}}
                           .dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  file += header + data + std::string(static_cast<const char*>(b.raw_data()), 8);
  Safetensors st = parse_safetensors(file, "w.safetensors");
  CHECK(st.get("weight").dtype() == DType::i64);
  CHECK(st.stored_dtypes.at("weight") == "I32");
  try {
    driver::check_stored_dtypes(st, lin, "w.safetensors");
    FAIL("expected an InputError");
  } catch (const driver::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("'weight'") != std::string::npos);
    CHECK(m.find("I32") != std::string::npos);
    CHECK(m.find("i64") == std::string::npos);
  }
  (void)w;
}
