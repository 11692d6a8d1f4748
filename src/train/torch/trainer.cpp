#include "train/torch/trainer.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <sstream>

#include "drafter/eagle3_export.h"
#include "drafter/speculation.h"
#include "io/files.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "kernels/dtype.h"
#include "model/block.h"
#include "model/transformer.h"
#include "train/draft_layer.h"
#include "train/online_data.h"
#include "train/served_eval.h"
#include "train/torch/distributed.h"
#include "train/torch/draft_net.h"
#include "train/torch/dump_data.h"
#include "train/torch/ttt.h"
#include "util/error.h"
#include "util/int_list.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int64_t kProfiledSteps = 3;

torch::Tensor matrix_f32(const WeightMatrix& w) {  // dense or quantized, as fp32
  std::vector<float> values(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, &values[static_cast<size_t>(r * w.cols)]);
  return torch::tensor(values, torch::kFloat32).reshape({w.rows, w.cols});
}

torch::Tensor view_f32(const TensorView& v) { return torch::tensor(to_f32(&v), torch::kFloat32).reshape(v.shape); }

}  // namespace

void write_new_drafter_config(const std::string& dir, const ModelConfig& t, const LayerShape& layer,
                              const std::vector<int>& aux, int64_t draft_vocab) {
  const DrafterConfig c = new_drafter_config(layer, t, draft_vocab);
  create_output_dir(dir);
  write_file_atomic((fs::path(dir) / "config.json").string(),
                    sglang_drafter_config(c, aux, t, DType::BF16).dump(2) + "\n");
}

namespace {

// bf16 autocast of CPU matmuls for one scope (libtorch's own rule list decides which ops run in bf16).
class AutocastGuard {
 public:
  explicit AutocastGuard(bool on) : was_(at::autocast::is_cpu_enabled()) {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(on);
  }
  ~AutocastGuard() {
    at::autocast::set_cpu_enabled(was_);
    at::autocast::clear_cache();
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool was_;
};

// model.safetensors of the net (bf16) with the vocabulary maps, beside its config.json.
void write_weights(const std::string& dir, const DraftNet& net, const TrainingData& data) {
  std::vector<std::vector<uint16_t>> bytes;
  std::vector<TensorToWrite> out;
  for (const auto& [name, t] : net.params()) {
    const torch::Tensor c = t.detach().contiguous();
    std::vector<uint16_t> b(static_cast<size_t>(c.numel()));
    const float* p = c.data_ptr<float>();
    for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(p[i]);
    bytes.push_back(std::move(b));
    out.push_back({name, DType::BF16, c.sizes().vec(), bytes.back().data()});
  }
  out.push_back({"d2t", DType::I64, {static_cast<int64_t>(data.d2t().size())}, data.d2t().data()});
  out.push_back({"t2d", DType::BOOL, {static_cast<int64_t>(data.t2d().size())}, data.t2d().data()});
  write_safetensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}, {"eaglet", "train-draft"}});
}

// The order of training sequences: a fresh shuffle per epoch from the seed, so step s always sees the same batch
// (a resumed run repeats and skips nothing).
class Order {
 public:
  Order(size_t n, uint64_t seed) : n_(n), seed_(seed) {}
  size_t at(uint64_t i) {
    const uint64_t epoch = i / n_;
    if (epoch != epoch_ || perm_.empty()) {
      perm_.resize(n_);
      for (size_t k = 0; k < n_; ++k) perm_[k] = k;
      std::mt19937_64 rng(seed_ * 1000003ull + epoch);
      for (size_t k = n_; k > 1; --k) std::swap(perm_[k - 1], perm_[rng() % k]);  // Fisher-Yates, portable
      epoch_ = epoch;
    }
    return perm_[i % n_];
  }

 private:
  size_t n_;
  uint64_t seed_, epoch_ = 0;
  std::vector<size_t> perm_;
};

// Held-out figures over all held-out sequences, from the summed counts (train/torch/ttt.h): loss and acc the
// official way; acc_in_vocab over the positions whose target is in the draft vocabulary only.
struct HeldOut {
  std::vector<double> loss, acc, acc_in_vocab;
};

HeldOut evaluate(const DraftNet& net, const TrainingData& data, const Teacher& teacher,
                 const std::vector<SequenceRef>& held, int steps, double decay, int batch) {
  torch::NoGradGuard no_grad;
  std::vector<TttStep> total(static_cast<size_t>(steps));
  for (size_t i = 0; i < held.size(); i += static_cast<size_t>(batch)) {
    const std::vector<SequenceRef> seqs(
        held.begin() + static_cast<long>(i),
        held.begin() + static_cast<long>(std::min(held.size(), i + static_cast<size_t>(batch))));
    const TttResult r = ttt_loss(net, make_ttt_batch(data, teacher, seqs), steps, decay);
    for (size_t k = 0; k < total.size(); ++k) {
      total[k].cross_entropy += r.steps[k].cross_entropy;
      total[k].hits += r.steps[k].hits;
      total[k].counted += r.steps[k].counted;
      total[k].trained += r.steps[k].trained;
      total[k].positions += r.steps[k].positions;
    }
  }
  const auto ratio = [](double a, int64_t b) { return b > 0 ? a / static_cast<double>(b) : 0.0; };
  HeldOut h;
  for (const TttStep& t : total) {
    h.loss.push_back(ratio(t.cross_entropy, t.positions));
    h.acc.push_back(ratio(static_cast<double>(t.hits), t.trained));
    h.acc_in_vocab.push_back(ratio(static_cast<double>(t.hits), t.counted));
  }
  return h;
}

// One network: the exported weights, loaded by the serving loader and run by the serving forward, against the
// libtorch net with the same (bf16) weights, on step 0 of a held-out sequence and one drafted step after it.
// Returns max |difference| / (1 + max |logit|).
double check_one_network(const DraftNet& net, const std::string& dir, Transformer& target, const TrainingData& data,
                         const SequenceRef& seq) {
  torch::NoGradGuard no_grad;
  DraftNet rounded = net;
  for (auto& [name, t] : rounded.params()) t = t.detach().to(torch::kBFloat16).to(torch::kFloat32);
  const int64_t n = std::min<int64_t>(32, seq.length - 2),
                W = static_cast<int64_t>(data.aux_layers().size()) * data.hidden_size();
  if (n < 1) fail("train-draft: the held-out sequence for the one-network check is too short");
  std::vector<int64_t> ids(static_cast<size_t>(n + 2));
  std::vector<float> aux(static_cast<size_t>((n + 2) * W));
  data.read(seq, 0, n + 2, ids.data(), nullptr, aux.data(), nullptr);

  auto served = Speculation::load_drafter(dir, {}, target);
  KVCache cache = served->make_cache(n + 1);
  std::vector<int32_t> tokens, positions;
  for (int64_t t = 0; t < n; ++t) {
    tokens.push_back(static_cast<int32_t>(ids[static_cast<size_t>(t + 1)]));
    positions.push_back(static_cast<int32_t>(t));
  }
  served->forward(cache, tokens, aux.data(), Eagle3Drafter::Input::TargetAux, positions, {}, true);
  cache.commit_all();
  const int64_t Vd = served->config().draft_vocab_size, H = served->config().hidden_size;
  std::vector<float> served_logits(static_cast<size_t>(n * Vd));
  std::copy(served->logits_row(0), served->logits_row(0) + n * Vd, served_logits.begin());
  const std::vector<float> last_hidden(served->h_next_row(n - 1), served->h_next_row(n - 1) + H);
  const int32_t next = static_cast<int32_t>(ids[static_cast<size_t>(n + 1)]), next_pos = static_cast<int32_t>(n);
  served->forward(cache, {&next, 1}, last_hidden.data(), Eagle3Drafter::Input::OwnHidden, {&next_pos, 1}, {}, true);
  const std::vector<float> served_step1(served->logits_row(0), served->logits_row(0) + Vd);

  std::vector<DraftNet::StepKV> kv;
  const torch::Tensor ids_t = torch::tensor(ids, torch::kInt64).unsqueeze(0);
  const torch::Tensor aux_t = torch::tensor(aux, torch::kFloat32).reshape({1, n + 2, W}).narrow(1, 0, n);
  const torch::Tensor h0 = rounded.step(ids_t.narrow(1, 1, n), rounded.fuse(aux_t), 0, kv);
  const torch::Tensor h1 = rounded.step(ids_t.narrow(1, 2, n), h0, 1, kv);
  const torch::Tensor mine0 = rounded.logits(h0).reshape({n, Vd});
  const torch::Tensor mine1 = rounded.logits(h1)[0][n - 1];
  const torch::Tensor theirs0 = torch::tensor(served_logits, torch::kFloat32).reshape({n, Vd});
  const torch::Tensor theirs1 = torch::tensor(served_step1, torch::kFloat32);
  const double diff =
      std::max((mine0 - theirs0).abs().max().item<double>(), (mine1 - theirs1).abs().max().item<double>());
  const double scale = 1.0 + std::max(mine0.abs().max().item<double>(), mine1.abs().max().item<double>());
  return diff / scale;
}

std::string fmt_list(const std::vector<double>& v) {
  std::string s;
  char buf[16];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, "%s%.3f", s.empty() ? "" : " ", x);
    s += buf;
  }
  return s;
}

// Served prompts: windows of held-out sequences, alternately for choosing the kept drafter (selection) and for the
// figures recorded with it (report), so that the record is not measured on the prompts that chose it. Windows are
// `prompt_tokens` long, or half the longest held-out sequence when that is shorter; first windows of every sequence
// first.
struct PromptSet {
  std::vector<std::vector<int32_t>> prompts, plain;  // prompts and the target's own continuations
  std::string sha256;                                // of the prompts' ids, one line each
};

std::pair<PromptSet, PromptSet> held_out_prompts(const TrainingData& data, const std::vector<SequenceRef>& held,
                                                 size_t per_set, int64_t prompt_tokens) {
  int64_t longest = 0;
  for (const SequenceRef& q : held) longest = std::max(longest, q.length);
  const int64_t n = std::min(prompt_tokens, std::max<int64_t>(1, longest / 2));
  PromptSet sets[2];
  size_t next = 0;
  for (int64_t j = 0; (j + 1) * n <= longest; ++j)
    for (const SequenceRef& q : held) {
      if ((j + 1) * n > q.length) continue;
      if (sets[next].prompts.size() >= per_set) next = 1 - next;
      if (sets[next].prompts.size() >= per_set) return {std::move(sets[0]), std::move(sets[1])};
      std::vector<int64_t> ids(static_cast<size_t>((j + 1) * n));
      data.read(q, 0, (j + 1) * n, ids.data(), nullptr, nullptr, nullptr);
      sets[next].prompts.emplace_back(ids.begin() + static_cast<long>(j * n), ids.end());
      next = 1 - next;
    }
  return {std::move(sets[0]), std::move(sets[1])};
}

json served_json(const std::vector<ServedAcceptance>& served) {
  json out = json::array();
  for (const ServedAcceptance& a : served)
    out.push_back({{"setting", a.setting.setting()},
                   {"accept_len", a.accept_len},
                   {"per_depth", a.per_depth},
                   {"identical_to_plain", a.identical}});
  return out;
}

void require_lossless(const std::vector<ServedAcceptance>& served, const std::string& dir) {
  for (const ServedAcceptance& a : served)
    if (!a.identical)
      fail("train-draft: speculative output differs from the target's alone with ", dir, " (setting ",
           a.setting.setting(), "): a lossless-decoding bug, please report it");
}

void replace_dir(const fs::path& tmp, const fs::path& dest) {
  const fs::path old = dest.string() + ".old";
  fs::remove_all(old);
  if (path_exists(dest.string())) fs::rename(dest, old);
  fs::rename(tmp, dest);
  fs::remove_all(old);
}

}  // namespace

TrainSummary run_train_draft(const TrainOptions& o) {
  Timer timer;
  set_num_threads(o.threads);
  torch::set_num_threads(thread_pool().size());
  if (o.ttt_steps < 1 || o.ttt_steps > 32) fail("train-draft: --ttt-steps must be in [1, 32], found ", o.ttt_steps);
  if (o.batch < 1 || o.max_length < 4) fail("train-draft: --batch must be >= 1 and --max-length >= 4");
  if (o.select_setting >= o.eval_settings.size()) fail("train-draft: no evaluation setting to select by");
  if (!o.profile.empty()) {  // libtorch's profiler writes nothing, silently, where it cannot write
    const std::string first = strprintf("%s.step2", o.profile.c_str());
    if (!std::ofstream(first))
      fail("--profile ", o.profile, ": cannot write ", first, " (a missing or read-only folder?)");
  }
  const std::unique_ptr<DataParallel> dp = DataParallel::join(o.dist);
  if (dp->world() > 1) {
    if (o.batch < dp->world())
      fail("train-draft: --batch ", o.batch, " is the global batch; it needs at least one sequence per process (",
           dp->world(), ")");
    if (o.loss_norm == LossNorm::Counted)
      fail(
          "train-draft: --loss-norm counted divides by counts only the whole batch knows; use the official loss with "
          "several processes");
  }
  if (!dp->lead()) {  // rank 0 reports; the others say only what goes wrong
    const int rank = dp->rank();
    set_log_sink([rank](LogLevel level, const std::string& line) {
      if (level != LogLevel::Info) std::fprintf(stderr, "rank %d: %s\n", rank, line.c_str());
    });
  }
  auto target = Transformer::load(o.target_dir);
  const ModelConfig& tc = target->config();
  DataSourceOptions source = o.source;
  source.dir = o.data_dir;
  if (o.online &&
      (!source.format.empty() || !source.layers.empty() || !source.final_state.empty() || !source.loss_mask.empty()))
    fail("train-draft: --online reads a JSONL file through the target; --data-format and --dump-* describe files");
  OnlineOptions online;
  online.data_file = o.data_dir;
  online.draft_vocab = source.draft_vocab;
  online.aux_layers = o.online_aux_layers;
  if (!o.online && !o.online_aux_layers.empty())
    fail("train-draft: --layers chooses what --online captures; shards and dumps hold their own layers");
  const std::unique_ptr<TrainingData> data_ptr =
      o.online ? open_online_data(online, *target) : open_training_data(source, *target);
  const TrainingData& data = *data_ptr;
  const std::string manifest = data.dir();
  for (int a : data.aux_layers())
    if (a < 1 || a >= tc.num_layers)
      fail(manifest, ": aux layer ", a, " cannot be served (SGLang's ids name a layer's output: use ids in [1, ",
           tc.num_layers - 1, "])");

  // Sequences: every k-th held out (acc_k, served prompts, the one-network check), the rest trained.
  const std::vector<SequenceRef> all = data.sequences(o.max_length);
  std::vector<SequenceRef> train, held;
  const size_t every = std::min(all.size(), static_cast<size_t>(std::max(2.0, std::round(1.0 / o.holdout))));
  for (size_t i = 0; i < all.size(); ++i) (every > 0 && i % every == every - 1 ? held : train).push_back(all[i]);
  if (train.empty() || held.empty())
    fail(o.data_dir, ": ", all.size(), " sequences are too few to train on and hold out (", train.size(), " / ",
         held.size(), "); extract more rows or change --holdout");
  int64_t train_tokens = 0;
  for (const SequenceRef& q : train) train_tokens += q.length;
  const int64_t steps =
      o.steps > 0 ? o.steps
                  : std::max<int64_t>(
                        1, static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(train.size()) / o.batch)));

  // Only rank 0 writes OUT; another rank writes the drafter's config it reads back in a folder of its own.
  const fs::path out(o.out_dir), state_dir = out / "train-state";
  const fs::path candidate = dp->lead() ? out / ".candidate"
                                        : fs::temp_directory_path() / strprintf("eaglet-train-rank%d-%d", dp->rank(),
                                                                                static_cast<int>(getpid()));
  // Made (or refused: a file, a symlink loop, a path through a file, a read-only place) before any training.
  if (dp->lead()) create_output_dir(o.out_dir);
  std::vector<int32_t> draft_ids;
  for (size_t i = 0; i < data.d2t().size(); ++i)
    draft_ids.push_back(static_cast<int32_t>(static_cast<int64_t>(i) + data.d2t()[i]));
  const int64_t Vd = static_cast<int64_t>(draft_ids.size());
  fs::remove_all(candidate);
  const DraftLayer layer = choose_draft_layer(tc, o.draft_config, data.aux_layers(), Vd);
  log_info(strprintf("train-draft: drafter layer %s: %s", describe_layer(layer.shape).c_str(), layer.origin.c_str()));
  write_new_drafter_config(candidate.string(), tc, layer.shape, data.aux_layers(), Vd);
  const DrafterConfig config = DrafterConfig::load(candidate.string());  // the server's reading of what we write

  DraftNet net(config, static_cast<int64_t>(data.aux_layers().size()), view_f32(target->embed_tokens()));
  const torch::Tensor target_head = matrix_f32(target->lm_head());
  const Teacher teacher(target->final_norm(), tc.rms_norm_eps, target->lm_head(), draft_ids, data.final_normed());
  init_draft_net(net, target_head, draft_ids, o.seed);

  torch::optim::AdamW optimizer(net.param_list(),
                                torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay));
  int64_t step = 0;
  TrainSummary sum;
  json best_record = nullptr;
  if (o.resume) {
    // Rank 0 reads the checkpoint and sends its bytes: the other ranks need no shared folder.
    std::string state_text, params_bytes, optimizer_bytes;
    dp->on_lead([&] {
      if (!path_exists((state_dir / "state.json").string()))
        fail((state_dir / "state.json").string(), ": no checkpoint to resume (run without --resume to start)");
      require_regular_file((state_dir / "state.json").string());
      state_text = read_file((state_dir / "state.json").string());
      require_regular_file((state_dir / "params.pt").string());  // a FIFO would block a reader
      params_bytes = read_file((state_dir / "params.pt").string());
      require_regular_file((state_dir / "optimizer.pt").string());
      optimizer_bytes = read_file((state_dir / "optimizer.pt").string());
    });
    for (std::string* bytes : {&state_text, &params_bytes, &optimizer_bytes}) dp->broadcast(*bytes);
    const json st = json::parse(state_text, nullptr, false);
    if (!st.is_object()) fail((state_dir / "state.json").string(), ": not a JSON object (a torn or edited file?)");
    if (st.value("data", "") != fs::absolute(o.data_dir).lexically_normal().string() ||
        st.value("seed", 0ull) != o.seed || st.value("batch", 0) != o.batch ||
        st.value("max_length", 0ll) != o.max_length ||
        st.value("loss_norm", std::string("counted")) != loss_norm_name(o.loss_norm))
      fail((state_dir / "state.json").string(),
           ": the checkpoint was trained with other data, seed, batch, max length or --loss-norm (",
           st.value("loss_norm", std::string("counted")), "); resume with the same flags or start a new --out");
    if (st.contains("draft_layer") && st["draft_layer"] != describe_layer(layer.shape))
      fail((state_dir / "state.json").string(), ": the checkpoint's drafter layer is ", st["draft_layer"].dump(),
           ", this run's ", describe_layer(layer.shape), " (", layer.origin,
           "); resume with the same --draft-config or "
           "start a new --out");
    std::vector<torch::Tensor> saved;
    std::istringstream params_in(params_bytes), optimizer_in(optimizer_bytes);
    torch::load(saved, params_in);
    std::vector<torch::Tensor> mine = net.param_list();
    if (saved.size() != mine.size()) fail((state_dir / "params.pt").string(), ": holds another drafter's weights");
    for (size_t i = 0; i < mine.size(); ++i)
      if (saved[i].sizes() != mine[i].sizes() || saved[i].scalar_type() != torch::kFloat32)
        fail((state_dir / "params.pt").string(), ": weight ", i, " is ", saved[i].sizes(), ", expected float ",
             mine[i].sizes(), " (a checkpoint of another drafter shape; start a new --out)");
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(saved[i]);
    torch::load(optimizer, optimizer_in);
    step = st.value("step", 0ll);
    sum.best_accept_len = st.value("best_accept_len", 0.0);
    sum.best_step = st.value("best_step", -1ll);
    sum.tokens = st.value("tokens", 0ll);
    best_record = st.value("best_record", json(nullptr));
    log_info(strprintf("train-draft: resumed at step %lld of %lld from %s", static_cast<long long>(step),
                       static_cast<long long>(steps), state_dir.c_str()));
  }

  dp->broadcast(net.param_list());  // every rank starts from rank 0's weights

  log_info(
      strprintf("train-draft: %zu training sequences (%lld tokens), %zu held out; %lld steps of %d x <= %lld tokens, "
                "TTT %d steps, lr %g; draft vocabulary %lld, aux layers %s (HF hidden_states ids)",
                train.size(), static_cast<long long>(train_tokens), held.size(), static_cast<long long>(steps), o.batch,
                static_cast<long long>(o.max_length), o.ttt_steps, o.lr, static_cast<long long>(Vd),
                format_int_list(data.aux_layers(), " ").c_str()));

  dp->on_lead([&] {
    write_weights(candidate.string(), net, data);
    sum.check_error = check_one_network(net, candidate.string(), *target, data, held[0]);
    log_info(
        strprintf("train-draft: one network: served drafter vs libtorch drafter, max |dlogit| / (1 + max |logit|) "
                  "= %.2e (tolerance %.2e)",
                  sum.check_error, o.check_tolerance));
    if (!(sum.check_error <= o.check_tolerance))
      fail("train-draft: the served drafter computes something else than the trained one (relative logit difference ",
           sum.check_error, " > ", o.check_tolerance, "): a contract between trainer and server is broken");
  });

  PromptSet selection, report;
  dp->on_lead([&] {
    std::tie(selection, report) =
        held_out_prompts(data, held, static_cast<size_t>(o.eval_prompts), o.eval_prompt_tokens);
    if (selection.prompts.empty() || report.prompts.empty())
      fail(o.data_dir, ": the held-out sequences are too short for served prompts (", held.size(),
           " sequences); extract longer rows or raise --holdout");
    for (PromptSet* set : {&selection, &report}) {
      set->plain = plain_continuations(*target, set->prompts, o.eval_max_tokens);
      set->sha256 = sha256_token_lists(set->prompts);
    }
    log_info(
        strprintf("train-draft: served prompts of %zu held-out tokens: %zu choose the kept drafter, %zu others "
                  "give its recorded figures",
                  selection.prompts[0].size(), selection.prompts.size(), report.prompts.size()));
  });

  // Every evaluation: held-out acc_k and the selection prompts' served accept len. A better drafter is checked as one
  // network with the libtorch net, measured on the report prompts and kept in OUT with its record.
  const auto evaluate_and_keep = [&](int64_t at) {
    const HeldOut h = evaluate(net, data, teacher, held, o.ttt_steps, o.decay, o.batch);
    write_weights(candidate.string(), net, data);
    const std::vector<ServedAcceptance> chosen_by = measure_served_acceptance(
        *target, candidate.string(), selection.prompts, selection.plain, o.eval_settings, o.eval_max_tokens);
    require_lossless(chosen_by, candidate.string());
    std::string line;
    for (const ServedAcceptance& a : chosen_by)
      line += strprintf("%s%s %.2f", line.empty() ? "" : ", ", a.setting.setting().c_str(), a.accept_len);
    const double accept = chosen_by[o.select_setting].accept_len;
    const bool better = accept > sum.best_accept_len || sum.best_step < 0;
    if (!better) {
      log_info(strprintf("eval step %lld: held-out acc %s | selection accept len %s", static_cast<long long>(at),
                         fmt_list(h.acc).c_str(), line.c_str()));
      return;
    }
    const double check = check_one_network(net, candidate.string(), *target, data, held[0]);
    if (!(check <= o.check_tolerance))
      fail("train-draft: at step ", at,
           " the served drafter computes something else than the trained one (relative "
           "logit difference ",
           check, " > ", o.check_tolerance, "): a contract between trainer and server is broken");
    const std::vector<ServedAcceptance> reported = measure_served_acceptance(
        *target, candidate.string(), report.prompts, report.plain, o.eval_settings, o.eval_max_tokens);
    require_lossless(reported, candidate.string());
    const double step0 = [&] {
      std::vector<std::vector<int32_t>> sequences = report.prompts;
      for (size_t i = 0; i < sequences.size(); ++i)
        sequences[i].insert(sequences[i].end(), report.plain[i].begin(), report.plain[i].end());
      return teacher_forced_step0(*target, *Speculation::load_drafter(candidate.string(), {}, *target), sequences)
          .accuracy();
    }();
    json record = {{"format", "eaglet-training/1"},
                   {"step", at},
                   {"steps", steps},
                   {"acc", h.acc},
                   {"loss", h.loss},
                   {"acc_in_vocab", h.acc_in_vocab},
                   {"loss_norm", loss_norm_name(o.loss_norm)},
                   {"ttt_steps", o.ttt_steps},
                   {"data", fs::absolute(o.data_dir).lexically_normal().string()},
                   {"draft_layer", {{"shape", describe_layer(layer.shape)}, {"origin", layer.origin}}},
                   {"held_out_sequences", held.size()},
                   {"one_network_error", check},
                   {"model_sha256", sha256_file((candidate / "model.safetensors").string())},
                   {"served", served_json(reported)},
                   {"report",
                    {{"prompts_sha256", report.sha256},
                     {"max_tokens", o.eval_max_tokens},
                     {"step0_accuracy", step0},
                     {"prompt_token_ids", report.prompts}}},
                   {"selection",
                    {{"prompts_sha256", selection.sha256},
                     {"prompts", selection.prompts.size()},
                     {"setting", o.eval_settings[o.select_setting].setting()},
                     {"served", served_json(chosen_by)}}},
                   {"target",
                    {{"dir", tc.dir},
                     {"model_type", tc.model_type},
                     {"hidden_size", tc.hidden_size},
                     {"num_hidden_layers", tc.num_layers},
                     {"vocab_size", tc.vocab_size}}}};
    log_info(
        strprintf("eval step %lld: held-out acc %s | selection accept len %s (best: kept; one network %.1e; "
                  "report accept len %.2f)",
                  static_cast<long long>(at), fmt_list(h.acc).c_str(), line.c_str(), check,
                  reported[o.select_setting].accept_len));
    write_file_atomic((candidate / "eaglet_training.json").string(), record.dump(2) + "\n");
    sum.best_accept_len = accept;
    sum.report_accept_len = reported[o.select_setting].accept_len;
    sum.best_step = at;
    best_record = record;
    for (const char* f : {"config.json", "model.safetensors", "eaglet_training.json"})
      copy_file_atomic((candidate / f).string(), (out / f).string());  // whole or not at all (a full disk)
  };
  const auto save_state = [&]() {
    const fs::path tmp = out / "train-state.tmp";
    fs::remove_all(tmp);
    create_output_dir(tmp.string());
    // Written under temporary names, checked, renamed: a full disk is an Error naming the file, not a torn one.
    write_atomically((tmp / "params.pt").string(), [&](const std::string& t) { torch::save(net.param_list(), t); });
    write_atomically((tmp / "optimizer.pt").string(), [&](const std::string& t) { torch::save(optimizer, t); });
    const json st = {{"step", step},
                     {"steps", steps},
                     {"seed", o.seed},
                     {"batch", o.batch},
                     {"max_length", o.max_length},
                     {"loss_norm", loss_norm_name(o.loss_norm)},
                     {"tokens", sum.tokens},
                     {"draft_layer", describe_layer(layer.shape)},
                     {"data", fs::absolute(o.data_dir).lexically_normal().string()},
                     {"best_accept_len", sum.best_accept_len},
                     {"best_step", sum.best_step},
                     {"best_record", best_record}};
    write_file_atomic((tmp / "state.json").string(), st.dump(2) + "\n");
    replace_dir(tmp, state_dir);
  };

  // Tests simulate a kill at any moment: the process ends here as SIGKILL would end it, nothing flushed or saved.
  const char* kill_at = std::getenv("EAGLET_TRAIN_KILL_AT_STEP");
  Order order(train.size(), o.seed);
  Timer run_timer;
  int64_t run_tokens = 0;
  const int64_t warmup = static_cast<int64_t>(o.warmup * static_cast<double>(steps));
  for (; step < steps;) {
    const double lr =
        step < warmup
            ? o.lr * static_cast<double>(step + 1) / static_cast<double>(warmup)
            : o.lr * (o.min_lr + (1 - o.min_lr) * 0.5 *
                                     (1 + std::cos(std::numbers::pi * static_cast<double>(step - warmup) /
                                                   static_cast<double>(std::max<int64_t>(1, steps - warmup)))));
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    // The global batch of this step; each rank takes every world-th sequence of it, and divides its loss by the
    // global batch's B x T, so that the summed gradients are those of one process on the whole batch.
    std::vector<SequenceRef> seqs, mine;
    int64_t longest = 0;
    for (int i = 0; i < o.batch; ++i) {
      seqs.push_back(train[order.at(static_cast<uint64_t>(step) * o.batch + i)]);
      longest = std::max(longest, seqs.back().length);
      if (i % dp->world() == dp->rank()) mine.push_back(seqs.back());
    }
    TttBatch batch = make_ttt_batch(data, teacher, mine, o.bf16 ? 64 : 1);
    batch.positions = o.batch * longest;
    optimizer.zero_grad();
    // --profile: libtorch's profiler over a few steps after the first (which builds oneDNN's kernels).
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profiling;
    if (!o.profile.empty() && step >= 1 && step < 1 + kProfiledSteps)
      profiling = std::make_unique<torch::autograd::profiler::RecordProfile>(
          strprintf("%s.step%lld", o.profile.c_str(), static_cast<long long>(step + 1)));
    const TttResult r = [&] {
      const AutocastGuard autocast(o.bf16);
      const bool logged = (step + 1) % o.log_every == 0 || step + 1 == steps;
      return ttt_loss(net, batch, o.ttt_steps, o.decay, o.loss_norm, logged);
    }();
    r.loss.backward();
    dp->allreduce_gradients(net.param_list());
    torch::nn::utils::clip_grad_norm_(net.param_list(), o.clip);
    optimizer.step();
    profiling.reset();
    ++step;
    for (const SequenceRef& q : seqs) run_tokens += q.length;
    for (const SequenceRef& q : seqs) sum.tokens += q.length;
    if (step % o.log_every == 0 || step == steps) {
      std::vector<double> figures = {r.loss.item<double>()};  // the loss, then hits and trained positions per step
      for (const TttStep& k : r.steps) {
        figures.push_back(static_cast<double>(k.hits));
        figures.push_back(static_cast<double>(k.trained));
      }
      dp->allreduce_sum(figures);
      std::vector<double> acc;
      for (size_t k = 0; k < r.steps.size(); ++k)
        acc.push_back(figures[2 + 2 * k] > 0 ? figures[1 + 2 * k] / figures[2 + 2 * k] : 0.0);
      const double rate = static_cast<double>(run_tokens) / run_timer.seconds();
      const double eta = static_cast<double>(steps - step) * static_cast<double>(run_tokens) / std::max(1.0, rate) /
                         std::max<double>(1.0, static_cast<double>(step));
      log_info(strprintf("step %lld/%lld loss %.4f acc %s lr %.2e %.0f tok/s ETA %d:%02d", static_cast<long long>(step),
                         static_cast<long long>(steps), figures[0], fmt_list(acc).c_str(), lr, rate,
                         static_cast<int>(eta) / 60, static_cast<int>(eta) % 60));
    }
    if (o.eval_every > 0 && step % o.eval_every == 0 && step < steps) dp->on_lead([&] { evaluate_and_keep(step); });
    if ((o.save_every > 0 && step % o.save_every == 0) || step == steps) dp->on_lead(save_state);
    if (kill_at != nullptr && std::to_string(step) == kill_at) std::_Exit(137);
  }
  sum.tokens_per_second = run_tokens > 0 ? static_cast<double>(run_tokens) / run_timer.seconds() : 0;
  dp->on_lead([&] {
    if (sum.best_step != steps) evaluate_and_keep(steps);
    save_state();
  });
  sum.steps = steps;
  // The drafter in OUT is the one checked when it was kept: its bytes, not a later write, are what the record names.
  if (dp->lead() && best_record.is_object()) {
    sum.acc = best_record["acc"].get<std::vector<double>>();
    sum.report_accept_len = best_record["served"][o.select_setting]["accept_len"].get<double>();
    if (sha256_file((out / "model.safetensors").string()) != best_record.value("model_sha256", ""))
      fail((out / "model.safetensors").string(), ": not the weights checked and recorded in eaglet_training.json (",
           "changed while training?); train again into a new --out");
  }
  fs::remove_all(candidate);
  sum.seconds = timer.seconds();
  return sum;
}

}  // namespace eaglet
