// The default pass pipeline, in order. Canonicalize first so CSE sees one spelling,
// fold constants, merge duplicates, drop the dead, then the fusions: inference
// batch-norms into the convolutions before them, attention reading and writing the
// projections' layout, residual adds into the convolutions that feed them,
// activations into GEMM and convolution epilogues (before chains
// form, so an activation a GEMM can absorb stays its epilogue), sibling int8 qmatmuls
// (Q, K, V) into one, sibling float addmms too, a feed-forward pair's hidden
// activations handed over transposed, chains of convs into the blocked channel layout
// (MobileNet blocks included, their depthwise convs blocked), int8 codes from int8 convs to the int8 convs that read them, then
// the expand 1x1 convs (blocked or NCHW) into the depthwise convs that read them, residual adds
// into the layer norms that read them, remaining elementwise chains into single-pass
// kernels; a last dce drops what they absorbed.
#include "zenith/error.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
struct PassEntry {
  const char* name;
  int (*run)(Graph&);
};
const PassEntry kPipeline[] = {
    {"canonicalize", canonicalize},
    {"constant_folding", constant_folding},
    {"cse", common_subexpression_elimination},
    {"dce", dead_code_elimination},  // the fusions below count readers: the dead ones must be gone
    {"fuse_conv_bn", fuse_conv_bn},
    {"fuse_attention_layout", fuse_attention_layout},
    {"fuse_conv_residual", fuse_conv_residual},  // after the norm joins the conv, before its relu does
    {"fuse_epilogue", fuse_epilogue},
    {"fuse_qmatmul_siblings", fuse_qmatmul_siblings},  // with their epilogues: only equal ones share a GEMM
    {"fuse_addmm_siblings", fuse_addmm_siblings},  // float Q, K, V: projections with an activation stay apart
    {"gemm_handoff_transposed", gemm_handoff_transposed},  // the GEMM carries its GELU; its reshapes die below
    {"layout_nchwc", layout_nchwc},  // the convs carry their epilogues and residuals
    {"dce", dead_code_elimination},  // the conversions nobody reads: fuse_conv_pw_dw and chain_int8 count readers
    {"chain_int8", chain_int8},      // int8 codes between the blocked int8 convs
    {"fuse_conv_pw_dw", fuse_conv_pw_dw},  // the MobileNet blocks, blocked or NCHW, with their epilogues
    {"fuse_residual_norm", fuse_residual_norm},  // before chains form: the add stays visible
    {"fuse_elementwise", fuse_elementwise},
    {"dce", dead_code_elimination},
};
}  // namespace

std::vector<PassReport> run_default_pipeline(Graph& g, bool verify_each) {
  std::vector<PassReport> reports;
  for (const PassEntry& p : kPipeline) {
    int n = p.run(g);
    try {
      restore_topological_order(g);  // a fusion may hand a node an input defined after it
      if (verify_each) verify(g);
    } catch (const Error& e) {
      fail("after pass ", p.name, ": ", e.what());
    }
    reports.push_back({p.name, n});
  }
  return reports;
}

}  // namespace zenith
