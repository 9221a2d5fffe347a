// A transformer's feed-forward pair, x @ W1^T (with its GELU) -> h -> h @ W2^T, hands h
// over transposed: the first addmm writes h^T ([N, M], `trans_c`) and the second reads
// it as its A transposed (`trans_a`). The first runs sgemm's weight-rows driver, which
// computes C^T = W X^T: its strips are already h^T's rows, where writing h row-major
// transposes every strip. The second, where it runs that driver too (a transformer's
// down projection), packs X^T = h^T, which becomes a copy of NR contiguous values per k
// where it was a transpose (or, on AVX-512 at up to 64 rows, reads h^T's panels in
// place, no copy); any other addmm reads a transposed A as well. The values are
// the same, bit for bit. Measured on AMD Zen 5 (family 26 model 2), 2 threads, per node (BERT-base
// seq 128): up projection 1362 -> 1340 us, down 1389 -> 1373; MiniLM's 360 -> 349 and
// 347 -> 343. Whole models, frozen, in-process A/B (off / on, calls alternating): BERT-base
// 0.996x and 0.983x the time, all-MiniLM-L6-v2 seq 128 0.989x, seq 32 0.989x; on the AVX2
// tile (ZENITH_NO_AVX512) MiniLM 0.993x.
//
// Rewritten: an addmm P that linear_reading_weight_in_place accepts (x @ W^T, f32, W a
// graph input, a bias per column, static rows sgemm reads W in place for, or symbolic
// rows) whose result,
// through reshapes back to its own shape, is read by nothing but the A operand of one
// addmm C that is not transposed already. P's result is not a graph output, and
// neither is any of the reshapes (their readers then go away with them: dce).
// Runs after fuse_epilogue, so P carries its activation. ZENITH_GEMM_HANDOFF=0 turns
// it off (for A/B measurement).
//
// Where C is an x @ W^T reading its weight in place as well (linear_reading_weight_in_place
// before it reads h transposed) and P sums over some inputs, both get `panels`: h^T is
// then laid out as C's X^T panels where the kernels' sgemm_handoff_panels says it can be
// (h's rows in whole panels), so C reads it with no packing at all. The same bytes, in
// another order that only P and C see (verify holds a graph to that). Measured on AMD Zen 4 (family 25 model 17), 2
// threads, frozen, in-process A/B against h^T plain (ZENITH_GEMM_HANDOFF=transposed),
// per round, median [p25, p75]: all-MiniLM-L6-v2 seq 128 0.986 [0.956, 1.008], seq 32
// 0.987 [0.951, 1.009], BERT-base seq 128 0.974 [0.941, 0.988]; AVX2 (ZENITH_NO_AVX512)
// 0.990 [0.932, 1.069], 0.982 [0.956, 1.010], 0.989 [0.956, 1.017]. Outputs identical.
#include <cstdlib>
#include <string>

#include "zenith/passes/passes.h"

namespace zenith {

int gemm_handoff_transposed(Graph& g) {
  const char* mode = std::getenv("ZENITH_GEMM_HANDOFF");
  if (mode && std::string(mode) == "0") return 0;
  const bool no_panels = mode && std::string(mode) == "transposed";  // h^T plain, never panels
  g.reindex();
  std::vector<int> uses = g.use_counts();
  // readers[v]: the nodes that read value v (a node reading it twice is listed twice)
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs) readers[size_t(v)].push_back(int(i));
  int rewritten = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& p = g.nodes[i];
    if (!linear_reading_weight_in_place(g, p)) continue;  // so sgemm writes its C^T as it computes it
    const int h = p.outputs[0];
    // Follow h through reshapes that alone read it (uses counts graph outputs too).
    int v = h;
    while (uses[size_t(v)] == 1 && readers[size_t(v)].size() == 1 &&
           g.nodes[size_t(readers[size_t(v)][0])].op == Op::reshape)
      v = g.nodes[size_t(readers[size_t(v)][0])].outputs[0];
    if (uses[size_t(v)] != 1 || readers[size_t(v)].size() != 1 || !same_shape(g.type(v).shape, g.type(h).shape))
      continue;
    Node& c = g.nodes[size_t(readers[size_t(v)][0])];
    if (c.op != Op::addmm || c.inputs[1] != v || c.i("trans_a", 0) || g.type(c.inputs[1]).dtype != DType::f32)
      continue;
    // Where C reads its weight in place too, h may go as C's X^T panels (`panels`: the
    // kernels decide by sgemm_handoff_panels, both the same way).
    const bool panels =
        linear_reading_weight_in_place(g, c) && !no_panels && g.type(p.inputs[1]).shape[1].value() > 0;
    p.set_int("trans_c", 1);
    g.values[size_t(h)].type = op_info(p.op).infer(g, p)[0];
    c.inputs[1] = h;
    c.set_int("trans_a", 1);
    if (panels) {
      p.set_int("panels", 1);
      c.set_int("panels", 1);
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace zenith
