// SPDX-License-Identifier: BSD-3-Clause
#include "safetensors.h"

#include "file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tensor_impl.h"

namespace remora {

namespace {

using json = nlohmann::json;

struct FileDType {
  const char* name;
  size_t size;
};
const FileDType kDTypes[] = {{"F32", 4}, {"F64", 8}, {"I64", 8}, {"F16", 2},  {"BF16", 2},
                             {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      uint32_t m = man;
      do { ++e; m <<= 1; } while (!(m & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Decodes one tensor's bytes into a Remora tensor (little-endian host assumed).
Tensor decode(const std::string& dt, const Shape& shape, const char* p, bool keep_16bit) {
  const int64_t n = shape_numel(shape);
  auto load = [&](DType out_dt, auto conv) {
    Tensor t = make_tensor(shape, out_dt, Device::cpu());
    for (int64_t i = 0; i < n; ++i) conv(t, i);
    return t;
  };
  if (dt == "F32" || dt == "F64" || dt == "I64") {
    const DType d = dt == "F32" ? DType::f32 : dt == "F64" ? DType::f64 : DType::i64;
    Tensor t = make_tensor(shape, d, Device::cpu());
    if (n > 0) std::memcpy(t.raw_data(), p, size_t(n) * dtype_size(d));  // empty: data is null
    return t;
  }
  if (keep_16bit && (dt == "F16" || dt == "BF16")) {  // the bits as they are
    const DType d = dt == "F16" ? DType::f16 : DType::bf16;
    Tensor t = make_tensor(shape, d, Device::cpu());
    if (n > 0) std::memcpy(t.raw_data(), p, size_t(n) * 2);
    return t;
  }
  if (dt == "F16")
    return load(DType::f32, [&](Tensor& t, int64_t i) {
      uint16_t h; std::memcpy(&h, p + 2 * i, 2); t.data_ptr<float>()[i] = half_to_float(h);
    });
  if (dt == "BF16")
    return load(DType::f32, [&](Tensor& t, int64_t i) {
      uint16_t h; std::memcpy(&h, p + 2 * i, 2);
      uint32_t bits = uint32_t(h) << 16; float f; std::memcpy(&f, &bits, 4);
      t.data_ptr<float>()[i] = f;
    });
  if (dt == "I32")
    return load(DType::i64, [&](Tensor& t, int64_t i) {
      int32_t v; std::memcpy(&v, p + 4 * i, 4); t.data_ptr<int64_t>()[i] = v;
    });
  if (dt == "I16")
    return load(DType::i64, [&](Tensor& t, int64_t i) {
      int16_t v; std::memcpy(&v, p + 2 * i, 2); t.data_ptr<int64_t>()[i] = v;
    });
  if (dt == "I8")
    return load(DType::i64, [&](Tensor& t, int64_t i) {
      t.data_ptr<int64_t>()[i] = int8_t(p[i]);
    });
  return load(DType::i64, [&](Tensor& t, int64_t i) {  // U8, BOOL
    t.data_ptr<int64_t>()[i] = uint8_t(p[i]);
  });
}

}  // namespace

const Tensor& Safetensors::get(const std::string& name) const {
  for (const auto& kv : tensors)
    if (kv.first == name) return kv.second;
  std::ostringstream os;
  os << "safetensors: no tensor named '" << name << "' (the file has " << tensors.size()
     << " tensors";
  for (size_t i = 0; i < tensors.size() && i < 5; ++i) os << (i ? ", " : ": ") << tensors[i].first;
  if (tensors.size() > 5) os << ", ...";
  os << ")";
  throw Error(os.str());
}

bool Safetensors::contains(const std::string& name) const {
  for (const auto& kv : tensors)
    if (kv.first == name) return true;
  return false;
}

namespace {
Safetensors keep_stored_dtypes(Safetensors st);
}  // namespace

Safetensors parse_safetensors(const std::string& bytes, const std::string& what) {
  return parse_safetensors(bytes, what, SafetensorsLoad{});
}

Safetensors parse_safetensors(const std::string& bytes, const std::string& what,
                              const SafetensorsLoad& how) {
  const std::string ctx = "safetensors: " + what + ": ";
  REMORA_CHECK(bytes.size() >= 8, ctx << "file is " << bytes.size()
                                      << " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  REMORA_CHECK(n <= 100000000ull, ctx << "header length " << n << " exceeds the 100 MB limit");
  REMORA_CHECK(n <= bytes.size() - 8, ctx << "header length " << n << " runs past the end of the "
                                          << bytes.size() << "-byte file (truncated?)");
  const std::string header = bytes.substr(8, size_t(n));
  // Reject duplicate top-level names, which a plain parse would silently merge.
  std::set<std::string> keys;
  std::string dup;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth == 1 && ev == json::parse_event_t::key) {
      const std::string k = parsed.get<std::string>();
      if (!keys.insert(k).second && dup.empty()) dup = k;
    }
    return true;
  };
  json h;
  try {
    h = json::parse(header, cb);
  } catch (const json::exception& e) {
    throw Error(ctx + "header is not valid JSON (" + e.what() + ")");
  }
  REMORA_CHECK(dup.empty(), ctx << "tensor name '" << dup << "' appears twice in the header");
  REMORA_CHECK(h.is_object(), ctx << "header must be a JSON object");
  const size_t data_start = 8 + size_t(n);
  const uint64_t buf_size = bytes.size() - data_start;

  Safetensors out;
  struct Entry { std::string name, dtype; Shape shape; uint64_t begin, end; };
  std::vector<Entry> entries;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      REMORA_CHECK(v.is_object(), ctx << "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        REMORA_CHECK(m.value().is_string(), ctx << "__metadata__." << m.key() << " must be a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string ectx = ctx + "tensor '" + name + "': ";
    REMORA_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") &&
                     v.contains("data_offsets"),
                 ectx << "expected an object with dtype, shape and data_offsets");
    REMORA_CHECK(v["dtype"].is_string(), ectx << "dtype must be a string");
    Entry e;
    e.name = name;
    e.dtype = v["dtype"].get<std::string>();
    size_t esize = 0;
    for (const FileDType& d : kDTypes)
      if (e.dtype == d.name) esize = d.size;
    REMORA_CHECK(esize > 0, ectx << "unknown dtype '" << e.dtype
                                 << "' (supported: F32 F64 I64 F16 BF16 I32 I16 I8 U8 BOOL)");
    REMORA_CHECK(v["shape"].is_array(), ectx << "shape must be an array");
    // Byte size of the shape, refusing sizes that overflow 64 bits (a wrapped
    // product could otherwise pass the size check below as a tiny tensor).
    // The product of the non-zero dims must fit int64 as well, even when a zero
    // dim makes the tensor empty: strides are products of dims (fuzz finding
    // regress-zero-dim-huge: [0, 2^63-1, 2^63-1] overflowed a stride).
    uint64_t want = esize, nonzero = 1;
    bool too_big = false;
    for (const json& d : v["shape"]) {
      REMORA_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                   ectx << "shape entries must be non-negative integers");
      const uint64_t n_d = d.get<uint64_t>();
      too_big = too_big || n_d > uint64_t(INT64_MAX);
      if (!too_big && n_d != 0 && want > UINT64_MAX / n_d) too_big = true;
      if (!too_big && n_d != 0 && nonzero > uint64_t(INT64_MAX) / n_d) too_big = true;
      if (!too_big) {
        want *= n_d;
        if (n_d != 0) nonzero *= n_d;
      }
      e.shape.push_back(too_big ? 0 : int64_t(n_d));
    }
    REMORA_CHECK(!too_big, ectx << "shape " << v["shape"].dump() << " of " << e.dtype
                                << " is too large (its size overflows 64 bits)");
    REMORA_CHECK(e.shape.size() <= 8, ectx << "more than 8 dims");
    const json& off = v["data_offsets"];
    REMORA_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                     off[1].is_number_unsigned(),
                 ectx << "data_offsets must be [begin, end] with non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    REMORA_CHECK(e.begin <= e.end && e.end <= buf_size,
                 ectx << "data_offsets [" << e.begin << ", " << e.end
                      << "] fall outside the data buffer of " << buf_size << " bytes");
    REMORA_CHECK(e.end - e.begin == want, ectx << "data_offsets span " << e.end - e.begin
                                               << " bytes but shape " << shape_str(e.shape)
                                               << " of " << e.dtype << " needs " << want);
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t pos = 0;
  for (const Entry& e : entries) {
    REMORA_CHECK(e.begin == pos, ctx << "tensor '" << e.name << "' starts at byte " << e.begin
                                     << " but the previous tensor ends at " << pos
                                     << (e.begin < pos ? " (overlap)" : " (hole)"));
    pos = e.end;
  }
  REMORA_CHECK(pos == buf_size, ctx << "data buffer is " << buf_size << " bytes but the tensors cover "
                                    << pos << " (trailing or missing data)");
  for (const Entry& e : entries) {
    out.tensors.emplace_back(e.name, decode(e.dtype, e.shape, bytes.data() + data_start + e.begin, how.keep_16bit));
    out.stored_dtypes[e.name] = e.dtype;
  }
  return how.keep_integers ? keep_stored_dtypes(std::move(out)) : out;
}

namespace {
// I32, U8 and BOOL tensors back to their own dtypes (lossless: they were
// widened from those).
Safetensors keep_stored_dtypes(Safetensors st) {
  for (auto& kv : st.tensors) {
    const std::string& dt = st.stored_dtypes.at(kv.first);
    if (dt == "I32") kv.second = kv.second.to(DType::i32);
    if (dt == "U8") kv.second = kv.second.to(DType::u8);
    if (dt == "BOOL") kv.second = kv.second.to(DType::b8);
  }
  return st;
}
}  // namespace

Safetensors load_safetensors(const std::string& path, bool keep_dtypes) {
  return load_safetensors(path, SafetensorsLoad{keep_dtypes, keep_dtypes});
}
Safetensors parse_safetensors(const std::string& bytes, const std::string& what, bool keep_dtypes) {
  return parse_safetensors(bytes, what, SafetensorsLoad{keep_dtypes, keep_dtypes});
}

Safetensors load_safetensors(const std::string& path) { return load_safetensors(path, SafetensorsLoad{}); }

Safetensors load_safetensors(const std::string& path, const SafetensorsLoad& how) {
  // A regular file only (a FIFO or a device would block or never end), read
  // into one buffer of the file's size (a stringstream would hold it twice).
  uint64_t size = 0;
  const int fd = open_regular_file(path, "safetensors", &size);
  std::string source;
  const uint64_t room = available_memory(&source);
  if (size > room) {
    ::close(fd);
    REMORA_FAIL("safetensors: '" << path << "' is " << human_bytes(double(size)) << " but only "
                                 << human_bytes(double(room)) << " of memory is available (" << source
                                 << "); refusing to load it");
  }
  std::string bytes(size_t(size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      REMORA_FAIL("safetensors: '" << path << "': read " << got << " of " << size << " bytes"
                                   << (n < 0 ? std::string(": ") + std::strerror(err) : std::string()));
    }
    got += size_t(n);
  }
  ::close(fd);
  return parse_safetensors(bytes, path, how);
}

namespace {

// What a safetensors file holds, before any byte is written: the header (its
// 8-byte length, the JSON, padding to 8 bytes) and the tensors' bytes in order
// (contiguous CPU tensors: a view when the tensor already is one, no copy).
struct SafetensorsPlan {
  std::string head;  // length + JSON header + padding
  std::vector<Tensor> data;
  size_t data_bytes = 0;
};

SafetensorsPlan plan_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  SafetensorsPlan plan;
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> seen;
  for (const auto& kv : tensors) {
    REMORA_CHECK(seen.insert(kv.first).second, "save_safetensors: name '" << kv.first << "' given twice");
    REMORA_CHECK(kv.second.defined(), "save_safetensors: tensor '" << kv.first << "' is undefined");
    Tensor t = kv.second.detach().to(Device::cpu()).contiguous();
    const size_t nb = size_t(t.numel()) * dtype_size(t.dtype());
    const char* dt = nullptr;
    switch (t.dtype()) {
      case DType::f32: dt = "F32"; break;
      case DType::f64: dt = "F64"; break;
      case DType::i64: dt = "I64"; break;
      case DType::b8: dt = "BOOL"; break;
      case DType::i32: dt = "I32"; break;
      case DType::u8: dt = "U8"; break;
      case DType::bf16: dt = "BF16"; break;
      case DType::f16: dt = "F16"; break;
      default:
        REMORA_FAIL("save_safetensors: tensor '" << kv.first << "' has dtype " << dtype_name(t.dtype())
                                                 << ", which safetensors files do not hold here");
    }
    h[kv.first] = {{"dtype", dt}, {"shape", t.shape()},
                   {"data_offsets", {plan.data_bytes, plan.data_bytes + nb}}};
    plan.data_bytes += nb;
    plan.data.push_back(t);
  }
  std::string hs = h.dump();
  hs.append((8 - hs.size() % 8) % 8, ' ');  // align the buffer to 8 bytes
  plan.head.assign(8, '\0');
  const uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) plan.head[size_t(i)] = char((n >> (8 * i)) & 0xff);
  plan.head += hs;
  return plan;
}

const char* bytes_of(const Tensor& t) { return static_cast<const char*>(t.raw_data()); }
size_t nbytes_of(const Tensor& t) { return size_t(t.numel()) * dtype_size(t.dtype()); }

}  // namespace

std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  const SafetensorsPlan plan = plan_safetensors(tensors, metadata);
  std::string out;
  out.reserve(plan.head.size() + plan.data_bytes);
  out += plan.head;
  for (const Tensor& t : plan.data)
    if (nbytes_of(t)) out.append(bytes_of(t), nbytes_of(t));
  return out;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Written tensor by tensor: no copy of the whole file in memory (a checkpoint
  // with Adam state is 4x the parameters; building it as one string used to
  // add up to 3x that to the peak resident memory of a training run).
  const SafetensorsPlan plan = plan_safetensors(tensors, metadata);
  const std::string tmp = path + ".tmp";
  // A fresh temporary: whatever is at that name (a file an interrupted write
  // left, a FIFO that would block the open forever, a symbolic link) is
  // removed first, and O_EXCL | O_NOFOLLOW create a new regular file.
  struct stat old_tmp {};
  if (::lstat(tmp.c_str(), &old_tmp) == 0 && !S_ISDIR(old_tmp.st_mode)) ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  REMORA_CHECK(fd >= 0, "save_safetensors: cannot write '" << tmp << "': " << std::strerror(errno));
  auto write_all = [&](const char* p, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t w = ::write(fd, p + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        REMORA_FAIL("save_safetensors: write to '" << tmp << "' failed: " << std::strerror(err));
      }
      done += size_t(w);
    }
  };
  write_all(plan.head.data(), plan.head.size());
  for (const Tensor& t : plan.data) write_all(bytes_of(t), nbytes_of(t));
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    REMORA_FAIL("save_safetensors: could not commit '" << path << "': " << std::strerror(err));
  }
  // Make the rename itself durable: fsync the directory that holds the file.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some file systems refuse fsync on a directory
    ::close(dfd);
  }
}

}  // namespace remora
