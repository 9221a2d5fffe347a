// The safetensors file format (huggingface/safetensors): an 8-byte little-endian header
// size N, N bytes of JSON ({"__metadata__": {string: string}, name: {"dtype", "shape",
// "data_offsets": [begin, end]}}), then the tensors' bytes, offsets relative to the end of
// the header. Zenith's model files are safetensors files (model_file.h), and zenith-run
// reads its inputs and writes its outputs in it, so any safetensors reader (Python's
// `safetensors` package, Rust's crate) opens all three.
//
// Reading maps the file (no copy); every offset, size and dtype is checked against the
// file before a tensor is handed out, and a bad file is a zenith::Error naming the
// problem and the file, never a crash. (The mapping shares the file's pages: a file
// truncated or rewritten in place by another process while mapped is not detected, and
// a read past a truncation is SIGBUS; writers here write a new file and rename it.)
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/dtype.h"

namespace zenith {

struct SafeTensor {
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // inside the mapping (or an aligned copy, see read_safetensors)
  size_t nbytes;
};

struct SafeTensorsFile {
  std::string path;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> names;              // in the order of their data in the file
  std::map<std::string, SafeTensor> tensors;   // by name
  std::shared_ptr<void> keep;                  // the mapping (and any aligned copies): tensors' data lives while this does
};

// Maps `path` and checks its header. A tensor whose data is not aligned to its dtype's
// size (another writer's file) is copied to aligned memory; Zenith's writer aligns them.
// Dtypes: F32, F16, BF16, I64, I32, BOOL, U8 (others are an error naming them).
SafeTensorsFile read_safetensors(const std::string& path);

struct SafeTensorOut {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};

// Writes `tensors` (bytes = numel x dtype size each) with `metadata`, through a temporary
// file renamed into place. The data section starts 64-byte aligned (the header padded with
// spaces) and the largest dtypes come first, so each tensor starts at a multiple of its
// dtype's size, with no holes between tensors, as the format requires.
void write_safetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata);

const char* safetensors_dtype_name(DType d);

}  // namespace zenith
