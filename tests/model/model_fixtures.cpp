#include "model/model_fixtures.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/matmul.h"
#include "test_env.h"

namespace eaglet::test {

std::string tiny_model_dir(const std::string& variant) { return fixtures_dir() + "/tiny/" + variant; }
std::string reference_file(const std::string& variant) {
  return fixtures_dir() + "/tiny/reference/" + variant + ".safetensors";
}

RefTensor read_reference(const Checkpoint& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (t == nullptr) {
    ADD_FAILURE() << file.source() << " has no tensor " << name;
    return {};
  }
  RefTensor r{t->shape, std::vector<float>(static_cast<size_t>(t->numel()))};
  for (size_t i = 0; i < r.values.size(); ++i) r.values[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return r;
}

std::vector<int32_t> read_ids(const Checkpoint& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (t == nullptr || t->dtype != DType::I64) {
    ADD_FAILURE() << file.source() << " has no I64 tensor " << name;
    return {};
  }
  std::vector<int32_t> ids(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v;
    std::memcpy(&v, t->data + 8 * i, 8);
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

TreeRun expect_tree_nodes_equal_their_paths(Transformer& model, const std::vector<int32_t>& context,
                                            const std::vector<int32_t>& tokens, const std::vector<int>& parent) {
  const int64_t V = model.config().vocab_size, N = static_cast<int64_t>(tokens.size());
  std::vector<int> depth(tokens.size(), 0);
  std::vector<uint8_t> mask(static_cast<size_t>(N * N), 0);
  std::vector<int32_t> positions(tokens.size());
  for (int64_t i = 0; i < N; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (i > 0) depth[u] = depth[static_cast<size_t>(parent[u])] + 1;
    positions[u] = static_cast<int32_t>(context.size()) + depth[u];
    for (int j = static_cast<int>(i); j >= 0; j = parent[static_cast<size_t>(j)])
      mask[static_cast<size_t>(i * N + j)] = 1;
  }
  TreeRun run{model.make_cache(static_cast<int64_t>(context.size() + tokens.size()) + 8), {}};
  model.forward(run.after_context, {.tokens = context});
  run.after_context.commit_all();
  run.tree = run.after_context;
  model.forward(run.tree, {.tokens = tokens, .positions = positions, .mask = mask, .all_logits = true});
  const std::vector<float> tree(model.logits().begin(), model.logits().end());
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int32_t> path;
    for (int j = static_cast<int>(i); j >= 0; j = parent[static_cast<size_t>(j)])
      path.insert(path.begin(), tokens[static_cast<size_t>(j)]);
    KVCache cache = run.after_context;
    for (int32_t t : path) {
      model.forward(cache, {.tokens = {&t, 1}});
      cache.commit_all();
    }
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_EQ(model.logits_row(0)[v], tree[static_cast<size_t>(i * V + v)]) << "node " << i;
      if (model.logits_row(0)[v] != tree[static_cast<size_t>(i * V + v)]) return run;
    }
  }
  return run;
}

void expect_chain_equals_token_by_token(Transformer& model, const std::vector<int32_t>& ids, size_t split,
                                        const std::string& label) {
  const int64_t V = model.config().vocab_size;
  const auto context = static_cast<int64_t>(ids.size()) + 1;
  KVCache chain = model.make_cache(context), one_by_one = model.make_cache(context);
  for (KVCache* c : {&chain, &one_by_one}) {
    model.forward(*c, {.tokens = {ids.data(), split}});
    c->commit_all();
  }
  model.forward(chain, {.tokens = {ids.data() + split, ids.size() - split}, .all_logits = true});
  const std::vector<float> batch(model.logits().begin(), model.logits().end());
  for (size_t i = split; i < ids.size(); ++i) {
    model.forward(one_by_one, {.tokens = {&ids[i], 1}});
    one_by_one.commit_all();
    for (int64_t v = 0; v < V; ++v)
      ASSERT_EQ(model.logits_row(0)[v], batch[(i - split) * V + static_cast<size_t>(v)]) << label << " position " << i;
  }
}

}  // namespace eaglet::test
