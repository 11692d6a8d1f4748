#include "doctor/live_checks.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <set>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "speculative/loop.h"
#include "train/served_eval.h"
#include "util/error.h"

namespace eaglet::doctor {

namespace {

using Prompts = std::vector<std::vector<int32_t>>;

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

double depth_rate(const SpecStats& s, size_t d) {
  const std::vector<double> depth = s.per_depth_acceptance();
  return d < depth.size() ? depth[d] : 0.0;
}

struct Served {
  SpecStats stats;
  bool lossless = true;
};

// Greedy speculative decoding of every prompt with one setting, compared with the plain outputs.
Served serve(Transformer& target, Eagle3Drafter& drafter, const Prompts& prompts, const Prompts& plain,
             const DraftParams& p, const GenerationLimits& limits) {
  Served s;
  Eagle3Proposer proposer(drafter);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SpeculativeResult r = generate_speculative(target, proposer, prompts[i], {{p}, {}}, limits);
    s.stats.merge(r.stats);
    s.lossless = s.lossless && r.tokens == plain[i];
  }
  return s;
}

const char* kZeroCauses =
    "usual causes: aux layers other than the trained ones (convention: see the probe), a drafter for another target, "
    "d2t missing or holding absolute ids, decoder-layer weights dropped (layer names), a norm flag read the other way";

void report_setting(Report& r, const std::string& name, const SpecStats& s, const TeacherForced& tf) {
  std::string reason =
      s.log_line() + fmt(", draft acceptance %.1f%%, per-depth ", 100.0 * s.draft_acceptance()) + s.per_depth_line();
  reason += " (" + std::to_string(s.verifies) + " verifies)";
  if (s.verifies >= 8 && s.accept_length() < SpecStats::kZeroAcceptLen) {
    const std::string diagnosis =
        tf.accuracy() >= 0.2
            ? fmt("; yet the teacher-forced step-0 accuracy is %.2f: the drafter is right when fed the features "
                  "directly, so a serving-side contract is broken",
                  tf.accuracy())
            : fmt("; the teacher-forced step-0 accuracy is %.2f too: the drafter is wrong even fed directly (features, "
                  "weights or vocabulary)",
                  tf.accuracy());
    r.fail("acceptance " + name,
           reason +
               fmt(": the zero-acceptance signature (accept len < %.2f, rate ~ 1/%.0f): nothing is accepted",
                   SpecStats::kZeroAcceptLen, s.num_draft_tokens) +
               diagnosis,
           kZeroCauses);
  } else if (s.accept_length() < kLowAcceptLen) {
    r.warn("acceptance " + name, reason + fmt(": below %.2f, little is gained", kLowAcceptLen),
           "see the step-0 accuracy and probe lines; a drafter trained on little or other data is weak (regenerate "
           "training replies with the target: eaglet extract --regenerate)");
  } else {
    r.pass("acceptance " + name, reason);
  }
}

// Why a recorded figure gets no verdict: measured on other prompts than the live one.
std::string other_prompts(const TrainingRecord& rec) {
  return rec.report_prompts.empty()
             ? ": the record does not name its prompts, these are others: no verdict"
             : ": these prompts are not the record's: no verdict (run doctor without --prompts/--chat to compare on "
               "the record's)";
}

void report_step0(Report& r, const TeacherForced& tf, const SpecStats& chain, const std::optional<TrainingRecord>& rec,
                  bool like_with_like) {
  const double acc = tf.accuracy();
  const std::string measured =
      fmt("teacher-forced step-0 accuracy %.3f over %.0f positions", acc, static_cast<double>(tf.positions));
  if (rec && !like_with_like && acc >= 0.1) {
    r.info("step-0 accuracy",
           measured + fmt(" vs acc_0 %.3f recorded on held-out training data", rec->acc[0]) + other_prompts(*rec));
  } else if (rec && like_with_like) {
    const double want = rec->report_step0;
    const std::string cmp =
        measured +
        fmt(" vs %.3f recorded on these prompts at training (WARN below %.0f%%, ", want, 100 * kAccWarnRatio) +
        fmt("FAIL below %.0f%% of it; acc_0 on held-out training data %.3f)", 100 * kAccFailRatio, rec->acc[0]);
    const std::string fix =
        "the drafter sees other features than in training: check the aux layers, the target "
        "(model and dtype) and the norm flags; the probes below try the usual suspects";
    if (acc < kAccFailRatio * want)
      r.fail("step-0 accuracy", cmp, fix);
    else if (acc < kAccWarnRatio * want)
      r.warn("step-0 accuracy", cmp, fix);
    else
      r.pass("step-0 accuracy", cmp);
  } else if (acc < 0.1) {
    r.warn("step-0 accuracy", measured + ": below 0.10, near chance",
           "features wrong (see the FAIL lines and probes) or a drafter trained for other data");
  } else {
    r.pass("step-0 accuracy", measured);
  }
  // Greedy chains accept the first draft exactly when the drafter's first guess is the target's token: served depth-1
  // acceptance and teacher-forced accuracy measure the same thing unless the loop feeds the drafter differently.
  const double d1 = depth_rate(chain, 0);
  const std::string both = fmt("served depth-1 acceptance %.3f vs teacher-forced step-0 accuracy %.3f", d1, acc);
  if (acc >= 0.2 && d1 < 0.5 * acc)
    r.fail("served vs teacher-forced",
           both + ": below half: the loop feeds the drafter otherwise than its forward does",
           "a serving-side contract is broken (positions, KV cache, the state carried between steps)");
  else
    r.pass("served vs teacher-forced", both);
}

void report_coverage(Report& r, const TeacherForced& tf, int64_t draft_vocab) {
  const std::string reason =
      fmt("%.1f%% of the target's next tokens on these prompts are in the draft vocabulary "
          "(%.0f ids)",
          100 * tf.coverage(), static_cast<double>(draft_vocab));
  if (tf.coverage() < 0.9)
    r.warn("draft vocabulary coverage", reason + ": below 90%, every other token cannot be drafted",
           "build the draft vocabulary from data like these prompts (eaglet extract --draft-vocab)");
  else
    r.pass("draft vocabulary coverage", reason);
}

// Loads the drafter with one convention changed; null when it does not load that way (reason in `why`).
std::unique_ptr<Eagle3Drafter> load_variant(const std::string& dir, const Transformer& target, const DrafterOptions& o,
                                            std::string& why) {
  try {
    return Speculation::load_drafter(dir, o, target);
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
}

void probe(Report& r, const std::string& name, const std::string& variant, std::unique_ptr<Eagle3Drafter> drafter,
           const std::string& why, double base, const std::function<double(Eagle3Drafter&)>& measure,
           const std::string& fix, nlohmann::json& out) {
  if (!drafter) {
    r.pass(name, variant + " does not load (" + why + "): not a candidate");
    return;
  }
  const double len = measure(*drafter);
  out[name] = {{"variant", variant}, {"accept_len", len}, {"baseline", base}};
  const std::string reason = fmt("accept len %.2f as configured, %.2f with ", base, len) + variant;
  if (len >= base + kProbeJump && len >= 1.2 * base)
    r.fail(name,
           reason + fmt(": acceptance jumps (by %.2f or more and 20%%): the config says the other convention "
                        "from the one the drafter was trained with",
                        kProbeJump),
           fix);
  else
    r.pass(name, reason + ": no jump, the configured convention is not the problem");
}

}  // namespace

void run_live_checks(Transformer& target, const LiveInput& in, Report& r) {
  const DrafterOptions& options = in.spec.load;
  std::unique_ptr<Eagle3Drafter> drafter = Speculation::load_drafter(in.spec.drafter, options, target);
  const GenerationLimits limits{in.max_tokens, 0, target.config().eos_token_ids, 256};
  Prompts plain, sequences;
  for (const auto& p : in.prompts) {
    plain.push_back(generate_plain(target, p, {}, limits).tokens);
    sequences.push_back(p);
    sequences.back().insert(sequences.back().end(), plain.back().begin(), plain.back().end());
  }
  const TeacherForced tf = teacher_forced_step0(target, *drafter, sequences);
  r.measured["teacher_forced_step0_accuracy"] = tf.accuracy();
  r.measured["draft_vocab_coverage"] = tf.coverage();

  std::vector<DraftParams> settings = {DraftParams{4, 1, 5}.resolved(), DraftParams{5, 4, 8}.resolved()};
  if (in.record)
    for (const auto& s : in.record->served) {
      bool known = false;
      for (const auto& p : settings) known = known || p == s.params;
      if (!known && settings.size() < 4) settings.push_back(s.params);
    }
  bool lossless = true;
  std::vector<SpecStats> stats;
  for (const DraftParams& p : settings) {
    const Served s = serve(target, *drafter, in.prompts, plain, p, limits);
    lossless = lossless && s.lossless;
    stats.push_back(s.stats);
    const std::vector<double> depth = s.stats.per_depth_acceptance();
    r.measured["settings"].push_back({{"setting", p.label()},
                                      {"accept_len", s.stats.accept_length()},
                                      {"accept_rate", s.stats.accept_rate()},
                                      {"draft_acceptance", s.stats.draft_acceptance()},
                                      {"per_depth", depth},
                                      {"verifies", s.stats.verifies}});
  }
  if (lossless)
    r.pass("lossless", "greedy speculative output equals the target alone on every prompt and setting");
  else
    r.fail("lossless", "greedy speculative output differs from the target alone: a bug in eaglet, not in the drafter",
           "report it with this drafter and these prompts");
  for (size_t i = 0; i < settings.size(); ++i) report_setting(r, settings[i].label(), stats[i], tf);
  report_step0(r, tf, stats[0], in.record, in.record_prompts);
  report_coverage(r, tf, drafter->config().draft_vocab_size);

  if (in.record)
    for (const auto& s : in.record->served) {
      size_t i = 0;
      while (i < settings.size() && settings[i] != s.params) ++i;
      if (i == settings.size()) continue;
      const double now = stats[i].accept_length();
      const std::string name = "served vs training " + s.params.label();
      if (!in.record_prompts) {
        r.info(name,
               fmt("accept len %.2f now vs %.2f recorded at training", now, s.accept_len) + other_prompts(*in.record));
        continue;
      }
      const std::string reason = fmt("accept len %.2f now vs %.2f recorded at training (WARN below %.0f%%, ", now,
                                     s.accept_len, 100 * kServedWarnRatio) +
                                 fmt("FAIL below %.0f%% of it)", 100 * kServedFailRatio);
      const std::string fix =
          "serving falls far below what training measured: a contract differs between the "
          "trainer's loop and this one (see the FAIL lines and probes), or the target is loaded otherwise "
          "(dtype, quantization) than in training";
      if (now < kServedFailRatio * s.accept_len)
        r.fail(name, reason, fix);
      else if (now < kServedWarnRatio * s.accept_len)
        r.warn(name, reason, fix);
      else
        r.pass(name, reason);
    }

  // The probes: each ambiguous convention read the other way, measured on the chain setting.
  const DrafterConfig& c = drafter->config();
  const double base = stats[0].accept_length();
  auto measure = [&](Eagle3Drafter& d) {
    return serve(target, d, in.prompts, plain, settings[0], limits).stats.accept_length();
  };
  nlohmann::json& probes = r.measured["probes"] = nlohmann::json::object();
  if (!c.aux_layer_ids.empty()) {
    const AuxConvention used = options.aux_convention.value_or(c.default_convention());
    const AuxConvention other = used == AuxConvention::Input ? AuxConvention::Output : AuxConvention::Input;
    std::string why;
    DrafterOptions o = options;
    o.aux_convention = other;
    probe(r, "probe aux convention", std::string("ids read as ") + convention_name(other) + " of layer i",
          load_variant(in.spec.drafter, target, o, why), why, base, measure,
          std::string("--aux-layer-convention ") + convention_name(other) +
              " (or write the ids in the convention of the drafter's layout)",
          probes);
  } else {
    r.pass("probe aux convention", "no explicit aux ids: nothing to swap");
  }
  std::string why;
  DrafterOptions o = options;
  o.norm_before_residual = !c.norm_before_residual;
  const std::string flip = std::string("norm_before_residual ") + (c.norm_before_residual ? "false" : "true");
  probe(r, "probe norm_before_residual", flip, load_variant(in.spec.drafter, target, o, why), why, base, measure,
        "write \"norm_before_residual\": " + std::string(c.norm_before_residual ? "false" : "true") + " in config.json",
        probes);
}

}  // namespace eaglet::doctor
