// Zenith's C++ API, for programs that run model files (zenith.export) without Python:
//
//   #include <zenith/zenith.h>
//   zenith::Model model("model.zenith");            // loads, passes and compiles for this CPU
//   std::vector<zenith::OutTensor> out =
//       model.run({{ids.data(), zenith::DType::i64, {1, n}}});   // thread-safe
//
// Link zenith::zenith (CMake: find_package(zenith)); examples/cpp/ and docs/cpp.md show
// the whole of it. Every failure is a zenith::Error (a std::runtime_error) with a message
// naming the file, input or op; a failed allocation is a zenith::OutOfMemory (a
// std::bad_alloc).
#pragma once
#include "zenith/error.h"
#include "zenith/model_file.h"
#include "zenith/threadpool.h"
