#include "zenith/planner.h"

#include <algorithm>

namespace zenith {

MemoryPlan plan_memory(const Graph& g, const std::vector<std::vector<int64_t>>& shapes,
                       const std::vector<BatchSlice>& slices) {
  MemoryPlan plan;
  plan.storage_of.assign(g.values.size(), -1);
  auto bytes_of = [&](int v) {
    int64_t n = 1;
    for (int64_t d : shapes[size_t(v)]) n *= d;
    return size_t(n) * dtype_size(g.type(v).dtype);
  };
  auto& st = plan.storages;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Storage s;
    s.kind = Storage::kInput;
    s.index = int(i);
    s.bytes = bytes_of(g.inputs[i]);
    plan.storage_of[size_t(g.inputs[i])] = int(st.size());
    st.push_back(s);
  }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (n.op == Op::constant) {
      Storage s;
      s.kind = Storage::kConst;
      s.index = int(ni);
      s.bytes = n.constant->nbytes;
      plan.storage_of[size_t(n.outputs[0])] = int(st.size());
      st.push_back(s);
      continue;
    }
    if (op_info(n.op).traits & kAlias) {
      plan.storage_of[size_t(n.outputs[0])] = plan.storage_of[size_t(n.inputs[0])];
    } else {
      for (int o : n.outputs) {
        Storage s;
        s.bytes = bytes_of(o);
        s.first = int(ni);
        s.last = int(ni);
        plan.storage_of[size_t(o)] = int(st.size());
        st.push_back(s);
      }
    }
    for (int v : n.inputs) {
      Storage& s = st[size_t(plan.storage_of[size_t(v)])];
      s.last = std::max(s.last, int(ni));
    }
  }
  // Graph outputs escape: their storages become per-call buffers. An output that is a
  // graph input or a constant (possibly through a reshape) keeps that storage.
  for (int v : g.outputs) {
    int si = plan.storage_of[size_t(v)];
    Storage& s = st[size_t(si)];
    if (s.kind == Storage::kArena) {
      s.kind = Storage::kOutput;
      s.index = plan.num_output_buffers++;
    }
    plan.output_storage.push_back(si);
  }
  std::vector<bool> batched;
  for (const BatchSlice& r : slices) {
    for (Storage& s : st) {
      if (s.kind != Storage::kArena && s.kind != Storage::kOutput) continue;
      const bool made_here = s.first >= r.first && s.first <= r.last;
      // (A slice's nodes are per image but for constants and fills, which it skips over.)
      if (made_here && s.last <= r.last && s.kind == Storage::kArena &&
          per_image_node(g.nodes[size_t(s.first)], &batched)) {
        s.per_pass = true;  // every output of a per-image node holds the batch in dim 0
        s.bytes = s.bytes / size_t(r.batch) * size_t(r.slice);
      } else if (made_here || (s.first < r.first && s.last >= r.first)) {
        s.first = std::min(s.first, r.first);
        s.last = std::max(s.last, r.last);
      }
    }
  }
  // First-fit offsets for arena storages, largest first, against lifetime overlaps.
  // live[ni] lists the storages placed so far that are live at node ni, so a storage
  // meets only the placed ones that overlap it: decode graphs of ~1000 nodes are
  // re-planned on every new sequence length, and comparing each storage with every
  // placed one (quadratic) took ~1 ms a call.
  std::vector<int> order;
  for (size_t i = 0; i < st.size(); ++i)
    if (st[i].kind == Storage::kArena) order.push_back(int(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return st[size_t(a)].bytes != st[size_t(b)].bytes ? st[size_t(a)].bytes > st[size_t(b)].bytes : a < b;
  });
  std::vector<std::vector<int>> live(g.nodes.size());
  std::vector<int> seen(st.size(), -1);  // the storage whose busy list last took it
  std::vector<std::pair<size_t, size_t>> busy;
  size_t total = 0;
  for (int si : order) {
    Storage& s = st[size_t(si)];
    busy.clear();
    // Inclusive at both ends: a node reads its inputs while it writes its outputs.
    for (int ni = s.first; ni <= s.last; ++ni)
      for (int pi : live[size_t(ni)]) {
        if (seen[size_t(pi)] == si) continue;
        seen[size_t(pi)] = si;
        const Storage& p = st[size_t(pi)];
        busy.push_back({p.offset, p.offset + arena_align_up(p.bytes)});
      }
    std::sort(busy.begin(), busy.end());
    size_t off = 0, need = arena_align_up(s.bytes);
    for (auto [lo, hi] : busy) {
      if (off + need <= lo) break;
      off = std::max(off, hi);
    }
    s.offset = off;
    total = std::max(total, off + need);
    plan.arena_unshared_bytes += need;
    for (int ni = s.first; ni <= s.last; ++ni) live[size_t(ni)].push_back(si);
  }
  plan.arena_bytes = total;
  return plan;
}

}  // namespace zenith
