// SPDX-License-Identifier: BSD-3-Clause
// Numbers in checkpoint files: a checkpoint with NaN / Inf numbers
// (weights, optimizer state or carried state) or with a tensor whose shape
// disagrees with the config is rejected when it is loaded, with exit code 2 and
// a one-line message naming the file and the tensor, instead of training or
// evaluating into a NaN loss. Also: a leftover temporary checkpoint is removed
// at the next start. The driver runs in-process (driver::run_cli).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <remora/remora.h>
#include <string>
#include <vector>

#include "../models/bert.h"
#include "cli/cli.h"
#include "cli/input_checks.h"
#include "cli/data.h"
#include "cli/experiment.h"
#include "../train/run_dir.h"
#include "cli_run.h"
#include "temp_dir.h"

using namespace remora;
namespace fs = std::filesystem;

namespace {

using Result = remora_test::CliRun;

std::string slurp(const std::string& path) { return remora_test::read_whole_file(path); }

// `remora ARGS...` in-process (tests/cli_run.h).
Result cli(std::vector<std::string> args) { return remora_test::run_remora(std::move(args)); }

void expect_rejected(const Result& r, const std::vector<std::string>& fragments) {
  INFO("stderr: " << r.err);
  CHECK(r.code == 2);
  REQUIRE(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
  for (const std::string& f : fragments) {
    INFO("expected the message to name: " << f);
    CHECK(r.err.find(f) != std::string::npos);
  }
}

using remora_test::TempDir;

// A tiny char-level Transformer-XL (with carried memory) trained for 2 steps.
struct Trained {
  TempDir dir;
  std::string config, out, ck;
  Trained() {
    std::string text;
    for (int i = 0; text.size() < 3000; ++i) text += (i % 7 ? "lorem ipsum dolor " : "sit amet.\n");
    std::ofstream(dir / "corpus.txt") << text;
    nlohmann::json j = nlohmann::json::parse(R"({
      "seed": 3, "device": "cpu",
      "model": {"type": "transformer_xl", "n_layer": 1, "d_model": 16, "n_head": 2, "d_inner": 32,
                "dropout": 0.0, "mem_len": 8},
      "data": {"type": "char", "path": "", "seq_len": 8, "batch_size": 2},
      "train": {"steps": 2, "eval_every": 0, "eval_batches": 1, "log_every": 1, "threads": 1,
                "optimizer": {"type": "adamw", "lr": 0.01}}
    })");
    j["data"]["path"] = dir / "corpus.txt";
    config = dir / "tiny.json";
    std::ofstream(config) << j.dump(2);
    out = dir / "run";
    const Result r = cli({"train", config, "--out", out});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    ck = out + "/last.safetensors";
  }
  // A copy of the checkpoint with `edit` applied to the tensor `name`.
  std::string edited(const std::string& name, const std::function<Tensor(const Tensor&)>& edit) const {
    Safetensors st = load_safetensors(ck);
    bool found = false;
    for (auto& kv : st.tensors)
      if (kv.first == name) {
        kv.second = edit(kv.second);
        found = true;
      }
    INFO("no tensor " << name);
    REQUIRE(found);
    const std::string path = dir / "edited.safetensors";
    save_safetensors(path, st.tensors, st.metadata);
    return path;
  }
  std::string first_named(const std::string& prefix) const {
    for (const auto& kv : load_safetensors(ck).tensors)
      if (kv.first.rfind(prefix, 0) == 0 && kv.second.dtype() == DType::f32 && kv.second.numel() > 1)
        return kv.first;
    FAIL("no tensor starting with " << prefix);
    return "";
  }
};

Tensor with_value(const Tensor& t, int64_t i, double v) {
  Tensor c = t.clone();
  REQUIRE(c.dtype() == DType::f32);
  c.data_ptr<float>()[i] = float(v);
  return c;
}

}  // namespace

TEST_CASE("checkpoint: NaN and Inf numbers are rejected on load, naming the tensor (exit 2)", "[hostile]") {
  Trained t;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  REQUIRE(cli({"eval", t.config, "--checkpoint", t.ck}).code == 0);  // the clean one loads

  SECTION("a NaN weight: eval, infer and train --resume refuse it") {
    const std::string w = t.first_named("word_emb.");
    const std::string bad = t.edited(w, [&](const Tensor& x) { return with_value(x, 3, nan); });
    expect_rejected(cli({"eval", t.config, "--checkpoint", bad}), {bad, "'" + w + "'", "1 NaN"});
    std::ofstream(t.dir / "ids.json") << "[1, 2, 3]";
    expect_rejected(cli({"infer", t.config, "--checkpoint", bad, "--input", t.dir / "ids.json", "--output",
                         t.dir / "o.safetensors"}),
                    {bad, w, "NaN"});
    CHECK(!fs::exists(t.dir / "o.safetensors"));
    // --resume reads DIR/last.safetensors: put the bad one there.
    const std::string good = slurp(t.ck);
    fs::copy_file(bad, t.ck, fs::copy_options::overwrite_existing);
    expect_rejected(cli({"train", t.config, "--out", t.out, "--resume", "--set", "train.steps=4"}),
                    {t.ck, w, "NaN"});
    std::ofstream(t.ck, std::ios::binary | std::ios::trunc) << good;
  }
  SECTION("+Inf and -Inf weights") {
    const std::string w = t.first_named("layers.0.");
    const std::string bad = t.edited(w, [&](const Tensor& x) {
      return with_value(with_value(x, 0, inf), x.numel() - 1, -inf);
    });
    expect_rejected(cli({"eval", t.config, "--checkpoint", bad}), {bad, w, "2 infinite"});
  }
  SECTION("non-finite optimizer state and carried memory") {
    const std::string o = t.first_named("optimizer.");
    const std::string bad = t.edited(o, [&](const Tensor& x) { return with_value(x, 0, inf); });
    expect_rejected(cli({"eval", t.config, "--checkpoint", bad}), {bad, o, "infinite"});
    const std::string m = t.first_named("state.mems.");
    const std::string badm = t.edited(m, [&](const Tensor& x) { return with_value(x, 1, nan); });
    expect_rejected(cli({"eval", t.config, "--checkpoint", badm}), {badm, m, "NaN"});
  }
}

TEST_CASE("checkpoint: a tensor whose shape disagrees with the config is rejected, naming it", "[hostile]") {
  Trained t;
  const std::string w = t.first_named("layers.0.");
  SECTION("one dimension too many") {
    const std::string bad = t.edited(w, [](const Tensor& x) { return x.unsqueeze(0); });
    expect_rejected(cli({"eval", t.config, "--checkpoint", bad}), {bad, "'" + w + "'", "size mismatch"});
  }
  SECTION("same numel, another shape") {
    const std::string bad = t.edited(w, [](const Tensor& x) { return x.reshape({x.numel()}); });
    expect_rejected(cli({"eval", t.config, "--checkpoint", bad}), {bad, w, "size mismatch"});
  }
  SECTION("carried memory of another shape: --resume refuses it before any step") {
    const std::string m = t.first_named("state.mems.");
    for (int variant = 0; variant < 2; ++variant) {
      const std::string bad = t.edited(m, [&](const Tensor& x) {
        return variant == 0 ? x.reshape({x.shape()[2], x.shape()[0], x.shape()[1]}) : x.reshape({x.numel()});
      });
      fs::copy_file(bad, t.ck, fs::copy_options::overwrite_existing);
      expect_rejected(cli({"train", t.config, "--out", t.out, "--resume", "--set", "train.steps=4"}),
                      {t.ck, m, "carried state", "does not fit the model"});
    }
  }
  SECTION("the config disagrees with the file") {
    expect_rejected(cli({"eval", t.config, "--checkpoint", t.ck, "--set", "model.d_inner=48"}),
                    {t.ck, "size mismatch for '"});
  }
}

TEST_CASE("checkpoint: a HuggingFace directory with a NaN weight is rejected by infer", "[hostile][bert]") {
  TempDir d;
  const std::string src = std::string(REMORA_TEST_DATA) + "/hf_bert_tiny";
  fs::copy_file(src + "/config.json", d / "config.json");
  Safetensors st = load_safetensors(src + "/model.safetensors");
  std::string name;
  for (auto& kv : st.tensors)
    if (kv.first.find("query.weight") != std::string::npos) {
      kv.second = with_value(kv.second, 5, std::nan(""));
      name = kv.first;
      break;
    }
  REQUIRE(!name.empty());
  save_safetensors(d / "model.safetensors", st.tensors, st.metadata);
  const Result r = cli({"infer", d / "config.json", "--checkpoint", d / "model.safetensors", "--input",
                        std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_ids.json", "--output", d / "o.safetensors"});
  expect_rejected(r, {d / "model.safetensors", name, "NaN"});
}

TEST_CASE("check_finite and clean_stale_tmp", "[hostile]") {
  Tensor ok = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor bad = Tensor::from_vector(std::vector<double>{1, std::nan(""), INFINITY, -INFINITY}, {2, 2});
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  CHECK_NOTHROW(driver::check_finite({{"a", ok}, {"i", ids}, {"empty", Tensor::zeros({0})}}, "f"));
  try {
    driver::check_finite({{"a", ok}, {"b.weight", bad}}, "file.safetensors");
    FAIL("no error");
  } catch (const driver::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("file.safetensors") != std::string::npos);
    CHECK(m.find("'b.weight' [2, 2]") != std::string::npos);
    CHECK(m.find("1 NaN and 2 infinite") != std::string::npos);
  }
  TempDir d;
  std::ofstream(d / "last.safetensors.tmp") << "half a checkpoint";
  std::ofstream(d / "best.safetensors") << "x";
  std::ofstream(d / "notes.tmp") << "not ours";
  std::ofstream(d / "metrics.jsonl.tmp") << "{\"step\": 1}\n";  // a killed --resume's metrics rewrite
  CHECK(remora::train::clean_stale_tmp(d.path) == 2);
  CHECK(!fs::exists(d / "last.safetensors.tmp"));
  CHECK(!fs::exists(d / "metrics.jsonl.tmp"));
  CHECK(fs::exists(d / "best.safetensors"));
  CHECK(fs::exists(d / "notes.tmp"));
  CHECK(remora::train::clean_stale_tmp(d / "missing") == 0);
}

// Fuzz findings, kept as regression tests (their inputs are also in
// tests/fuzz/corpus/<target>/regress-*, see docs/reliability.md).
TEST_CASE("fuzz regressions: safetensors shapes whose strides overflow are rejected", "[hostile]") {
  auto file = [](const std::string& header) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return out + header;
  };
  // regress-zero-dim-huge: an empty tensor (a zero dim) whose other dims
  // multiply past int64 used to overflow the stride computation (UBSan).
  const std::string zero_dim =
      file(R"({"x":{"dtype":"F64","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})");
  CHECK_THROWS_WITH(parse_safetensors(zero_dim, "f"), Catch::Contains("tensor 'x'") && Catch::Contains("too large"));
  // Still fine: empty tensors with ordinary dims, and big dims whose product fits.
  CHECK(parse_safetensors(file(R"({"e":{"dtype":"F32","shape":[0,3,1000000],"data_offsets":[0,0]}})"), "f")
            .get("e")
            .numel() == 0);
  // Through the driver: exit 2 naming the file.
  TempDir d;
  std::ofstream(d / "z.safetensors", std::ios::binary) << zero_dim;
  std::ofstream(d / "ids.json") << "[1]";
  std::ofstream(d / "c.json") << R"({"model":{"type":"rnn","d_model":8,"n_layer":1},
    "data":{"type":"copy","delay":4,"symbols":3,"copy_len":2,"batch_size":2},"train":{"threads":1}})";
  const Result r = cli({"eval", d / "c.json", "--checkpoint", d / "z.safetensors"});
  expect_rejected(r, {d / "z.safetensors", "'x'", "too large"});
}

// Found by hand while reviewing the fuzz targets (their -max_len keeps inputs
// too short to reach it): JSON a million levels deep parsed fine and then
// overflowed the stack in a recursive walk (an error message's dump()), a
// segfault in `remora train CONFIG` and `remora infer --input IDS`.
TEST_CASE("fuzz regressions: deeply nested JSON is an input error, not a stack overflow", "[hostile]") {
  CHECK(driver::json_depth(R"({"a": [1, {"b": "[[[[{{{{"}], "c": "\"[["})") == 3);
  CHECK(driver::json_depth("[]") == 1);
  CHECK(driver::json_depth("3") == 0);
  CHECK(driver::json_depth(std::string(100000, '[')) == driver::kMaxJsonDepth + 1);

  Trained t;
  const int deep = 1000000;
  const std::string nested = std::string(deep, '[') + std::string(deep, ']');
  const std::string cfg = t.dir / "deep.json", ids = t.dir / "deep_ids.json";
  std::ofstream(cfg) << "{\"model\": " << nested << "}";
  std::ofstream(ids) << nested;
  expect_rejected(cli({"train", cfg, "--out", t.dir / "x"}), {cfg, "nested more than 512 levels"});
  expect_rejected(cli({"infer", cfg, "--checkpoint", t.ck, "--input", ids, "--output", t.dir / "o.safetensors"}),
                  {cfg, "nested more than 512 levels"});
  expect_rejected(cli({"infer", t.config, "--checkpoint", t.ck, "--input", ids, "--output", t.dir / "o.safetensors"}),
                  {ids, "nested more than 512 levels"});
  const std::string deep_set = std::string(600, '[') + std::string(600, ']');
  expect_rejected(cli({"train", t.config, "--out", t.dir / "x", "--set", "model.d_model=" + deep_set}),
                  {"--set model.d_model", "nested more than 512 levels"});
  CHECK_THROWS_WITH(data::Vocab::from_json(nested), Catch::Contains("nested more than 512 levels"));
}

// The library's HuggingFace config readers: text (from_hf_config) and a parsed
// value (from_hf_json). Deep nesting is refused without recursing (dump()
// recursed once per level and overflowed the stack); values in messages are
// bounded excerpts.
TEST_CASE("BertConfig::from_hf_json: a deeply nested value is an error with a short excerpt", "[hostile][bert]") {
  const int deep = 1000000;
  const std::string nested = std::string(deep, '[') + std::string(deep, ']');
  for (const std::string& key : {"vocab_size", "hidden_act", "remora", "layer_norm_eps"}) {
    const std::string text = "{\"" + key + "\": " + nested + "}";
    CHECK_THROWS_WITH(models::BertConfig::from_hf_config(text, "cfg.json"),
                      Catch::Contains("cfg.json") && Catch::Contains("nested more than 512 levels"));
    const nlohmann::json j = nlohmann::json::parse(text);
    CHECK_THROWS_WITH(models::BertConfig::from_hf_json(j, "cfg.json"),
                      Catch::Contains("cfg.json") && Catch::Contains("nested more than 512 levels"));
    // Under the limit: the message names the key and shows a bounded excerpt.
    const std::string shallow = std::string(300, '[') + std::string(300, ']');
    std::string m;
    try {
      (void)models::BertConfig::from_hf_json(nlohmann::json::parse("{\"" + key + "\": " + shallow + "}"),
                                             "cfg.json");
    } catch (const Error& e) {
      m = e.what();
    }
    INFO(key << ": " << m);
    CHECK(m.find("cfg.json") != std::string::npos);
    CHECK(m.find(key) != std::string::npos);
    CHECK(m.find("[[[[...]]]]") != std::string::npos);
    CHECK(m.size() < 400);
  }
  const nlohmann::json top = nlohmann::json::parse(nested);
  CHECK_THROWS_WITH(models::BertConfig::from_hf_json(top, "top.json"), Catch::Contains("top.json"));
  // Long flat values are cut short too.
  const nlohmann::json wide = {{"vocab_size", std::string(100000, 'x')}};
  try {
    (void)models::BertConfig::from_hf_json(wide, "w.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("xxx...") != std::string::npos);
    CHECK(std::string(e.what()).size() < 400);
  }
}
