// Zenith model files: a graph and its weights in one safetensors file (safetensors.h),
// run by the C++ runtime with no Python: `zenith-run` (csrc/tools/zenith_run.cc) or Model below.
// Python writes them (zenith.export); any safetensors reader opens them.
//
//   __metadata__ "zenith.format": kModelFormat. "zenith.inputs": the model's input names,
//     comma-separated (so a weight's missing tensor is an error, not a new input).
//     "zenith.symbols" (optional): JSON {"<symbol>": {"min": m, "max": M}} (max null or
//     absent: unbounded), the sizes a symbolic dim may take (torch.export's range
//     constraints); a symbol not listed takes any size >= 0.
//     "zenith.graph": the graph's IR text
//     (ir.h) as imported, before the passes: the loader runs the pass pipeline on the
//     machine it runs on, so blocked layouts and kernel choices follow that CPU, not the
//     exporter's. Other "zenith.*" keys are the exporter's notes (versions, output tree).
//   "input/<name>": the value bound to graph input %<name> (a weight), of its dtype and shape.
//   "const/<i>":    the bytes of a constant the text prints as data=@const/<i>.
// The graph inputs with no "input/" tensor are the model's inputs, in graph order. Their
// dims may be symbolic (s0, s1, ...: one file for every batch or sequence length); each
// symbol must be a whole dim of some model input, which binds it at run time. Weights
// and constants are static.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/ir.h"
#include "zenith/runtime.h"
#include "zenith/safetensors.h"

namespace zenith {

inline constexpr const char* kModelFormat = "1";

// Writes g (not yet through the passes) with `bound`: graph input name -> its value.
void save_model(const std::string& path, const Graph& g, const std::map<std::string, InTensor>& bound,
                const std::map<std::string, std::string>& metadata);

class Model {
 public:
  // Maps the file, checks it against its graph, runs the pass pipeline and compiles it.
  // The weights are read in place from the mapping (packed copies made at the first call).
  // Any problem with the file is a zenith::Error naming it.
  explicit Model(const std::string& path);

  struct Input {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;     // -1 where the dim is symbolic
    std::vector<std::string> dims;  // each dim as text: "8", "s0", "2*s0"
    std::string type_str() const;   // "f32[s0, 8]"
  };
  // A symbolic size: its name in the graph, the input dim that binds it (for messages:
  // "input_ids dim 1") and the sizes it may take (max -1: unbounded).
  struct Symbol {
    std::string name, bound_by;
    int64_t min = 0, max = -1;
  };
  const std::vector<Input>& inputs() const { return inputs_; }
  const std::vector<Symbol>& symbols() const { return symbols_; }
  size_t num_outputs() const { return exe_->graph().outputs.size(); }
  const std::map<std::string, std::string>& metadata() const { return file_.metadata; }
  const Executable& executable() const { return *exe_; }

  // Runs the model on its inputs (in inputs()' order, dense). Thread-safe. A wrong count,
  // dtype or shape, a symbol's size outside its range or bound two ways, is a
  // zenith::Error naming the input.
  std::vector<OutTensor> run(const std::vector<InTensor>& inputs) const;

 private:
  SafeTensorsFile file_;
  std::unique_ptr<Executable> exe_;
  std::vector<Input> inputs_;
  std::vector<Symbol> symbols_;     // indexed as the graph's SymbolTable
  std::vector<InTensor> all_;      // per graph input: its weight, or (data null) a model input
  std::vector<size_t> user_at_;    // the graph positions of the model's inputs
};

}  // namespace zenith
