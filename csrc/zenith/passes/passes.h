// Graph-to-graph passes. Each returns how many rewrites it made; the pipeline
// (pipeline.cc) runs them in a fixed, named order and reports per pass.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

int dead_code_elimination(Graph& g);
int constant_folding(Graph& g);
int common_subexpression_elimination(Graph& g);
int canonicalize(Graph& g);
int fuse_conv_bn(Graph& g);
int fuse_attention_layout(Graph& g);
int fuse_conv_residual(Graph& g);
int fuse_epilogue(Graph& g);
int fuse_elementwise(Graph& g);
int fuse_residual_norm(Graph& g);
int fuse_conv_pw_dw(Graph& g);
int layout_nchwc(Graph& g);
int chain_int8(Graph& g);
int fuse_qmatmul_siblings(Graph& g);
int fuse_addmm_siblings(Graph& g);
int gemm_handoff_transposed(Graph& g);

struct PassReport {
  std::string name;
  int changes = 0;
};

// The default pipeline. With verify_each, the verifier runs after every pass and a
// failure names the pass that broke the graph.
std::vector<PassReport> run_default_pipeline(Graph& g, bool verify_each = false);

// Shared helpers for passes.
void replace_all_uses(Graph& g, int from, int to);
// Dims equal as expressions (symbolic dims compare structurally).
bool same_shape(const Shape& a, const Shape& b);
// The (height, width) attribute `key` of a node as constants (dflt when absent);
// false if symbolic.
bool const_pair(const Node& n, const char* key, int64_t dflt, std::array<int64_t, 2>& out);
// Puts the nodes back in an order where every value is defined before it is read,
// moving as little as it can (the lowest-index ready node first); returns whether it
// moved any. A fusion that hands a node an input defined after it (a constant or a
// batch-norm parameter the importer added at its first use, later than the conv the
// norm joins) relies on it. Throws on a cycle.
bool restore_topological_order(Graph& g);
// An f32 addmm x @ W^T as nn.Linear gives it (trans_b only, alpha and beta 1, W a graph
// input, a bias of one value per output column, static columns) with rows for which sgemm
// reads W in place (sgemm_reads_weight_in_place), or symbolic rows: what
// fuse_addmm_siblings and gemm_handoff_transposed rewrite. Any activation.
bool linear_reading_weight_in_place(const Graph& g, const Node& n);
// Sibling GEMM nodes reading one x (members, in node order; each one output) become the
// first of them with parts: inputs (x, the members' weights[, their biases]), taken from
// each member's input slots w_slot and b_slot (-1: none), the members' outputs (ids kept),
// attribute parts; the others are flagged in dead. The caller sets the op and the rest.
Node& merge_siblings(Graph& g, const std::vector<size_t>& members, int x, int w_slot, int b_slot,
                     std::vector<bool>& dead);
// Drops the nodes whose flag is set and refreshes producer indices.
void erase_nodes(Graph& g, const std::vector<bool>& dead);

}  // namespace zenith
