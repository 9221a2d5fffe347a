#include "zenith/batch_slices.h"

#include "zenith/error.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace zenith {

bool per_image_node(const Node& n, std::vector<bool>* batched) {
  batched->assign(n.inputs.size(), false);
  if (n.inputs.empty() || n.outputs.empty()) return false;
  switch (n.op) {
    case Op::conv2d:
    case Op::conv2d_nchwc:
    case Op::conv2d_pw_dw:
      // (x, weights..., [residual]): x and the residual are images, the rest filters.
      (*batched)[0] = true;
      if (n.i("has_residual", 0) != 0) batched->back() = true;
      return true;
    case Op::max_pool2d:
    case Op::max_pool2d_nchwc:
    case Op::max_pool2d_codes:
    case Op::avg_pool2d:
    case Op::to_nchwc:
    case Op::from_nchwc:
      (*batched)[0] = true;
      return n.inputs.size() == 1;
    default:
      return false;
  }
}

namespace {
size_t bytes_of(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, int v) {
  int64_t n = 1;
  for (int64_t d : shapes[size_t(v)]) n *= d;
  return size_t(n) * dtype_size(g.type(v).dtype);
}
}  // namespace

std::vector<BatchSlice> find_batch_slices(const Graph& g, const std::vector<std::vector<int64_t>>& shapes,
                                          size_t cache) {
  std::vector<BatchSlice> out;
  if (cache == 0) return out;
  std::vector<int> producer(g.values.size(), -1);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni)
    for (int v : g.nodes[ni].outputs) producer[size_t(v)] = int(ni);
  // The run being built: its first node, its batch, its first and last node worth
  // slicing (below), and the most bytes of batched operands one image of those has.
  int start = -1, big_first = -1, big_last = -1;
  int64_t batch = 0;
  size_t image_work = 0;
  auto close = [&]() {
    if (big_first >= 0) {
      int64_t s = batch - 1;
      while (s > 1 && (batch % s != 0 || size_t(s) * image_work > cache / 4)) --s;
      out.push_back({big_first, big_last, batch, s});
    }
    start = big_first = big_last = -1;
    batch = 0;
    image_work = 0;
  };
  std::vector<bool> batched;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (has_trait(n.op, kSource)) continue;  // a constant or a fill: made once, not per image
    bool ok = per_image_node(n, &batched);
    int64_t nb = 0;
    size_t work = 0, largest = 0;  // the node's batched operands' bytes, its largest one's
    // Every batched operand: an image tensor (rank 4 or more: NCHW, blocked, codes
    // NHWC) of float32 or codes, all with one dim 0 >= 2; the weights made outside the
    // run (a pass reads them whole).
    auto operand = [&](int v) {
      const auto& s = shapes[size_t(v)];
      const DType d = g.type(v).dtype;
      if (s.size() < 4 || (d != DType::f32 && d != DType::u8) || s[0] < 2 || (nb && s[0] != nb)) return false;
      nb = s[0];
      const size_t b = bytes_of(g, shapes, v);
      work += b;
      largest = std::max(largest, b);
      return true;
    };
    for (size_t k = 0; ok && k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      if (batched[k]) ok = operand(v);
      else ok = start < 0 || producer[size_t(v)] < start;  // a weight the run does not make
    }
    for (size_t k = 0; ok && k < n.outputs.size(); ++k) ok = operand(n.outputs[k]);
    if (!ok || (start >= 0 && nb != batch)) close();
    if (!ok) continue;
    if (start < 0) {
      start = int(ni);
      batch = nb;
    }
    // Worth a pass per image: a batched operand over a quarter of the cache (it leaves
    // the cache before its reader is done with it), and filters small enough that
    // reading them once an image adds at most an eighth of the operands' traffic (each
    // value once: a conv without a bias repeats its filters in the bias slot). An
    // eighth, not a quarter: ResNet-50's layer 3 sliced lost what the earlier layers
    // gained (its first conv reads 13 MB with 0.5 MB of filters); Winograd convs
    // re-read their transformed filters, 1.8-4x the bytes counted here.
    size_t weights = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      bool seen = batched[k];
      for (size_t j = 0; j < k && !seen; ++j) seen = n.inputs[j] == v;
      if (!seen) weights += bytes_of(g, shapes, v);
    }
    if (largest > cache / 4 && weights * size_t(nb - 1) <= work / 8) {
      if (big_first < 0) big_first = int(ni);
      big_last = int(ni);
      image_work = std::max(image_work, work / size_t(nb));
    }
  }
  close();
  return out;
}

// The last-level cache's size as the kernel reports it in sysfs (what lscpu prints), or
// 0. glibc's sysconf can report the host's whole L3 in a VM (384 MiB on a 2-core Zen 5
// guest whose sysfs and lscpu say 32 MiB).
size_t last_level_cache_bytes() {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size"), type_file(dir + "type");
    int level = 0;
    std::string size, type;
    if (!(level_file >> level) || !(size_file >> size)) break;
    if ((type_file >> type) && type == "Instruction") continue;
    size_t n = size_t(std::strtoull(size.c_str(), nullptr, 10));
    if (!size.empty() && (size.back() == 'K' || size.back() == 'k')) n <<= 10;
    if (!size.empty() && size.back() == 'M') n <<= 20;
    if (level > best_level) best_level = level, best = n;
  }
  return best;
}

size_t batch_slice_cache() {
  if (const char* e = std::getenv("ZENITH_BATCH_SLICE_CACHE")) {
    // Bytes, or with a K, M or G suffix (KiB, MiB, GiB).
    char* end = nullptr;
    const unsigned long long n = std::strtoull(e, &end, 10);
    const std::string unit = end ? end : "";
    const int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
    ZENITH_CHECK(end != e && shift >= 0 && e[0] != '-', "ZENITH_BATCH_SLICE_CACHE: expected the cache's bytes as a "
                 "number, optionally with K, M or G (0 turns batch slices off), got '", e, "'");
    return size_t(n) << shift;
  }
  static const size_t llc = last_level_cache_bytes();  // read once a process
  return llc > 0 ? llc : size_t(32) << 20;
}

}  // namespace zenith
