#pragma once
// Access to the tiny checkpoints and PyTorch reference outputs made by tests/oracle/make_tiny_models.py.
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/transformer.h"

namespace eaglet::test {

std::string tiny_model_dir(const std::string& variant);  // fixtures/tiny/<variant>
std::string reference_file(const std::string& variant);  // fixtures/tiny/reference/<variant>.safetensors

// A reference tensor as fp32 (F32 or I64 converted), with its shape.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
RefTensor read_reference(const Checkpoint& file, const std::string& name);
std::vector<int32_t> read_ids(const Checkpoint& file, const std::string& name = "input_ids");

// Verifies a tree of `tokens` (parent[i]: the node before i, -1 for the root) after `context` in one forward, then
// decodes each node's path token by token from the same context: every node's logits must be bit-identical (gtest
// assertions). Returns the cache after the context and the one holding the tree's pending entries.
struct TreeRun {
  KVCache after_context, tree;
};
TreeRun expect_tree_nodes_equal_their_paths(Transformer& model, const std::vector<int32_t>& context,
                                            const std::vector<int32_t>& tokens, const std::vector<int>& parent);

// Verifies ids[split..] as one chain after ids[..split], then decodes the same tokens one by one from the same
// context: every position's logits must be bit-identical (gtest assertions; `label` names the failing case).
void expect_chain_equals_token_by_token(Transformer& model, const std::vector<int32_t>& ids, size_t split,
                                        const std::string& label);

}  // namespace eaglet::test
