// The gallery of broken drafters (issue 9): each made from a working fixture drafter by one edit, each with the
// verdict `eaglet doctor` must give.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "doctor/doctor.h"
#include "doctor/doctor_fixtures.h"
#include "doctor/report.h"
#include "io/json_util.h"
#include "test_env.h"
#include "tokenizer/tokenizer.h"
#include "util/sha256.h"

namespace eaglet::test {
namespace {

using doctor::Report;
using doctor::Verdict;

const std::string kEchoTarget = "drafters/targets/echo_fp32";

const std::vector<std::string> kPrompts = {"the quick brown fox", "abc def ghi jkl"};

// `prompts` false: none given, as a user who lets a training record choose its own.
Report run(const std::string& drafter_dir, const std::string& target = kEchoTarget, bool prompts = true) {
  doctor::DoctorOptions o;
  o.target_dir = fixtures_dir() + "/" + target;
  o.spec.drafter = drafter_dir;
  if (prompts) o.prompts = kPrompts;
  o.max_tokens = 24;
  return doctor::run_doctor(o);
}

std::string fixture_drafter(const std::string& name) { return fixtures_dir() + "/drafters/" + name; }

// The verdict of a named check, with the whole table in the failure message.
::testing::AssertionResult has(const Report& r, const std::string& name, Verdict v) {
  const doctor::Check* c = r.find(name);
  if (c != nullptr && c->verdict == v) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << doctor::verdict_name(v) << " for '" << name << "', found "
                                       << (c ? doctor::verdict_name(c->verdict) : "no such check") << "\n"
                                       << doctor::report_table(r);
}

::testing::AssertionResult all_pass(const Report& r) {
  for (const doctor::Check& c : r.checks)
    if (c.verdict != Verdict::Pass)
      return ::testing::AssertionFailure() << c.name << " is " << doctor::verdict_name(c.verdict) << "\n"
                                           << doctor::report_table(r);
  return ::testing::AssertionSuccess();
}

double accept_len(const Report& r, size_t setting) {
  return r.measured["settings"][setting]["accept_len"].get<double>();
}

TEST(DoctorGallery, WorkingDrafterPassesEveryCheck) {
  const Report r = run(fixture_drafter("exact_echo"));
  EXPECT_TRUE(all_pass(r));
  EXPECT_GT(accept_len(r, 0), 4.0);  // the exact drafter: every draft accepted
  EXPECT_GT(r.measured["teacher_forced_step0_accuracy"].get<double>(), 0.95);
  for (const char* name :
       {"config", "fc", "d2t/t2d", "tensors", "aux convention", "norm flags", "rope", "embedding provenance",
        "lm_head provenance", "tokenizer", "chat template", "lossless", "acceptance chain 4/1/5",
        "acceptance tree 5/4/8", "step-0 accuracy", "probe aux convention", "probe norm_before_residual"})
    EXPECT_NE(r.find(name), nullptr) << name;
}

TEST(DoctorGallery, WorkingEagleLayoutAndReducedVocabularyPass) {
  EXPECT_TRUE(all_pass(run(fixture_drafter("exact_echo_eagle"))));
  const Report r =
      run(make_drafter("reduced", "exact_echo", [](nlohmann::json& c, Tensors& t) { reduce_vocabulary(t, c); }));
  EXPECT_TRUE(all_pass(r));
  EXPECT_GT(accept_len(r, 0), 4.0);
}

// The origin story's first layer: the trainer saved layers.0.*, the EAGLE layout names midlayer.*.
TEST(DoctorGallery, Layers0WhereTheLayoutExpectsMidlayer) {
  const Report r = run(make_drafter("layers0", "exact_echo_eagle", [](nlohmann::json&, Tensors& t) {
    Tensors renamed;
    for (auto& [name, tensor] : t)
      renamed[name.rfind("midlayer.", 0) == 0 ? "layers.0." + name.substr(9) : name] = std::move(tensor);
    t = std::move(renamed);
  }));
  EXPECT_TRUE(has(r, "layer names", Verdict::Warn));
  EXPECT_FALSE(r.failed()) << doctor::report_table(r);
}

TEST(DoctorGallery, MissingFc) {
  const Report r = run(make_drafter("no_fc", "exact_echo", [](nlohmann::json&, Tensors& t) { t.erase("fc.weight"); }));
  EXPECT_TRUE(has(r, "fc", Verdict::Fail));
  EXPECT_TRUE(has(r, "tensors", Verdict::Fail));
  EXPECT_TRUE(has(r, "live checks", Verdict::Warn));  // not run: the drafter does not load
  EXPECT_TRUE(has(r, "d2t/t2d", Verdict::Pass));      // every other contract still reported
}

// The origin story's root cause: fc sized for single-layer features.
TEST(DoctorGallery, FcForSingleLayerFeatures) {
  const Report r = run(make_drafter("fc_single", "exact_echo", [](nlohmann::json&, Tensors& t) {
    t["fc.weight"] = f32_tensor({64, 64}, std::vector<float>(64 * 64, 0.0f));
  }));
  EXPECT_TRUE(has(r, "fc", Verdict::Fail));
  EXPECT_NE(r.find("fc")->reason.find("3 aux layers x target hidden 64 = 192"), std::string::npos)
      << r.find("fc")->reason;
}

TEST(DoctorGallery, AuxIdsOffByOne) {
  // Speculators ids are inputs of layer i; [1, 3, 4] read as outputs would be the default [2, 4, 5].
  const Report r = run(make_drafter("aux_shift", "exact_echo", [](nlohmann::json& c, Tensors&) {
    c["eagle_aux_hidden_state_layer_ids"] = {1, 3, 4};
  }));
  EXPECT_TRUE(has(r, "aux convention", Verdict::Warn));
  EXPECT_TRUE(has(r, "aux layers", Verdict::Pass));
  // This drafter's fc is zero (it reads no feature), so the probe measures no jump: it must not claim one.
  EXPECT_TRUE(has(r, "probe aux convention", Verdict::Pass));
  EXPECT_FALSE(r.failed());
}

// A target whose hidden states change after layer 2 (its layer 2 MLP writes dims 32..63, which its head never
// reads: the bigram map stays), and a drafter that reads hidden state 2 through fc and predicts the token after next
// from it: with the aux layers it was built for, every first draft is accepted; one layer later, fc amplifies noise.
std::string layered_target() {
  return copy_model("layered_target", fixtures_dir() + "/" + kEchoTarget, [](nlohmann::json&, Tensors& t) {
    OwnedTensor& down = t.at("model.layers.2.mlp.down_proj.weight");  // [hidden 64, intermediate]
    const int64_t I = down.shape[1];
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (int64_t row = 32; row < 64; ++row)
      for (int64_t k = 0; k < I; ++k) down.set_f32(row * I + k, normal(rng));
  });
}

std::string feature_drafter(const std::string& name, const std::vector<int>& eagle_config_ids) {
  const nlohmann::json manifest = read_json_file(fixtures_dir() + "/drafters/MANIFEST.json");
  const auto f = manifest["targets"]["echo_fp32"]["bigram_map"].get<std::vector<int64_t>>();
  return make_drafter(name, "exact_echo_eagle", [&](nlohmann::json& c, Tensors& t) {
    c["norm_before_residual"] = false;  // the residual is fc's output
    c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", eagle_config_ids}, {"use_aux_hidden_state", true}};
    std::vector<float> fc(64 * 192, 0.0f);  // g[0:32] = aux chunk 0 [0:32] + 50-sigma weights on chunk 0 [32:64]
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 50.0f);
    for (int i = 0; i < 32; ++i) {
      fc[static_cast<size_t>(i * 192 + i)] = 1.0f;
      for (int k = 32; k < 64; ++k) fc[static_cast<size_t>(i * 192 + k)] = normal(rng);
    }
    t["fc.weight"] = f32_tensor({64, 192}, fc);
    for (const char* zero : {"midlayer.self_attn.o_proj.weight", "midlayer.mlp.down_proj.weight"})
      std::fill(t.at(zero).bytes.begin(), t.at(zero).bytes.end(), std::byte{0});  // the layer adds nothing: h = g
    // Head row f(z) = the target's row z: norm(embed(x)) scores f(f(x)), the token after next.
    OwnedTensor& head = t.at("lm_head.weight");
    const OwnedTensor target_head = head;
    std::fill(head.bytes.begin(), head.bytes.end(), std::byte{0});
    const size_t row = 64 * 4;
    for (int64_t z = 3; z < 381; ++z)
      std::copy_n(target_head.bytes.begin() + static_cast<std::ptrdiff_t>(z * row), row,
                  head.bytes.begin() + static_cast<std::ptrdiff_t>(f[static_cast<size_t>(z)] * row));
  });
}

// vLLM-convention ids (hidden states [2, 4, 5]) written into an SGLang/SpecForge config, which reads them as outputs.
TEST(DoctorGallery, AuxIdsOffByOneMeasuredByTheProbe) {
  const std::string target = layered_target();
  auto run_on = [&](const std::string& drafter) {
    doctor::DoctorOptions o;
    o.target_dir = target;
    o.spec.drafter = drafter;
    o.prompts = {"the quick brown fox", "abc def ghi jkl"};
    o.max_tokens = 24;
    return doctor::run_doctor(o);
  };
  const Report right = run_on(feature_drafter("features_right", {1, 3, 4}));  // outputs of 1, 3, 4 = [2, 4, 5]
  EXPECT_TRUE(has(right, "acceptance chain 4/1/5", Verdict::Pass));
  EXPECT_GT(accept_len(right, 0), 1.8);
  EXPECT_TRUE(has(right, "probe aux convention", Verdict::Pass));
  EXPECT_FALSE(right.failed()) << doctor::report_table(right);
  const Report shifted = run_on(feature_drafter("features_shifted", {2, 4, 5}));  // read as [3, 5, 6]
  EXPECT_TRUE(has(shifted, "aux convention", Verdict::Warn));
  EXPECT_TRUE(has(shifted, "acceptance chain 4/1/5", Verdict::Fail));
  EXPECT_TRUE(has(shifted, "probe aux convention", Verdict::Fail));
  EXPECT_NE(shifted.find("probe aux convention")->fix.find("--aux-layer-convention input"), std::string::npos);
  EXPECT_GT(shifted.measured["probes"]["probe aux convention"]["accept_len"].get<double>(), 1.8);
}

TEST(DoctorGallery, AuxIdsOutOfRange) {
  const Report r = run(make_drafter("aux_range", "exact_echo", [](nlohmann::json& c, Tensors&) {
    c["eagle_aux_hidden_state_layer_ids"] = {2, 4, 9};
  }));
  EXPECT_TRUE(has(r, "aux layers", Verdict::Fail));
  EXPECT_TRUE(r.failed());
}

TEST(DoctorGallery, D2tHoldingAbsoluteIds) {
  const Report r = run(make_drafter("d2t_absolute", "exact_echo", [](nlohmann::json& c, Tensors& t) {
    reduce_vocabulary(t, c);
    std::vector<int64_t> absolute(378);
    for (int64_t i = 0; i < 378; ++i) absolute[static_cast<size_t>(i)] = i + 3;
    t["d2t"] = i64_tensor(absolute);
  }));
  EXPECT_TRUE(has(r, "d2t/t2d", Verdict::Fail));
  EXPECT_NE(r.find("d2t/t2d")->reason.find("absolute target ids"), std::string::npos);
}

TEST(DoctorGallery, D2tMissingWithReducedVocabulary) {
  const Report r = run(make_drafter("d2t_missing", "exact_echo", [](nlohmann::json& c, Tensors& t) {
    reduce_vocabulary(t, c);
    t.erase("d2t");
  }));
  EXPECT_TRUE(has(r, "d2t/t2d", Verdict::Fail));
  EXPECT_NE(r.find("d2t/t2d")->reason.find("needs d2t"), std::string::npos);
}

TEST(DoctorGallery, T2dInconsistentWithD2t) {
  const Report r = run(make_drafter("t2d_mismatch", "exact_echo", [](nlohmann::json& c, Tensors& t) {
    reduce_vocabulary(t, c);
    t["t2d"].bytes[3] = std::byte{0};
    t["t2d"].bytes[381] = std::byte{1};
  }));
  EXPECT_TRUE(has(r, "d2t/t2d", Verdict::Fail));
  EXPECT_NE(r.find("d2t/t2d")->reason.find("disagree"), std::string::npos);
}

TEST(DoctorGallery, WrongDraftVocabSize) {
  const Report r = run(make_drafter("draft_vocab_size", "exact_echo", [](nlohmann::json& c, Tensors& t) {
    reduce_vocabulary(t, c);
    c["draft_vocab_size"] = 300;
  }));
  EXPECT_TRUE(has(r, "lm_head", Verdict::Fail));
  EXPECT_TRUE(has(r, "d2t/t2d", Verdict::Fail));
}

TEST(DoctorGallery, EmbeddingFromAnotherModel) {
  const Report r = run(make_drafter("embed_other", "exact_echo", [](nlohmann::json&, Tensors& t) {
    OwnedTensor& e = t["embed_tokens.weight"];
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (int64_t i = 0; i < e.numel(); ++i) e.set_f32(i, normal(rng));
  }));
  EXPECT_TRUE(has(r, "embedding provenance", Verdict::Warn));
  EXPECT_TRUE(has(r, "acceptance chain 4/1/5", Verdict::Fail));  // the zero-acceptance signature
  EXPECT_LT(accept_len(r, 0), 1.05);
}

TEST(DoctorGallery, LmHeadForAnotherVocabulary) {
  // Same size, other ids: each row is the head row of the next token id.
  const Report rolled = run(make_drafter("head_rolled", "exact_echo", [](nlohmann::json&, Tensors& t) {
    OwnedTensor& h = t["lm_head.weight"];
    const size_t row = static_cast<size_t>(h.shape[1]) * 4;
    std::rotate(h.bytes.begin(), h.bytes.begin() + static_cast<std::ptrdiff_t>(row), h.bytes.end());
  }));
  EXPECT_TRUE(has(rolled, "lm_head provenance", Verdict::Warn));
  EXPECT_TRUE(has(rolled, "acceptance chain 4/1/5", Verdict::Fail));
  // Another size: rows for a vocabulary of 400.
  const Report wider = run(make_drafter("head_wider", "exact_echo", [](nlohmann::json&, Tensors& t) {
    t["lm_head.weight"] = f32_tensor({400, 64}, std::vector<float>(400 * 64, 0.01f));
  }));
  EXPECT_TRUE(has(wider, "lm_head", Verdict::Fail));
}

TEST(DoctorGallery, RopeThetaDifferentFromTraining) {
  const Report r = run(make_drafter("rope_theta", "exact_echo", [](nlohmann::json& c, Tensors&) {
    c["transformer_layer_config"]["rope_theta"] = 10000.0;
  }));
  EXPECT_TRUE(has(r, "rope", Verdict::Warn));
}

TEST(DoctorGallery, DrafterForAnotherTargetHiddenSize) {
  const Report r = run(make_drafter("other_target", "exact_echo", [](nlohmann::json& c, Tensors& t) {
    c["target_hidden_size"] = 128;
    t["fc.weight"] = f32_tensor({64, 384}, std::vector<float>(64 * 384, 0.0f));
  }));
  EXPECT_TRUE(has(r, "target hidden size", Verdict::Fail));
  EXPECT_TRUE(has(r, "fc", Verdict::Fail));
}

TEST(DoctorGallery, TokenizerMismatch) {
  nlohmann::json tok = read_json_file(fixtures_dir() + "/" + kEchoTarget + "/tokenizer.json");
  auto& vocab = tok["model"]["vocab"];
  auto first = vocab.begin(), second = std::next(first, 5);
  const nlohmann::json id = *first;
  *first = *second;
  *second = id;
  const Report r = run(make_drafter("tokenizer", "exact_echo", {}, {{"tokenizer.json", tok.dump()}}));
  EXPECT_TRUE(has(r, "tokenizer", Verdict::Fail));
  // The target's own tokenizer shipped beside the drafter is no mismatch.
  const Report same =
      run(make_drafter("tokenizer_same", "exact_echo", {},
                       {{"tokenizer.json", read_file(fixtures_dir() + "/" + kEchoTarget + "/tokenizer.json")}}));
  EXPECT_TRUE(has(same, "tokenizer", Verdict::Pass));
}

TEST(DoctorGallery, TrainedOnAnotherChatTemplate) {
  const nlohmann::json llama3 = {
      {"chat_template",
       "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
       "{{ message['content'] }}<|eot_id|>{% endfor %}"}};
  const Report r = run(make_drafter("chat_template", "exact_echo", {}, {{"tokenizer_config.json", llama3.dump()}}));
  EXPECT_TRUE(has(r, "chat template", Verdict::Warn));
  const std::string& reason = r.find("chat template")->reason;
  EXPECT_NE(reason.find("renders a user turn other than the target's"), std::string::npos) << reason;
  EXPECT_NE(reason.find("<|start_header_id|>user<|end_header_id|>"), std::string::npos) << reason;  // the difference
  // The same template in another spelling renders the same text: no warning.
  const nlohmann::json target_config =
      nlohmann::json::parse(read_file(fixtures_dir() + "/" + kEchoTarget + "/tokenizer_config.json"));
  const nlohmann::json respelled = {{"chat_template", target_config["chat_template"].get<std::string>() + "{# x #}"},
                                    {"bos_token", target_config.value("bos_token", nlohmann::json())}};
  const Report same =
      run(make_drafter("chat_template_same", "exact_echo", {}, {{"tokenizer_config.json", respelled.dump()}}));
  EXPECT_TRUE(has(same, "chat template", Verdict::Pass)) << same.find("chat template")->reason;
}

// A speculators config without norm_before_residual: eaglet reads false, the drafter was trained with true. Step 0
// is unaffected (the hidden input is zero), later steps are not: the probe measures the fix.
TEST(DoctorGallery, NormFlagLeftToTheDefault) {
  const Report r = run(
      make_drafter("norm_flag", "exact_echo", [](nlohmann::json& c, Tensors&) { c.erase("norm_before_residual"); }));
  EXPECT_TRUE(has(r, "norm flags", Verdict::Warn));
  EXPECT_TRUE(has(r, "probe norm_before_residual", Verdict::Fail));
  EXPECT_NE(r.find("probe norm_before_residual")->fix.find("\"norm_before_residual\": true"), std::string::npos);
  EXPECT_TRUE(has(r, "served vs teacher-forced", Verdict::Pass));
}

// Files that do not even load: each is one FAIL line, and the report goes on.
TEST(DoctorGallery, UnreadableFilesAreFailLinesNotErrors) {
  const std::string dir = make_drafter("truncated", "exact_echo", {});
  const std::string bytes = read_file(dir + "/model.safetensors");
  write_file(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 100));
  const Report r = run(dir);
  EXPECT_TRUE(has(r, "safetensors", Verdict::Fail));
  EXPECT_TRUE(has(r, "tokenizer", Verdict::Pass));
  const Report target_as_drafter = run(fixtures_dir() + "/" + kEchoTarget);
  EXPECT_TRUE(has(target_as_drafter, "config", Verdict::Fail));
}

// A record as the trainer writes it; `report` false: an older record that does not name its prompts.
std::string record(double acc0, double served_4_1_5, int hidden = 64, bool report = true) {
  nlohmann::json j = {
      {"format", "eaglet-training/1"},
      {"acc", {acc0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4}},
      {"served", {{{"setting", "4,1,5"}, {"accept_len", served_4_1_5}}, {{"setting", "5,4,8"}, {"accept_len", 3.2}}}},
      {"target",
       {{"architectures", {"LlamaForCausalLM"}},
        {"hidden_size", hidden},
        {"num_hidden_layers", 8},
        {"vocab_size", 384}}}};
  if (report) {
    const Tokenizer tok = Tokenizer::load(fixtures_dir() + "/" + kEchoTarget);
    std::vector<std::vector<int32_t>> ids;
    for (const std::string& p : kPrompts) ids.push_back(tok.encode(p, tok.adds_bos()));
    j["report"] = {{"prompt_token_ids", ids},
                   {"max_tokens", 24},
                   {"prompts_sha256", sha256_token_lists(ids)},
                   {"step0_accuracy", acc0}};
  }
  return j.dump();
}

// Without --prompts the record's own prompts are decoded: its figures get a verdict.
TEST(DoctorGallery, TrainingRecordMatchesServing) {
  const Report r = run(make_drafter("record_ok", "exact_echo", {}, {{"eaglet_training.json", record(0.98, 4.8)}}),
                       kEchoTarget, false);
  EXPECT_TRUE(all_pass(r));
  EXPECT_TRUE(has(r, "prompts", Verdict::Pass));
  EXPECT_TRUE(has(r, "served vs training chain 4/1/5", Verdict::Pass));
  EXPECT_TRUE(has(r, "served vs training tree 5/4/8", Verdict::Pass));
}

TEST(DoctorGallery, ServingFarBelowTheTrainingRecord) {
  const Report r = run(
      make_drafter("record_norm", "exact_echo", [](nlohmann::json& c, Tensors&) { c.erase("norm_before_residual"); },
                   {{"eaglet_training.json", record(0.98, 4.8)}}),
      kEchoTarget, false);
  EXPECT_TRUE(has(r, "served vs training chain 4/1/5", Verdict::Fail)) << accept_len(r, 0);
  EXPECT_TRUE(has(r, "step-0 accuracy", Verdict::Pass));  // step 0 is intact: a later-step contract is broken
  // Features gone (embedding from another model): step-0 accuracy far below the recorded acc_0.
  const Report features = run(make_drafter("record_embed", "exact_echo",
                                           [](nlohmann::json&, Tensors& t) {
                                             OwnedTensor& e = t["embed_tokens.weight"];
                                             for (int64_t i = 0; i < e.numel(); ++i)
                                               e.set_f32(i, static_cast<float>((i * 7919) % 13) - 6.0f);
                                           },
                                           {{"eaglet_training.json", record(0.98, 4.8)}}),
                              kEchoTarget, false);
  EXPECT_TRUE(has(features, "step-0 accuracy", Verdict::Fail));
}

// Figures measured on other prompts than the record's are reported without a verdict: with --prompts, and for a
// record that does not name its prompts. The zero-acceptance and near-chance checks still judge.
TEST(DoctorGallery, OtherPromptsThanTheRecordsGetNoVerdict) {
  const std::string healthy =
      make_drafter("record_other_prompts", "exact_echo", {}, {{"eaglet_training.json", record(0.98, 9.0)}});
  const Report given = run(healthy);
  EXPECT_TRUE(has(given, "served vs training chain 4/1/5", Verdict::Info));
  EXPECT_TRUE(has(given, "step-0 accuracy", Verdict::Info));
  EXPECT_NE(given.find("served vs training chain 4/1/5")->reason.find("not the record's"), std::string::npos);
  EXPECT_FALSE(given.failed());
  EXPECT_NE(doctor::report_table(given).find(" FAIL, 3 INFO\n"), std::string::npos) << doctor::report_table(given);
  const Report older =
      run(make_drafter("record_no_prompts", "exact_echo", {}, {{"eaglet_training.json", record(0.98, 9.0, 64, false)}}),
          kEchoTarget, false);
  EXPECT_TRUE(has(older, "served vs training tree 5/4/8", Verdict::Info));
  EXPECT_NE(older.find("served vs training tree 5/4/8")->reason.find("does not name its prompts"), std::string::npos);
  EXPECT_EQ(older.find("prompts"), nullptr);
  const Report broken = run(make_drafter("record_other_prompts_broken", "exact_echo",
                                         [](nlohmann::json&, Tensors& t) {
                                           OwnedTensor& e = t["embed_tokens.weight"];
                                           for (int64_t i = 0; i < e.numel(); ++i)
                                             e.set_f32(i, static_cast<float>((i * 7919) % 13) - 6.0f);
                                         },
                                         {{"eaglet_training.json", record(0.98, 4.8)}}));
  EXPECT_TRUE(broken.failed()) << doctor::report_table(broken);
}

// A record beside other weights than those it was made for (model_sha256) is named (a quantized drafter keeps the
// record of its dense original, so that doctor shows what quantizing cost); one edited by hand is refused.
TEST(DoctorGallery, RecordOfOtherWeights) {
  nlohmann::json rec = nlohmann::json::parse(record(0.98, 4.8));
  rec["model_sha256"] = std::string(64, 'a');
  const Report r = run(make_drafter("record_other_weights", "exact_echo", {}, {{"eaglet_training.json", rec.dump()}}),
                       kEchoTarget, false);
  EXPECT_TRUE(has(r, "training record", Verdict::Info));
  EXPECT_NE(r.find("training record")->reason.find("recorded for other weights"), std::string::npos);
  rec["report"]["prompt_token_ids"][0][0] = 7;
  const Report edited =
      run(make_drafter("record_edited", "exact_echo", {}, {{"eaglet_training.json", rec.dump()}}), kEchoTarget, false);
  EXPECT_TRUE(has(edited, "training record", Verdict::Fail));
  EXPECT_NE(edited.find("training record")->reason.find("not the hash of its prompt_token_ids"), std::string::npos);
  rec["report"]["prompt_token_ids"][0][0] = 384;  // hashed right, but past the vocabulary
  rec["report"]["prompts_sha256"] =
      sha256_token_lists(rec["report"]["prompt_token_ids"].get<std::vector<std::vector<int32_t>>>());
  const Report outside =
      run(make_drafter("record_outside", "exact_echo", {}, {{"eaglet_training.json", rec.dump()}}), kEchoTarget, false);
  EXPECT_TRUE(has(outside, "training record", Verdict::Fail));
  EXPECT_NE(outside.find("training record")->reason.find("outside the recorded vocabulary"), std::string::npos);
}

TEST(DoctorGallery, TrainingRecordForAnotherTargetOrMalformed) {
  const Report other =
      run(make_drafter("record_other", "exact_echo", {}, {{"eaglet_training.json", record(0.98, 4.8, 4096)}}));
  EXPECT_TRUE(has(other, "training record", Verdict::Fail));
  EXPECT_NE(other.find("training record")->reason.find("hidden_size 4096"), std::string::npos);
  const Report bad =
      run(make_drafter("record_bad", "exact_echo", {}, {{"eaglet_training.json", R"({"format": "x"})"}}));
  EXPECT_TRUE(has(bad, "training record", Verdict::Fail));
}

}  // namespace
}  // namespace eaglet::test
