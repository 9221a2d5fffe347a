// The memory planner on hand-built graphs: reuse where lifetimes allow it, and the
// cases where it must not happen (a value still to be read, a node's own inputs),
// aliases through reshape, graph outputs that are inputs or constants, alignment and
// empty values; then random graphs checked against the same invariants and against a
// simulated run that tags every byte with the value written there.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/planner.h"
#include "test_util.h"

using namespace zenith;

namespace {

struct Planned {
  Graph g;
  MemoryPlan plan;
  int id(const std::string& name) const {
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].name == name) return int(v);
    ADD_FAILURE() << "no value %" << name;
    return 0;
  }
  int si(const std::string& name) const { return plan.storage_of[size_t(id(name))]; }
  const Storage& st(const std::string& name) const { return plan.storages[size_t(si(name))]; }
};

Planned plan_text(const std::string& text) {
  Planned p{parse_graph(text), {}};
  verify(p.g);
  p.plan = plan_memory(p.g, static_shapes(p.g));
  return p;
}

// Two arena storages overlap in memory: their aligned byte ranges intersect. Empty
// storages occupy no bytes.
bool bytes_overlap(const Storage& a, const Storage& b) {
  if (a.kind != Storage::kArena || b.kind != Storage::kArena) return false;
  size_t ae = a.offset + arena_align_up(a.bytes), be = b.offset + arena_align_up(b.bytes);
  return a.offset < ae && b.offset < be && a.offset < be && b.offset < ae;
}

// What the plan must say, recomputed from the graph alone (not from the plan's own
// first/last): per value id, the value that owns its memory and, for those owners,
// the lifetime and where the memory comes from.
struct Reference {
  std::vector<int> root;        // v itself, or for a reshape output its input's root; -1 if undefined
  std::vector<int> first;       // root's producer node (-1 for an input)
  std::vector<int> last;        // last node reading the root or any alias of it (first if none)
  std::vector<int> input_pos;   // graph input position, or -1
  std::vector<int> const_node;  // constant node, or -1
  std::vector<bool> returned;   // the root or an alias of it is a graph output
};

Reference reference_of(const Graph& g) {
  size_t nv = g.values.size();
  Reference r{std::vector<int>(nv, -1), std::vector<int>(nv, -1), std::vector<int>(nv, -1),
              std::vector<int>(nv, -1), std::vector<int>(nv, -1), std::vector<bool>(nv, false)};
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    r.root[size_t(g.inputs[i])] = g.inputs[i];
    r.input_pos[size_t(g.inputs[i])] = int(i);
  }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    for (int v : n.inputs) {
      size_t root = size_t(r.root[size_t(v)]);
      r.last[root] = std::max(r.last[root], int(ni));
    }
    if (op_info(n.op).traits & kAlias) {
      r.root[size_t(n.outputs[0])] = r.root[size_t(n.inputs[0])];
      continue;
    }
    for (int o : n.outputs) {
      r.root[size_t(o)] = o;
      r.first[size_t(o)] = r.last[size_t(o)] = int(ni);
      if (n.op == Op::constant) r.const_node[size_t(o)] = int(ni);
    }
  }
  for (int v : g.outputs) r.returned[size_t(r.root[size_t(v)])] = true;
  return r;
}

// Each storage against the reference: one storage per root, shared by exactly the
// values aliasing it; inputs kInput and constants kConst (also when returned, directly
// or through reshapes); other returned roots kOutput, one buffer each; the rest kArena,
// aligned and inside the arena. Fills `root_of_storage`.
void check_storages(const Graph& g, const MemoryPlan& plan, const Reference& ref,
                    std::vector<int>* root_of_storage) {
  const auto& st = plan.storages;
  ASSERT_EQ(plan.storage_of.size(), g.values.size());
  auto& owner = *root_of_storage;
  owner.assign(st.size(), -1);
  for (size_t v = 0; v < g.values.size(); ++v) {
    int r = ref.root[v];
    if (r < 0) continue;
    int s = plan.storage_of[v];
    ASSERT_GE(s, 0) << "%" << g.value_name(int(v)) << " has no storage";
    ASSERT_LT(size_t(s), st.size());
    EXPECT_EQ(s, plan.storage_of[size_t(r)]) << "%" << g.value_name(int(v)) << " is not in its root's storage";
    if (owner[size_t(s)] < 0) owner[size_t(s)] = r;
    EXPECT_EQ(owner[size_t(s)], r) << "%" << g.value_name(r) << " and %" << g.value_name(owner[size_t(s)])
                                   << " share a storage";
  }
  std::vector<int> buffer_users(size_t(std::max(plan.num_output_buffers, 0)), 0);
  size_t unshared = 0;
  for (size_t s = 0; s < st.size(); ++s) {
    int r = owner[s];
    ASSERT_GE(r, 0) << "storage " << s << " holds no value";
    const Storage& x = st[s];
    SCOPED_TRACE("storage of %" + g.value_name(r));
    if (ref.input_pos[size_t(r)] >= 0) {
      EXPECT_EQ(x.kind, Storage::kInput);
      EXPECT_EQ(x.index, ref.input_pos[size_t(r)]);
      continue;
    }
    if (ref.const_node[size_t(r)] >= 0) {
      EXPECT_EQ(x.kind, Storage::kConst);
      EXPECT_EQ(x.index, ref.const_node[size_t(r)]);
      EXPECT_EQ(x.bytes, g.nodes[size_t(ref.const_node[size_t(r)])].constant->nbytes);
      continue;
    }
    size_t numel = 1;
    for (const auto& d : g.type(r).shape) numel *= size_t(d.value());
    EXPECT_EQ(x.bytes, numel * dtype_size(g.type(r).dtype));
    EXPECT_EQ(x.first, ref.first[size_t(r)]);
    EXPECT_EQ(x.last, ref.last[size_t(r)]);
    if (ref.returned[size_t(r)]) {
      EXPECT_EQ(x.kind, Storage::kOutput);
      ASSERT_GE(x.index, 0);
      ASSERT_LT(x.index, plan.num_output_buffers);
      ++buffer_users[size_t(x.index)];
      continue;
    }
    EXPECT_EQ(x.kind, Storage::kArena);
    EXPECT_EQ(x.offset % kArenaAlign, 0u);
    EXPECT_LE(x.offset + arena_align_up(x.bytes), plan.arena_bytes);
    unshared += arena_align_up(x.bytes);
  }
  for (size_t b = 0; b < buffer_users.size(); ++b) EXPECT_EQ(buffer_users[b], 1) << "output buffer " << b;
  EXPECT_EQ(plan.arena_unshared_bytes, unshared);
  EXPECT_LE(plan.arena_bytes, plan.arena_unshared_bytes);
  EXPECT_EQ(plan.arena_bytes % kArenaAlign, 0u);
  ASSERT_EQ(plan.output_storage.size(), g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_EQ(plan.output_storage[i], plan.storage_of[size_t(g.outputs[i])]) << "output " << i;
}

// Where bytes may be shared: arena storages whose reference lifetimes overlap are
// disjoint; a node's outputs never share a storage or bytes with its inputs (kernels
// read inputs while writing outputs); the arena holds the live bytes of every node.
void check_sharing(const Graph& g, const MemoryPlan& plan, const Reference& ref,
                   const std::vector<int>& root_of_storage) {
  const auto& st = plan.storages;
  auto first = [&](size_t s) { return ref.first[size_t(root_of_storage[s])]; };
  auto last = [&](size_t s) { return ref.last[size_t(root_of_storage[s])]; };
  auto name = [&](size_t s) { return "%" + g.value_name(root_of_storage[s]); };
  for (size_t a = 0; a < st.size(); ++a)
    for (size_t b = a + 1; b < st.size(); ++b) {
      if (st[a].kind != Storage::kArena || st[b].kind != Storage::kArena) continue;
      if (first(a) <= last(b) && first(b) <= last(a))
        EXPECT_FALSE(bytes_overlap(st[a], st[b]))
            << name(a) << " [" << first(a) << ", " << last(a) << "] at " << st[a].offset << " and " << name(b)
            << " [" << first(b) << ", " << last(b) << "] at " << st[b].offset;
    }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (op_info(n.op).traits & kAlias) continue;
    for (int o : n.outputs)
      for (int v : n.inputs) {
        int so = plan.storage_of[size_t(o)], sv = plan.storage_of[size_t(v)];
        EXPECT_NE(so, sv) << "node " << ni << " writes %" << g.value_name(o) << " over its input %" << g.value_name(v);
        EXPECT_FALSE(bytes_overlap(st[size_t(so)], st[size_t(sv)]))
            << "node " << ni << " writes %" << g.value_name(o) << " over its input %" << g.value_name(v);
      }
  }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    size_t live = 0;
    for (size_t s = 0; s < st.size(); ++s)
      if (st[s].kind == Storage::kArena && first(s) <= int(ni) && int(ni) <= last(s))
        live += arena_align_up(st[s].bytes);
    EXPECT_GE(plan.arena_bytes, live) << "at node " << ni;
  }
}

void check_invariants(const Graph& g, const MemoryPlan& plan) {
  Reference ref = reference_of(g);
  std::vector<int> root_of_storage;
  check_storages(g, plan, ref, &root_of_storage);
  if (::testing::Test::HasFatalFailure()) return;
  check_sharing(g, plan, ref, root_of_storage);
}

// Runs the plan on paper: every byte of the arena and of each output buffer carries
// the id of the value last written there. Each kernel checks that its inputs still
// hold their values before and after it writes its outputs, and at the end each
// output holds its value. Inputs and constants are never written.
void simulate(const Graph& g, const MemoryPlan& plan) {
  const auto& st = plan.storages;
  std::vector<int> arena(plan.arena_bytes, -1);
  std::vector<std::vector<int>> buffers(size_t(plan.num_output_buffers));
  for (const Storage& s : st)
    if (s.kind == Storage::kOutput) buffers[size_t(s.index)].assign(s.bytes, -1);
  std::vector<int> root(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) root[v] = int(v);
  // Inputs and constants: the caller's memory, never written, always intact.
  auto external = [&](int v) {
    auto k = st[size_t(plan.storage_of[size_t(v)])].kind;
    return k == Storage::kInput || k == Storage::kConst;
  };
  auto bytes_of = [&](int v) -> int* {
    const Storage& s = st[size_t(plan.storage_of[size_t(v)])];
    return s.kind == Storage::kArena ? arena.data() + s.offset : buffers[size_t(s.index)].data();
  };
  auto intact = [&](int v) {
    if (external(v)) return true;
    const int* p = bytes_of(v);
    size_t n = st[size_t(plan.storage_of[size_t(v)])].bytes;
    return std::all_of(p, p + n, [&](int t) { return t == root[size_t(v)]; });
  };
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (op_info(n.op).traits & kAlias) {
      root[size_t(n.outputs[0])] = root[size_t(n.inputs[0])];
      continue;
    }
    for (int v : n.inputs) EXPECT_TRUE(intact(v)) << "node " << ni << " reads %" << g.value_name(v) << " overwritten";
    if (n.op == Op::constant) continue;
    for (int o : n.outputs) {
      ASSERT_FALSE(external(o)) << "node " << ni << " writes into an input or constant";
      int* p = bytes_of(o);
      std::fill(p, p + st[size_t(plan.storage_of[size_t(o)])].bytes, o);
    }
    for (int v : n.inputs)
      EXPECT_TRUE(intact(v)) << "node " << ni << " overwrote its own input %" << g.value_name(v);
  }
  for (int v : g.outputs) EXPECT_TRUE(intact(v)) << "output %" << g.value_name(v) << " overwritten";
}

void check_all(const Planned& p) {
  check_invariants(p.g, p.plan);
  simulate(p.g, p.plan);
}

}  // namespace

// (a) Reuse: in a chain, a value can take the bytes of one that died before it was written.
TEST(Planner, ChainReusesBytes) {
  Planned p = plan_text(R"(graph(%a: f32[100]) {
  %b: f32[100] = relu(%a)
  %c: f32[100] = exp(%b)
  %d: f32[100] = neg(%c)
  %e: f32[100] = sin(%d)
  return (%e)
})");
  check_all(p);
  const size_t slot = arena_align_up(400);  // 448: 400 bytes rounded up to 64
  EXPECT_EQ(p.st("b").kind, Storage::kArena);
  EXPECT_EQ(p.st("c").kind, Storage::kArena);
  EXPECT_EQ(p.st("d").kind, Storage::kArena);
  EXPECT_EQ(p.st("e").kind, Storage::kOutput);
  // %b is last read by the node writing %c, so %d (written after) can take its bytes.
  EXPECT_EQ(p.st("b").first, 0);
  EXPECT_EQ(p.st("b").last, 1);
  EXPECT_EQ(p.st("d").first, 2);
  EXPECT_EQ(p.st("b").offset, p.st("d").offset);
  EXPECT_NE(p.st("b").offset, p.st("c").offset);
  EXPECT_EQ(p.plan.arena_unshared_bytes, 3 * slot);
  EXPECT_EQ(p.plan.arena_bytes, 2 * slot);
  EXPECT_LT(p.plan.arena_bytes, p.plan.arena_unshared_bytes);
}

// (a) A smaller value fits in the hole a larger dead one left, beside a live one.
TEST(Planner, SmallValueReusesPartOfALargeOne) {
  Planned p = plan_text(R"(graph(%x: f32[64], %y: f32[4, 64]) {
  %big: f32[4, 64] = exp(%y)
  %s: f32[4, 64] = add(%big, %x)
  %t: f32[4, 64] = neg(%s)
  %u: f32[64] = relu(%x)
  %v: f32[4, 64] = add(%t, %u)
  return (%v)
})");
  check_all(p);
  // %t takes %big's bytes; %s dies at node 2 and %u (node 3) lands in the first
  // quarter of its bytes while %t stays live.
  EXPECT_EQ(p.st("t").offset, p.st("big").offset);
  EXPECT_EQ(p.st("u").offset, p.st("s").offset);
  EXPECT_EQ(p.plan.arena_bytes, 2u * 1024);
  EXPECT_EQ(p.plan.arena_unshared_bytes, 3u * 1024 + 256);
}

// (b) A residual read at the end of a block stays put while the block runs.
TEST(Planner, NoReuseWhileLiveAcrossASkipConnection) {
  Planned p = plan_text(R"(graph(%x: f32[16], %w: f32[8, 16]) {
  %a: f32[16] = relu(%x)
  %b: f32[8, 16] = mul(%w, %a)
  %c: f32[8, 16] = exp(%b)
  %d: f32[8, 16] = neg(%c)
  %e: f32[8, 16] = tanh(%d)
  %f: f32[8, 16] = add(%e, %a)
  %g: f32[8, 16] = sin(%f)
  return (%g)
})");
  check_all(p);
  const Storage& a = p.st("a");
  EXPECT_EQ(a.first, 0);
  EXPECT_EQ(a.last, 5);
  for (const char* name : {"b", "c", "d", "e", "f"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(bytes_overlap(a, p.st(name)));
  }
  // %b..%f alternate between two slots; %a needs one more, small, slot of its own.
  EXPECT_EQ(p.st("b").offset, p.st("d").offset);
  EXPECT_EQ(p.st("c").offset, p.st("e").offset);
  EXPECT_EQ(p.plan.arena_bytes, 2u * 512 + 64);
}

// (b) Two values read at the same late node, both live through everything between.
TEST(Planner, NoReuseWhileLiveWithTwoLongLivedValues) {
  Planned p = plan_text(R"(graph(%x: f32[32]) {
  %p: f32[32] = exp(%x)
  %q: f32[32] = neg(%x)
  %r: f32[32] = sin(%x)
  %s: f32[32] = cos(%r)
  %t: f32[32] = tanh(%s)
  %u: f32[32] = add(%p, %q)
  %v: f32[32] = mul(%u, %t)
  return (%v)
})");
  check_all(p);
  for (const char* name : {"r", "s", "t"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(bytes_overlap(p.st("p"), p.st(name)));
    EXPECT_FALSE(bytes_overlap(p.st("q"), p.st(name)));
  }
  EXPECT_FALSE(bytes_overlap(p.st("p"), p.st("q")));
}

// (c) A reshape of an intermediate shares its storage, and reads of the reshape keep
// that storage alive: without the extension %b would take %a's bytes.
TEST(Planner, ReshapeSharesStorageAndExtendsLifetime) {
  Planned p = plan_text(R"(graph(%x: f32[32], %y: f32[4, 8]) {
  %a: f32[32] = relu(%x)
  %r: f32[4, 8] = reshape(%a) {shape=[4, 8]}
  %b: f32[4, 8] = exp(%y)
  %c: f32[4, 8] = neg(%b)
  %d: f32[4, 8] = add(%c, %r)
  %e: f32[4, 8] = sin(%d)
  return (%e)
})");
  check_all(p);
  EXPECT_EQ(p.si("r"), p.si("a"));
  EXPECT_EQ(p.st("a").kind, Storage::kArena);
  EXPECT_EQ(p.st("a").first, 0);
  EXPECT_EQ(p.st("a").last, 4);  // the add reading %r
  EXPECT_FALSE(bytes_overlap(p.st("a"), p.st("b")));
  EXPECT_FALSE(bytes_overlap(p.st("a"), p.st("c")));
  EXPECT_FALSE(bytes_overlap(p.st("a"), p.st("d")));
}

// (c) Reshapes of reshapes all land on the first value's storage.
TEST(Planner, ReshapeChainsShareOneStorage) {
  Planned p = plan_text(R"(graph(%x: f32[2, 3, 4]) {
  %a: f32[2, 3, 4] = exp(%x)
  %r1: f32[6, 4] = reshape(%a) {shape=[6, 4]}
  %r2: f32[24] = reshape(%r1) {shape=[24]}
  %b: f32[2, 3, 4] = neg(%x)
  %b2: f32[24] = reshape(%b) {shape=[24]}
  %c: f32[24] = add(%r2, %b2)
  %r3: f32[4, 6] = reshape(%c) {shape=[4, 6]}
  %d: f32[4, 6] = relu(%r3)
  return (%d)
})");
  check_all(p);
  EXPECT_EQ(p.si("r1"), p.si("a"));
  EXPECT_EQ(p.si("r2"), p.si("a"));
  EXPECT_EQ(p.si("r3"), p.si("c"));
  EXPECT_EQ(p.st("a").last, 5);
  EXPECT_EQ(p.st("c").last, 7);
}

// (c) A reshape returned from the graph: the value under it is written straight into
// the output buffer, which it therefore cannot share with anything.
TEST(Planner, ReturnedReshapeMakesItsStorageAnOutput) {
  Planned p = plan_text(R"(graph(%x: f32[4, 8]) {
  %a: f32[4, 8] = relu(%x)
  %r: f32[32] = reshape(%a) {shape=[32]}
  %r2: f32[2, 16] = reshape(%r) {shape=[2, 16]}
  %b: f32[4, 8] = exp(%a)
  %c: f32[4, 8] = neg(%b)
  return (%c, %r2)
})");
  check_all(p);
  EXPECT_EQ(p.st("a").kind, Storage::kOutput);
  EXPECT_EQ(p.si("r2"), p.si("a"));
  EXPECT_EQ(p.plan.output_storage[1], p.si("a"));
  EXPECT_EQ(p.plan.num_output_buffers, 2);
  EXPECT_NE(p.st("a").index, p.st("c").index);
  // Only %b is left in the arena.
  EXPECT_EQ(p.st("b").kind, Storage::kArena);
  EXPECT_EQ(p.plan.arena_bytes, 128u);
}

// (c) Inputs and constants returned, directly or through reshapes, keep their own
// storage (the runtime copies them out): no output buffer, nothing in the arena.
TEST(Planner, ReturnedInputsAndConstantsKeepTheirStorage) {
  Planned p = plan_text(R"(graph(%x: f32[2, 2], %y: f32[4]) {
  %k: f32[2] = constant() {dtype=[0], shape=[2]} data=0000803f00000040
  %xr: f32[4] = reshape(%x) {shape=[4]}
  %kr: f32[2, 1] = reshape(%k) {shape=[2, 1]}
  %s: f32[4] = add(%xr, %y)
  return (%x, %xr, %y, %k, %kr, %s)
})");
  check_all(p);
  EXPECT_EQ(p.st("x").kind, Storage::kInput);
  EXPECT_EQ(p.st("x").index, 0);
  EXPECT_EQ(p.st("y").kind, Storage::kInput);
  EXPECT_EQ(p.st("y").index, 1);
  EXPECT_EQ(p.st("k").kind, Storage::kConst);
  EXPECT_EQ(p.st("k").index, 0);  // the constant node
  EXPECT_EQ(p.si("xr"), p.si("x"));
  EXPECT_EQ(p.si("kr"), p.si("k"));
  const auto& out = p.plan.output_storage;
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], p.si("x"));
  EXPECT_EQ(out[1], p.si("x"));
  EXPECT_EQ(out[2], p.si("y"));
  EXPECT_EQ(out[3], p.si("k"));
  EXPECT_EQ(out[4], p.si("k"));
  EXPECT_EQ(p.st("s").kind, Storage::kOutput);
  EXPECT_EQ(p.plan.num_output_buffers, 1);
  EXPECT_EQ(p.plan.arena_bytes, 0u);
}

// (c) A value returned twice, or beside a reshape of it, gets one buffer.
TEST(Planner, OutputListedTwiceGetsOneBuffer) {
  Planned p = plan_text(R"(graph(%x: f32[6]) {
  %a: f32[6] = exp(%x)
  %r: f32[2, 3] = reshape(%a) {shape=[2, 3]}
  %b: f32[6] = neg(%a)
  return (%a, %b, %a, %r)
})");
  check_all(p);
  const auto& out = p.plan.output_storage;
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], out[2]);
  EXPECT_EQ(out[0], out[3]);
  EXPECT_NE(out[0], out[1]);
  EXPECT_EQ(p.plan.num_output_buffers, 2);
  EXPECT_EQ(p.st("a").kind, Storage::kOutput);
  EXPECT_EQ(p.st("a").index, 0);
  EXPECT_EQ(p.st("b").index, 1);
  EXPECT_EQ(p.plan.arena_bytes, 0u);
}

// (d) Kernels read their inputs while writing their outputs, so an output never takes
// an input's bytes, even when that input is read for the last time by this very node.
TEST(Planner, OutputNeverSharesBytesWithADyingInput) {
  Planned p = plan_text(R"(graph(%x: f32[16]) {
  %a: f32[16] = exp(%x)
  %b: f32[16] = neg(%a)
  %c: f32[16] = relu(%b)
  %d: f32[16] = add(%b, %c)
  %e: f32[16] = mul(%d, %d)
  %f: f32[16] = sin(%e)
  return (%f)
})");
  check_all(p);
  EXPECT_EQ(p.st("a").last, 1);  // dies where %b is written
  EXPECT_FALSE(bytes_overlap(p.st("a"), p.st("b")));
  EXPECT_FALSE(bytes_overlap(p.st("b"), p.st("c")));
  EXPECT_FALSE(bytes_overlap(p.st("b"), p.st("d")));  // both inputs of the add die there
  EXPECT_FALSE(bytes_overlap(p.st("c"), p.st("d")));
  EXPECT_FALSE(bytes_overlap(p.st("d"), p.st("e")));  // read twice by the same node
  // One value dead before each write leaves room for reuse: three slots for five values.
  EXPECT_EQ(p.plan.arena_bytes, 3u * 64);
}

// (d) The same through an alias: the input is read as a reshape of it.
TEST(Planner, OutputNeverSharesBytesWithAnInputReadThroughAReshape) {
  Planned p = plan_text(R"(graph(%x: f32[4, 4]) {
  %a: f32[4, 4] = exp(%x)
  %r: f32[16] = reshape(%a) {shape=[16]}
  %b: f32[16] = neg(%r)
  %c: f32[16] = relu(%b)
  return (%c)
})");
  check_all(p);
  EXPECT_EQ(p.st("a").last, 2);
  EXPECT_FALSE(bytes_overlap(p.st("a"), p.st("b")));
}

// (e) Offsets are multiples of kArenaAlign whatever the sizes and dtypes.
TEST(Planner, OffsetsAreAligned) {
  Planned p = plan_text(R"(graph(%x: f32[3], %y: f32[5, 7]) {
  %a: f32[3] = exp(%x)
  %h: f16[5, 7] = cast(%y) {dtype=[1]}
  %m: b8[5, 7] = isnan(%y)
  %i: i64[3] = cast(%a) {dtype=[3]}
  %h2: f16[5, 7] = neg(%h)
  %a2: f32[3] = neg(%a)
  %o: b8[5, 7] = logical_not(%m)
  %o2: f16[5, 7] = abs(%h2)
  %o3: i64[3] = neg(%i)
  %o4: f32[3] = sin(%a2)
  return (%o, %o2, %o3, %o4)
})");
  check_all(p);
  EXPECT_EQ(p.st("h").bytes, 70u);
  EXPECT_EQ(p.st("m").bytes, 35u);
  EXPECT_EQ(p.st("i").bytes, 24u);
  for (size_t s = 0; s < p.plan.storages.size(); ++s)
    if (p.plan.storages[s].kind == Storage::kArena) EXPECT_EQ(p.plan.storages[s].offset % kArenaAlign, 0u) << s;
}

// (e) Empty values take no arena bytes and do not push others apart.
TEST(Planner, ZeroSizeValues) {
  Planned p = plan_text(R"(graph(%x: f32[0, 4], %y: f32[4]) {
  %a: f32[0, 4] = exp(%x)
  %b: f32[4] = neg(%y)
  %c: f32[0, 4] = add(%a, %b)
  %d: f32[4] = relu(%b)
  %e: f32[0, 4] = neg(%c)
  return (%e, %d)
})");
  check_all(p);
  EXPECT_EQ(p.st("a").bytes, 0u);
  EXPECT_EQ(p.st("c").bytes, 0u);
  EXPECT_EQ(p.st("e").kind, Storage::kOutput);
  EXPECT_EQ(p.st("e").bytes, 0u);
  EXPECT_EQ(p.plan.arena_bytes, 64u);  // %b alone
  EXPECT_EQ(p.plan.arena_unshared_bytes, 64u);

  Planned q = plan_text(R"(graph(%x: f32[0]) {
  %a: f32[0] = exp(%x)
  %b: f32[0] = neg(%a)
  return (%b)
})");
  check_all(q);
  EXPECT_EQ(q.plan.arena_bytes, 0u);
}

namespace {

// A random graph of elementwise nodes over a few broadcastable shapes: unary and
// binary ops, casts (so sizes vary with dtype), reshapes, constants, and outputs drawn
// from every value (inputs, constants, reshapes, repeats). Inputs are drawn mostly from
// recent values (chains that free memory) and sometimes from old ones (long lifetimes).
Graph random_graph(std::mt19937& rng) {
  auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const int64_t rows_choices[] = {0, 1, 2, 7, 16}, cols_choices[] = {1, 3, 8, 33};
  int64_t R = rows_choices[pick(5)], C = cols_choices[pick(4)];
  if (R == 0 && chance(0.5)) R = 3;  // empty graphs one time in ten
  Graph g;
  std::vector<std::vector<int64_t>> in_shapes = {{R, C}, {1, C}, {R, 1}, {C}};
  int num_inputs = 1 + pick(3);
  for (int i = 0; i < num_inputs; ++i) {
    TensorType t;
    for (int64_t d : in_shapes[size_t(pick(4))]) t.shape.push_back(SymInt(d));
    g.add_input("in" + std::to_string(i), t);
  }
  const Op unary[] = {Op::neg, Op::exp, Op::relu, Op::sin, Op::abs, Op::tanh};
  const Op binary[] = {Op::add, Op::mul, Op::sub, Op::maximum};
  const int dtype_codes[] = {int(DType::f32), int(DType::f16), int(DType::i64), int(DType::b8)};
  int num_nodes = 5 + pick(26);
  while (int(g.nodes.size()) < num_nodes) {
    int nv = int(g.values.size());
    auto any_value = [&]() { return chance(0.6) ? std::max(0, nv - 1 - pick(3)) : pick(nv); };
    int kind = pick(10);
    try {
      if (kind < 4) {
        g.add_node(unary[pick(6)], {any_value()});
      } else if (kind < 7) {
        g.add_node(binary[pick(4)], {any_value(), any_value()});
      } else if (kind == 7) {
        Node attrs;
        attrs.set_int("dtype", dtype_codes[pick(4)]);
        g.add_node(Op::cast, {any_value()}, attrs.attrs);
      } else if (kind == 8) {
        int v = any_value();
        const auto& shape = g.type(v).shape;
        int64_t n = 1;
        for (const auto& d : shape) n *= d.value();
        std::vector<std::vector<int64_t>> targets = {{n}, {1, n}};
        if (shape.size() == 2) targets.push_back({shape[1].value(), shape[0].value()});
        if (shape.size() == 2) targets.push_back({shape[0].value(), shape[1].value()});
        std::vector<SymInt> target;
        for (int64_t d : targets[size_t(pick(int(targets.size())))]) target.push_back(SymInt(d));
        Node attrs;
        attrs.set_ints("shape", target);
        g.add_node(Op::reshape, {v}, attrs.attrs);
      } else {
        std::vector<float> data(size_t(C), 0.5f);
        TensorType t;
        t.shape = {SymInt(C)};
        g.add_owned_constant(t, data.data(), data.size() * sizeof(float));
      }
    } catch (const Error&) {
      // Shapes or dtypes that do not combine: draw again.
    }
  }
  int num_outputs = 1 + pick(3);
  int nv = int(g.values.size());
  for (int i = 0; i < num_outputs; ++i) g.outputs.push_back(chance(0.5) ? nv - 1 : pick(nv));
  return g;
}

}  // namespace

// (f) Random graphs against the invariants and the simulated run.
TEST(Planner, RandomGraphsKeepTheInvariants) {
  std::mt19937 rng(15);
  int reused = 0, aliased = 0, returned_external = 0;
  for (int gi = 0; gi < 400; ++gi) {
    Graph g = random_graph(rng);
    verify(g);
    MemoryPlan plan = plan_memory(g, static_shapes(g));
    SCOPED_TRACE("graph " + std::to_string(gi) + ":\n" + print_graph(g));
    check_invariants(g, plan);
    simulate(g, plan);
    if (::testing::Test::HasFailure()) break;  // one graph's report is enough to read
    reused += plan.arena_bytes < plan.arena_unshared_bytes;
    for (const Node& n : g.nodes) aliased += n.op == Op::reshape;
    for (int si : plan.output_storage) returned_external += plan.storages[size_t(si)].kind != Storage::kOutput;
  }
  // The generator reaches the cases it is meant to.
  EXPECT_GT(reused, 50);
  EXPECT_GT(aliased, 50);
  EXPECT_GT(returned_external, 20);
}
