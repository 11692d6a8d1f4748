#pragma once
// A model's tensor list: every tensor it reads from a checkpoint, with its shape and whether it is required,
// optional, or known and deliberately unused. The loader, a trainer and an exporter all work from the same list;
// strict accounting (every tensor of the checkpoint consumed, or the load fails naming it) works from it too.
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/quantization.h"

namespace eaglet {

enum class TensorUse {
  Required,  // must be present with this shape
  Optional,  // used when present (checked), e.g. a tied lm_head
  Unused,    // known and ignored when present, e.g. rotary_emb.inv_freq written by old converters; a name ending
             // in '*' covers every tensor that starts with the rest (a vision tower, an MTP layer)
};

enum class TensorKind {
  Weight,  // F32, BF16 or F16 with exactly `shape`
  Index,   // integer or boolean, any shape: the model validates it (vocabulary maps)
  Linear,  // a projection's weight [out, in]: dense, or quantized as the checkpoint declares (model/quantization.h)
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorUse use = TensorUse::Required;
  TensorKind kind = TensorKind::Weight;
  std::string note = {};  // why optional or unused
};

using TensorList = std::vector<TensorSpec>;

// The tensors of a list as found in a checkpoint (views into the mapped files).
class LoadedTensors {
 public:
  const TensorView* find(const std::string& name) const;  // null when absent (optional) or unused
  const TensorView& get(const std::string& name) const;   // a present tensor; a missing one is a programming error
  // A Linear (as stored: dense or quantized) or a dense Weight as a matrix.
  WeightMatrix matrix(const std::string& name) const;
  const WeightMatrix* find_matrix(const std::string& name) const;  // a loaded Linear, or null

 private:
  friend LoadedTensors load_tensors(const Checkpoint&, const TensorList&, const std::string&, bool, const QuantConfig&);
  std::map<std::string, const TensorView*> tensors_;
  std::map<std::string, WeightMatrix> linears_;
};

// Takes every tensor of `list` from the checkpoint. Missing required tensors, wrong shapes or dtypes, and tensors of
// the checkpoint that are not on the list fail together, in one error naming them and `description`;
// `allow_unlisted` is the user's explicit opt-out for the last (they are still printed). Unused tensors that are
// present are logged (util/log.h) with the reason; so are the Linears stored quantized, by format.
LoadedTensors load_tensors(const Checkpoint& checkpoint, const TensorList& list, const std::string& description,
                           bool allow_unlisted = false, const QuantConfig& quant = {});

}  // namespace eaglet
