// The libtorch trainer: every trainable tensor learns, the TTT loss equals an independent PyTorch computation, a short
// run on a tiny target learns and serves, and a run killed at any step resumes into the uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/block.h"
#include "model/transformer.h"
#include "test_env.h"
#include "tokenizer/tokenizer.h"
#include "train/draft_layer.h"
#include "train/shards.h"
#include "train/torch/draft_net.h"
#include "train/torch/trainer.h"
#include "train/torch/ttt.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The bigram target of the drafter fixtures: its next token is a fixed function of the current one, so a drafter can
// learn it exactly.
std::string echo_target() { return test::fixtures_dir() + "/drafters/targets/echo_fp32"; }

// Rows of code-like text, extracted once for the whole suite by the real `eaglet extract`.
class TrainDraftTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = test::suite_dir("train_draft");
    std::mt19937 rng(7);
    const Tokenizer tokenizer = Tokenizer::load(echo_target());
    std::string jsonl;
    for (int r = 0; r < 64; ++r) {
      std::vector<int32_t> ids;
      for (int w = 0; w < 48; ++w) ids.push_back(3 + static_cast<int32_t>(rng() % 378));
      jsonl += nlohmann::json{{"text", tokenizer.decode(ids, true)}}.dump() + "\n";
    }
    test::write_file(root_ + "/rows.jsonl", jsonl);
    const auto r = test::run_command(test::eaglet_bin() + " extract -m " + echo_target() + " --data " + root_ +
                                     "/rows.jsonl --out " + root_ + "/data --draft-vocab 384 -t 2 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string data_dir() { return root_ + "/data"; }
  static std::string train(const std::string& out, const std::string& flags, const std::string& env = "",
                           test::CommandResult* result = nullptr) {
    const auto r = test::run_command(env + " " + test::eaglet_bin() + " train-draft -m " + echo_target() + " --data " +
                                     data_dir() + " --out " + out + " " + flags);
    if (result != nullptr) *result = r;
    return r.err;
  }
  static std::string root_;
};
std::string TrainDraftTest::root_;

struct Rig {
  std::unique_ptr<Transformer> target;
  ExtractedData data;
  std::unique_ptr<DraftNet> net;
  std::unique_ptr<Teacher> teacher;
};

Rig make_setup(const std::string& data_dir, const std::string& config_dir) {
  Rig s{Transformer::load(echo_target()), ExtractedData::open(data_dir), nullptr, nullptr};
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.data.d2t().size(); ++i)
    ids.push_back(static_cast<int32_t>(static_cast<int64_t>(i) + s.data.d2t()[i]));
  const LayerShape layer =
      choose_draft_layer(s.target->config(), "", s.data.aux_layers(), static_cast<int64_t>(ids.size())).shape;
  write_new_drafter_config(config_dir, s.target->config(), layer, s.data.aux_layers(),
                           static_cast<int64_t>(ids.size()));
  const TensorView& e = s.target->embed_tokens();
  const torch::Tensor embed = torch::tensor(to_f32(&e), torch::kFloat32).reshape(e.shape);
  const WeightMatrix& h = s.target->lm_head();
  TensorView hv{"",
                h.dtype,
                {h.rows, h.cols},
                static_cast<const std::byte*>(h.data),
                static_cast<size_t>(h.rows * h.cols) * dtype_size(h.dtype),
                ""};
  const torch::Tensor head = torch::tensor(to_f32(&hv), torch::kFloat32).reshape({h.rows, h.cols});
  s.net = std::make_unique<DraftNet>(DrafterConfig::load(config_dir), 3, embed);
  init_draft_net(*s.net, head, ids, 3);
  s.teacher = std::make_unique<Teacher>(s.target->final_norm(), s.target->config().rms_norm_eps, h, ids);
  return s;
}

TEST_F(TrainDraftTest, OneStepTrainsEveryTensor) {
  Rig s = make_setup(data_dir(), test::temp_dir("train_one_step"));
  const std::vector<SequenceRef> seqs = s.data.sequences(64);
  ASSERT_GE(seqs.size(), 2u);
  const TttBatch batch = make_ttt_batch(s.data, *s.teacher, {seqs[0], seqs[1]});
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, t] : s.net->params()) before[name] = t.detach().clone();
  torch::optim::AdamW opt(s.net->param_list(), torch::optim::AdamWOptions(1e-3));
  const TttResult r = ttt_loss(*s.net, batch, 3, 0.8);
  r.loss.backward();
  opt.step();
  ASSERT_EQ(s.net->params().size(),
            13u);  // fc, 10 layer tensors (hidden_norm included), norm, lm_head; embed is frozen
  for (const auto& [name, t] : s.net->params()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    EXPECT_GT(t.grad().abs().sum().item<double>(), 0.0) << name << " got no gradient";
    EXPECT_GT((t.detach() - before[name]).abs().max().item<double>(), 0.0) << name << " did not change";
  }
}

TEST_F(TrainDraftTest, LossEqualsIndependentPyTorchComputation) {
  const std::string dir = test::temp_dir("train_oracle");
  Rig s = make_setup(data_dir(), dir);
  std::vector<SequenceRef> seqs = s.data.sequences(20);
  ASSERT_GE(seqs.size(), 3u);
  seqs.resize(3);
  seqs[1].length = 13;  // padding inside the batch
  // The oracle reads the official padded layout; eaglet trains on the packed one.
  TttBatch b = make_ttt_batch(s.data, *s.teacher, seqs, 1, BatchLayout::Padded);
  TttBatch packed = make_ttt_batch(s.data, *s.teacher, seqs, 8);
  ASSERT_EQ(packed.ids.size(0), 1);
  ASSERT_EQ(packed.starts.size(), 4u);  // three sequences and the padding to a multiple of 8
  // Targets outside the draft vocabulary (every 5th position): trained but not counted, as with a real draft vocab.
  // A prompt of 8 untrained tokens in each sequence: no TTT step after the first counts its start, so those steps
  // compute only the other positions of the packed batch.
  for (TttBatch* x : {&b, &packed}) {
    x->teacher_argmax.masked_fill_(x->index_in_sequence.remainder(5).eq(2) & x->left.gt(0), -1);
    x->mask.masked_fill_(x->index_in_sequence.lt(8), 0.0);
  }
  const int steps = 4;
  {  // a drafter that hits some targets, so that accuracy is compared on non-zero counts
    torch::optim::AdamW opt(s.net->param_list(), torch::optim::AdamWOptions(3e-3));
    for (int i = 0; i < 30; ++i) {
      opt.zero_grad();
      ttt_loss(*s.net, packed, steps, 0.8).loss.backward();
      opt.step();
    }
  }
  const TttResult mine = ttt_loss(*s.net, packed, steps, 0.8);
  const TttResult counted = ttt_loss(*s.net, packed, steps, 0.8, LossNorm::Counted);
  {  // packing changes neither the loss nor its gradients
    const auto gradients = [&](const TttBatch& x) {
      for (torch::Tensor& p : s.net->param_list()) p.mutable_grad() = torch::Tensor();
      const TttResult r = ttt_loss(*s.net, x, steps, 0.8);
      r.loss.backward();
      std::vector<torch::Tensor> g = {r.loss.detach()};
      for (const torch::Tensor& p : s.net->param_list()) g.push_back(p.grad().clone());
      return g;
    };
    const std::vector<torch::Tensor> padded = gradients(b), from_packed = gradients(packed);
    for (size_t i = 0; i < padded.size(); ++i)
      EXPECT_LT((from_packed[i] - padded[i]).abs().max().item<double>(),
                1e-4 * padded[i].abs().max().item<double>() + 1e-9)
          << (i == 0 ? "the loss" : "the gradient of parameter " + std::to_string(i - 1));
  }

  std::vector<torch::Tensor> keep;
  std::vector<TensorToWrite> out;
  const auto add = [&](const std::string& name, const torch::Tensor& t, DType dtype) {
    keep.push_back(t.detach().contiguous());
    out.push_back({name, dtype, keep.back().sizes().vec(), keep.back().data_ptr()});
  };
  for (const auto& [name, t] : s.net->params()) add(name, t, DType::F32);
  const TensorView& e = s.target->embed_tokens();
  add("embed", torch::tensor(to_f32(&e), torch::kFloat32).reshape(e.shape), DType::F32);
  add("ids", b.ids, DType::I64);
  add("mask", b.mask, DType::F32);
  add("aux", b.aux, DType::F32);
  add("teacher", b.teacher, DType::F32);
  add("teacher_argmax", b.teacher_argmax, DType::I64);
  write_safetensors(dir + "/case.safetensors", out);
  const nlohmann::json target_config = read_json_file(echo_target() + "/config.json");
  const DrafterConfig& c = s.net->config();
  test::write_file(
      dir + "/case.json",
      nlohmann::json{
          {"num_heads", c.num_heads},
          {"num_kv_heads", c.num_kv_heads},
          {"head_dim", c.head_dim},
          {"rms_norm_eps", c.rms_norm_eps},
          {"steps", steps},
          {"decay", 0.8},
          {"rope", {{"rope_theta", target_config["rope_theta"]}, {"rope_scaling", target_config["rope_scaling"]}}}}
          .dump());
  const auto r = test::run_command("cd " + test::oracle_dir() + " && " + test::python_bin() + " ttt_reference.py " +
                                   dir + "/case.safetensors " + dir + "/case.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json ref = nlohmann::json::parse(r.out);
  const double ref_loss = ref["loss"].get<double>();
  EXPECT_NEAR(mine.loss.item<double>(), ref_loss, 1e-4 * std::abs(ref_loss));
  for (size_t k = 0; k < static_cast<size_t>(steps); ++k) {
    const TttStep& m = mine.steps[k];
    EXPECT_EQ(m.counted, ref["step_count"][k].get<int64_t>()) << "step " << k;
    EXPECT_EQ(m.trained, ref["step_trained"][k].get<int64_t>()) << "step " << k;
    EXPECT_LT(m.counted, m.trained) << "step " << k << ": the case must have targets outside the draft vocabulary";
    EXPECT_LT(m.trained, m.positions) << "step " << k << ": the case must have untrained positions";
    EXPECT_NEAR(m.loss, ref["step_loss"][k].get<double>(), 1e-4 * ref["step_loss"][k].get<double>()) << "step " << k;
    EXPECT_NEAR(m.acc, ref["step_acc"][k].get<double>(), 1e-9) << "step " << k;
  }
  // The former normalisation (over counted positions) is not the official one, and the oracle sees the difference.
  EXPECT_GT(std::abs(counted.loss.item<double>() - ref_loss), 0.1 * ref_loss);
  for (size_t k = 0; k < static_cast<size_t>(steps); ++k) {
    const TttStep& c = counted.steps[k];
    EXPECT_GT(c.hits, 0) << "step " << k;
    EXPECT_NEAR(c.loss * static_cast<double>(c.counted), mine.steps[k].loss * static_cast<double>(c.positions),
                1e-4 * c.cross_entropy);
    EXPECT_GT(static_cast<double>(c.hits) / static_cast<double>(c.counted), ref["step_acc"][k].get<double>())
        << "hits over counted positions overstate acc_k wherever targets fall outside the draft vocabulary";
  }
}

TEST_F(TrainDraftTest, ShortRunLearnsAndServes) {
  const std::string out = test::temp_dir("train_short") + "/drafter";
  test::CommandResult r;
  const std::string err = train(out,
                                "--steps 150 --batch 4 --max-length 64 --ttt-steps 3 --lr 3e-3 --holdout 0.1 "
                                "--eval-prompts 6 --eval-prompt-tokens 16 --eval-max-tokens 32 --log-every 50 -t 2",
                                "", &r);
  ASSERT_EQ(r.exit_code, 0) << err;
  EXPECT_THAT(err, HasSubstr("one network: served drafter vs libtorch drafter"));
  const nlohmann::json record = read_json_file(out + "/eaglet_training.json");
  EXPECT_EQ(record["format"], "eaglet-training/1");
  EXPECT_GT(record["acc"][0].get<double>(), 0.5) << "chance is 1/384";
  double tree = 0;
  for (const auto& s : record["served"]) {
    EXPECT_TRUE(s["identical_to_plain"].get<bool>());
    if (s["setting"] == "5,4,8") tree = s["accept_len"].get<double>();
  }
  EXPECT_GT(tree, 1.5) << record.dump();

  // Served by generate as trained, and the same after conversion to the speculators layout.
  const std::string prompt = " --temp 0 -n 24 -p 'def value items' --speculative-policy static ";  // same drafts
  const auto a =
      test::run_command(test::eaglet_bin() + " generate -m " + echo_target() + " -d " + out + prompt + "--compare");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto conv = test::run_command(test::eaglet_bin() + " convert-draft -m " + echo_target() + " -d " + out +
                                      " --format speculators --out " + out + "-spec");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  const auto b =
      test::run_command(test::eaglet_bin() + " generate -m " + echo_target() + " -d " + out + "-spec" + prompt);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const std::regex accept("accept len: ([0-9.]+)");
  std::smatch ma, mb;
  ASSERT_TRUE(std::regex_search(a.err, ma, accept)) << a.err;
  ASSERT_TRUE(std::regex_search(b.err, mb, accept)) << b.err;
  EXPECT_EQ(ma[1], mb[1]);
}

std::string file_sha256(const std::string& path) {
  const auto r = test::run_command("sha256sum " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(0, 64);
}

// The kept drafter: chosen on the selection prompts, recorded on others, checked as one network when kept, and kept
// through later worse evaluations, a resume included (a resumed run at a destructive learning rate).
TEST_F(TrainDraftTest, BestDrafterIsKeptAndRecordedOnOtherPrompts) {
  const std::string out = test::temp_dir("train_kept") + "/d";
  const std::string flags =
      " --batch 4 --max-length 64 --ttt-steps 2 --holdout 0.1 --eval-every 40 --eval-prompts 3 "
      "--eval-prompt-tokens 16 --eval-max-tokens 24 --log-every 40 -t 2";
  test::CommandResult r;
  std::string log = train(out, "--steps 80 --lr 3e-3" + flags, "", &r);
  ASSERT_EQ(r.exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("3 choose the kept drafter, 3 others give its recorded figures"));
  const nlohmann::json kept = read_json_file(out + "/eaglet_training.json");
  EXPECT_NE(kept["report"]["prompts_sha256"], kept["selection"]["prompts_sha256"]);
  ASSERT_EQ(kept["report"]["prompt_token_ids"].size(), 3u);
  EXPECT_THAT(log, HasSubstr("served prompts of " + std::to_string(kept["report"]["prompt_token_ids"][0].size()) +
                             " held-out tokens"));
  EXPECT_EQ(kept["selection"]["prompts"], 3);
  EXPECT_LE(kept["one_network_error"].get<double>(), 0.02);
  EXPECT_EQ(kept["model_sha256"], file_sha256(out + "/model.safetensors"));
  const double chosen = kept["selection"]["served"][1]["accept_len"].get<double>();
  EXPECT_GT(chosen, 1.3) << kept.dump();
  EXPECT_GT(kept["served"][1]["accept_len"].get<double>(), 1.3) << kept.dump();
  EXPECT_NE(kept["served"][1]["accept_len"], kept["selection"]["served"][1]["accept_len"])
      << "the report prompts give their own figure";
  // doctor decodes the record's own prompts and finds its figures again, to the printed digit.
  const auto doc = test::run_command(test::eaglet_bin() + " doctor -m " + echo_target() + " -d " + out);
  EXPECT_THAT(doc.out, HasSubstr("PASS  prompts "));
  for (const char* check : {"served vs training chain 4/1/5", "served vs training tree 5/4/8", "step-0 accuracy"}) {
    const std::regex figures(std::string("PASS  ") + check +
                             " +[^\\n]* ([0-9.]+)( now| over [0-9]+ positions) vs ([0-9.]+) ");
    std::smatch f;
    ASSERT_TRUE(std::regex_search(doc.out, f, figures)) << check << "\n" << doc.out;
    EXPECT_EQ(f[1], f[3]) << check;
  }

  // Resumed at a learning rate that wrecks the weights: the evaluation at step 120 is worse, the kept drafter stays.
  log = train(out, "--resume --steps 120 --lr 5 --warmup 0" + flags, "", &r);
  ASSERT_EQ(r.exit_code, 0) << log;
  const std::regex worse("eval step 120: [^\\n]*selection accept len [0-9,]+ [0-9.]+, 5,4,8 ([0-9.]+)\\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, worse)) << log;
  EXPECT_LT(std::stod(m[1]), chosen);
  EXPECT_EQ(read_json_file(out + "/eaglet_training.json"), kept);
  EXPECT_EQ(file_sha256(out + "/model.safetensors"), kept["model_sha256"]);
  const nlohmann::json state = read_json_file(out + "/train-state/state.json");
  EXPECT_EQ(state["best_step"], kept["step"]);
  EXPECT_EQ(state["step"], 120);
}

std::map<int, double> step_losses(const std::string& log) {
  std::map<int, double> out;
  const std::regex line("step ([0-9]+)/[0-9]+ loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = std::stod((*it)[2]);
  return out;
}

TEST_F(TrainDraftTest, KilledRunResumesIntoTheUninterruptedOne) {
  const std::string flags =
      "--steps 8 --batch 3 --max-length 48 --ttt-steps 2 --save-every 3 --log-every 1 "
      "--eval-prompts 2 --eval-max-tokens 8 -t 1";
  const std::string whole = test::temp_dir("train_whole") + "/d", killed = test::temp_dir("train_killed") + "/d";
  test::CommandResult r;
  const std::map<int, double> expected = step_losses(train(whole, flags, "", &r));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(expected.size(), 8u);
  train(killed, flags, "EAGLET_TRAIN_KILL_AT_STEP=5", &r);
  EXPECT_EQ(r.exit_code, 137);
  const std::string resumed_log = train(killed, flags + " --resume", "", &r);
  ASSERT_EQ(r.exit_code, 0) << resumed_log;
  EXPECT_THAT(resumed_log, HasSubstr("resumed at step 3 of 8"));
  const std::map<int, double> resumed = step_losses(resumed_log);
  ASSERT_EQ(resumed.size(), 5u);  // steps 4..8 again: the ones after the last checkpoint
  for (const auto& [step, loss] : resumed) EXPECT_NEAR(loss, expected.at(step), 1e-4) << "step " << step;
}

// Data-parallel (c10d, Gloo, loopback): 2 processes, each on half of every global batch, give the losses of 1 process
// on the whole batch (fp32: bf16 kernels of other shapes round otherwise), and a 2-process run killed and resumed,
// by 2 processes or by 1, continues into the uninterrupted run.
TEST_F(TrainDraftTest, TwoProcessesTrainAsOneAndResume) {
  const std::string flags =
      "--steps 8 --batch 4 --max-length 48 --ttt-steps 2 --save-every 3 --log-every 1 --eval-prompts 2 "
      "--eval-max-tokens 8 --bf16 false";
  const std::string dir = test::temp_dir("train_two_processes");
  test::CommandResult r;
  const std::map<int, double> one = step_losses(train(dir + "/one", flags + " -t 2", "", &r));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(one.size(), 8u);
  const std::string log = train(dir + "/two", flags + " --nproc 2", "", &r);
  ASSERT_EQ(r.exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("train-draft: 2 processes at tcp://127.0.0.1:"));
  const std::map<int, double> two = step_losses(log);
  ASSERT_EQ(two.size(), 8u) << "rank 0 alone reports the (summed) losses\n" << log;
  for (const auto& [step, loss] : two) EXPECT_NEAR(loss, one.at(step), 1e-4) << "step " << step;
  EXPECT_TRUE(fs::exists(dir + "/two/model.safetensors"));

  for (const std::string resume : {" --nproc 2", " -t 2"}) {
    const std::string killed = dir + "/killed" + std::to_string(resume.size());
    train(killed, flags + " --nproc 2", "EAGLET_TRAIN_KILL_AT_STEP=5", &r);
    EXPECT_EQ(r.exit_code, 137) << r.err;
    const std::string resumed_log = train(killed, flags + resume + " --resume", "", &r);
    ASSERT_EQ(r.exit_code, 0) << resumed_log;
    EXPECT_THAT(resumed_log, HasSubstr("resumed at step 3 of 8"));
    const std::map<int, double> resumed = step_losses(resumed_log);
    ASSERT_EQ(resumed.size(), 5u) << resumed_log;
    for (const auto& [step, loss] : resumed) EXPECT_NEAR(loss, one.at(step), 1e-4) << "step " << step << resume;
  }
}

TEST_F(TrainDraftTest, DataParallelFlagsAreChecked) {
  const std::string dir = test::temp_dir("train_dp_flags");
  test::CommandResult r;
  EXPECT_THAT(train(dir + "/a", "--steps 2 --world-size 2 --rank 1", "", &r), HasSubstr("needs --dist-url"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(train(dir + "/b", "--steps 2 --world-size 2 --rank 1 --dist-url http://127.0.0.1:1", "", &r),
              HasSubstr("expected tcp://HOST:PORT"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(train(dir + "/c", "--steps 2 --nproc 2 --loss-norm counted", "", &r),
              HasSubstr("--loss-norm counted divides by counts only the whole batch knows"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(train(dir + "/e", "--steps 2 --profile " + dir + "/absent/trace", "", &r), HasSubstr("cannot write"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(train(dir + "/d", "--steps 2 --nproc 4 --batch 2", "", &r),
              HasSubstr("at least one sequence per process"));
  EXPECT_NE(r.exit_code, 0);
}

// --online: the target's forward feeds the batches through extraction's capture path, so the losses are the offline
// run's on the same rows (states rounded to bf16 on both sides: equal up to float summation order, 1e-4), and a
// killed online run resumes into the uninterrupted one.
TEST_F(TrainDraftTest, OnlineRunEqualsOfflineAndResumes) {
  const std::string flags =
      "--steps 4 --batch 3 --max-length 48 --ttt-steps 2 --save-every 2 --log-every 1 "
      "--eval-prompts 2 --eval-max-tokens 8 -t 1";
  const std::string online = " --online --draft-vocab 384 --data " + root_ + "/rows.jsonl";
  const std::string dir = test::temp_dir("train_online");
  test::CommandResult r;
  const std::map<int, double> offline = step_losses(train(dir + "/offline", flags, "", &r));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(offline.size(), 4u);
  const auto run_online = [&](const std::string& out, const std::string& more, const std::string& env) {
    r = test::run_command(env + " " + test::eaglet_bin() + " train-draft -m " + echo_target() + " --out " + out +
                          online + " " + flags + more);
    return r.err;
  };
  const std::string log = run_online(dir + "/online", "", "");
  ASSERT_EQ(r.exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("train-draft: online from "));
  const std::map<int, double> whole = step_losses(log);
  ASSERT_EQ(whole.size(), 4u);
  for (const auto& [step, loss] : whole) EXPECT_NEAR(loss, offline.at(step), 1e-4) << "step " << step;
  run_online(dir + "/killed", "", "EAGLET_TRAIN_KILL_AT_STEP=3");
  EXPECT_EQ(r.exit_code, 137);
  const std::string resumed_log = run_online(dir + "/killed", " --resume", "");
  ASSERT_EQ(r.exit_code, 0) << resumed_log;
  EXPECT_THAT(resumed_log, HasSubstr("resumed at step 2 of 4"));
  const std::map<int, double> resumed = step_losses(resumed_log);
  ASSERT_EQ(resumed.size(), 2u);
  for (const auto& [step, loss] : resumed) EXPECT_NEAR(loss, whole.at(step), 1e-4) << "step " << step;
  run_online(dir + "/bad", " --data-format specforge", "");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--online reads a JSONL file"));
}

// --draft-config chooses the layer (here other heads, MLP width and RoPE than the Llama target's own): written to
// config.json, recorded, served; a resume with another layer is refused naming both.
TEST_F(TrainDraftTest, DraftConfigChoosesTheLayerAndAResumeKeepsIt) {
  const std::string dir = test::temp_dir("train_draft_config");
  nlohmann::json layer = {{"architectures", {"LlamaForCausalLMEagle3"}},
                          {"model_type", "llama"},
                          {"hidden_size", 64},
                          {"num_attention_heads", 2},
                          {"num_key_value_heads", 1},
                          {"head_dim", 16},
                          {"intermediate_size", 48},
                          {"num_hidden_layers", 1},
                          {"rms_norm_eps", 1e-5},
                          {"rope_theta", 1000000},
                          {"rope_scaling", nullptr},
                          {"vocab_size", 384}};
  test::write_file(dir + "/draft.json", layer.dump());
  const std::string flags =
      "--steps 4 --batch 2 --max-length 48 --ttt-steps 2 --save-every 2 --eval-prompts 2 "
      "--eval-max-tokens 8 -t 2 --draft-config " +
      dir + "/draft.json";
  test::CommandResult r;
  const std::string log = train(dir + "/d", flags, "EAGLET_TRAIN_KILL_AT_STEP=3", &r);
  EXPECT_EQ(r.exit_code, 137) << log;
  EXPECT_THAT(log,
              HasSubstr("drafter layer hidden 64, 2 heads x 16 (1 KV), intermediate 48, rope_theta 1e+06, eps 1e-05: "
                        "--draft-config " +
                        dir + "/draft.json"));
  layer["intermediate_size"] = 64;
  test::write_file(dir + "/other.json", layer.dump());
  const std::string other = train(dir + "/d",
                                  "--resume --steps 4 --batch 2 --max-length 48 --ttt-steps 2 -t 2 "
                                  "--draft-config " +
                                      dir + "/other.json",
                                  "", &r);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(other, HasSubstr("the checkpoint's drafter layer is \"hidden 64, 2 heads x 16 (1 KV), intermediate 48"));
  const std::string resumed = train(dir + "/d", flags + " --resume", "", &r);
  ASSERT_EQ(r.exit_code, 0) << resumed;
  EXPECT_THAT(resumed, HasSubstr("resumed at step 2 of 4"));
  const nlohmann::json config = read_json_file(dir + "/d/config.json");
  EXPECT_EQ(config["num_attention_heads"], 2);
  EXPECT_EQ(config["num_key_value_heads"], 1);
  EXPECT_EQ(config["intermediate_size"], 48);
  EXPECT_EQ(config["rope_theta"], 1e6);
  EXPECT_EQ(config["rope_scaling"], nullptr);
  EXPECT_THAT(read_json_file(dir + "/d/eaglet_training.json")["draft_layer"]["origin"].get<std::string>(),
              HasSubstr("--draft-config"));
  const auto g = test::run_command(test::eaglet_bin() + " generate -m " + echo_target() + " -d " + dir +
                                   "/d -n 16 -p 'def value items' --compare");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_THAT(g.err, HasSubstr("outputs identical"));
}

TEST_F(TrainDraftTest, RefusesWhatCannotBeTrained) {
  test::CommandResult r;
  const std::string dir = test::temp_dir("train_refuse");
  EXPECT_THAT(train(dir + "/a", "--resume --steps 2", "", &r), HasSubstr("no checkpoint to resume"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(train(dir + "/b", "--steps 2 --check-tolerance 0", "", &r), HasSubstr("computes something else"));
  EXPECT_EQ(r.exit_code, 1);
  const auto other =
      test::run_command(test::eaglet_bin() + " train-draft -m " + test::fixtures_dir() +
                        "/drafters/targets/smallvocab_fp32 --data " + data_dir() + " --out " + dir + "/c");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.err, HasSubstr("extracted from another target"));
  const auto missing = test::run_command(test::eaglet_bin() + " train-draft -m " + echo_target() + " --data " + dir +
                                         " --out " + dir + "/d");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("not a folder written by `eaglet extract`"));
  // The same shape, other weights (one bf16 value of the head changed): the features are another model's.
  const std::string copy = dir + "/echo_copy";
  fs::copy(echo_target(), copy, fs::copy_options::recursive);
  std::string weights = test::read_file(copy + "/model.safetensors");
  weights[weights.size() - 3] ^= 0x01;
  test::write_file(copy + "/model.safetensors", weights);
  const auto retrained = test::run_command(test::eaglet_bin() + " train-draft -m " + copy + " --data " + data_dir() +
                                           " --out " + dir + "/e");
  EXPECT_EQ(retrained.exit_code, 1);
  EXPECT_THAT(retrained.err, AllOf(HasSubstr("extracted from another checkpoint than " + copy),
                                   HasSubstr("target fingerprint"), HasSubstr(echo_target())));
}

}  // namespace
}  // namespace eaglet
