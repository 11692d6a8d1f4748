// eaglet extract: the shards hold what the serving forward computes (one path), the loss mask follows the chat
// turns, the token budget is exact, and a rerun resumes (finished shards kept, bytes identical) or refuses a folder
// extracted with other settings.
#include "train/extract.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "generate/generation.h"
#include "io/safetensors.h"
#include "kernels/dtype.h"
#include "model/transformer.h"
#include "test_env.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset.h"
#include "train/shards.h"
#include "util/error.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string tiny(const std::string& variant) { return test::fixtures_dir() + "/tiny/" + variant; }

// Text rows and two-turn conversations.
std::string write_rows(const std::string& dir, int copies) {
  std::string jsonl;
  for (int i = 0; i < copies; ++i) {
    jsonl += nlohmann::json{{"text", "def add(a, b):\n    return a + b  # " + std::to_string(i) + "\n"}}.dump() + "\n";
    jsonl += nlohmann::json{{"messages",
                             {{{"role", "user"}, {"content", "hi there " + std::to_string(i)}},
                              {{"role", "assistant"}, {"content", "hello, how can I help?"}},
                              {{"role", "user"}, {"content", "add two numbers"}},
                              {{"role", "assistant"}, {"content", "use a + b"}}}}}
                 .dump() +
             "\n";
  }
  const std::string path = dir + "/rows.jsonl";
  test::write_file(path, jsonl);
  return path;
}

std::vector<int64_t> ints(const Checkpoint& c, const std::string& name) {
  const TensorView* t = c.find(name);
  EXPECT_TRUE(t != nullptr && t->dtype == DType::I64) << name;
  std::vector<int64_t> v(t ? static_cast<size_t>(t->numel()) : 0);
  if (t) std::memcpy(v.data(), t->data, v.size() * 8);
  return v;
}

ExtractOptions options(const std::string& model, const std::string& data, const std::string& out) {
  ExtractOptions o;
  o.model_dir = model;
  o.data_file = data;
  o.out_dir = out;
  o.rows_per_shard = 3;
  o.draft_vocab = 100;
  o.progress = false;
  return o;
}

TEST(Extract, ShardsHoldTheServingForwardsStates) {
  const std::string dir = test::temp_dir("extract_states");
  const std::string data = write_rows(dir, 4);
  const ExtractSummary s = run_extract(options(tiny("qwen3_fp32"), data, dir + "/out"));
  EXPECT_EQ(s.rows, 8);
  EXPECT_EQ(s.shards, 3);

  auto target = Transformer::load(tiny("qwen3_fp32"));
  const int64_t L = target->config().num_layers, H = target->config().hidden_size;
  std::vector<int> layers = target->default_aux_layers();
  layers.push_back(static_cast<int>(L));
  target->set_aux_layers(layers);
  const std::vector<TrainingRow> rows =
      read_training_rows(data, Tokenizer::load(tiny("qwen3_fp32")), tiny("qwen3_fp32"), {});
  int64_t row_index = 0, tokens = 0;
  for (int64_t k = 0; k < s.shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "/out/shard-%05lld.safetensors", static_cast<long long>(k));
    const Checkpoint shard = Checkpoint::open_file(dir + name);
    const auto ids = ints(shard, "input_ids"), mask = ints(shard, "loss_mask"), offsets = ints(shard, "row_offsets");
    const TensorView* aux = shard.find("aux_hidden_states");
    const TensorView* fin = shard.find("final_hidden_states");
    ASSERT_TRUE(aux != nullptr && fin != nullptr);
    ASSERT_EQ(aux->shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), 3 * H}));
    for (size_t r = 0; r + 1 < offsets.size(); ++r, ++row_index) {
      const TrainingRow& want = rows[static_cast<size_t>(row_index)];
      const int64_t begin = offsets[r], n = offsets[r + 1] - offsets[r];
      ASSERT_EQ(n, static_cast<int64_t>(want.ids.size()));
      KVCache cache = target->make_cache(n);
      target->forward(cache, {.tokens = want.ids});
      const float* states = target->aux_hidden().data();
      for (int64_t t = 0; t < n; ++t) {
        ASSERT_EQ(ids[static_cast<size_t>(begin + t)], want.ids[static_cast<size_t>(t)]);
        ASSERT_EQ(mask[static_cast<size_t>(begin + t)], want.loss_mask[static_cast<size_t>(t)]);
        for (int64_t i = 0; i < 3 * H; ++i)
          ASSERT_EQ(load_as_f32(aux->data, DType::BF16, (begin + t) * 3 * H + i),
                    bf16_to_f32(f32_to_bf16(states[t * 4 * H + i])));
        for (int64_t i = 0; i < H; ++i)
          ASSERT_EQ(load_as_f32(fin->data, DType::BF16, (begin + t) * H + i),
                    bf16_to_f32(f32_to_bf16(states[t * 4 * H + 3 * H + i])));
      }
      tokens += n;
    }
  }
  EXPECT_EQ(row_index, s.rows);
  EXPECT_EQ(tokens, s.tokens);
}

// Only the assistant turns (content and end-of-turn marker) are trained; plain text is trained whole.
TEST(Extract, LossMaskCoversAssistantTurnsOnly) {
  const std::string dir = test::temp_dir("extract_mask");
  const std::string data = write_rows(dir, 1);
  const Tokenizer tok = Tokenizer::load(tiny("qwen3_fp32"));
  const auto rows = read_training_rows(data, tok, tiny("qwen3_fp32"), {});
  ASSERT_EQ(rows.size(), 2u);
  for (uint8_t m : rows[0].loss_mask) EXPECT_EQ(m, 1);
  std::vector<std::string> trained;
  const TrainingRow& chat = rows[1];
  for (size_t i = 0; i < chat.ids.size(); ++i) {
    if (chat.loss_mask[i] == 0) continue;
    if (i == 0 || chat.loss_mask[i - 1] == 0) trained.emplace_back();
    trained.back() += tok.decode({&chat.ids[i], 1});
  }
  EXPECT_EQ(trained, (std::vector<std::string>{"hello, how can I help?<|im_end|>", "use a + b<|im_end|>"}));
  EXPECT_EQ(tok.decode(chat.ids),  // the template writes {{ bos_token }} first
            "<s><|im_start|>user\nhi there 0<|im_end|>\n<|im_start|>assistant\nhello, how can I "
            "help?<|im_end|>\n<|im_start|>user\nadd two numbers<|im_end|>\n<|im_start|>"
            "assistant\nuse a + b<|im_end|>\n");
}

TEST(Extract, TokenBudgetAndResume) {
  const std::string dir = test::temp_dir("extract_resume");
  const std::string data = write_rows(dir, 5);
  ExtractOptions o = options(tiny("llama_fp32"), data, dir + "/out");
  o.max_tokens = 300;
  const ExtractSummary first = run_extract(o);
  EXPECT_EQ(first.tokens, 300);
  EXPECT_EQ(first.shards_skipped, 0);
  const std::string shard1 = dir + "/out/shard-00001.safetensors";
  const std::string bytes = test::read_file(shard1);
  fs::remove(shard1);  // as if killed while writing it
  const ExtractSummary again = run_extract(o);
  EXPECT_EQ(again.shards_skipped, first.shards - 1);
  EXPECT_EQ(test::read_file(shard1), bytes);
  EXPECT_FALSE(fs::exists(shard1 + ".tmp"));

  o.aux_layers = {1, 2, 3};
  EXPECT_THAT(test::error_of([&] { run_extract(o); }),
              AllOf(HasSubstr("manifest.json"), HasSubstr("other settings"), HasSubstr("aux_layers")));
  fs::remove(dir + "/out/manifest.json");  // shards left without the settings they were made with
  EXPECT_THAT(test::error_of([&] { run_extract(o); }),
              AllOf(HasSubstr("/out/shard-0000"), HasSubstr("no manifest.json"), HasSubstr("use another --out")));
  EXPECT_TRUE(fs::exists(shard1)) << "nothing is overwritten";
  fs::remove_all(dir + "/out");
  o.aux_layers = {};
  ASSERT_EQ(run_extract(o).shards_skipped, 0);
  test::write_file(dir + "/other.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  o.chat_template_file = dir + "/other.jinja";  // messages rows would render otherwise
  EXPECT_THAT(test::error_of([&] { run_extract(o); }),
              AllOf(HasSubstr("other settings"), HasSubstr("chat_template"), HasSubstr("other.jinja")));
}

// Shards that lie: truncated, zeroed, random or bit-flipped shards are extracted again on resume (a note names
// each), a folder in a shard's place is refused, and a shard damaged after extraction is refused when it is read.
TEST(Extract, DamagedShardsAreExtractedAgainOrRefused) {
  const std::string dir = test::temp_dir("extract_damaged");
  const ExtractOptions o = options(tiny("llama_fp32"), write_rows(dir, 5), dir + "/out");
  const ExtractSummary first = run_extract(o);
  ASSERT_GE(first.shards, 4);
  const nlohmann::json manifest = nlohmann::json::parse(test::read_file(dir + "/out/manifest.json"));
  ASSERT_EQ(manifest["shard_files"].size(), static_cast<size_t>(first.shards));
  EXPECT_EQ(manifest["settings"]["target_fingerprint"].get<std::string>().size(), 64u);
  const auto shard = [&](int k) { return dir + "/out/shard-0000" + std::to_string(k) + ".safetensors"; };
  std::vector<std::string> good;
  for (int k = 0; k < 4; ++k) good.push_back(test::read_file(shard(k)));
  EXPECT_EQ(manifest["shard_files"]["shard-00002.safetensors"]["bytes"], good[2].size());

  std::string flipped = good[3];
  flipped[flipped.size() / 2] ^= 0x10;
  std::string random(good[2].size(), '\0');
  for (size_t i = 0; i < random.size(); ++i) random[i] = static_cast<char>((i * 2654435761u) >> 13);
  test::write_file(shard(0), good[0].substr(0, good[0].size() / 2));  // truncated
  test::write_file(shard(1), std::string(good[1].size(), '\0'));      // zeroed
  test::write_file(shard(2), random);                                 // random, the right size
  test::write_file(shard(3), flipped);                                // one bit
  const ExtractSummary again = run_extract(o);
  EXPECT_EQ(again.shards_redone, 4);
  EXPECT_EQ(again.shards_skipped, first.shards - 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(test::read_file(shard(k)), good[static_cast<size_t>(k)]) << "shard " << k;

  fs::remove(shard(1));
  fs::create_directory(shard(1));
  EXPECT_THAT(test::error_of([&] { run_extract(o); }),
              AllOf(HasSubstr("shard-00001.safetensors: is not a file"), HasSubstr("move it away")));
  fs::remove(shard(1));
  ASSERT_EQ(run_extract(o).shards_redone, 0);

  test::write_file(shard(3), flipped);  // damaged after extraction: training refuses it
  EXPECT_THAT(test::error_of([&] { ExtractedData::open(dir + "/out"); }),
              AllOf(HasSubstr("shard-00003.safetensors: its sha256 is not the one recorded"),
                    HasSubstr("rerun the same `eaglet extract` command")));
  test::write_file(shard(3), good[3].substr(0, 100));
  EXPECT_THAT(test::error_of([&] { ExtractedData::open(dir + "/out"); }),
              AllOf(HasSubstr("shard-00003.safetensors: 100 bytes,"), HasSubstr("truncated or replaced")));
}

// --shard I/N on 3 machines, then extract-merge: the very extraction one process writes (every shard's bytes, the
// draft vocabulary, the totals); a part alone is not trained on, and parts are merged only all together.
TEST(Extract, ShardedPartsMergeIntoTheWholeExtraction) {
  const std::string dir = test::temp_dir("extract_sharded");
  const std::string data = write_rows(dir, 7);  // 14 rows, 3 per shard: 5 shards
  const ExtractSummary whole = run_extract(options(tiny("llama_fp32"), data, dir + "/whole"));
  ASSERT_EQ(whole.shards, 5);
  std::string parts;
  for (int i = 0; i < 3; ++i) {
    ExtractOptions o = options(tiny("llama_fp32"), data, dir + "/part" + std::to_string(i));
    o.part = i;
    o.parts = 3;
    const ExtractSummary s = run_extract(o);
    EXPECT_EQ(s.shards, 5);
    for (int k = 0; k < 5; ++k)
      EXPECT_EQ(fs::exists(o.out_dir + "/shard-0000" + std::to_string(k) + ".safetensors"), k % 3 == i)
          << "part " << i << " shard " << k;
    parts += " " + o.out_dir;
  }
  EXPECT_THAT(test::error_of([&] { ExtractedData::open(dir + "/part1"); }),
              AllOf(HasSubstr("part {\"count\":3,\"index\":1}"), HasSubstr("eaglet extract-merge")));
  const auto two = test::run_command(test::eaglet_bin() + " extract-merge --draft-vocab 100 --out " + dir + "/m2 " +
                                     dir + "/part0 " + dir + "/part1");
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_THAT(two.err, HasSubstr("give every part once"));
  const auto twice = test::run_command(test::eaglet_bin() + " extract-merge --draft-vocab 100 --out " + dir + "/m3 " +
                                       dir + "/part0 " + dir + "/part0 " + dir + "/part1");
  EXPECT_THAT(twice.err, HasSubstr("is given twice"));

  {  // a manifest naming a file outside its own shards is refused, and nothing of it is linked in
    const std::string path = dir + "/part1/manifest.json";
    const std::string good = test::read_file(path);
    nlohmann::json m = nlohmann::json::parse(good);
    m["shard_files"]["../escape.safetensors"] = m["shard_files"]["shard-00001.safetensors"];
    test::write_file(path, m.dump());
    const auto escape =
        test::run_command(test::eaglet_bin() + " extract-merge --draft-vocab 100 --out " + dir + "/m4" + parts);
    EXPECT_EQ(escape.exit_code, 1);
    EXPECT_THAT(escape.err, HasSubstr("shard_files names '../escape.safetensors', not a shard of part 1 of 3"));
    test::write_file(path, good);
  }
  const auto merged =
      test::run_command(test::eaglet_bin() + " extract-merge --draft-vocab 100 --out " + dir + "/merged" + parts);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_THAT(merged.err, HasSubstr("3 parts, " + std::to_string(whole.rows) + " rows"));
  for (int k = 0; k < 5; ++k) {
    const std::string name = "/shard-0000" + std::to_string(k) + ".safetensors";
    EXPECT_EQ(test::read_file(dir + "/merged" + name), test::read_file(dir + "/whole" + name)) << name;
  }
  EXPECT_EQ(test::read_file(dir + "/merged/draft_vocab.safetensors"),
            test::read_file(dir + "/whole/draft_vocab.safetensors"));
  const auto a = nlohmann::json::parse(test::read_file(dir + "/whole/manifest.json"));
  const auto b = nlohmann::json::parse(test::read_file(dir + "/merged/manifest.json"));
  for (const char* key : {"settings", "rows", "tokens", "trained_tokens", "shards", "shard_files"})
    EXPECT_EQ(a[key], b[key]) << key;
  EXPECT_EQ(ExtractedData::open(dir + "/merged").sequences(64).size(),
            ExtractedData::open(dir + "/whole").sequences(64).size());

  // With --regenerate (greedy), each part regenerates only its own rows, and the merge is again the whole.
  ExtractOptions regen = options(tiny("qwen3_fp32"), data, dir + "/regen_whole");
  regen.regenerate = true;
  regen.regenerate_max_tokens = 8;
  run_extract(regen);
  std::string regen_parts;
  uint64_t replies = 0;
  for (int i = 0; i < 2; ++i) {
    ExtractOptions o = regen;
    o.out_dir = dir + "/regen_part" + std::to_string(i);
    o.part = i;
    o.parts = 2;
    run_extract(o);
    const std::string part_replies = test::read_file(o.out_dir + "/replies.jsonl");
    replies += static_cast<uint64_t>(std::count(part_replies.begin(), part_replies.end(), '\n'));
    regen_parts += " " + o.out_dir;
  }
  const std::string all_replies = test::read_file(dir + "/regen_whole/replies.jsonl");
  EXPECT_EQ(replies, static_cast<uint64_t>(std::count(all_replies.begin(), all_replies.end(), '\n')))
      << "every reply made once, by its own part";
  const auto regen_merged = test::run_command(test::eaglet_bin() + " extract-merge --draft-vocab 100 --out " + dir +
                                              "/regen_merged" + regen_parts);
  ASSERT_EQ(regen_merged.exit_code, 0) << regen_merged.err;
  EXPECT_EQ(nlohmann::json::parse(test::read_file(dir + "/regen_merged/manifest.json"))["shard_files"],
            nlohmann::json::parse(test::read_file(dir + "/regen_whole/manifest.json"))["shard_files"]);

  ExtractOptions budget = options(tiny("llama_fp32"), data, dir + "/budget");
  budget.parts = 2;
  budget.max_tokens = 100;
  EXPECT_THAT(test::error_of([&] { run_extract(budget); }), HasSubstr("--shard and --max-tokens"));
}

// An extraction that would train nothing (no assistant turn, empty completions) is an error naming why, before any
// shard is written.
TEST(Extract, NothingToTrainIsAnError) {
  const std::string dir = test::temp_dir("extract_nothing_trained");
  test::write_file(dir + "/rows.jsonl", R"({"messages": [{"role": "user", "content": "hi"}]})"
                                        "\n"
                                        R"({"prompt": "def f():", "completion": ""})"
                                        "\n");
  const ExtractOptions o = options(tiny("qwen3_fp32"), dir + "/rows.jsonl", dir + "/out");
  EXPECT_THAT(test::error_of([&] { run_extract(o); }),
              AllOf(HasSubstr("rows.jsonl: no token would be trained (2 rows"), HasSubstr("assistant turns")));
  EXPECT_FALSE(fs::exists(dir + "/out/shard-00000.safetensors"));
}

// --regenerate: every assistant turn becomes the target's own reply (here greedy) to the turns before it, trained
// as before; the same rows again on a rerun.
TEST(Extract, RegenerateUsesTheTargetsOwnReplies) {
  const std::string dir = test::temp_dir("extract_regenerate");
  const std::string data = write_rows(dir, 1);
  const Tokenizer tok = Tokenizer::load(tiny("qwen3_fp32"));
  auto target = Transformer::load(tiny("qwen3_fp32"));
  ExtractOptions o = options(tiny("qwen3_fp32"), data, dir + "/out");
  o.regenerate = true;
  o.regenerate_max_tokens = 12;
  std::vector<ChatJson> contexts;
  const ChatTemplate chat_template = ChatTemplate::load(tiny("qwen3_fp32"));
  DatasetOptions d;
  d.regenerate = [&](const ChatJson& context) {
    contexts.push_back(context);
    GenerationLimits limits{12, 0, target->config().eos_token_ids, 256};
    limits.stop_ids.push_back(tok.encode("<|im_end|>", false).at(0));
    const auto prompt = tok.encode(chat_template.render(context, true), false);
    return tok.decode(generate_plain(*target, prompt, {}, limits).tokens, true);
  };
  const auto want = read_training_rows(data, tok, tiny("qwen3_fp32"), d);
  ASSERT_EQ(contexts.size(), 2u);  // the two assistant turns, each after its user turn
  EXPECT_EQ(contexts[1].size(), 3u);
  EXPECT_NE(tok.decode(want[1].ids).find("<|im_start|>assistant\n"), std::string::npos);

  run_extract(o);
  const Checkpoint shard = Checkpoint::open_file(dir + "/out/shard-00000.safetensors");
  const auto ids = ints(shard, "input_ids"), offsets = ints(shard, "row_offsets");
  const std::vector<int64_t> chat(ids.begin() + offsets[1], ids.begin() + offsets[2]);
  EXPECT_EQ(chat, std::vector<int64_t>(want[1].ids.begin(), want[1].ids.end()));
  EXPECT_EQ(tok.decode(want[1].ids).find("hello, how can I help?"), std::string::npos) << "the reply was replaced";
}

// {"prompt", "completion"} rows train the completion only; regenerated, the completion is exactly the target's greedy
// tokens after the prompt's (kept as tokens, with no round trip through text).
TEST(Extract, PromptRowsTrainTheCompletion) {
  const std::string dir = test::temp_dir("extract_prompt_rows");
  const std::string prompt = "def add(a, b):\n", completion = "    return a + b\n";
  test::write_file(dir + "/rows.jsonl", nlohmann::json{{"prompt", prompt}, {"completion", completion}}.dump() + "\n");
  const Tokenizer tok = Tokenizer::load(tiny("llama_fp32"));
  const std::vector<int32_t> whole = tok.encode(prompt + completion, tok.adds_bos());
  const size_t n_prompt = tok.encode(prompt, tok.adds_bos()).size();
  const auto rows = read_training_rows(dir + "/rows.jsonl", tok, tiny("llama_fp32"), {});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].ids, whole);
  ASSERT_LT(n_prompt, whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(rows[0].loss_mask[i], i >= n_prompt ? 1 : 0) << i;

  ExtractOptions o = options(tiny("llama_fp32"), dir + "/rows.jsonl", dir + "/out");
  o.regenerate = true;
  o.regenerate_max_tokens = 9;
  run_extract(o);
  auto target = Transformer::load(tiny("llama_fp32"));
  const std::vector<int32_t> prompt_ids = tok.encode(prompt, tok.adds_bos());
  const std::vector<int32_t> reply =
      generate_plain(*target, prompt_ids, {}, {9, 0, target->config().eos_token_ids, 256}).tokens;
  ASSERT_FALSE(reply.empty());
  const Checkpoint shard = Checkpoint::open_file(dir + "/out/shard-00000.safetensors");
  std::vector<int64_t> want(prompt_ids.begin(), prompt_ids.end());
  want.insert(want.end(), reply.begin(), reply.end());
  EXPECT_EQ(ints(shard, "input_ids"), want);
  std::vector<int64_t> mask(want.size(), 0);
  std::fill(mask.begin() + static_cast<std::ptrdiff_t>(prompt_ids.size()), mask.end(), 1);
  EXPECT_EQ(ints(shard, "loss_mask"), mask);
}

// A resumed --regenerate extraction reads the replies the killed run kept in replies.jsonl (a torn last line is
// dropped and made again) instead of decoding them again, and writes the same shards.
TEST(Extract, ResumedRegenerationReusesTheKeptReplies) {
  const std::string dir = test::temp_dir("extract_regenerate_resume");
  std::string rows;
  for (const char* p : {"def add(a, b):\n", "class Point:\n", "import os\n"})
    rows += nlohmann::json{{"prompt", p}}.dump() + "\n";
  test::write_file(dir + "/rows.jsonl", rows);
  ExtractOptions o = options(tiny("llama_fp32"), dir + "/rows.jsonl", dir + "/out");
  o.regenerate = true;
  o.regenerate_max_tokens = 7;
  o.rows_per_shard = 2;
  const ExtractSummary first = run_extract(o);
  EXPECT_EQ(first.replies_reused, 0);
  const std::string replies = test::read_file(dir + "/out/replies.jsonl");
  ASSERT_EQ(std::count(replies.begin(), replies.end(), '\n'), 3);
  const std::string shard0 = dir + "/out/shard-00000.safetensors", shard1 = dir + "/out/shard-00001.safetensors";
  const std::string bytes0 = test::read_file(shard0), bytes1 = test::read_file(shard1);

  // Killed while writing the second reply: one whole line and a torn one are left, and no shard.
  const size_t second = replies.find('\n') + 1;
  test::write_file(dir + "/out/replies.jsonl", replies.substr(0, second + 3));
  fs::remove(shard0);
  fs::remove(shard1);
  const ExtractSummary again = run_extract(o);
  EXPECT_EQ(again.replies_reused, 1);
  EXPECT_EQ(again.shards_skipped, 0);
  EXPECT_EQ(test::read_file(dir + "/out/replies.jsonl"), replies);
  EXPECT_EQ(test::read_file(shard0), bytes0);
  EXPECT_EQ(test::read_file(shard1), bytes1);

  // Nothing to make the third time.
  EXPECT_EQ(run_extract(o).replies_reused, 3);

  // A whole line that is not a reply is refused, naming the file and line (only a torn last line is made again).
  for (const std::string bad : {"{\"a\": 1}\n", "[1, 99999999]\n", "[4611686018427387904]\n", "[-1]\n"}) {
    test::write_file(dir + "/out/replies.jsonl", replies.substr(0, second) + bad);
    EXPECT_THAT(test::error_of([&] { run_extract(o); }),
                AllOf(HasSubstr("replies.jsonl:2"), HasSubstr("remove the file")))
        << bad;
  }

  // A token budget the first row fills (its prompt and two reply tokens): only its reply is made.
  o.out_dir = dir + "/budget";
  const Tokenizer tok = Tokenizer::load(tiny("llama_fp32"));
  o.max_tokens = static_cast<int64_t>(tok.encode("def add(a, b):\n", tok.adds_bos()).size()) + 2;
  const ExtractSummary budget = run_extract(o);
  EXPECT_EQ(budget.tokens, o.max_tokens);
  EXPECT_EQ(budget.trained_tokens, 2);
  const std::string budget_replies = test::read_file(dir + "/budget/replies.jsonl");
  EXPECT_EQ(std::count(budget_replies.begin(), budget_replies.end(), '\n'), 1);
}

TEST(BadInputExtract, MalformedRowsAreNamed) {
  const std::string dir = test::temp_dir("extract_bad");
  test::write_file(dir + "/bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": 5}\n");
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("llama_fp32"), dir + "/bad.jsonl", dir + "/o")); }),
              AllOf(HasSubstr("bad.jsonl:2"), HasSubstr("expected {\"text\"")));
  test::write_file(dir + "/bad2.jsonl", "{\"messages\": [{\"role\": \"user\"}]}\n");
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("qwen3_fp32"), dir + "/bad2.jsonl", dir + "/o2")); }),
              AllOf(HasSubstr("bad2.jsonl:1"), HasSubstr("'content'")));
  test::write_file(dir + "/both.jsonl", "{\"text\": \"x y\", \"messages\": []}\n");
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("llama_fp32"), dir + "/both.jsonl", dir + "/o4")); }),
              AllOf(HasSubstr("both.jsonl:1"), HasSubstr("more than one of 'text', 'messages', 'prompt'")));
  test::write_file(dir + "/prompt.jsonl", "{\"prompt\": \"def f():\"}\n");
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("llama_fp32"), dir + "/prompt.jsonl", dir + "/o7")); }),
              AllOf(HasSubstr("prompt.jsonl:1"), HasSubstr("'completion'"), HasSubstr("--regenerate")));
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("llama_fp32"), dir, dir + "/o5")); }),
              HasSubstr("is a directory"));
  ExtractOptions o = options(tiny("llama_fp32"), dir + "/both.jsonl", dir + "/both.jsonl");
  EXPECT_THAT(test::error_of([&] { run_extract(o); }), HasSubstr("is not a folder"));
  o.out_dir = dir + "/o6";
  o.rows_per_shard = int64_t{1} << 62;
  EXPECT_THAT(test::error_of([&] { run_extract(o); }), HasSubstr("--rows-per-shard"));
  test::write_file(dir + "/bad3.jsonl", "{\"text\": \"x\"\n");
  EXPECT_THAT(test::error_of([&] { run_extract(options(tiny("llama_fp32"), dir + "/bad3.jsonl", dir + "/o3")); }),
              AllOf(HasSubstr("bad3.jsonl:1"), HasSubstr("not valid JSON")));
}

}  // namespace
}  // namespace eaglet
