// SPDX-License-Identifier: BSD-3-Clause
// TensorBoard event files (train/tensorboard.h): the bytes equal those of
// TensorBoard's own writer (tests/data/tensorboard, written by
// tools/goldens/make_tensorboard_golden.py), and `remora train` with
// train.tensorboard writes one scalar event per metrics.jsonl record.
#include <dirent.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <functional>
#include <fstream>
#include <map>
#include <sstream>

#include "../cli/cli.h"
#include "../train/tensorboard.h"

using namespace remora;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The payloads of an event file, each record's framing and CRCs checked.
std::vector<std::string> records(const std::string& bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, bytes.data() + at, 8);
    std::memcpy(&len_crc, bytes.data() + at + 8, 4);
    CHECK(len_crc == train::masked_crc32c(bytes.data() + at, 8));
    REQUIRE(at + 12 + len + 4 <= bytes.size());
    const std::string payload = bytes.substr(at + 12, len);
    std::memcpy(&data_crc, bytes.data() + at + 12 + len, 4);
    CHECK(data_crc == train::masked_crc32c(payload.data(), payload.size()));
    out.push_back(payload);
    at += 12 + len + 4;
  }
  return out;
}

// Scalar tags and values of an Event payload (wire format: field 5 = summary,
// its field 1 = values, each with field 1 = tag, field 2 = float).
struct Parsed {
  int64_t step = 0;
  std::map<std::string, float> values;
  bool restart = false;
};
uint64_t read_varint(const std::string& s, size_t& i) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const uint8_t b = uint8_t(s.at(i++));
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}
void fields(const std::string& s, const std::function<void(int, int, size_t, size_t)>& f) {
  size_t i = 0;
  while (i < s.size()) {
    const uint64_t k = read_varint(s, i);
    const int field = int(k >> 3), wire = int(k & 7);
    size_t len = 0;
    if (wire == 0) {
      const size_t b = i;
      read_varint(s, i);
      f(field, wire, b, i - b);
      continue;
    }
    if (wire == 1) len = 8;
    if (wire == 5) len = 4;
    if (wire == 2) len = size_t(read_varint(s, i));
    f(field, wire, i, len);
    i += len;
  }
}
Parsed parse_event(const std::string& e) {
  Parsed p;
  fields(e, [&](int field, int wire, size_t at, size_t len) {
    if (field == 2 && wire == 0) {
      size_t i = at;
      p.step = int64_t(read_varint(e, i));
    }
    if (field == 7) p.restart = true;  // Event.session_log
    if (field != 5) return;
    const std::string summary = e.substr(at, len);
    fields(summary, [&](int, int, size_t vat, size_t vlen) {
      const std::string value = summary.substr(vat, vlen);
      std::string tag;
      float x = 0;
      fields(value, [&](int vf, int, size_t a, size_t n) {
        if (vf == 1) tag = value.substr(a, n);
        if (vf == 2) std::memcpy(&x, value.data() + a, 4);
      });
      p.values[tag] = x;
    });
  });
  return p;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d);
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, "events.out.tfevents.", 20) == 0) out.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("tensorboard: CRC-32C of the standard check string", "[tensorboard]") {
  CHECK(train::crc32c("123456789", 9) == 0xE3069283u);
  CHECK(train::crc32c("", 0) == 0u);
}

TEST_CASE("tensorboard: the event file equals TensorBoard's own writer's, byte for byte", "[tensorboard]") {
  const std::string golden = std::string(REMORA_TEST_DATA) + "/tensorboard/events.out.tfevents.1700000000.golden";
  char dir[] = "/tmp/remora_tb_XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/events.out.tfevents.1700000000.golden";
  {
    train::EventWriter w(path, 1700000000.5);
    w.scalars(10, 1700000001.25, {{"train/loss", 2.5}, {"train/lr", 0.001}});
    w.scalars(20, 1700000002.0, {{"train/loss", 2.25}, {"valid/bpc", 1.125}});
    w.restart(15, 1700000003.0);
    w.scalars(15, 1700000004.0, {{"train/loss", 2.375}});
  }
  const std::string ours = slurp(path), theirs = slurp(golden);
  REQUIRE(!theirs.empty());
  CHECK(ours == theirs);
  const std::vector<std::string> r = records(ours);
  REQUIRE(r.size() == 5);
  CHECK(parse_event(r[1]).values.at("train/lr") == 0.001f);
  CHECK(parse_event(r[3]).restart);
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("tensorboard: remora train writes every numeric metric; a resumed run restarts at its step",
          "[tensorboard][driver]") {
  char dir[] = "/tmp/remora_tbrun_XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string d = dir, corpus = d + "/corpus.txt", config = d + "/tiny.json", out = d + "/run";
  {
    std::ofstream f(corpus);
    for (int i = 0; i < 200; ++i) f << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  {
    std::ofstream f(config);
    f << R"({"seed": 3, "device": "cpu",
      "model": {"type": "transformer_xl", "n_layer": 1, "d_model": 16, "n_head": 2, "d_inner": 32, "mem_len": 8},
      "data": {"type": "char", "path": ")" << corpus << R"(", "seq_len": 8, "batch_size": 2},
      "train": {"steps": 6, "eval_every": 3, "eval_batches": 1, "log_every": 1, "threads": 1,
                "tensorboard": true, "optimizer": {"type": "adamw", "lr": 0.01}}})";
  }
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), "remora");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    return driver::run_cli(int(args.size()), argv.data());
  };
  REQUIRE(run({"train", config, "--out", out, "--until", "4"}) == 0);
  REQUIRE(run({"train", config, "--out", out, "--resume"}) == 0);
  const std::vector<std::string> files = event_files(out);
  REQUIRE(files.size() == 2);
  std::map<int64_t, Parsed> train_points;
  int valid_points = 0;
  bool restarted = false;
  for (const std::string& f : files) {
    for (const std::string& e : records(slurp(f))) {
      const Parsed p = parse_event(e);
      if (p.restart) {
        CHECK(p.step == 5);  // the first step the resumed run trains
        restarted = true;
      }
      if (p.values.count("train/loss")) train_points[p.step] = p;
      if (p.values.count("valid/loss")) ++valid_points;
    }
  }
  CHECK(restarted);
  REQUIRE(train_points.size() == 6);
  CHECK(train_points.at(6).values.count("train/lr") == 1);
  CHECK(valid_points >= 2);
  REQUIRE(std::system(("rm -rf '" + d + "'").c_str()) == 0);
}
