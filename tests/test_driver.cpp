// SPDX-License-Identifier: BSD-3-Clause
// The `remora` driver end to end (cli/cli.h): every command is run
// in-process through run_cli with an argv array; stdout and stderr are
// captured by redirecting file descriptors 1 and 2 to temporary files.
//
// Everything is tiny (d_model 16, one layer, seq_len 8, batch 2, a few steps,
// one thread, a ~3 KB corpus written to a temporary folder) so the file runs in
// seconds. Error cases check the exit code (2: usage / config / input file,
// 1: failure during a run), that the message is ONE line, and that it names the
// key, file or problem.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <remora/remora.h>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli_run.h"
#include "cli/experiment.h"
#include "registry_variants.h"
#include "temp_dir.h"
#include "../train/run_dir.h"

using namespace remora;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Run = remora_test::CliRun;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// `remora ARGS...` in-process (tests/cli_run.h).
Run remora_cli(std::vector<std::string> args) { return remora_test::run_remora(std::move(args)); }

// The error message: stderr must be exactly one line.
std::string one_line_error(const Run& r) {
  INFO("stderr: " << r.err);
  REQUIRE(!r.err.empty());
  REQUIRE(r.err.back() == '\n');
  REQUIRE(r.err.find('\n') == r.err.size() - 1);
  return r.err.substr(0, r.err.size() - 1);
}

// Expects exit code `code` and a one-line error containing every fragment.
void expect_error(const Run& r, int code, const std::vector<std::string>& fragments) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK(r.code == code);
  const std::string msg = one_line_error(r);
  for (const std::string& f : fragments) {
    INFO("expected the message to contain: " << f);
    CHECK(msg.find(f) != std::string::npos);
  }
}

void expect_ok(const Run& r) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
}

using remora_test::TempDir;

// About 3 KB of deterministic English-like text.
std::string corpus_text() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog",
                         "and", "runs", "to", "its", "den", "while", "birds", "sing", "of",
                         "summer", "rain"};
  std::string t;
  uint32_t x = 12345;
  int line = 0;
  while (t.size() < 3000) {
    x = x * 1103515245u + 12345u;
    t += words[(x >> 16) % 20];
    t += (++line % 11 == 0) ? ".\n" : " ";
  }
  return t;
}

// The tiny experiment every test starts from.
json tiny_config() {
  return json::parse(R"({
    "seed": 3,
    "device": "cpu",
    "model": {
      "type": "transformer_xl", "n_layer": 1, "d_model": 16, "n_head": 2, "d_inner": 32,
      "dropout": 0.1, "mem_len": 8,
      "attention": {"type": "rsa", "rem": {"regular": 1}, "gate": "head"}
    },
    "data": {"type": "char", "path": "", "seq_len": 8, "batch_size": 2},
    "train": {
      "steps": 6, "eval_every": 3, "eval_batches": 2, "log_every": 1, "threads": 1, "clip": 1.0,
      "optimizer": {"type": "adamw", "lr": 0.01},
      "schedule": {"type": "cosine", "warmup": 2, "min_lr_ratio": 0.1}
    }
  })");
}

struct Fixture {
  TempDir dir;
  std::string corpus, config;
  Fixture() {
    corpus = dir / "corpus.txt";
    write_all(corpus, corpus_text());
    config = dir / "tiny.json";
    write_config(config, base());
  }
  json base() const {
    json j = tiny_config();
    j["data"]["path"] = corpus;
    return j;
  }
  std::string write_config(const std::string& path, const json& j) const {
    write_all(path, j.dump(2));
    return path;
  }
  // A config file with `patch` merged into the base (RFC 7386 merge patch).
  std::string config_with(const std::string& name, const json& patch) const {
    json j = base();
    j.merge_patch(patch);
    return write_config(dir / name, j);
  }
  // Trains the base config into DIR (extra args appended) and expects success.
  std::string train(const std::string& out_name, std::vector<std::string> extra = {}) const {
    const std::string out = dir / out_name;
    std::vector<std::string> args{"train", config, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_ok(remora_cli(args));
    return out;
  }
};

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> v;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

std::vector<json> split_lines(const std::vector<json>& lines, const std::string& split) {
  std::vector<json> v;
  for (const json& j : lines)
    if (j.at("split") == split) v.push_back(j);
  return v;
}

// Raw safetensors surgery: header JSON and data buffer.
struct RawSafetensors {
  json header;
  std::string data;
  static RawSafetensors read(const std::string& path) {
    const std::string b = read_all(path);
    REQUIRE(b.size() >= 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(b[size_t(i)]);
    RawSafetensors r;
    r.header = json::parse(b.substr(8, size_t(n)));
    r.data = b.substr(8 + size_t(n));
    return r;
  }
  std::string bytes(const std::string& header_text) const {
    std::string h = header_text;
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    const uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
    return out + h + data;
  }
  std::string bytes() const { return bytes(header.dump()); }
  // Tensor names (not __metadata__) ordered by their data offset.
  std::vector<std::string> by_offset() const {
    std::vector<std::pair<uint64_t, std::string>> v;
    for (auto it = header.begin(); it != header.end(); ++it)
      if (it.key() != "__metadata__") v.emplace_back(it.value()["data_offsets"][0].get<uint64_t>(), it.key());
    std::sort(v.begin(), v.end());
    std::vector<std::string> names;
    for (auto& p : v) names.push_back(p.second);
    return names;
  }
};

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

}  // namespace

// ------------------------------------------------------------------ usage

TEST_CASE("driver: --help for every command exits 0; unknown commands and options exit 2", "[driver]") {
  for (const char* cmd : {"train", "eval", "generate", "infer", "gradcheck", "info", "plot", "export"}) {
    Run r = remora_cli({cmd, "--help"});
    INFO(cmd);
    CHECK(r.code == 0);
    CHECK(r.out.find(std::string("remora ") + cmd) != std::string::npos);
  }
  Run top = remora_cli({"--help"});
  CHECK(top.code == 0);
  CHECK(top.out.find("commands:") != std::string::npos);
  CHECK(remora_cli({}).code == 2);  // no command: usage on stderr

  Run unknown = remora_cli({"frobnicate"});
  CHECK(unknown.code == 2);
  CHECK(unknown.err.find("unknown command 'frobnicate'") != std::string::npos);

  Fixture fx;
  expect_error(remora_cli({"info", fx.config, "--bogus", "1"}), 2, {"unknown option --bogus"});
  expect_error(remora_cli({"info"}), 2, {"expected exactly one CONFIG argument"});
  // --time trains a few steps here and prints what it measured.
  Run timed = remora_cli({"info", fx.config, "--time", "2"});
  expect_ok(timed);
  CHECK_THAT(timed.out, Catch::Matchers::Contains("measured here:") && Catch::Matchers::Contains("tokens/s") &&
                            Catch::Matchers::Contains("s per training step"));
  expect_error(remora_cli({"info", fx.config, "--time", "0"}), 2, {"--time"});
  expect_error(remora_cli({"eval", fx.config}), 2, {"missing --checkpoint"});
  expect_error(remora_cli({"train", fx.config, "--until", "soon"}), 2, {"--until"});
  expect_error(remora_cli({"train", fx.config, "--resume=yes"}), 2, {"--resume takes no value"});
}

// ------------------------------------------------------------------ configs

TEST_CASE("driver: config errors exit 2 with one line naming the JSON path", "[driver]") {
  Fixture fx;
  SECTION("unknown key") {
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"colour", "red"}}}})}), 2,
                 {"model.colour: unknown key"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"optimiser", 1}})}), 2, {"optimiser: unknown key"});
  }
  SECTION("wrong type") {
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"d_model", "big"}}}})}), 2,
                 {"model.d_model: expected an integer, got a string"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"train", {{"optimizer", {{"lr", true}}}}}})}), 2,
                 {"train.optimizer.lr: expected a number, got a boolean"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"attention", 3}}}})}), 2,
                 {"model.attention: expected an object"});
  }
  SECTION("out of range") {
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"train", {{"optimizer", {{"lr", -1}}}}}})}), 2,
                 {"train.optimizer.lr: expected a number in [0, 1000], got -1"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"n_layer", 0}}}})}), 2,
                 {"model.n_layer: expected an integer in [1, 1024], got 0"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"attention", {{"type", "linear"}}}}}})}),
                 2, {"model.attention.type: unknown value \"linear\"", "softmax, rsa"});
  }
  SECTION("dilations length") {
    json rem = {{"regular", 0}, {"dilated_regular", 2}, {"dilations", {2, 3, 4}}};
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"attention", {{"rem", rem}}}}}})}), 2,
                 {"model.attention.rem.dilations: expected 2 entries, got 3"});
  }
  SECTION("train.precision not f32 or bf16") {
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"train", {{"precision", "fp16"}}}})}), 2,
                 {"train.precision: unknown value \"fp16\"", "f32, bf16"});
    expect_error(remora_cli({"train", fx.config, "--set", "train.precision=bfloat16", "--out", fx.dir / "p"}), 2,
                 {"train.precision: unknown value \"bfloat16\"", "f32, bf16"});
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"train", {{"precision", 16}}}})}), 2,
                 {"train.precision: expected a string, got an integer"});
  }
  SECTION("too many REM heads for the model") {
    json rem = {{"regular", 3}};
    expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"attention", {{"rem", rem}}}}}})}), 2,
                 {"model.attention.rem:", "n_head = 2"});
  }
  SECTION("missing data file") {
    const std::string missing = fx.dir / "no_such_corpus.txt";
    const std::string cfg = fx.config_with("c.json", {{"data", {{"path", missing}}}});
    // info summarises a recipe whose corpus is elsewhere, for the vocabulary given.
    Run info = remora_cli({"info", cfg, "--vocab", "205"});
    expect_ok(info);
    CHECK_THAT(info.out, Catch::Matchers::Contains(missing + " is not here") &&
                             Catch::Matchers::Contains("vocabulary of 205") &&
                             Catch::Matchers::Contains("tokens per step"));
    expect_error(remora_cli({"info", cfg, "--time", "2"}), 2, {"--time", "needs the corpus", missing});
    expect_error(remora_cli({"eval", cfg, "--checkpoint", fx.dir / "none.safetensors"}), 2,
                 {"data.path: file not found", missing});
    expect_error(remora_cli({"train", fx.config_with("c.json", {{"data", {{"path", missing}}}}), "--out",
                             fx.dir / "never"}),
                 2, {"data.path"});
    CHECK(!fs::exists(fx.dir / "never"));  // validated before any work
  }
  SECTION("malformed JSON") {
    const std::string bad = fx.dir / "bad.json";
    write_all(bad, "{\"seed\": 1,\n  \"model\": {\"type\": \"transformer_xl\",,}\n}\n");
    expect_error(remora_cli({"info", bad}), 2, {bad, "malformed JSON"});
    expect_error(remora_cli({"train", bad, "--out", fx.dir / "o"}), 2, {"malformed JSON"});
    write_all(bad, "[1, 2, 3]");
    expect_error(remora_cli({"info", bad}), 2, {"expected an object"});
    write_all(bad, "");
    expect_error(remora_cli({"info", bad}), 2, {"malformed JSON"});
  }
  SECTION("missing config file") {
    expect_error(remora_cli({"info", fx.dir / "nope.json"}), 2, {"nope.json", "cannot open config file"});
  }
}

TEST_CASE("driver: --set overrides any key", "[driver]") {
  Fixture fx;
  SECTION("numbers, strings and nested new keys") {
    Run r = remora_cli({"info", fx.config, "--set", "model.d_model=24", "--set", "model.n_head=4", "--set",
                        "model.attention.type=softmax"});
    expect_ok(r);
    CHECK(r.out.find("softmax attention") != std::string::npos);
    CHECK(r.out.find("d_model 24") != std::string::npos);
    CHECK(r.out.find("heads 4 x 6") != std::string::npos);
    // A quoted JSON string works too; a key path that the file does not have is created.
    Run n = remora_cli({"info", fx.config, "--set", "model.attention.gate=\"layer\"", "--set",
                        "model.attention.rem.init.theta=0.5", "--set", "model.attention.rem.cyclic=1",
                        "--set", "model.n_head=4", "--set", "model.d_model=32"});
    expect_ok(n);
    CHECK(n.out.find("cyclic pairs 1") != std::string::npos);
    CHECK(n.out.find("gate per layer") != std::string::npos);
    // The resolved config that train writes shows the overrides.
    const std::string out = fx.dir / "o";
    expect_ok(remora_cli({"train", fx.config, "--out", out, "--set", "train.steps=1", "--set",
                          "train.optimizer.lr=0.005", "--set", "model.pre_ln=true", "--set", "data.seq_len=4",
                          "--set", "train.clip=null"}));
    json resolved = json::parse(read_all(out + "/config.json"));
    CHECK(resolved["train"]["steps"] == 1);
    CHECK(resolved["train"]["optimizer"]["lr"].get<double>() == 0.005);
    CHECK(resolved["model"]["pre_ln"] == true);
    CHECK(resolved["data"]["seq_len"] == 4);
    CHECK(resolved["train"]["clip"].get<double>() == 0.0);  // null: back to the default
  }
  SECTION("overrides are validated like the file") {
    expect_error(remora_cli({"info", fx.config, "--set", "model.attention.rem.init.bogus=1"}), 2,
                 {"model.attention.rem.init.bogus: unknown key"});
    expect_error(remora_cli({"info", fx.config, "--set", "model.d_model=wide"}), 2,
                 {"model.d_model: expected an integer, got a string"});
    expect_error(remora_cli({"info", fx.config, "--set", "model.d_model=15"}), 2,
                 {"model.n_head", "not divisible"});
  }
  SECTION("bad syntax") {
    expect_error(remora_cli({"info", fx.config, "--set", "model.d_model"}), 2, {"expected key.path=value"});
    expect_error(remora_cli({"info", fx.config, "--set", "=3"}), 2, {"expected key.path=value"});
    // A config that is not an object takes no --set (fuzz_config found the
    // uncaught nlohmann type_error: tests/fuzz/corpus/config/regress-number-root-with-set).
    const std::string number = fx.write_config(fx.dir / "number.json", json(700));
    expect_error(remora_cli({"info", number, "--set", "a=1"}), 2, {"--set a: the config is number, not a JSON object"});
    expect_error(remora_cli({"info", fx.config, "--set", "model..d_model=3"}), 2, {"empty key in path"});
    expect_error(remora_cli({"info", fx.config, "--set", "seed.value=3"}), 2, {"seed is not an object"});
    expect_error(remora_cli({"info", fx.config, "--set"}), 2, {"--set needs a value"});
  }
}

// ------------------------------------------------------------------ the happy path

TEST_CASE("driver: a masked-LM batch with no masked token trains on with a zero loss", "[driver]") {
  Fixture fx;
  // Batches of 1 x 2 tokens: most draw no masked token (15% each), whose mean
  // loss would be 0 / 0.
  const std::string out = fx.dir / "mlm_empty";
  const Run r = remora_cli({"train", std::string(REMORA_SOURCE_DIR) + "/configs/bert.json", "--set", "data.batch_size=1",
                            "--set", "data.eval_batch_size=1", "--set", "data.seq_len=2", "--set", "train.steps=6",
                            "--set", "train.log_every=1", "--set", "train.eval_every=6", "--set", "train.eval_batches=2",
                            "--set", "model.n_layer=1", "--set", "model.d_model=16", "--set", "model.n_head=2",
                            "--set", "model.d_inner=32", "--set", "train.threads=1", "--out", out});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> train = split_lines(read_jsonl(out + "/metrics.jsonl"), "train");
  REQUIRE(train.size() == 6);
  int zero = 0;
  for (const json& l : train) {
    CHECK(std::isfinite(l["loss"].get<double>()));
    zero += l["loss"].get<double>() == 0;
  }
  CHECK(zero > 0);
}


TEST_CASE("driver: train, then eval, generate, infer, info succeed", "[driver]") {
  Fixture fx;
  const std::string out = fx.train("run");
  for (const char* f : {"last.safetensors", "best.safetensors", "metrics.jsonl", "config.json"})
    CHECK(fs::exists(out + "/" + f));
  CHECK(!fs::exists(out + "/last.safetensors.tmp"));

  // metrics.jsonl: one train line per step (log_every 1), a valid line every 3 steps.
  std::vector<json> lines = read_jsonl(out + "/metrics.jsonl");
  std::vector<json> train = split_lines(lines, "train"), valid = split_lines(lines, "valid");
  REQUIRE(train.size() == 6);
  REQUIRE(valid.size() == 2);
  for (const json& j : lines) {
    for (const char* k : {"step", "split", "loss", "bpc", "lr", "tokens_per_s", "elapsed"}) {
      INFO(j.dump() << " lacks " << k);
      CHECK(j.contains(k));
    }
    CHECK(std::isfinite(j["loss"].get<double>()));
    CHECK(j["bpc"].get<double>() == Approx(j["loss"].get<double>() / std::log(2.0)));
  }
  for (size_t i = 0; i < train.size(); ++i) CHECK(train[i]["step"] == int64_t(i + 1));
  CHECK(valid[0]["step"] == 3);
  CHECK(valid[1]["step"] == 6);
  CHECK(train[0]["loss"].get<double>() > 1.0);  // ~ln(vocab) at the start

  const std::string ck = out + "/last.safetensors";
  SECTION("eval") {
    for (const char* split : {"valid", "test"}) {
      Run r = remora_cli({"eval", fx.config, "--checkpoint", ck, "--split", split});
      expect_ok(r);
      json j = json::parse(r.out);
      CHECK(j["split"] == split);
      CHECK(j["tokens"].get<int64_t>() > 0);
      CHECK(std::isfinite(j["loss"].get<double>()));
      CHECK(j["bpc"].get<double>() == Approx(j["loss"].get<double>() / std::log(2.0)));
    }
    expect_error(remora_cli({"eval", fx.config, "--checkpoint", ck, "--split", "train"}), 2,
                 {"--split must be valid or test"});
  }
  SECTION("generate") {
    const std::string prompt = "the quick";
    Run r = remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", prompt, "--tokens", "12",
                        "--seed", "5", "--top-k", "3", "--temperature", "0.8"});
    expect_ok(r);
    REQUIRE(r.out.size() == prompt.size() + 12 + 1);
    CHECK(r.out.compare(0, prompt.size(), prompt) == 0);
    CHECK(r.out.back() == '\n');
    // The same seed gives the same text.
    Run again = remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", prompt, "--tokens", "12",
                            "--seed", "5", "--top-k", "3", "--temperature", "0.8"});
    CHECK(again.out == r.out);
    Run greedy = remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", "a", "--tokens", "5",
                             "--temperature", "0"});
    expect_ok(greedy);
    CHECK(greedy.out.size() == 1 + 5 + 1);
    expect_error(remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", "a", "--tokens", "-3"}), 2,
                 {"--tokens"});
    expect_error(remora_cli({"generate", fx.config, "--checkpoint", ck, "--tokens", "3"}), 2, {"missing --prompt"});
  }
  SECTION("infer") {
    const std::string ids = fx.dir / "ids.json", res = fx.dir / "infer.safetensors";
    write_all(ids, "[[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]");
    expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", ids, "--output", res, "--hidden"}));
    Safetensors st = load_safetensors(res);
    const Tensor& logits = st.get("logits");
    REQUIRE(logits.dim() == 3);
    CHECK(logits.size(0) == 2);
    CHECK(logits.size(1) == 5);
    const int64_t V = logits.size(2);
    CHECK(V > 10);
    for (int l = 0; l <= 1; ++l) {
      const Tensor& h = st.get("hidden." + std::to_string(l));
      CHECK(h.shape() == Shape{2, 5, 16});
    }
    CHECK(!st.contains("hidden.2"));
    for (double x : logits.to_vector()) REQUIRE(std::isfinite(x));

    // One sequence; no --hidden: logits only. Equal to row 0 of the batch.
    write_all(ids, "[1, 2, 3, 4, 5]");
    expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", ids, "--output", res, "--force"}));
    Safetensors one = load_safetensors(res);
    CHECK(one.get("logits").shape() == Shape{1, 5, V});
    CHECK(!one.contains("hidden.0"));
    // Not bit-equal in general: BLAS may block a 1-row and a 2-row batch differently
    // (it does with OpenBLAS on AMD Zen), so the sums round in another order. The
    // same computation agrees to f32 rounding (logits are O(1)).
    {
      const std::vector<double> a = one.get("logits").to_vector();
      const std::vector<double> b = logits.select(0, 0).contiguous().to_vector();
      REQUIRE(a.size() == b.size());
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      INFO("max |batch of 1 - row 0 of batch of 2| = " << worst);
      CHECK(worst <= 1e-6);
    }

    // A text file is encoded with the checkpoint's vocabulary.
    const std::string text = fx.dir / "prompt.txt";
    write_all(text, "the lazy dog");
    expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", text, "--output", res, "--force"}));
    CHECK(load_safetensors(res).get("logits").shape() == Shape{1, 12, V});

    CHECK(load_safetensors(res).get("lengths").to_i64_vector() == std::vector<int64_t>{12});

    // One sequence per line, of different lengths: each runs alone, its rows padded
    // with zeros to the longest; "lengths" says where each ends.
    write_all(text, "the lazy dog\n\nthe\r\nlazy dog\n");
    expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", text, "--lines", "--output", res,
                          "--force", "--hidden"}));
    {
      Safetensors lines = load_safetensors(res);
      CHECK(lines.get("lengths").to_i64_vector() == std::vector<int64_t>{12, 3, 8});
      const Tensor& lg = lines.get("logits");
      REQUIRE(lg.shape() == Shape{3, 12, V});
      CHECK(lines.get("hidden.0").shape() == Shape{3, 12, 16});
      // Row 1 ("the") is the logits of "the" run alone, then zeros.
      const std::string the = fx.dir / "the.txt", one_res = fx.dir / "the.safetensors";
      write_all(the, "the");
      expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", the, "--output", one_res}));
      const std::vector<double> alone = load_safetensors(one_res).get("logits").to_vector();
      const std::vector<double> row = lg.select(0, 1).contiguous().to_vector();
      double worst = 0;
      for (size_t i = 0; i < alone.size(); ++i) worst = std::max(worst, std::abs(alone[i] - row[i]));
      CHECK(worst == 0);
      for (size_t i = alone.size(); i < row.size(); ++i) REQUIRE(row[i] == 0);
    }
    // A batch of id arrays may be ragged too.
    write_all(ids, "[[1, 2], [3]]");
    expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", ids, "--output", res, "--force"}));
    CHECK(load_safetensors(res).get("logits").shape() == Shape{2, 2, V});

    // Bad inputs: infer exits 2 naming what is wrong with the ids file.
    for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
             {"[[1, 2], []]", "sequence 1 has no tokens"},
             {"[1, 2, 100000]", "id 100000 is outside the vocabulary"},
             {"[1, 2.5]", "ids must be integers"},
             {"[]", "no tokens"}}) {
      INFO("ids: " << bad);
      write_all(ids, bad);
      expect_error(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", ids, "--output", res}), 2,
                   {message});
    }
    expect_error(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", fx.dir / "none.json", "--output",
                             res}),
                 2, {"none.json", "cannot open"});
    write_all(ids, "[1, 2]");
    write_all(fx.dir / "plain_file", "x");
    expect_error(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", ids, "--output",
                             fx.dir / "plain_file/sub/out.safetensors"}),
                 2, {"--output", "plain_file/sub/out.safetensors"});
  }
  SECTION("info") {
    Run r = remora_cli({"info", fx.config});
    expect_ok(r);
    CHECK(r.out.find("rsa attention") != std::string::npos);
    CHECK(r.out.find("layers 1, d_model 16") != std::string::npos);
    CHECK(r.out.find("total") != std::string::npos);
    CHECK(r.out.find("memory estimate") != std::string::npos);
    CHECK(r.out.find("precision: f32") != std::string::npos);
    Run b = remora_cli({"info", fx.config, "--set", "train.precision=bf16"});
    expect_ok(b);
    CHECK(b.out.find("precision: bf16") != std::string::npos);
  }
  SECTION("plot") {
    if (!have_gnuplot()) {
      WARN("gnuplot is not installed: skipping `remora plot` (tools/scripts/setup.sh installs gnuplot-nox)");
      return;
    }
    Run r = remora_cli({"plot", out});
    expect_ok(r);
    const std::string png = read_all(out + "/loss.png");
    REQUIRE(png.size() > 8);
    CHECK(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
    expect_error(remora_cli({"plot", fx.dir / "no_run"}), 2, {"cannot open", "metrics.jsonl"});
  }
}

// train.precision = "bf16" (docs/precision.md): the same run as f32 from the
// same seed, dropout 0, 200 steps of the tiny Transformer-XL (RSA attention,
// 16-token batches). The bounds, from measurements (tools: this config with
// seeds 1-8; this test runs seed 3, deterministic on one thread):
// - step 1 (identical weights: only the forward's rounding differs): the
//   relative loss difference was 1e-6 .. 2e-5; bound 2^-9 (1.95e-3), bf16's
//   unit roundoff: one rounding of every operand cannot move a loss that is an
//   average of log-probabilities by more than that unless something is wrong.
// - later steps: the two runs' weights drift apart (every update differs by
//   ~2^-9), and on 16-token batches a small weight difference moves a batch's
//   loss by percents. bf16 vs f32 over seeds 1-8: worst step 1.6% .. 5.7%,
//   mean over the 200 steps 0.26% .. 0.95%, final validation loss (in f32, 2
//   batches) 0.09% .. 0.72%. An f32 run with lr * 1.002 (a 2^-9 perturbation,
//   no bf16 anywhere) differs from f32 just as much: worst 1.8% .. 3.8%, mean
//   0.2% .. 0.8%, validation up to 1.2%. So the spread is the divergence of two
//   nearby trajectories, not a bf16 bias. Bounds ~1.5x the largest of all 16
//   runs: every step (the final one included) 8e-2, the mean 1.5e-2, the final
//   validation loss 2e-2. A bias (a gradient rounded wrongly, a product not
//   accumulated in f32) would push the mean and the validation loss past them.
constexpr double kBf16FirstStepRtol = 0x1p-9;
constexpr double kBf16StepRtol = 8e-2, kBf16MeanRtol = 1.5e-2, kBf16ValidRtol = 2e-2;
TEST_CASE("driver: train.precision bf16 keeps the loss curve of f32 over 200 steps", "[driver][precision]") {
  Fixture fx;
  json patch = {{"model", {{"dropout", 0.0}}},
                {"train", {{"steps", 200}, {"eval_every", 0}, {"log_every", 1}}}};
  const std::string cfg = fx.config_with("parity.json", patch);
  auto losses = [&](const std::string& precision) {
    const std::string out = fx.dir / ("parity_" + precision);
    expect_ok(remora_cli({"train", cfg, "--out", out, "--set", "train.precision=" + precision}));
    std::vector<json> lines = read_jsonl(out + "/metrics.jsonl");
    std::vector<double> train;
    for (const json& j : split_lines(lines, "train")) train.push_back(j["loss"].get<double>());
    const std::vector<json> valid = split_lines(lines, "valid");
    REQUIRE(valid.size() == 1);
    train.push_back(valid[0]["loss"].get<double>());  // last: the final validation loss (in f32)
    return train;
  };
  const std::vector<double> f32 = losses("f32"), bf16 = losses("bf16");
  REQUIRE(f32.size() == 201);
  REQUIRE(bf16.size() == 201);
  double worst = 0, mean = 0;
  int64_t worst_step = 0, differing = 0;
  for (size_t i = 0; i < 200; ++i) {
    const double rel = std::fabs(bf16[i] - f32[i]) / f32[i];
    mean += rel / 200;
    differing += rel > 0;
    if (rel > worst) {
      worst = rel;
      worst_step = int64_t(i + 1);
    }
  }
  const double first = std::fabs(bf16[0] - f32[0]) / f32[0];
  const double final_train = std::fabs(bf16[199] - f32[199]) / f32[199];
  const double final_valid = std::fabs(bf16[200] - f32[200]) / f32[200];
  INFO("bf16 vs f32 training loss over 200 steps: step 1 " << first << ", worst " << worst << " at step "
       << worst_step << ", mean " << mean << ", final train " << final_train << ", final valid "
       << final_valid << " (f32 " << f32[0] << " -> " << f32[199] << ")");
  CHECK(differing > 100);            // bf16 really ran: the curves differ
  CHECK(f32[199] < 0.75 * f32[0]);   // it learned, so the comparison means something
  CHECK(first > 0);
  CHECK(first < kBf16FirstStepRtol);
  CHECK(worst < kBf16StepRtol);      // every step, the final one included
  CHECK(final_train < kBf16StepRtol);
  CHECK(mean < kBf16MeanRtol);
  CHECK(final_valid < kBf16ValidRtol);
}

TEST_CASE("driver: gradcheck runs the named ops", "[driver]") {
  Run r = remora_cli({"gradcheck", "matmul"});
  expect_ok(r);
  CHECK(r.out.find("0 failed") != std::string::npos);
  CHECK(r.out.find("matmul") != std::string::npos);
  expect_error(remora_cli({"gradcheck", "no_such_op"}), 2, {"unknown op 'no_such_op'", "matmul"});
}

// ------------------------------------------------------------------ resume

TEST_CASE("driver: --resume reproduces the uninterrupted run exactly", "[driver]") {
  Fixture fx;
  const std::string full = fx.train("full", {"--set", "train.steps=8", "--set", "train.eval_every=4"});
  // Interrupted at step 3 (not an eval step: --until saves an extra checkpoint there), then resumed.
  const std::string split = fx.dir / "split";
  expect_ok(remora_cli({"train", fx.config, "--out", split, "--set", "train.steps=8", "--set",
                        "train.eval_every=4", "--until", "3"}));
  {
    std::vector<json> half = split_lines(read_jsonl(split + "/metrics.jsonl"), "train");
    REQUIRE(half.size() == 3);
  }
  Run resumed = remora_cli({"train", fx.config, "--out", split, "--set", "train.steps=8", "--set",
                            "train.eval_every=4", "--resume"});
  expect_ok(resumed);
  CHECK(resumed.err.find("resumed from") != std::string::npos);

  std::vector<json> a = split_lines(read_jsonl(full + "/metrics.jsonl"), "train");
  std::vector<json> b = split_lines(read_jsonl(split + "/metrics.jsonl"), "train");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i]["step"]);
    CHECK(b[i]["step"] == a[i]["step"]);
    // Bitwise equal doubles (JSON numbers round-trip exactly).
    const double la = a[i]["loss"].get<double>(), lb = b[i]["loss"].get<double>();
    CHECK(std::memcmp(&la, &lb, sizeof(double)) == 0);
    CHECK(b[i]["lr"].get<double>() == a[i]["lr"].get<double>());
  }
  // The final validation point agrees too.
  std::vector<json> va = split_lines(read_jsonl(full + "/metrics.jsonl"), "valid");
  std::vector<json> vb = split_lines(read_jsonl(split + "/metrics.jsonl"), "valid");
  REQUIRE(!va.empty());
  REQUIRE(!vb.empty());
  CHECK(va.back()["step"] == 8);
  CHECK(vb.back()["step"] == 8);
  CHECK(va.back()["loss"].get<double>() == vb.back()["loss"].get<double>());

  // Identical final weights, optimizer state and carried state, bit for bit.
  Safetensors wa = load_safetensors(full + "/last.safetensors");
  Safetensors wb = load_safetensors(split + "/last.safetensors");
  REQUIRE(wa.tensors.size() == wb.tensors.size());
  for (size_t i = 0; i < wa.tensors.size(); ++i) {
    INFO(wa.tensors[i].first);
    REQUIRE(wa.tensors[i].first == wb.tensors[i].first);
    REQUIRE(wa.tensors[i].second.shape() == wb.tensors[i].second.shape());
    CHECK(wa.tensors[i].second.to_vector() == wb.tensors[i].second.to_vector());
  }
  CHECK(wa.metadata.at("step") == "8");
  CHECK(wb.metadata.at("step") == "8");
  CHECK(wa.metadata.at("rng_offset") == wb.metadata.at("rng_offset"));
  CHECK(wa.metadata.at("data_position") == wb.metadata.at("data_position"));

  SECTION("--resume without a checkpoint is an input error") {
    expect_error(remora_cli({"train", fx.config, "--out", fx.dir / "empty", "--resume"}), 2,
                 {"--resume: no checkpoint at", "empty/last.safetensors"});
  }
}

// ------------------------------------------------------------------ NaN stop

TEST_CASE("driver: a NaN loss stops training, names the step and keeps the good checkpoint", "[driver]") {
  Fixture fx;
  const std::string out = fx.train("run", {"--set", "train.steps=3"});
  const std::string last = out + "/last.safetensors";
  const std::string good = read_all(last);
  REQUIRE(!good.empty());
  // The largest learning rate the config allows blows the weights up within a few steps.
  // eval_every 1: the checkpoint would be rewritten after every step, so a good one
  // must never be replaced by one with non-finite weights.
  Run r = remora_cli({"train", fx.config, "--out", out, "--resume", "--allow-config-change", "--set",
                      "train.steps=200", "--set", "train.eval_every=1", "--set", "train.optimizer.lr=1000", "--set",
                      "train.clip=0", "--set", "train.schedule.type=constant"});
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  const std::string msg = r.err.substr(r.err.rfind("remora train:"));
  CHECK((msg.find("at step") != std::string::npos || msg.find("after step") != std::string::npos));
  CHECK((msg.find("NaN") != std::string::npos || msg.find("Inf") != std::string::npos ||
         msg.find("non-finite") != std::string::npos));
  CHECK(msg.find(last) != std::string::npos);
  // Whatever was saved before the blow-up is finite, and loads.
  Safetensors st = load_safetensors(last);
  for (const auto& kv : st.tensors)
    for (double x : kv.second.to_vector()) REQUIRE(std::isfinite(x));
  // ... and it is a checkpoint whose evaluation was finite: the blow-up was caught
  // before the non-finite model was saved (metrics.jsonl writes NaN as null).
  Run ev = remora_cli({"eval", fx.config, "--checkpoint", last});
  expect_ok(ev);
  CHECK(json::parse(ev.out)["loss"].is_number());
  for (const json& j : read_jsonl(out + "/metrics.jsonl")) {
    INFO(j.dump());
    if (j["split"] == "note") {  // the settings changed on resume, recorded
      CHECK(j["config_changed_on_resume"].dump().find("/train/optimizer/lr") != std::string::npos);
      continue;
    }
    CHECK(j["loss"].is_number());
  }

  SECTION("without evaluations in between, the blow-up leaves the checkpoint byte for byte") {
    write_all(last, good);
    // eval_every 0: the only checkpoint write would come after the last step,
    // which is never reached.
    Run again = remora_cli({"train", fx.config, "--out", out, "--resume", "--allow-config-change", "--set",
                            "train.steps=60", "--set", "train.eval_every=0", "--set", "train.optimizer.lr=1000",
                            "--set", "train.clip=0", "--set", "train.schedule.type=constant"});
    CHECK(again.code == 1);
    CHECK(again.err.find("at step") != std::string::npos);
    CHECK(read_all(last) == good);
  }
}

// ------------------------------------------------------------------ corrupt checkpoints

TEST_CASE("driver: corrupt or mismatched checkpoints are one-line input errors (exit 2)", "[driver]") {
  Fixture fx;
  const std::string out = fx.train("run", {"--set", "train.steps=2", "--set", "train.eval_every=0"});
  const std::string ck = out + "/last.safetensors";
  const std::string good = read_all(ck);
  const RawSafetensors raw = RawSafetensors::read(ck);
  const std::string bad = fx.dir / "bad.safetensors";
  auto eval_bad = [&](const std::string& bytes) {
    write_all(bad, bytes);
    return remora_cli({"eval", fx.config, "--checkpoint", bad});
  };

  SECTION("missing file") {
    expect_error(remora_cli({"eval", fx.config, "--checkpoint", fx.dir / "nope.safetensors"}), 2,
                 {"nope.safetensors", "cannot open"});
  }
  SECTION("truncated") {
    expect_error(eval_bad(good.substr(0, 5)), 2, {bad, "too short for the 8-byte header length"});
    expect_error(eval_bad(good.substr(0, good.size() / 3)), 2, {bad});  // inside the header or the data
    expect_error(eval_bad(good.substr(0, good.size() - 4)), 2, {bad, "fall outside the data buffer"});
  }
  SECTION("bad header length") {
    std::string b = good;
    for (int i = 0; i < 8; ++i) b[size_t(i)] = char(i == 5 ? 1 : 0);  // 2^40 bytes
    expect_error(eval_bad(b), 2, {bad, "header length", "exceeds the 100 MB limit"});
    const uint64_t n = good.size();  // longer than what follows the 8 bytes
    for (int i = 0; i < 8; ++i) b[size_t(i)] = char((n >> (8 * i)) & 0xff);
    expect_error(eval_bad(b), 2, {bad, "runs past the end"});
    b = good;
    b[0] = char(uint8_t(b[0]) - 8);  // the header is cut short: its JSON is invalid
    expect_error(eval_bad(b), 2, {bad, "header is not valid JSON"});
  }
  SECTION("offsets out of range") {
    RawSafetensors r = raw;
    const std::string name = r.by_offset().back();
    r.header[name]["data_offsets"][1] = r.data.size() + 64;
    expect_error(eval_bad(r.bytes()), 2, {bad, name, "fall outside the data buffer"});
  }
  SECTION("overlapping data") {
    RawSafetensors r = raw;
    const std::vector<std::string> names = r.by_offset();
    REQUIRE(names.size() > 2);
    json& off = r.header[names[1]]["data_offsets"];
    off = {off[0].get<uint64_t>() - 4, off[1].get<uint64_t>() - 4};
    expect_error(eval_bad(r.bytes()), 2, {bad, names[1], "(overlap)"});
  }
  SECTION("missing data") {
    RawSafetensors r = raw;
    const std::vector<std::string> names = r.by_offset();
    r.header.erase(names[1]);  // its bytes become a hole
    expect_error(eval_bad(r.bytes()), 2, {bad, names[2], "(hole)"});
    RawSafetensors t = raw;
    t.header.erase(names.back());  // trailing bytes nobody owns
    expect_error(eval_bad(t.bytes()), 2, {bad, "trailing or missing data"});
  }
  SECTION("unknown dtype") {
    RawSafetensors r = raw;
    const std::string name = r.by_offset().front();
    r.header[name]["dtype"] = "F8_E4M3";
    expect_error(eval_bad(r.bytes()), 2, {bad, name, "unknown dtype 'F8_E4M3'"});
  }
  SECTION("not a checkpoint") {
    RawSafetensors r = raw;
    r.header["__metadata__"]["format"] = "remora-infer";
    expect_error(eval_bad(r.bytes()), 2, {bad, "not a Remora checkpoint", "remora-infer"});
    RawSafetensors s = raw;
    s.header["__metadata__"]["step"] = "seven";
    expect_error(eval_bad(s.bytes()), 2, {bad, "\"step\" is not an integer"});
  }
  SECTION("positions, steps and seeds out of range are refused on resume, the file untouched") {
    for (const auto& kv : std::vector<std::pair<std::string, std::string>>{
             {"data_position", "-1"},
             {"data_position", "9223372036854775807"},
             {"step", "-3"},
             {"rng_offset", "-1"},
             {"rng_seed", "18446744073709551616"}}) {
      INFO(kv.first << " = " << kv.second);
      RawSafetensors r = raw;
      r.header["__metadata__"][kv.first] = kv.second;
      write_all(ck, r.bytes());
      expect_error(remora_cli({"train", fx.config, "--out", out, "--resume"}), 2, {ck, "\"" + kv.first + "\""});
      CHECK(read_all(ck) == r.bytes());
    }
    write_all(ck, good);
    // The largest seed survives the round trip: no sign flip in messages or metadata.
    RawSafetensors r = raw;
    r.header["__metadata__"]["rng_seed"] = "18446744073709551615";
    write_all(ck, r.bytes());
    expect_ok(remora_cli({"train", fx.config, "--out", out, "--resume", "--set", "train.steps=3"}));
    CHECK(load_safetensors(ck).metadata.at("rng_seed") == "18446744073709551615");
  }
  SECTION("shapes that do not fit the config") {
    Run r = remora_cli({"eval", fx.config, "--checkpoint", ck, "--set", "model.d_model=32"});
    expect_error(r, 2, {ck, "does not fit the config", "size mismatch for 'word_emb.emb_layers.0.weight'"});
    Run layers = remora_cli({"eval", fx.config, "--checkpoint", ck, "--set", "model.n_layer=2"});
    expect_error(layers, 2, {ck, "missing keys", "layers.1."});
    Run att = remora_cli({"infer", fx.config, "--checkpoint", ck, "--set", "model.attention.type=softmax",
                          "--input", fx.config, "--output", fx.dir / "x.safetensors"});
    expect_error(att, 2, {ck, "unexpected keys", "rem"});
  }
  SECTION("a checkpoint from another vocabulary") {
    const std::string other = fx.dir / "other.txt";
    write_all(other, std::string(400, 'x') + std::string(400, 'y'));
    Run r = remora_cli({"eval", fx.config, "--checkpoint", ck, "--set", "data.path=" + other});
    expect_error(r, 2, {"checkpoint vocabulary", other});
  }
  SECTION("--resume from an earlier version's checkpoint: keys added since, at their defaults, are no change") {
    RawSafetensors r = raw;
    json recorded = json::parse(r.header["__metadata__"]["config"].get<std::string>());
    REQUIRE(recorded["train"]["optimizer"].contains("decoupled_weight_decay"));
    recorded["train"]["optimizer"].erase("decoupled_weight_decay");  // a key this version added
    r.header["__metadata__"]["config"] = recorded.dump();
    write_all(ck, r.bytes());
    expect_ok(remora_cli({"train", fx.config, "--out", out, "--resume", "--set", "train.steps=3"}));
    // The same key at another value than its default is a change, named.
    recorded["train"]["optimizer"]["decoupled_weight_decay"] = true;
    r.header["__metadata__"]["config"] = recorded.dump();
    write_all(ck, r.bytes());
    expect_error(remora_cli({"train", fx.config, "--out", out, "--resume", "--set", "train.steps=4"}), 2,
                 {"configuration differs", "/train/optimizer/decoupled_weight_decay true -> false"});
  }
  SECTION("--resume from a corrupt checkpoint fails without touching it") {
    RawSafetensors r = raw;
    r.header[r.by_offset().front()]["dtype"] = "Q4";
    const std::string corrupt = r.bytes();
    write_all(ck, corrupt);
    expect_error(remora_cli({"train", fx.config, "--out", out, "--resume"}), 2, {ck, "unknown dtype 'Q4'"});
    CHECK(read_all(ck) == corrupt);
    // A changed model is refused on resume, naming the key; allowed, its shape
    // mismatch is an input error too; both leave the good checkpoint alone.
    write_all(ck, good);
    expect_error(remora_cli({"train", fx.config, "--out", out, "--resume", "--set", "model.d_inner=48"}), 2,
                 {"configuration differs", "/model/d_inner 32 -> 48", "--allow-config-change"});
    CHECK(read_all(ck) == good);
    expect_error(remora_cli({"train", fx.config, "--out", out, "--resume", "--allow-config-change", "--set",
                             "model.d_inner=48"}),
                 2, {"does not fit the config"});
    CHECK(read_all(ck) == good);
  }
}

// ------------------------------------------------------------------ output folders

TEST_CASE("driver: an unwritable --out is an input error before any work", "[driver]") {
  Fixture fx;
  const std::string file = fx.dir / "a_file";
  write_all(file, "not a folder");
  expect_error(remora_cli({"train", fx.config, "--out", file + "/run"}), 2, {"--out", file + "/run"});
  expect_error(remora_cli({"train", fx.config, "--out", file}), 2, {"--out", file});
  CHECK(read_all(file) == "not a folder");
}

// ------------------------------------------------------------------ PyTorch interop

// tests/data/torch_xl_weights.safetensors was written by tools/goldens/checkpoint_interop.py
// from a PyTorch-initialised tools/torch_ref MemTransformerLM (bare weights: no
// Remora checkpoint metadata); torch_xl_expected.safetensors holds the ids it ran
// and PyTorch's logits. See that script for the model config (repeated here).
TEST_CASE("driver: a PyTorch-written safetensors file loads through the driver", "[driver]") {
  const std::string weights = std::string(REMORA_TEST_DATA) + "/torch_xl_weights.safetensors";
  const std::string expected = std::string(REMORA_TEST_DATA) + "/torch_xl_expected.safetensors";
  Safetensors exp = load_safetensors(expected);
  Safetensors w = load_safetensors(weights);
  CHECK(w.metadata.count("format") == 1);
  CHECK(w.metadata.at("format") == "pt");
  const json cfg_json = json::parse(exp.metadata.at("remora_config"));

  Fixture fx;
  json cfg = cfg_json;
  cfg["data"]["path"] = fx.corpus;  // bytes: 256 symbols whatever the text
  const std::string config = fx.write_config(fx.dir / "torch.json", cfg);

  const Tensor ids = exp.get("ids");  // i64 [B, L]
  std::string ids_json = "[";
  for (int64_t b = 0; b < ids.size(0); ++b) {
    ids_json += b ? ", [" : "[";
    for (int64_t t = 0; t < ids.size(1); ++t)
      ids_json += (t ? ", " : "") + std::to_string(ids.to_i64_vector()[size_t(b * ids.size(1) + t)]);
    ids_json += "]";
  }
  ids_json += "]";
  write_all(fx.dir / "ids.json", ids_json);
  const std::string res = fx.dir / "logits.safetensors";
  expect_ok(remora_cli({"infer", config, "--checkpoint", weights, "--input", fx.dir / "ids.json", "--output", res}));
  const Tensor got = load_safetensors(res).get("logits");
  const Tensor want = exp.get("logits");
  REQUIRE(got.shape() == want.shape());
  std::vector<double> g = got.to_vector(), t = want.to_vector();
  double max_err = 0;
  for (size_t i = 0; i < g.size(); ++i) max_err = std::max(max_err, std::fabs(g[i] - t[i]));
  INFO("max |remora - torch| = " << max_err);
  CHECK(max_err < 1e-4);

  // eval and generate accept bare weights too; resuming from them does not.
  expect_ok(remora_cli({"eval", config, "--checkpoint", weights}));
  Run gen = remora_cli({"generate", config, "--checkpoint", weights, "--prompt", "ab", "--tokens", "4"});
  expect_ok(gen);
  CHECK(gen.out.size() == 2 + 4 + 1);
  const std::string out = fx.dir / "resume";
  fs::create_directories(out);
  fs::copy_file(weights, out + "/last.safetensors");
  expect_error(remora_cli({"train", config, "--out", out, "--resume"}), 2,
               {"bare weights file", "resume"});
  // A bare file that does not fit the config names the keys.
  expect_error(remora_cli({"eval", config, "--checkpoint", weights, "--set", "model.d_inner=8"}), 2,
               {"size mismatch for 'layers.0.pos_ff.CoreNet.0.weight'"});
}

// Both attentions train, evaluate and infer in the registry loop below; here
// what it does not look at: the MLM metrics, hidden states, generate refused.
TEST_CASE("driver: export writes a softmax BERT as a HuggingFace directory, an RSA-BERT in Remora's layout",
          "[driver][bert][text_driver]") {
  Fixture fx;
  for (const std::string att : {"softmax", "rsa"}) {
    INFO("attention " << att);
    json patch = {{"model",
                   {{"type", "bert"}, {"mem_len", nullptr},
                    {"attention", att == "rsa" ? json{{"type", "rsa"}, {"rem", {{"regular", 1}, {"cyclic", 0}}}}
                                               : json{{"type", "softmax"}, {"rem", nullptr}, {"gate", nullptr}}}}},
                  {"train", {{"steps", 3}, {"eval_every", 0}}}};
    const std::string cfg = fx.config_with("bert_export_" + att + ".json", patch);
    const std::string run = fx.dir / ("bert_export_run_" + att), out = fx.dir / ("bert_export_" + att);
    expect_ok(remora_cli({"train", cfg, "--out", run}));
    expect_ok(remora_cli({"export", "--checkpoint", run + "/last.safetensors", "--out", out}));
    const json config = json::parse(read_all(out + "/config.json"));
    const std::string ids = fx.dir / "export_ids.json", want = fx.dir / ("want_" + att + ".safetensors"),
                      got = fx.dir / ("got_" + att + ".safetensors");
    write_all(ids, "[[1, 2, 3, 4], [4, 3, 2, 1]]");
    expect_ok(remora_cli({"infer", cfg, "--checkpoint", run + "/last.safetensors", "--input", ids, "--output", want}));
    if (att == "softmax") {
      // HF's BertConfig, loadable by from_pretrained; Remora's config beside it.
      CHECK(config["model_type"] == "bert");
      CHECK(!config.contains("model"));
      CHECK(json::parse(read_all(out + "/remora_config.json"))["model"]["type"] == "bert");
      // Run as an HF directory: the same logits as the checkpoint.
      expect_ok(remora_cli({"infer", out + "/config.json", "--checkpoint", out + "/model.safetensors", "--input", ids,
                            "--output", got}));
    } else {
      CHECK(config["model"]["type"] == "bert");
      CHECK(!fs::exists(out + "/remora_config.json"));
      expect_ok(remora_cli({"infer", "--checkpoint", out + "/model.safetensors", "--input", ids, "--output", got}));
    }
    // Config-free use reads the Remora config from the weights' metadata either way.
    const std::vector<double> a = load_safetensors(want).get("logits").to_vector();
    const std::vector<double> b = load_safetensors(got).get("logits").to_vector();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-5));
    Run ev = remora_cli({"eval", "--checkpoint", out + "/model.safetensors"});
    expect_ok(ev);
    CHECK(json::parse(ev.out).contains("mlm_accuracy"));
  }
}

TEST_CASE("driver: bert and rsa-bert train by MLM, evaluate and infer", "[driver][bert]") {
  Fixture fx;
  for (const char* att : {"rsa"}) {
    INFO("attention " << att);
    json patch = {{"model",
                   {{"type", "bert"}, {"mem_len", nullptr},
                    {"attention", att == std::string("rsa")
                                      ? json{{"type", "rsa"}, {"rem", {{"regular", 1}, {"cyclic", 0}}}}
                                      : json{{"type", "softmax"}, {"rem", nullptr}, {"gate", nullptr}}}}}};
    const std::string cfg = fx.config_with(std::string("bert_") + att + ".json", patch);
    const std::string out = fx.dir / (std::string("bert_out_") + att);
    expect_ok(remora_cli({"train", cfg, "--out", out}));
    Run ev = remora_cli({"eval", cfg, "--checkpoint", out + "/last.safetensors"});
    expect_ok(ev);
    json m = json::parse(ev.out);
    CHECK(m.contains("mlm_accuracy"));
    CHECK(m["loss"].get<double>() > 0);
    const std::string ids = fx.dir / "bert_ids.json", res = fx.dir / "bert_infer.safetensors";
    write_all(ids, "[[1, 2, 3, 4], [4, 3, 2, 1]]");
    expect_ok(remora_cli({"infer", cfg, "--checkpoint", out + "/last.safetensors", "--input", ids,
                          "--output", res, "--hidden", "--force"}));
    Safetensors st = load_safetensors(res);
    CHECK(st.get("logits").size(0) == 2);
    CHECK(st.get("logits").size(1) == 4);
    CHECK(st.contains("hidden.1"));
    // generate is a causal-LM command
    expect_error(remora_cli({"generate", cfg, "--checkpoint", out + "/last.safetensors", "--prompt", "ab",
                             "--tokens", "3"}),
                 2, {"transformer_xl"});
  }
  // An XL-only key on a bert model is an unknown key.
  const std::string bad = fx.config_with("bert_bad.json", {{"model", {{"type", "bert"}, {"mem_len", 4}}}});
  expect_error(remora_cli({"info", bad}), 2, {"model.mem_len", "unknown key"});
}

TEST_CASE("driver: infer on a HuggingFace BERT directory reproduces its MLM logits", "[driver][bert]") {
  const std::string dir = std::string(REMORA_TEST_DATA) + "/hf_bert_tiny";
  TempDir tmp;
  const std::string out = tmp / "hf_out.safetensors";
  expect_ok(remora_cli({"infer", dir + "/config.json", "--checkpoint", dir + "/model.safetensors", "--input",
                        std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_ids.json", "--output", out}));
  Tensor got = load_safetensors(out).get("logits");
  Tensor want = load_safetensors(std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_expected.safetensors").get("mlm_logits");
  REQUIRE(got.shape() == want.shape());
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(std::fabs(g[i] - w[i]) <= 1e-5 + 1e-4 * std::fabs(w[i]));
  // A config.json that is not a valid BertConfig is an input error.
  const std::string bad = tmp / "config.json";
  write_all(bad, R"({"model_type": "bert", "hidden_size": 7, "num_attention_heads": 2})");
  expect_error(remora_cli({"infer", bad, "--checkpoint", dir + "/model.safetensors", "--input",
                           std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_ids.json", "--output", out}),
               2, {"config.json"});
}

TEST_CASE("driver: regular-language and time-series tasks train and evaluate", "[driver]") {
  Fixture fx;
  const std::string reg = fx.config_with(
      "regular.json", {{"model", {{"mem_len", nullptr}}},
                       {"data", {{"type", "regular"}, {"language", "tomita3"}, {"n_train", 50}, {"n_test", 20},
                                 {"path", nullptr}, {"seq_len", nullptr}}}});
  const std::string out = fx.dir / "reg_out";
  expect_ok(remora_cli({"train", reg, "--out", out}));
  Run ev = remora_cli({"eval", reg, "--checkpoint", out + "/best.safetensors"});
  expect_ok(ev);
  json m = json::parse(ev.out);
  REQUIRE(m["bin_accuracy"].size() == 2);  // 51-100 and 101-150
  CHECK(m["accuracy"].get<double>() >= 0);
  expect_error(remora_cli({"info", fx.config_with("reg_bad.json", {{"data", {{"type", "regular"},
                                                                              {"language", "tomita9"},
                                                                              {"path", nullptr},
                                                                              {"seq_len", nullptr}}}})}),
               2, {"data.language", "tomita9"});

  const std::string ts = fx.config_with(
      "series.json", {{"model", {{"mem_len", nullptr}}},
                      {"data", {{"type", "timeseries"}, {"length", 400}, {"context", 16}, {"horizon", 4},
                                {"path", nullptr}, {"seq_len", nullptr}}}});
  const std::string tout = fx.dir / "ts_out";
  expect_ok(remora_cli({"train", ts, "--out", tout}));
  Run tev = remora_cli({"eval", ts, "--checkpoint", tout + "/best.safetensors", "--split", "test"});
  expect_ok(tev);
  json t = json::parse(tev.out);
  CHECK(t["mse"].get<double>() > 0);
  CHECK(t["mae"].get<double>() > 0);
  expect_error(remora_cli({"info", fx.config_with("ts_bad.json", {{"data", {{"type", "timeseries"},
                                                                             {"periods", {24, 12}},
                                                                             {"amplitudes", {1.0}},
                                                                             {"path", nullptr},
                                                                             {"seq_len", nullptr}}}})}),
               2, {"data.amplitudes", "expected 2 entries"});
}

TEST_CASE("driver: copy, denoise and membership classification train and evaluate", "[driver]") {
  Fixture fx;
  const json no_lm = {{"path", nullptr}, {"seq_len", nullptr}};
  json copy = {{"model", {{"mem_len", nullptr}}},
               {"data", {{"type", "copy"}, {"delay", 6}, {"copy_len", 3}, {"symbols", 4}, {"n_test", 5}}}};
  copy["data"].update(no_lm);
  const std::string cfg = fx.config_with("copy.json", copy);
  for (const std::string& task : {"copy", "denoise"}) {
    const std::string out = fx.dir / (task + "_out");
    expect_ok(remora_cli({"train", cfg, "--set", "data.type=" + task, "--out", out}));
    Run ev = remora_cli({"eval", cfg, "--set", "data.type=" + task, "--checkpoint", out + "/best.safetensors",
                         "--split", "test"});
    expect_ok(ev);
    json m = json::parse(ev.out);
    INFO(task << ": " << ev.out);
    CHECK(m["tokens"].get<int64_t>() == 5 * 3);  // n_test sequences x copy_len answers
    CHECK(m["accuracy"].get<double>() >= 0);
    CHECK(m["accuracy"].get<double>() <= 1);
  }
  expect_error(remora_cli({"info", cfg, "--set", "data.type=denoise", "--set", "data.delay=3"}), 2,
               {"data.delay", "delay >= copy_len + 1"});
  expect_error(remora_cli({"info", cfg, "--set", "model.type=bert", "--set", "model.mem_len=null"}), 2,
               {"model.type", "encoder"});

  json cls = {{"model", {{"type", "bert"}, {"mem_len", nullptr}, {"attention", {{"type", "softmax"}}}}},
              {"data", {{"type", "classify"}, {"language", "parity"}, {"n_train", 40}, {"n_test", 10}}}};
  cls["data"].update(no_lm);
  const std::string ccfg = fx.config_with("cls.json", cls);
  const std::string cout_dir = fx.dir / "cls_out";
  expect_ok(remora_cli({"train", ccfg, "--out", cout_dir}));
  Run ev = remora_cli({"eval", ccfg, "--checkpoint", cout_dir + "/best.safetensors"});
  expect_ok(ev);
  json m = json::parse(ev.out);
  CHECK(m["bin_accuracy"].size() == 2);
  CHECK(m["accuracy"].get<double>() >= 0);
  expect_error(remora_cli({"info", ccfg, "--set", "model.type=transformer_xl"}), 2,
               {"model.type", "classify needs an encoder"});
  // StarSaber classifies too (mean pooling over the real tokens).
  json ss = fx.base();
  ss["model"] = {{"type", "starsaber"}, {"d_model", 16}, {"n_layer", 2}};
  ss["data"] = cls["data"];
  const std::string scfg = fx.write_config(fx.dir / "cls_ss.json", ss);
  expect_ok(remora_cli({"train", scfg, "--out", fx.dir / "cls_ss"}));
  Run sev = remora_cli({"eval", scfg, "--checkpoint", fx.dir / "cls_ss/best.safetensors", "--split", "test"});
  expect_ok(sev);
  CHECK(json::parse(sev.out)["bin_accuracy"].size() == 2);
}

namespace {

// Runs `check` on every variant in its own section, with the variant's config
// written to PATH in a temporary folder DIR; prints how long each took.
void for_each_variant(const std::vector<remora_test::Variant>& variants, const std::string& what,
                      const std::function<void(const remora_test::Variant& v, const TempDir& dir,
                                               const std::string& name, const std::string& path)>& check) {
  REQUIRE(!variants.empty());
  TempDir dir;
  for (const remora_test::Variant& v : variants) {
    DYNAMIC_SECTION(v.name) {
      const auto t0 = std::chrono::steady_clock::now();
      std::string name = v.name;
      std::replace(name.begin(), name.end(), '/', '_');
      const std::string path = dir / (name + ".json");
      write_all(path, v.config.dump(2));
      check(v, dir, name, path);
      std::printf("driver registry: %-24s %s in %.2f s\n", v.name.c_str(), what.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
}

}  // namespace

TEST_CASE("driver: every registered model type trains, resumes exactly, evaluates and generates or infers", "[driver]") {
  for_each_variant(remora_test::model_variants(), "train, resume, eval, generate or infer",
                   [](const remora_test::Variant& v, const TempDir& dir, const std::string& name,
                      const std::string& path) {
    const std::string full = dir / (name + "_full"), part = dir / (name + "_part");
    const int64_t steps = v.config["train"]["steps"].get<int64_t>();
    REQUIRE(steps >= 3);
    expect_ok(remora_cli({"train", path, "--out", full}));
    // Interrupted before the last step (and not at an evaluation), then resumed: the
    // carried state, the data position and the optimizer survive the checkpoint.
    const int64_t every = v.config["train"]["eval_every"].get<int64_t>();
    int64_t until = steps - 1;
    while (until > 1 && until % every == 0) --until;
    expect_ok(remora_cli({"train", path, "--out", part, "--until", std::to_string(until)}));
    expect_ok(remora_cli({"train", path, "--out", part, "--resume"}));
    const auto a = split_lines(read_jsonl(full + "/metrics.jsonl"), "train");
    const auto b = split_lines(read_jsonl(part + "/metrics.jsonl"), "train");
    REQUIRE(a.size() == size_t(steps));
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i]["loss"].get<double>() == b[i]["loss"].get<double>());
    CHECK(read_all(full + "/last.safetensors") == read_all(part + "/last.safetensors"));
    // eval on both splits.
    for (const char* split : {"valid", "test"}) {
      Run ev = remora_cli({"eval", path, "--checkpoint", full + "/last.safetensors", "--split", split});
      expect_ok(ev);
      const double loss = json::parse(ev.out)["loss"].get<double>();
      CHECK(std::isfinite(loss));
      CHECK(loss > 0);
    }
    // generate (causal types) or infer (encoders).
    if (remora_test::parse_variant(v.config).model.def->is_encoder()) {
      const std::string ids = dir / "ids.json", res = dir / (name + "_infer.safetensors");
      write_all(ids, "[[1, 2, 3, 4], [4, 3, 2, 1]]");
      expect_ok(remora_cli({"infer", path, "--checkpoint", full + "/last.safetensors", "--input", ids, "--output",
                            res}));
      const Tensor logits = load_safetensors(res).get("logits");
      CHECK(logits.size(0) == 2);
      CHECK(logits.size(1) == 4);
      for (double x : logits.to_vector()) REQUIRE(std::isfinite(x));
    } else {
      Run g = remora_cli({"generate", path, "--checkpoint", full + "/last.safetensors", "--prompt", "the",
                          "--tokens", "5", "--seed", "1"});
      expect_ok(g);
      if (v.config["data"]["type"] == "words") {
        // The prompt's word and 5 tokens: each a word after a space or line break, or <eos> as a line break.
        std::istringstream words(g.out);
        size_t n = 0;
        for (std::string w; words >> w;) ++n;
        INFO(g.out);
        CHECK(n + size_t(std::count(g.out.begin(), g.out.end(), '\n')) - 1 == 1 + 5);
      } else {
        CHECK(g.out.size() == 3 + 5 + 1);
      }
    }
  });
}

TEST_CASE("driver: every registered task trains and evaluates its tiny config", "[driver]") {
  for_each_variant(remora_test::task_variants(), "train, eval",
                   [](const remora_test::Variant& v, const TempDir& dir, const std::string& name,
                      const std::string& path) {
    const std::string out = dir / (name + "_out");
    expect_ok(remora_cli({"train", path, "--out", out}));
    const auto lines = read_jsonl(out + "/metrics.jsonl");
    CHECK(split_lines(lines, "train").size() == size_t(v.config["train"]["steps"].get<int64_t>()));
    CHECK(!split_lines(lines, "valid").empty());
    for (const char* split : {"valid", "test"}) {
      Run ev = remora_cli({"eval", path, "--checkpoint", out + "/best.safetensors", "--split", split});
      expect_ok(ev);
      INFO(split << ": " << ev.out);
      CHECK(std::isfinite(json::parse(ev.out)["loss"].get<double>()));
    }
  });
}

TEST_CASE("driver: keys of another model type are unknown keys; model constraints name the key", "[driver]") {
  Fixture fx;
  // Keys of another model type are unknown keys; the screening cells are single-layer.
  json bad = fx.base();
  bad["model"] = {{"type", "relrnn"}, {"n_layer", 2}};
  expect_error(remora_cli({"info", fx.write_config(fx.dir / "bad1.json", bad)}), 2, {"model.n_layer", "single-layer"});
  bad["model"] = {{"type", "lstm"}, {"n_head", 2}};
  expect_error(remora_cli({"info", fx.write_config(fx.dir / "bad2.json", bad)}), 2, {"model.n_head"});
  bad["model"] = {{"type", "starsaber"}, {"causal", true}};
  bad["data"] = {{"type", "copy"}};
  expect_error(remora_cli({"info", fx.write_config(fx.dir / "bad3.json", bad)}), 2, {"model.causal"});
}

// ------------------------------------------------------------------ the registries

TEST_CASE("driver: the model and task registries drive config validation", "[driver]") {
  Fixture fx;
  // Every registered model type and data type is listed when the value is unknown.
  Run bad_model = remora_cli({"info", fx.config_with("c.json", {{"model", {{"type", "gpt9"}}}})});
  expect_error(bad_model, 2, {"model.type: unknown value \"gpt9\""});
  for (const std::string& t : driver::model_type_names()) CHECK(bad_model.err.find(t) != std::string::npos);
  CHECK(driver::model_type_names().size() == driver::model_registry().size());
  Run bad_data = remora_cli({"info", fx.config_with("c.json", {{"data", {{"type", "video"}}}})});
  expect_error(bad_data, 2, {"data.type: unknown value \"video\""});
  for (const std::string& t : driver::data_type_names()) CHECK(bad_data.err.find(t) != std::string::npos);

  // Each data type has a task for at least one model kind, and every task can be built.
  for (const std::string& d : driver::data_type_names()) {
    INFO(d);
    CHECK((driver::find_task(d, true) || driver::find_task(d, false)));
    CHECK(driver::task_for_data(d) != nullptr);
  }
  for (const driver::TaskEntry& t : driver::task_registry()) CHECK(t.make() != nullptr);

  // The capability lists in errors come from the registry.
  expect_error(remora_cli({"info", fx.config_with("c.json", {{"data", {{"type", "classify"}, {"language", "parity"}, {"path", nullptr}, {"seq_len", nullptr}}}})}),
               2, {"model.type", "needs an encoder model (bert or starsaber)"});
  expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"type", "rnn"}, {"n_head", nullptr},
                                                                         {"d_inner", nullptr}, {"mem_len", nullptr},
                                                                         {"attention", nullptr}}},
                                                             {"data", {{"type", "timeseries"}, {"path", nullptr},
                                                                       {"seq_len", nullptr}}}})}),
               2, {"model.type", "use transformer_xl or srupp, got rnn"});
  // A key of another model type is an unknown key of this one.
  expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"type", "srupp"}, {"n_head", 2},
                                                                         {"d_inner", nullptr}, {"mem_len", nullptr},
                                                                         {"attention", nullptr}}}})}),
               2, {"model.n_head: unknown key"});
  expect_error(remora_cli({"info", fx.config_with("c.json", {{"model", {{"mem_len", nullptr}, {"gated", true}}}})}),
               2, {"model.gated: unknown key"});
}

TEST_CASE("driver: a task builds the data of a shard; world 1 is the whole data set", "[driver]") {
  Fixture fx;
  driver::Config cfg = driver::load_config(fx.config);
  CHECK(cfg.task == "lm");
  driver::ExperimentOptions whole;
  driver::Experiment a(cfg, whole), b(cfg);
  CHECK(a.data_position() == 0);
  CHECK(a.vocab_json() == b.vocab_json());
  // Rank 1 of 2 builds the same data (it keeps its rows of each global batch);
  // a batch that does not divide among the ranks is an input error that says so.
  driver::ExperimentOptions two;
  two.shard = {1, 2};
  driver::Experiment half(cfg, two);
  CHECK(half.data_position() == 0);
  driver::ExperimentOptions three;
  three.shard = {0, 3};
  REQUIRE(cfg.data.batch_size % 3 != 0);
  try {
    driver::Experiment e(cfg, three);
    FAIL("a batch that does not divide among 3 ranks was accepted");
  } catch (const driver::InputError& e) {
    CHECK(std::string(e.what()).find("does not divide among 3 ranks") != std::string::npos);
  }
  driver::ExperimentOptions bad;
  bad.shard = {1, 1};
  try {
    driver::Experiment e(cfg, bad);
    FAIL("rank 1 of world 1 was accepted");
  } catch (const driver::InputError& e) {
    CHECK(std::string(e.what()).find("rank 1 of world 1") != std::string::npos);
  }
}

TEST_CASE("driver: one command per run; a later command name is an argument", "[driver]") {
  expect_error(remora_cli({"gradcheck", "plot"}), 2, {"unknown op 'plot'"});
  expect_error(remora_cli({"info", "train"}), 2, {"train: cannot open config file"});
  // Options take values that look like options or command names.
  Fixture fx;
  expect_error(remora_cli({"eval", fx.config, "--checkpoint", "train"}), 2, {"train"});
}

// ---- memory ----

#if defined(__SANITIZE_ADDRESS__)
#define REMORA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMORA_TEST_ASAN 1
#endif
#endif

namespace {
// Runs the remora binary (not in-process) and returns its peak resident set in MiB.
double peak_rss_mib_of(std::vector<std::string> args) {
  args.insert(args.begin(), REMORA_CLI_PATH);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return double(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}
}  // namespace

TEST_CASE("driver: a CPU run maps no CUDA library (the CUDA backend is a plugin loaded on demand)", "[driver][memory]") {
#ifdef REMORA_TEST_ASAN
  SUCCEED("ASan's shadow memory makes resident sizes meaningless here; the Release suite checks this");
#else
  // cuBLAS alone is ~150 MiB resident once mapped (measured 227 MiB for
  // `remora --help` when libremora linked it); without it `info` needs ~20 MiB.
  const std::string cfg = std::string(REMORA_SOURCE_DIR) + "/configs/default.json";
  const double mib = peak_rss_mib_of({"info", cfg});
  INFO("remora info peak RSS " << mib << " MiB");
  CHECK(mib < 64);
#endif
}

TEST_CASE("driver: train --memory-report prints where the resident memory went", "[driver][memory]") {
  Fixture fx;
  Run r = remora_cli({"train", fx.config, "--out", fx.dir / "mem", "--memory-report"});
  expect_ok(r);
  for (const char* s : {"memory report", "startup (libraries, config)", "data and model built", "after step 1",
                        "exact sizes: parameters", "cpu allocator: peak live", "peak reserved", "peak RSS"})
    CHECK(r.err.find(s) != std::string::npos);
  Run quiet = remora_cli({"train", fx.config, "--out", fx.dir / "mem2"});
  expect_ok(quiet);
  CHECK(quiet.err.find("memory report") == std::string::npos);
}

TEST_CASE("driver: info reports how a Transformer-XL's activations grow with the segment length", "[driver][memory]") {
  Fixture fx;
  Run r = remora_cli({"info", fx.config});  // an RSA-XL
  expect_ok(r);
  const std::string all = r.out + r.err;
  for (const char* s : {"activations by segment length", "inside the fused attention on cpu: linear in L",
                        "mem_len = seq_len"})
    CHECK(all.find(s) != std::string::npos);
  CHECK(all.find("positional scores") == std::string::npos);  // not in the CPU's estimate
}

TEST_CASE("driver: a CUDA plugin that cannot load is a clear error naming it", "[driver][memory]") {
  Fixture fx;
  const std::string bogus = (fx.dir / "no_such_dir") + "/libremora_cuda.so";
  const std::string cmd = "REMORA_CUDA_PLUGIN=" + bogus + " " + REMORA_CLI_PATH + " train " + fx.config +
                          " --set device=cuda --out " + (fx.dir / "cu") + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = ::pclose(p);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(out.find("device cuda:0 was requested, but") != std::string::npos);
  // A CUDA build names the plugin it tried; a build without CUDA says it has none.
  CHECK((out.find(bogus + " could not be loaded") != std::string::npos ||
         out.find("has no CUDA backend") != std::string::npos));
}

// ------------------------------------------------------------------ the run directory's rules

TEST_CASE("driver: a run directory's earlier run is never lost without a word", "[driver][rundir]") {
  Fixture fx;
  const std::string out = fx.train("run", {"--set", "train.steps=2"});
  const std::string last = read_all(out + "/last.safetensors"), metrics = read_all(out + "/metrics.jsonl");
  // Training again without --resume is refused and says how to go on; nothing changes.
  expect_error(remora_cli({"train", fx.config, "--out", out}), 2,
               {out, "already holds a training run", "--resume", "--overwrite"});
  CHECK(read_all(out + "/last.safetensors") == last);
  CHECK(read_all(out + "/metrics.jsonl") == metrics);
  // --overwrite replaces it; --resume and --overwrite together make no sense.
  expect_error(remora_cli({"train", fx.config, "--out", out, "--resume", "--overwrite"}), 2,
               {"--resume and --overwrite"});
  expect_ok(remora_cli({"train", fx.config, "--out", out, "--overwrite", "--set", "train.steps=3"}));
  CHECK(load_safetensors(out + "/last.safetensors").metadata.at("step") == "3");
  // Empty and root outputs are refused.
  expect_error(remora_cli({"train", fx.config, "--out", ""}), 2, {"--out"});
  expect_error(remora_cli({"train", fx.config, "--out", "/"}), 2, {"root directory"});
  // A directory in use by another training is refused at once, naming its pid.
  {
    train::RunDirectoryOptions ro;
    ro.resume = true;
    auto held = train::RunDirectory::open(out, ro);
    expect_error(remora_cli({"train", fx.config, "--out", out, "--resume"}), 2,
                 {"in use by another training", "pid " + std::to_string(::getpid())});
  }
  // Splits too small for one evaluation batch are found before the first step.
  const std::string tiny = fx.dir / "tiny_eval";
  expect_error(remora_cli({"train", fx.config, "--out", tiny, "--set", "data.eval_batch_size=1000"}), 2,
               {"too short for eval_batch_size 1000"});
  CHECK(!fs::exists(tiny + "/last.safetensors"));
  CHECK(read_all(tiny + "/metrics.jsonl").empty());
}

namespace {
// Starts the remora binary with args (stdout and stderr to `log`), returns its pid.
pid_t start_cli(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<std::string> a = args;
    a.insert(a.begin(), REMORA_CLI_PATH);
    std::vector<char*> argv;
    for (std::string& s : a) argv.push_back(&s[0]);
    argv.push_back(nullptr);
    ::execv(REMORA_CLI_PATH, argv.data());
    ::_exit(127);
  }
  return pid;
}
}  // namespace

TEST_CASE("driver: SIGTERM and SIGINT save the step and exit 143 / 130 saying how to resume", "[driver][rundir]") {
  Fixture fx;
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string out = fx.dir / ("sig" + std::to_string(sig)), log = fx.dir / "log.txt";
    const pid_t pid = start_cli({"train", fx.config, "--out", out, "--set", "train.steps=100000", "--set",
                                 "train.eval_every=0"},
                                log);
    // Wait for training to be under way (a few training lines), then signal.
    for (int i = 0; i < 600 && split_lines(read_jsonl(out + "/metrics.jsonl"), "train").size() < 3; ++i)
      ::usleep(50000);
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO(read_all(log));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(read_all(log).find("--resume") != std::string::npos);
    const std::vector<json> lines = split_lines(read_jsonl(out + "/metrics.jsonl"), "train");
    REQUIRE(!lines.empty());
    const int64_t saved = std::stoll(load_safetensors(out + "/last.safetensors").metadata.at("step"));
    CHECK(saved >= lines.back()["step"].get<int64_t>());
    // The run continues from there.
    expect_ok(remora_cli({"train", fx.config, "--out", out, "--resume", "--set", "train.steps=100000", "--set",
                          "train.eval_every=0", "--until", std::to_string(saved + 2)}));
    CHECK(load_safetensors(out + "/last.safetensors").metadata.at("step") == std::to_string(saved + 2));
  }
}

// ------------------------------------------------------------------ text in, text out

namespace {
// The WikiText layout in `dir`: wiki.{train,valid,test}.tokens of corpus_text's
// lines, " <unk> " in the training file so that unknown words have an id.
std::string write_wikitext(const TempDir& dir, const std::string& name, bool with_unk = true) {
  const std::string d = dir / name;
  fs::create_directories(d);
  const std::string t = corpus_text();
  std::string train = with_unk ? " = <unk> = \n" : "";
  train += t + t;
  write_all(d + "/wiki.train.tokens", train);
  const size_t cut = t.find('\n', 1500) + 1;  // at a line break
  write_all(d + "/wiki.valid.tokens", t.substr(0, cut) + " zebra the fox \n");
  write_all(d + "/wiki.test.tokens", t.substr(cut));
  return d;
}
}  // namespace

TEST_CASE("text driver: a word-level LM trains, reports perplexity, stores its tokenizer and generates words",
          "[driver][text_driver]") {
  Fixture fx;
  const std::string wiki = write_wikitext(fx.dir, "wiki");
  const std::string cfg = fx.config_with("words.json", {{"data", {{"type", "words"}, {"path", wiki}}}});
  const std::string out = fx.dir / "words_run";
  expect_ok(remora_cli({"train", cfg, "--out", out}));
  for (const json& j : read_jsonl(out + "/metrics.jsonl")) {
    INFO(j.dump());
    REQUIRE(j.contains("ppl"));
    CHECK(!j.contains("bpc"));
    CHECK(j["ppl"].get<double>() == Approx(std::exp(j["loss"].get<double>())));
  }
  // The checkpoint carries the word tokenizer (vocabulary and settings).
  const json meta = RawSafetensors::read(out + "/last.safetensors").header["__metadata__"];
  const json vocab = json::parse(meta["vocab"].get<std::string>());
  CHECK(vocab["kind"] == "words");
  CHECK(vocab["tokenizer"]["kind"] == "word");
  const data::Vocab v = data::Vocab::from_json(meta["vocab"].get<std::string>());
  CHECK(v.words->token_to_id("<eos>") == 0);
  CHECK(v.words->token_to_id("<unk>") > 0);
  CHECK(v.size() > 20);  // <eos>, <unk>, "=", the 20 words and those before a full stop
  CHECK(v.decode(v.encode("the fox\n")) == "the fox\n");
  CHECK(v.encode("the fox").size() == 2);       // no <eos> without a line break
  CHECK(v.encode("the fox\n").size() == 3);
  CHECK(v.encode("zebra")[0] == v.words->token_to_id("<unk>"));

  for (const char* split : {"valid", "test"}) {
    Run ev = remora_cli({"eval", cfg, "--checkpoint", out + "/last.safetensors", "--split", split});
    expect_ok(ev);
    const json j = json::parse(ev.out);
    CHECK(j["ppl"].get<double>() == Approx(std::exp(j["loss"].get<double>())));
    CHECK(j["ppl"].get<double>() > 1);
  }
  Run g = remora_cli({"generate", cfg, "--checkpoint", out + "/last.safetensors", "--prompt", "the quick",
                      "--tokens", "6", "--seed", "2", "--top-p", "0.9", "--repetition-penalty", "1.3"});
  expect_ok(g);
  REQUIRE(g.out.compare(0, 9, "the quick") == 0);
  // Every generated piece is a word of the vocabulary, <unk>, or a line break.
  std::istringstream words(g.out.substr(9));
  std::string w;
  int64_t n = 0;
  while (words >> w) {
    INFO(g.out);
    CHECK(v.words->token_to_id(w) >= 0);
    ++n;
  }
  CHECK(n >= 1);
  CHECK(n <= 6);
  // A char checkpoint is not a word vocabulary.
  const std::string char_out = fx.train("chars");
  expect_error(remora_cli({"eval", cfg, "--checkpoint", char_out + "/last.safetensors"}), 2, {"word vocabulary"});
  // A folder without the WikiText files is a config error naming the file.
  const std::string bad = fx.config_with("bad.json", {{"data", {{"type", "words"}, {"path", fx.dir.path}}}});
  expect_error(remora_cli({"train", bad, "--out", fx.dir / "bad_run"}), 2, {"wiki.train.tokens"});
  // Without <unk> in the vocabulary an unknown word in valid is an input error.
  const std::string nounk = write_wikitext(fx.dir, "nounk", false);
  const std::string cfg2 = fx.config_with("nounk.json", {{"data", {{"type", "words"}, {"path", nounk}}}});
  expect_error(remora_cli({"train", cfg2, "--out", fx.dir / "nounk_run"}), 2, {"zebra"});
}

TEST_CASE("text driver: generate with top-p and a repetition penalty", "[driver][text_driver]") {
  Fixture fx;
  const std::string ck = fx.train("run") + "/last.safetensors";
  auto gen = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"generate", fx.config, "--checkpoint", ck, "--prompt", "the ", "--tokens", "20"};
    args.insert(args.end(), extra.begin(), extra.end());
    Run r = remora_cli(args);
    expect_ok(r);
    return r.out;
  };
  const std::string greedy = gen({"--temperature", "0"});
  // A nucleus this small keeps only the most likely token: greedy, for any seed.
  CHECK(gen({"--top-p", "1e-9", "--seed", "1"}) == greedy);
  CHECK(gen({"--top-p", "1e-9", "--seed", "7"}) == greedy);
  // Penalty 1 is no penalty.
  CHECK(gen({"--temperature", "0", "--repetition-penalty", "1"}) == greedy);
  // A huge penalty on greedy decoding: a positive logit of a seen token falls to about 0.
  const std::string penalised = gen({"--temperature", "0", "--repetition-penalty", "100"});
  CHECK(penalised.size() == greedy.size());
  // The same seed gives the same sample with top-p.
  CHECK(gen({"--top-p", "0.8", "--seed", "3"}) == gen({"--top-p", "0.8", "--seed", "3"}));
  expect_error(remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", "a", "--tokens", "3", "--top-p",
                           "0"}),
               2, {"--top-p"});
  expect_error(remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", "a", "--tokens", "3",
                           "--repetition-penalty", "0.5"}),
               2, {"repetition-penalty"});
}

TEST_CASE("text driver: export writes weights-only safetensors with config and tokenizer; eval, generate and infer "
          "need no config",
          "[driver][text_driver]") {
  Fixture fx;
  const std::string run = fx.train("run");
  const std::string ck = run + "/last.safetensors";
  const std::string out = fx.dir / "exported";
  Run ex = remora_cli({"export", "--checkpoint", ck, "--out", out});
  expect_ok(ex);
  for (const char* f : {"model.safetensors", "config.json", "tokenizer.json"}) CHECK(fs::exists(out + "/" + f));
  const std::string weights = out + "/model.safetensors";
  // Weights only: the model's tensors and nothing of the optimizer or the data position.
  const RawSafetensors raw = RawSafetensors::read(weights);
  const json meta = raw.header["__metadata__"];
  CHECK(meta["format"] == "pt");
  CHECK(meta.contains("config"));
  CHECK(json::parse(meta["vocab"].get<std::string>())["kind"] == "chars");
  const RawSafetensors full = RawSafetensors::read(ck);
  CHECK(raw.header.size() < full.header.size());
  for (auto it = raw.header.begin(); it != raw.header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    INFO(it.key());
    CHECK(full.header.contains(it.key()));
  }
  CHECK(json::parse(read_all(out + "/tokenizer.json")) == json::parse(meta["vocab"].get<std::string>()));

  // Without CONFIG eval, generate and infer read the config from the file's metadata,
  // with the same results as with the config.
  Run with_cfg = remora_cli({"eval", fx.config, "--checkpoint", ck, "--split", "test"});
  Run from_meta = remora_cli({"eval", "--checkpoint", weights, "--split", "test"});
  Run from_ck = remora_cli({"eval", "--checkpoint", ck, "--split", "test"});
  expect_ok(with_cfg);
  expect_ok(from_meta);
  expect_ok(from_ck);
  CHECK(json::parse(from_meta.out)["loss"] == json::parse(with_cfg.out)["loss"]);
  CHECK(json::parse(from_ck.out)["loss"] == json::parse(with_cfg.out)["loss"]);
  Run g1 = remora_cli({"generate", fx.config, "--checkpoint", ck, "--prompt", "the", "--tokens", "8", "--seed", "4"});
  Run g2 = remora_cli({"generate", "--checkpoint", weights, "--prompt", "the", "--tokens", "8", "--seed", "4"});
  expect_ok(g1);
  expect_ok(g2);
  CHECK(g1.out == g2.out);
  // --set still applies to the stored config.
  Run thr = remora_cli({"eval", "--checkpoint", weights, "--split", "test", "--set", "train.threads=2"});
  expect_ok(thr);
  // Bare weights without metadata read the config.json of their run directory.
  const std::string bare_dir = fx.dir / "bare";
  fs::create_directories(bare_dir);
  save_safetensors(bare_dir + "/w.safetensors", load_safetensors(weights).tensors);
  expect_error(remora_cli({"eval", "--checkpoint", bare_dir + "/w.safetensors"}), 2, {"no CONFIG given"});
  fs::copy_file(run + "/config.json", bare_dir + "/config.json");
  Run bare = remora_cli({"eval", "--checkpoint", bare_dir + "/w.safetensors", "--split", "test"});
  expect_ok(bare);
  CHECK(json::parse(bare.out)["loss"] == json::parse(with_cfg.out)["loss"]);
  // Text in for infer without a config.
  const std::string txt = fx.dir / "in.txt", res = fx.dir / "res.safetensors";
  write_all(txt, "the quick brown fox");
  expect_ok(remora_cli({"infer", "--checkpoint", weights, "--input", txt, "--output", res}));
  CHECK(load_safetensors(res).get("logits").size(1) == 19);
  expect_error(remora_cli({"export", "--checkpoint", ck}), 2, {"missing --out"});

  // The corpus moved away (or the run's data.path was relative to another
  // folder): generate, infer and export need only the vocabulary the file
  // holds; eval, which reads a split, names the missing corpus.
  RawSafetensors moved = RawSafetensors::read(weights);
  json moved_cfg = json::parse(moved.header["__metadata__"]["config"].get<std::string>());
  moved_cfg["data"]["path"] = std::string(fx.dir / "gone") + "/corpus.txt";
  moved.header["__metadata__"]["config"] = moved_cfg.dump();
  const std::string moved_w = fx.dir / "moved.safetensors";
  write_all(moved_w, moved.bytes());
  Run g3 = remora_cli({"generate", "--checkpoint", moved_w, "--prompt", "the", "--tokens", "8", "--seed", "4"});
  expect_ok(g3);
  CHECK(g3.out == g1.out);
  const std::string res2 = fx.dir / "res2.safetensors";
  expect_ok(remora_cli({"infer", "--checkpoint", moved_w, "--input", txt, "--output", res2}));
  CHECK(load_safetensors(res2).get("logits").to_vector() == load_safetensors(res).get("logits").to_vector());
  expect_ok(remora_cli({"export", "--checkpoint", moved_w, "--out", fx.dir / "exported2"}));
  expect_error(remora_cli({"eval", "--checkpoint", moved_w}), 2, {"data.path", "gone/corpus.txt"});
}

TEST_CASE("text driver: infer takes a JSON array of texts as a batch", "[driver][text_driver]") {
  Fixture fx;
  const std::string ck = fx.train("run") + "/last.safetensors";
  const std::string in = fx.dir / "texts.json", res = fx.dir / "res.safetensors", res1 = fx.dir / "one.safetensors";
  write_all(in, R"(["the fox", "lazy do"])");
  expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", in, "--output", res}));
  const Tensor logits = load_safetensors(res).get("logits");
  CHECK(logits.size(0) == 2);
  CHECK(logits.size(1) == 7);
  // Row 0 is the text "the fox" alone.
  write_all(fx.dir / "one.txt", "the fox");
  expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", fx.dir / "one.txt", "--output", res1}));
  const Tensor one = load_safetensors(res1).get("logits");
  const std::vector<double> a = logits.select(0, 0).contiguous().to_vector(), b = one.select(0, 0).contiguous().to_vector();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
  // Texts of different lengths: padded to the longest, with their lengths.
  write_all(in, R"(["the fox", "a"])");
  expect_ok(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", in, "--output", fx.dir / "x.safetensors"}));
  CHECK(load_safetensors(fx.dir / "x.safetensors").get("lengths").to_i64_vector() == std::vector<int64_t>{7, 1});
  write_all(in, R"(["the fox", ""])");
  expect_error(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", in, "--output", fx.dir / "y.safetensors"}),
               2, {"sequence 1 has no tokens"});
  write_all(in, R"(["the fox", 3])");
  expect_error(remora_cli({"infer", fx.config, "--checkpoint", ck, "--input", in, "--output", fx.dir / "x.safetensors"}),
               2, {"not a string"});
}

TEST_CASE("text driver: a HuggingFace BERT with its vocab.txt fills [MASK] in a sentence given as text",
          "[driver][text_driver][bert]") {
  const std::string src = std::string(REMORA_TEST_DATA) + "/hf_bert_tiny";
  TempDir tmp;
  const std::string dir = tmp / "bert";
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  fs::copy_file(src + "/model.safetensors", dir + "/model.safetensors");
  // 30 tokens, as the model's vocab_size.
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
                                          "on",    "mat",   ".",     "a",     "dog",    "ran", "to", "house",
                                          "big",   "red",   "##s",   "is",    "was",    "in",  "of", "and",
                                          "it",    "he",    "she",   "they",  "we",     "you"};
  std::string txt;
  for (const std::string& t : vocab) txt += t + "\n";
  write_all(dir + "/vocab.txt", txt);
  write_all(tmp / "sentence.txt", "The cat [MASK] on the mat.");
  const std::string logits_out = tmp / "logits.safetensors";
  Run r = remora_cli({"infer", dir + "/config.json", "--checkpoint", dir + "/model.safetensors", "--input",
                      tmp / "sentence.txt", "--fill", "3", "--output", logits_out});
  expect_ok(r);
  // [CLS] the cat [MASK] on the mat . [SEP]
  const std::vector<int64_t> ids = {2, 5, 6, 4, 8, 5, 9, 10, 3};
  const Tensor logits = load_safetensors(logits_out).get("logits");
  REQUIRE(logits.shape() == Shape{1, 9, 30});
  // The same logits as the ids themselves give.
  write_all(tmp / "ids.json", json(std::vector<std::vector<int64_t>>{ids}).dump());
  expect_ok(remora_cli({"infer", dir + "/config.json", "--checkpoint", dir + "/model.safetensors", "--input",
                        tmp / "ids.json", "--output", tmp / "ids_out.safetensors"}));
  CHECK(load_safetensors(tmp / "ids_out.safetensors").get("logits").to_vector() == logits.to_vector());
  // One line for the one [MASK] (position 3), its top 3 by the logits.
  const json j = json::parse(r.out);
  CHECK(j["sequence"] == 0);
  CHECK(j["position"] == 3);
  REQUIRE(j["fills"].size() == 3);
  const std::vector<double> row = logits.select(0, 0).select(0, 3).contiguous().to_vector();
  std::vector<int64_t> order(30);
  for (int64_t i = 0; i < 30; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[size_t(a)] > row[size_t(b)]; });
  double prev = 1.0;
  for (size_t i = 0; i < 3; ++i) {
    const json& f = j["fills"][i];
    CHECK(f["id"] == order[i]);
    CHECK(f["token"] == vocab[size_t(order[i])]);
    CHECK(f["probability"].get<double>() <= prev);
    CHECK(f["probability"].get<double>() > 0);
    prev = f["probability"].get<double>();
  }
  // No [MASK]: an input error; --fill without vocab.txt: a usage error.
  write_all(tmp / "plain.txt", "the cat sat on the mat.");
  expect_error(remora_cli({"infer", dir + "/config.json", "--checkpoint", dir + "/model.safetensors", "--input",
                           tmp / "plain.txt", "--fill", "2"}),
               2, {"[MASK]"});
  expect_error(remora_cli({"infer", src + "/config.json", "--checkpoint", src + "/model.safetensors", "--input",
                           std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_ids.json", "--fill", "2"}),
               2, {"vocab.txt"});
}
