#include "model/tensor_list.h"

#include "util/error.h"
#include "util/log.h"

namespace eaglet {

const TensorView* LoadedTensors::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& LoadedTensors::get(const std::string& name) const {
  const TensorView* t = find(name);
  if (t == nullptr) fail("internal: tensor '", name, "' is not on the model's tensor list or was not loaded");
  return *t;
}

const WeightMatrix* LoadedTensors::find_matrix(const std::string& name) const {
  auto it = linears_.find(name);
  return it == linears_.end() ? nullptr : &it->second;
}

WeightMatrix LoadedTensors::matrix(const std::string& name) const {
  if (auto it = linears_.find(name); it != linears_.end()) return it->second;
  const TensorView& t = get(name);
  return {t.data, t.dtype, t.dim(0), t.dim(1)};
}

LoadedTensors load_tensors(const Checkpoint& checkpoint, const TensorList& list, const std::string& description,
                           bool allow_unlisted, const QuantConfig& quant) {
  TensorConsumer take(checkpoint, description);
  take.allow_unexpected(allow_unlisted);
  LoadedTensors out;
  std::map<std::string, std::vector<std::string>> ignored;  // by reason
  int64_t quantized = 0;
  for (const TensorSpec& t : list) {
    const TensorView* v = nullptr;
    if (t.use == TensorUse::Unused && !t.name.empty() && t.name.back() == '*') {  // every tensor under a prefix
      const std::string prefix = t.name.substr(0, t.name.size() - 1);
      for (auto it = checkpoint.all().lower_bound(prefix);
           it != checkpoint.all().end() && it->first.starts_with(prefix); ++it) {
        ignored[t.note].push_back(it->first);
        take.declare_unused(it->first, t.note);
      }
      continue;
    }
    if (t.use == TensorUse::Unused) {
      if (checkpoint.find(t.name) != nullptr) ignored[t.note].push_back(t.name);
      take.declare_unused(t.name, t.note);
      continue;
    }
    if (t.kind == TensorKind::Linear) {
      if (t.use == TensorUse::Optional && checkpoint.find(t.name) == nullptr &&
          checkpoint.find(linear_module(t.name) + ".weight_packed") == nullptr)
        continue;
      const WeightMatrix w = take_linear(take, checkpoint, t.name, t.shape.at(0), t.shape.at(1), quant);
      if (w.data == nullptr) continue;
      out.linears_[t.name] = w;
      if (w.quantized())
        ++quantized;
      else
        out.tensors_[t.name] = checkpoint.find(t.name);  // a dense one is also a plain tensor
      continue;
    }
    if (t.kind == TensorKind::Index)
      v = take.take_unchecked(t.name);
    else if (t.use == TensorUse::Optional)
      v = take.take_optional(t.name, t.shape);
    else
      v = take.take(t.name, t.shape);
    if (v != nullptr) out.tensors_[t.name] = v;
  }
  take.finish();
  for (const auto& [why, names] : ignored)
    log_note_once(checkpoint.source() + ": ignoring " + std::to_string(names.size()) + " tensor(s) such as " +
                  names.front() + ": " + why);
  if (quantized > 0)
    log_note_once(checkpoint.source() + ": " + std::to_string(quantized) + " of " +
                  std::to_string(out.linears_.size()) + " projection weights are quantized (" + quant.description +
                  "), the rest dense");
  return out;
}

}  // namespace eaglet
