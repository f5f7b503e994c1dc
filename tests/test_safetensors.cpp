// SPDX-License-Identifier: BSD-3-Clause
// safetensors (docs/math.md#checkpoints-the-safetensors-format): round trips, decoding of the foreign dtypes, and a
// clear remora::Error for every kind of malformed file.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <remora/remora.h>

#include "helpers.h"

using namespace remora;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp, removed with everything in it at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/remora_test_st_XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// u64 little-endian header length, the header, then the data buffer.
std::string st_file(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// Little-endian bytes of a value.
template <typename T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(&s[0], &v, sizeof(T));
  return s;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}


}  // namespace


TEST_CASE("save/load round trip of f32, f64, i64 and metadata", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  Generator g(11);
  Tensor a = Tensor::randn({2, 3}, DType::f32, Device::cpu(), &g);           // [2, 3] f32
  Tensor b = Tensor::randn({4}, DType::f64, Device::cpu(), &g);              // [4] f64
  Tensor c = Tensor::from_vector(std::vector<int64_t>{-5, 0, 7, INT64_MAX}, {2, 2});  // [2, 2] i64
  Tensor s = Tensor::scalar(3.25, DType::f64);                               // [] f64
  Tensor e = Tensor::zeros({0, 3});                                          // [0, 3] f32
  Tensor t = Tensor::randn({3, 2}, DType::f32, Device::cpu(), &g).t();       // [2, 3] strided
  Tensor w = Tensor::ones({2}, DType::f64).requires_grad_();                 // with autograd
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "10"}};
  save_safetensors(path,
                   {{"encoder.weight", a}, {"encoder.bias", b}, {"ids", c}, {"scale", s},
                    {"empty", e}, {"transposed", t}, {"w", w}},
                   meta);
  CHECK_FALSE(fs::exists(path + ".tmp"));  // the temporary was renamed away

  // The data buffer starts 8-byte aligned.
  const std::string bytes = read_all(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);

  Safetensors st = load_safetensors(path);
  REQUIRE(st.tensors.size() == 7);
  // File order is the order given to save.
  CHECK(st.tensors[0].first == "encoder.weight");
  CHECK(st.tensors[6].first == "w");
  CHECK(st.metadata == meta);
  auto same = [&](const std::string& name, const Tensor& want) {
    INFO(name);
    const Tensor& got = st.get(name);
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    CHECK(got.to_vector() == want.to_vector());  // bit-exact
  };
  same("encoder.weight", a);
  same("encoder.bias", b);
  same("ids", c);
  same("scale", s);
  same("empty", e);
  same("transposed", t);
  same("w", w.detach());
  CHECK(st.get("ids").to_i64_vector()[3] == INT64_MAX);
  CHECK_FALSE(st.get("w").requires_grad());
  CHECK(st.contains("scale"));
  CHECK_FALSE(st.contains("missing"));

  // serialize + parse agree with save + load.
  Safetensors p = parse_safetensors(serialize_safetensors({{"x", a}}, {}));
  REQUIRE(p.tensors.size() == 1);
  CHECK(p.metadata.empty());
  CHECK(p.get("x").to_vector() == a.to_vector());

  // Overwriting an existing file replaces it.
  save_safetensors(path, {{"only", b}});
  CHECK(load_safetensors(path).tensors.size() == 1);
}

TEST_CASE("Safetensors::get on a missing name lists the names", "[safetensors]") {
  Safetensors st = parse_safetensors(serialize_safetensors(
      {{"alpha", Tensor::ones({1})}, {"beta", Tensor::ones({1})}, {"gamma", Tensor::ones({1})}}));
  CHECK_ERROR(st.get("delta"), "delta", "alpha", "beta", "gamma", "3 tensors");
  // Long lists are cut short.
  std::vector<std::pair<std::string, Tensor>> many;
  for (int i = 0; i < 10; ++i) many.emplace_back("t" + std::to_string(i), Tensor::ones({1}));
  Safetensors big = parse_safetensors(serialize_safetensors(many));
  CHECK_ERROR(big.get("nope"), "nope", "10 tensors", "t0", "...");
}

TEST_CASE("F16, BF16 and integer dtypes decode", "[safetensors]") {
  SECTION("F16 -> f32") {
    // 1, -2, 0.5, 65504 (max), 2^-24 (smallest subnormal), 2^-14 * 0.5 (subnormal), inf, -0
    const uint16_t h[] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x0200, 0x7C00, 0x8000};
    std::string data;
    for (uint16_t v : h) data += le(v);
    Safetensors st = parse_safetensors(
        st_file(R"({"h":{"dtype":"F16","shape":[2,4],"data_offsets":[0,16]}})", data));
    const Tensor& t = st.get("h");
    CHECK(t.dtype() == DType::f32);
    CHECK(t.shape() == Shape{2, 4});
    const std::vector<double> v = t.to_vector();
    CHECK(v[0] == 1.0);
    CHECK(v[1] == -2.0);
    CHECK(v[2] == 0.5);
    CHECK(v[3] == 65504.0);
    CHECK(v[4] == std::ldexp(1.0, -24));
    CHECK(v[5] == std::ldexp(1.0, -15));
    CHECK(std::isinf(v[6]));
    CHECK(v[6] > 0);
    CHECK(v[7] == 0.0);
    CHECK(std::signbit(v[7]));
  }
  SECTION("F16 NaN stays NaN") {
    Safetensors st = parse_safetensors(
        st_file(R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})", le(uint16_t(0x7E00))));
    CHECK(std::isnan(st.get("h").item()));
  }
  SECTION("BF16 -> f32") {
    // 1, -2.5, 3.140625, 1e38-ish (0x7E96)
    const uint16_t h[] = {0x3F80, 0xC020, 0x4049, 0x7E96};
    std::string data;
    for (uint16_t v : h) data += le(v);
    Safetensors st = parse_safetensors(
        st_file(R"({"b":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", data));
    const std::vector<double> v = st.get("b").to_vector();
    CHECK(st.get("b").dtype() == DType::f32);
    CHECK(v[0] == 1.0);
    CHECK(v[1] == -2.5);
    CHECK(v[2] == 3.140625);
    uint32_t bits = 0x7E960000u;
    float f;
    std::memcpy(&f, &bits, 4);
    CHECK(v[3] == double(f));
  }
  SECTION("I32, I16, I8, U8, BOOL -> i64") {
    std::string data = le(int32_t(-1)) + le(int32_t(2147483647)) + le(int32_t(-2147483647 - 1)) +
                       le(int32_t(5));                       // I32 [2, 2]: 16 bytes
    data += le(int16_t(-300)) + le(int16_t(300));             // I16 [2]: 4 bytes
    data += le(int8_t(-7)) + le(uint8_t(250)) + le(uint8_t(1)) + le(uint8_t(0));  // I8, U8, BOOL x2
    const std::string header =
        R"({"i32":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},)"
        R"("i16":{"dtype":"I16","shape":[2],"data_offsets":[16,20]},)"
        R"("i8":{"dtype":"I8","shape":[1],"data_offsets":[20,21]},)"
        R"("u8":{"dtype":"U8","shape":[1],"data_offsets":[21,22]},)"
        R"("flag":{"dtype":"BOOL","shape":[2],"data_offsets":[22,24]}})";
    Safetensors st = parse_safetensors(st_file(header, data));
    CHECK(st.get("i32").dtype() == DType::i64);
    CHECK(st.get("i32").shape() == Shape{2, 2});
    CHECK(st.get("i32").to_i64_vector() ==
          std::vector<int64_t>{-1, 2147483647, -2147483648LL, 5});
    CHECK(st.get("i16").to_i64_vector() == std::vector<int64_t>{-300, 300});
    CHECK(st.get("i8").to_i64_vector() == std::vector<int64_t>{-7});
    CHECK(st.get("u8").to_i64_vector() == std::vector<int64_t>{250});
    CHECK(st.get("flag").to_i64_vector() == std::vector<int64_t>{1, 0});
    // File order is by offset, whatever the JSON key order.
    CHECK(st.tensors[0].first == "i32");
    CHECK(st.tensors[4].first == "flag");
  }
  SECTION("an empty header object is a valid file") {
    Safetensors st = parse_safetensors(st_file("{}"));
    CHECK(st.tensors.empty());
    Safetensors m = parse_safetensors(st_file(R"({"__metadata__":{"a":"b"}})"));
    CHECK(m.metadata.at("a") == "b");
  }
}

TEST_CASE("malformed safetensors files are clear errors", "[safetensors][errors]") {
  const std::string f32x2 = le(1.0f) + le(2.0f);  // 8 bytes of data
  auto one = [](const std::string& entry) { return "{\"x\":" + entry + "}"; };

  SECTION("too short for the header length") {
    CHECK_ERROR(parse_safetensors(std::string(5, '\0'), "tiny.st"), "tiny.st", "5 bytes",
                "too short");
    CHECK_ERROR(parse_safetensors(""), "0 bytes");
  }
  SECTION("header length past the end (truncated)") {
    std::string f = st_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), f32x2);
    f.resize(20);
    CHECK_ERROR(parse_safetensors(f), "header length", "past the end", "truncated");
  }
  SECTION("header over 100 MB") {
    std::string f = le(uint64_t(200000000)) + "{}";
    CHECK_ERROR(parse_safetensors(f), "200000000", "100 MB");
    CHECK_ERROR(parse_safetensors(le(~uint64_t(0))), "100 MB");
  }
  SECTION("invalid JSON") {
    CHECK_ERROR(parse_safetensors(st_file(R"({"x": {"dtype": )")), "not valid JSON");
    CHECK_ERROR(parse_safetensors(st_file("")), "not valid JSON");
  }
  SECTION("header not an object") {
    CHECK_ERROR(parse_safetensors(st_file("[1, 2]")), "JSON object");
    CHECK_ERROR(parse_safetensors(st_file("42")), "JSON object");
  }
  SECTION("entry not an object or missing fields") {
    CHECK_ERROR(parse_safetensors(st_file(one("3"))), "'x'", "dtype, shape and data_offsets");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[2]})"), f32x2)),
                "'x'", "data_offsets");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})"), f32x2)),
                "dtype must be a string");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), f32x2)),
                "'x'", "non-negative");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), f32x2)),
                "shape must be an array");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), f32x2)),
                "data_offsets");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,7]})"), f32x2)),
                "data_offsets");
  }
  SECTION("unknown dtype") {
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]})"), f32x2)),
                "'x'", "unknown dtype", "F8_E4M3");
  }
  SECTION("shape and offsets disagree") {
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), f32x2)),
                "'x'", "8 bytes", "[3]", "needs 12");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})"), f32x2)),
                "needs 16");
  }
  SECTION("a shape whose byte size overflows is not accepted") {
    // 2^62 * 4 elements * 4 bytes wraps to 0 in 64 bits; must not pass as an empty tensor.
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]})"))),
                "'x'", "shape");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]})"))),
                "'x'", "shape");
  }
  SECTION("offsets out of range") {
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), f32x2)),
                "'x'", "[4, 12]", "8 bytes");
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[0],"data_offsets":[8,4]})"), f32x2)),
                "[8, 4]");
  }
  SECTION("overlapping tensors") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    CHECK_ERROR(parse_safetensors(st_file(h, f32x2 + le(3.0f))), "'b'", "overlap");
    // The same range twice.
    const std::string h2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    CHECK_ERROR(parse_safetensors(st_file(h2, f32x2)), "overlap");
  }
  SECTION("a hole between tensors") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    CHECK_ERROR(parse_safetensors(st_file(h, f32x2 + le(3.0f))), "'b'", "hole");
    // A hole at the start.
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), f32x2)),
                "'x'", "starts at byte 4", "hole");
  }
  SECTION("trailing data not covered by any tensor") {
    CHECK_ERROR(parse_safetensors(st_file(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), f32x2)),
                "8 bytes", "cover 4", "trailing");
    CHECK_ERROR(parse_safetensors(st_file("{}", "junk")), "4 bytes", "cover 0");
  }
  SECTION("duplicate tensor names") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    CHECK_ERROR(parse_safetensors(st_file(h, f32x2)), "'a'", "twice");
  }
  SECTION("bad __metadata__") {
    CHECK_ERROR(parse_safetensors(st_file(R"({"__metadata__":["a"]})")), "__metadata__",
                "object of strings");
    CHECK_ERROR(parse_safetensors(st_file(R"({"__metadata__":{"step":10}})")), "__metadata__",
                "step", "string");
  }
  SECTION("errors from a file name the file") {
    TempDir dir;
    const std::string path = dir.file("broken.safetensors");
    {
      std::ofstream f(path, std::ios::binary);
      f << st_file("not json");
    }
    CHECK_ERROR(load_safetensors(path), path, "not valid JSON");
    CHECK_ERROR(load_safetensors(dir.file("missing.safetensors")), "missing.safetensors",
                "cannot open");
    CHECK_ERROR(load_safetensors(dir.path), dir.path);  // a directory is not a file
  }
}

TEST_CASE("a failed save reports the path and keeps the old file", "[safetensors][errors]") {
  Tensor a = Tensor::ones({3}, DType::f64);
  CHECK_ERROR(save_safetensors("/proc/nonexistent/x.safetensors", {{"a", a}}),
              "/proc/nonexistent/x.safetensors");
  TempDir dir;
  CHECK_ERROR(save_safetensors(dir.file("no_such_dir/x.safetensors"), {{"a", a}}),
              "no_such_dir/x.safetensors");

  // A good file at `path`...
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"good", a}}, {{"v", "1"}});
  const std::string before = read_all(path);
  // ...survives a save that cannot create its temporary (a directory is in the way)...
  REQUIRE(::mkdir((path + ".tmp").c_str(), 0755) == 0);
  CHECK_ERROR(save_safetensors(path, {{"bad", Tensor::zeros({2})}}), path);
  CHECK(read_all(path) == before);
  REQUIRE(::rmdir((path + ".tmp").c_str()) == 0);
  // ...and saves that fail before writing anything.
  CHECK_ERROR(save_safetensors(path, {{"u", Tensor()}}), "'u'", "undefined");
  CHECK_ERROR(save_safetensors(path, {{"d", a}, {"d", a}}), "'d'", "twice");
  CHECK(read_all(path) == before);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  Safetensors st = load_safetensors(path);
  CHECK(st.contains("good"));
  CHECK(st.metadata.at("v") == "1");
}
