#include "zenith/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "zenith/error.h"

namespace zenith {
namespace {

using json = nlohmann::json;

// The header's size is capped as the safetensors library caps it: a corrupt size field
// must not become a 2^63-byte read.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  std::vector<void*> copies;  // aligned copies of misaligned tensors
  ~Mapping() {
    if (base != MAP_FAILED && size) munmap(base, size);
    for (void* p : copies) std::free(p);
  }
};

bool dtype_from_safetensors(const std::string& s, DType* d) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"I64", DType::i64},
      {"I32", DType::i32}, {"BOOL", DType::b8}, {"U8", DType::u8}};
  for (const auto& [name, dt] : kNames)
    if (s == name) {
      *d = dt;
      return true;
    }
  return false;
}

// numel x size, or fail on a negative dim or an overflow.
uint64_t checked_bytes(const std::string& where, const std::vector<int64_t>& shape, DType d) {
  uint64_t n = dtype_size(d);
  for (int64_t s : shape) {
    if (s < 0) fail(where, ": negative dimension ", s);
    if (s && n > std::numeric_limits<uint64_t>::max() / uint64_t(s)) fail(where, ": shape too large");
    n *= uint64_t(s);
  }
  return n;
}

}  // namespace

const char* safetensors_dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::b8: return "BOOL";
    case DType::u8: return "U8";
  }
  return "?";
}

SafeTensorsFile read_safetensors(const std::string& path) {
  SafeTensorsFile f;
  f.path = path;
  auto map = std::make_shared<Mapping>();
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, ": cannot open (", std::strerror(errno), ")");
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, ": not a regular file");
    }
    map->size = size_t(st.st_size);
    if (map->size < 8) {
      ::close(fd);
      fail(path, ": ", map->size, " bytes, too short for a safetensors file (8-byte header size first)");
    }
    map->base = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map->base == MAP_FAILED) fail(path, ": cannot map (", std::strerror(errno), ")");
  }
  const auto* bytes = static_cast<const unsigned char*>(map->base);
  uint64_t header_size = 0;
  for (int b = 7; b >= 0; --b) header_size = header_size << 8 | bytes[b];  // little endian
  if (header_size > kMaxHeaderBytes || header_size > map->size - 8)
    fail(path, ": header size ", header_size, " does not fit the file's ", map->size, " bytes (not a safetensors file, "
         "or truncated)");
  const size_t data_start = 8 + size_t(header_size), data_size = map->size - data_start;
  json header;
  try {
    header = json::parse(bytes + 8, bytes + data_start);
  } catch (const json::exception& e) {
    fail(path, ": the header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object()) fail(path, ": the header is not a JSON object");
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, ": metadata ", m.key(), " is not a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor " + name;
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      fail(where, ": needs dtype (a string), shape (a list) and data_offsets ([begin, end])");
    SafeTensor t{};
    const std::string dt = v["dtype"].get<std::string>();
    if (!dtype_from_safetensors(dt, &t.dtype))
      fail(where, ": dtype ", dt, " is not one Zenith reads (F32, F16, BF16, I64, I32, BOOL, U8)");
    for (const json& d : v["shape"]) {
      if (!d.is_number_integer()) fail(where, ": a dimension is not an integer");
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(where, ": data_offsets are not non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      fail(where, ": data_offsets [", begin, ", ", end, "] fall outside the file's ", data_size, " bytes of data");
    const uint64_t want = checked_bytes(where, t.shape, t.dtype);
    if (end - begin != want)
      fail(where, ": holds ", end - begin, " bytes, its dtype and shape need ", want);
    t.nbytes = size_t(want);
    const unsigned char* p = bytes + data_start + begin;
    if (reinterpret_cast<uintptr_t>(p) % dtype_size(t.dtype) != 0 && t.nbytes) {  // another writer's layout
      void* copy = std::aligned_alloc(64, (t.nbytes + 63) / 64 * 64);
      if (!copy) fail_alloc(where, ": out of memory for an aligned copy of ", t.nbytes, " bytes");
      std::memcpy(copy, p, t.nbytes);
      map->copies.push_back(copy);
      p = static_cast<const unsigned char*>(copy);
    }
    t.data = p;
    order.push_back({begin, name});
    f.tensors.emplace(name, std::move(t));
  }
  std::sort(order.begin(), order.end());
  for (auto& [b, name] : order) f.names.push_back(std::move(name));
  f.keep = std::move(map);
  return f;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Largest dtypes first: with the data starting at a multiple of 64, each tensor then
  // starts at a multiple of its own dtype's size, with no holes between them.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype);
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  std::vector<uint64_t> sizes(tensors.size());
  for (size_t i : order) {
    const SafeTensorOut& t = tensors[i];
    if (t.name.empty() || t.name == "__metadata__") fail(path, ": a tensor needs a name other than __metadata__");
    if (header.contains(t.name)) fail(path, ": two tensors named ", t.name);
    sizes[i] = checked_bytes(path + ": tensor " + t.name, t.shape, t.dtype);
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + sizes[i]}}};
    at += sizes[i];
  }
  // (invalid UTF-8 in a name or value is replaced, not thrown as nlohmann's own error)
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');  // the data starts 64-byte aligned
  if (text.size() > kMaxHeaderBytes)
    fail(path, ": a header of ", text.size(), " bytes, past the ", kMaxHeaderBytes, " readers accept");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());  // one per writing process
  FILE* out = std::fopen(tmp.c_str(), "wb");
  if (!out) fail(path, ": cannot write (", std::strerror(errno), ")");
  unsigned char size_le[8];
  for (int b = 0; b < 8; ++b) size_le[b] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * b));
  bool ok = std::fwrite(size_le, 1, 8, out) == 8 && std::fwrite(text.data(), 1, text.size(), out) == text.size();
  for (size_t i : order)
    if (ok && sizes[i]) ok = std::fwrite(tensors[i].data, 1, sizes[i], out) == sizes[i];
  ok = std::fclose(out) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, ": writing failed (", std::strerror(err), ")");
  }
}

}  // namespace zenith
