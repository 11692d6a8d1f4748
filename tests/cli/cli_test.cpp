// The eaglet command line, end to end on real files: stdout holds exactly the result, stderr the logs; results
// agree with the PyTorch oracle; bad input exits non-zero with one line naming the problem, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "test_env.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string pycode() { return test::shared_dir() + "/models/pycode-llama-19m"; }
std::string tiny(const std::string& v) { return test::fixtures_dir() + "/tiny/" + v; }
std::string q(const std::string& s) { return test::shell_quote(s); }
std::string eaglet(const std::string& args) { return test::eaglet_bin() + " " + args; }
// The fp32-activation kernels, for comparisons with the fp32 oracle that must hold token for token (the default
// AVX-512 BF16 path rounds activations of bf16 models to bf16, as HF does; tests/model/parity_test.cpp covers it).
std::string eaglet_exact(const std::string& args) { return "EAGLET_ISA=avx512 " + eaglet(args); }

std::vector<int> ids_of(const std::string& json_text) {
  return nlohmann::json::parse(json_text).get<std::vector<int>>();
}
std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s;
}
std::string oracle(const std::string& args) {
  auto r = run_command(test::python_bin() + " " + test::oracle_dir() + "/cli_oracle.py " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

const char* kPrompt = "import os\n\n\ndef list_python_files(root):\n";

TEST(Cli, GenerateGreedyMatchesOracleAndKeepsStdoutClean) {
  const auto tok = run_command(eaglet("tokenize --bos -m " + pycode() + " -p " + q(kPrompt)));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const std::vector<int> prompt_ids = ids_of(tok.out);
  ASSERT_EQ(prompt_ids.front(), 1);  // BOS
  const std::vector<int> want =
      ids_of(oracle("greedy --model " + pycode() + " --ids " + join(prompt_ids) + " -n 40 --eos 2"));
  ASSERT_FALSE(want.empty());
  // The text of prompt + continuation, decoded whole (without BOS).
  std::vector<int> whole(prompt_ids.begin() + 1, prompt_ids.end());
  whole.insert(whole.end(), want.begin(), want.end());
  const auto want_text = run_command(eaglet("detokenize -m " + pycode() + " --ids " + join(whole)));
  ASSERT_EQ(want_text.exit_code, 0) << want_text.err;
  // The continuation starts with indentation, whose first token carries a SentencePiece space: all 4 are kept.
  ASSERT_THAT(want_text.out, StartsWith(std::string(kPrompt) + "    \""));

  const auto gen = run_command(eaglet_exact("generate -m " + pycode() + " -n 40 -t 2 -p " + q(kPrompt)));
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(kPrompt + gen.out, want_text.out);  // exactly the continuation: no prompt echo, no logs
  EXPECT_THAT(gen.err, HasSubstr("prompt: "));
  EXPECT_THAT(gen.err, HasSubstr("tok/s"));

  const auto echoed = run_command(eaglet_exact("generate --echo -m " + pycode() + " -n 40 -p " + q(kPrompt)));
  EXPECT_EQ(echoed.out, want_text.out);
}

TEST(Cli, SamplingIsSeededAndStaysInVocabulary) {
  const std::string base =
      eaglet("generate -m " + pycode() + " -n 24 --temp 0.9 --top-p 0.95 --top-k 50 -p " + q(kPrompt));
  const auto a = run_command(base + " --seed 11"), b = run_command(base + " --seed 11"),
             c = run_command(base + " --seed 12");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(Cli, PerplexityMatchesOracle) {
  const std::string dir = test::temp_dir("cli_ppl");
  std::string text;
  for (int i = 0; i < 6; ++i)
    text += "def f" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i) + " + 1\n\n";
  test::write_file(dir + "/text.py", text);
  const auto tok = run_command(eaglet("tokenize -m " + pycode() + " -f " + dir + "/text.py"));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const auto want =
      nlohmann::json::parse(oracle("perplexity --model " + pycode() + " --ctx 32 --ids " + join(ids_of(tok.out))));
  const auto got = run_command(eaglet_exact("perplexity -m " + pycode() + " -f " + dir + "/text.py --ctx 32 -b 10"));
  ASSERT_EQ(got.exit_code, 0) << got.err;
  double ppl = 0;
  long scored = 0;
  ASSERT_EQ(std::sscanf(got.out.c_str(), "perplexity: %lf\nscored tokens: %ld", &ppl, &scored), 2) << got.out;
  EXPECT_EQ(scored, want["scored"].get<long>());
  EXPECT_NEAR(ppl, want["perplexity"].get<double>(), 1e-3 * want["perplexity"].get<double>());
  const auto too_short = run_command(eaglet("perplexity -m " + pycode() + " -f " + dir + "/text.py --ctx 4096"));
  EXPECT_EQ(too_short.exit_code, 1);
  EXPECT_THAT(too_short.err, HasSubstr("fewer than one window"));
}

TEST(Cli, TokenizeDetokenizeRoundTrip) {
  const std::string text = "for i in range(10):\n\tprint(i, 'héllo')  # 你好\n";
  const auto tok = run_command(eaglet("tokenize -m " + pycode() + " -p " + q(text)));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  EXPECT_THAT(tok.out, StartsWith("["));
  const auto ids = ids_of(tok.out);
  EXPECT_NE(ids.front(), 1) << "no BOS unless --bos";
  const auto back = run_command(eaglet("detokenize -m " + pycode() + " --ids " + join(ids)));
  EXPECT_EQ(back.out, text);
}

TEST(Cli, HiddenWritesTheCapturedLayers) {
  const std::string out = test::temp_dir("cli_hidden") + "/h.safetensors";
  const auto r =
      run_command(eaglet("hidden -m " + tiny("llama_fp32") + " -p 'def f(x): return x' --layers 5,2,8 --out " + out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("layers [2,5,8]"));
  Checkpoint file = Checkpoint::open_file(out);
  const TensorView* h = file.find("hidden_states");
  ASSERT_NE(h, nullptr);
  const int64_t S = file.find("input_ids")->numel();
  EXPECT_EQ(h->shape, (std::vector<int64_t>{S, 3 * 64}));
  EXPECT_EQ(file.find("logits")->shape, (std::vector<int64_t>{S, 384}));
  // The same text from a file gives the same states.
  const std::string file_dir = test::temp_dir("cli_hidden_file");
  const std::string text_file = file_dir + "/t.txt", out2 = file_dir + "/h2.safetensors";
  test::write_file(text_file, "def f(x): return x");
  ASSERT_EQ(
      run_command(eaglet("hidden -m " + tiny("llama_fp32") + " -f " + text_file + " --layers 5,2,8 --out " + out2))
          .exit_code,
      0);
  EXPECT_EQ(test::read_file(out2), test::read_file(out));
  const auto bad = run_command(eaglet("hidden -m " + tiny("llama_fp32") + " -p x --layers 2,9 --out " + out));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("layer 9 does not exist"));
  // --out naming the model's own weights would destroy them: refused, the file intact.
  const std::string model_copy = file_dir + "/model";
  fs::copy(tiny("llama_fp32"), model_copy, fs::copy_options::recursive);
  const std::string weights = test::read_file(model_copy + "/model.safetensors");
  const auto own =
      run_command(eaglet("hidden -m " + model_copy + " -p x --out " + model_copy + "/./model.safetensors"));
  EXPECT_EQ(own.exit_code, 1);
  EXPECT_THAT(own.err, HasSubstr("is a file of the model being read"));
  EXPECT_EQ(test::read_file(model_copy + "/model.safetensors"), weights);
}

TEST(Cli, ChatFormatsThePrompt) {
  const auto r = run_command(eaglet("generate --chat -m " + tiny("llama_fp32") + " -n 4 -p hi"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto none = run_command(eaglet("generate --chat -m " + pycode() + " -n 4 -p hi"));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("tokenizer_config.json"));
}

std::string drafter(const std::string& name) { return test::fixtures_dir() + "/drafters/" + name; }

TEST(CliSpeculative, SameTextAsTargetAloneWithAcceptanceReport) {
  const std::string echo = drafter("targets/echo_fp32");
  const std::string args = " -m " + echo + " -n 48 -p 'def f(x): return x'";
  const auto plain = run_command(eaglet("generate" + args));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto tree = run_command(eaglet("generate" + args + " -d " + drafter("exact_echo") +
                                       " --speculative-policy static --compare --log-every 2"));
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(tree.out, plain.out);
  EXPECT_THAT(tree.err, HasSubstr("aux layers [2, 4, 5] (input of layer i)"));
  EXPECT_THAT(tree.err, HasSubstr("[verify 2] accept len: "));
  EXPECT_THAT(tree.err, HasSubstr("accept len: 6.00, accept rate: 0.75"));  // 5 steps, 8 draft tokens, all accepted
  EXPECT_THAT(tree.err, HasSubstr("draft acceptance"));
  EXPECT_THAT(tree.err, HasSubstr("outputs identical"));
  const auto chain = run_command(eaglet("generate" + args + " -d " + drafter("exact_echo") +
                                        " --speculative-policy static --speculative-eagle-topk 1 "
                                        "--speculative-num-steps 3"));
  EXPECT_EQ(chain.out, plain.out);
  EXPECT_THAT(chain.err, HasSubstr("adjusted to speculative_num_steps + 1 = 4"));
  EXPECT_THAT(chain.err, HasSubstr("accept len: 4.00, accept rate: 1.00"));
  // The default policy: same text, drafts accepted, the shapes it chose printed.
  const auto automatic = run_command(eaglet("generate" + args + " -d " + drafter("exact_echo") + " --compare"));
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_EQ(automatic.out, plain.out);
  EXPECT_THAT(automatic.err, HasSubstr("policy auto within depth 12"));
  EXPECT_THAT(automatic.err, HasSubstr("cost model ("));
  EXPECT_THAT(automatic.err, HasSubstr("shapes (share of "));
  const size_t at = automatic.err.rfind("accept len: ");
  ASSERT_NE(at, std::string::npos) << automatic.err;
  EXPECT_GE(std::stod(automatic.err.substr(at + 12)), 2.0) << "the exact drafter's drafts are accepted";
  EXPECT_THAT(automatic.err, HasSubstr("outputs identical"));
}

// The benchmarks run on tiny models (their timings are not checked; what they report about outputs is).
TEST(CliBench, SpeculativeBenchReportsAcceptanceAndIdentity) {
  const std::string prompts = test::temp_dir("cli_bench") + "/prompts.jsonl";
  test::write_file(prompts, "{\"prompt\": \"def f(x): return x\"}\n{\"prompt\": \"class A:\"}\n");
  const auto r =
      run_command(eaglet("bench spec --json -m " + drafter("targets/echo_fp32") + " -d " + drafter("exact_echo") +
                         " --prompts " + prompts + " -n 24 --setting 3,1,4 --setting 3,2,6"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& run : j["runs"]) {
    EXPECT_TRUE(run["identical_to_plain"].get<bool>());
    EXPECT_GE(run["accept_len"].get<double>(), 3.9);
  }
  // --draft-head full on a head too small to be screened: the same two rows, each with the whole head, and a note.
  const auto full =
      run_command(eaglet("bench spec --json -m " + drafter("targets/echo_fp32") + " -d " + drafter("exact_echo") +
                         " --prompts " + prompts + " -n 8 --setting 3,1,4 --setting 3,2,6 --draft-head full"));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(nlohmann::json::parse(full.out)["runs"].size(), 2u);
  EXPECT_THAT(full.err, HasSubstr("--draft-head full: this drafter's head is not screened here"));
  const auto curve =
      run_command(eaglet("bench cost -m " + tiny("llama_fp32") + " --contexts 16 --batch-sizes 1,4 --repeats 1"));
  ASSERT_EQ(curve.exit_code, 0) << curve.err;
  EXPECT_THAT(curve.out, HasSubstr("| 4 |"));
  EXPECT_THAT(curve.out, HasSubstr("of the probed bandwidth"));
  EXPECT_THAT(curve.out, HasSubstr("compute peak (probe,"));
  EXPECT_THAT(curve.out, HasSubstr("| GFLOP/s | % of peak |"));
}

TEST(CliBench, PeakProbesAndLayerMatmuls) {
  const auto r = run_command(eaglet("bench peak --batch-sizes 2 --repeats 1 -t 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory read bandwidth (probe, 1 thread)"));
  EXPECT_THAT(r.out, HasSubstr("compute peak (probe, 2 threads)"));
  EXPECT_THAT(r.out, HasSubstr("| 2 |"));
  EXPECT_THAT(r.out, testing::AnyOf(HasSubstr("a reference only"), HasSubstr("oneDNN reference: not built in")));
}

TEST(CliBench, KernelCurveTimesEachBatchSize) {
  const auto r = run_command(eaglet("bench kernels --batch-sizes 1,3 --repeats 1 -t 1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 copies"));
  EXPECT_THAT(r.out, HasSubstr("1 thread(s), thread CPU time"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\\| 1 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9]+ \\| 1\\.00 \\|"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\\| 3 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9]+ \\| [0-9.]+ \\|"));
  for (const char* mode : {"kernels", "peak"}) {  // a usage error: exit 2, before any work
    const auto bad = run_command(eaglet(std::string("bench ") + mode + " --shape moe-tiny"));
    EXPECT_EQ(bad.exit_code, 2) << mode << ": " << bad.err;
    EXPECT_THAT(bad.err, HasSubstr("--shape: moe-tiny not in {1b,8b}"));
  }
}

// The flag forms of the release before the subcommands are read as the subcommands, with a note saying so.
TEST(CliBench, OldFlagFormsAreReadAsSubcommandsWithANote) {
  const auto r = run_command(eaglet("bench --kernel-curve --batch-sizes 1 --repeats 1 -t 1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: `eaglet bench --kernel-curve` is now `eaglet bench kernels`"));
  EXPECT_THAT(r.out, HasSubstr("4 copies"));
  const auto spec = run_command(eaglet("bench -m " + tiny("llama_fp32") + " -d " + test::fixtures_dir() +
                                       "/no-such-drafter --prompts /dev/null"));
  EXPECT_THAT(spec.err, HasSubstr("`eaglet bench -d` is now `eaglet bench spec`"));
  EXPECT_EQ(spec.exit_code, 1) << spec.err;
  const auto bare = run_command(eaglet("bench"));
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.err, HasSubstr("subcommand"));
}

TEST(CliSpeculative, ZeroAcceptanceIsLoud) {
  // auto soon stops drafting: that must not hide it. Its first round and its probes (after 8 and 16 plain steps)
  // verify one draft each, so 60 tokens hold 3 verifies whatever the machine's costs.
  for (const std::string policy : {"static", "auto"}) {
    const auto r = run_command(eaglet("generate -m " + drafter("targets/echo_fp32") + " -d " + drafter("random_echo") +
                                      " -n 60 -p 'def f(x): return x' --speculative-policy " + policy));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("warning: zero acceptance: accept len: 1.00")) << policy;
  }
}

// One line on stderr, prefixed, naming the problem; exit 1 for bad files, 2 for bad usage.
void expect_clean_failure(const test::CommandResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_THAT(r.err, HasSubstr(needle));
  if (code == 1) {
    EXPECT_THAT(r.err, StartsWith("eaglet: error: "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(BadInputCli, CorruptModelFolders) {
  const std::string dir = test::temp_dir("cli_corrupt");
  fs::copy(tiny("llama_fp32"), dir, fs::copy_options::recursive);
  const std::string weights = dir + "/model.safetensors";
  const std::string bytes = test::read_file(weights);
  test::write_file(weights, bytes.substr(0, bytes.size() / 2));
  expect_clean_failure(run_command(eaglet("generate -m " + dir + " -p hi -n 2")), 1, "model.safetensors");
  test::write_file(weights, "");
  expect_clean_failure(run_command(eaglet("generate -m " + dir + " -p hi -n 2")), 1, "too short");
  test::write_file(weights, bytes);
  test::write_file(dir + "/tokenizer.json", "{\"model\": {\"type\": \"WordPiece\"}}");
  expect_clean_failure(run_command(eaglet("generate -m " + dir + " -p hi -n 2")), 1, "tokenizer.json");
  test::write_file(dir + "/tokenizer.json", "not json at all");
  expect_clean_failure(run_command(eaglet("tokenize -m " + dir + " -p hi")), 1, "tokenizer.json");
  expect_clean_failure(run_command(eaglet("generate -m /nonexistent -p hi")), 1, "/nonexistent");
}

TEST(BadInputCli, UsageErrors) {
  expect_clean_failure(run_command(eaglet("generate -p hi")), 2, "--model");
  expect_clean_failure(run_command(eaglet("generate -m x -p hi --no-such-flag")), 2, "no-such-flag");
  expect_clean_failure(run_command(eaglet("generate -m x -p hi --temp -1")), 2, "temp");
  expect_clean_failure(run_command(eaglet("frobnicate")), 2, "frobnicate");
  expect_clean_failure(run_command(eaglet("detokenize -m " + pycode() + " --ids 1,x")), 1, "'x'");
  expect_clean_failure(run_command(eaglet("detokenize -m " + pycode() + " --ids 99999")), 1, "99999");
  expect_clean_failure(run_command(eaglet("tokenize -m " + pycode())), 1, "-p TEXT or -f FILE");
}

TEST(BadInputCli, DrafterProblemsAreNamed) {
  const auto broken =
      run_command(eaglet("generate -m " + tiny("llama_fp32") + " -d " + drafter("broken/fc_width") + " -p hi"));
  expect_clean_failure(broken, 1, "fc.weight");
  const auto no_drafter =
      run_command(eaglet("generate -m " + tiny("llama_fp32") + " --speculative-algorithm eagle3 -p hi"));
  expect_clean_failure(no_drafter, 1, "needs a drafter");
  const auto wrong_target = run_command(
      eaglet("generate -m " + drafter("targets/smallvocab_fp32") + " -d " + drafter("exact_echo") + " -p hi"));
  expect_clean_failure(wrong_target, 1, "vocab_size 384");
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// eaglet extract: shards, manifest and draft vocabulary, the summary on stderr, stdout empty; a rerun resumes.
TEST(CliExtract, WritesShardsAndResumes) {
  const std::string dir = test::temp_dir("cli_extract");
  test::write_file(dir + "/rows.jsonl", "{\"text\": \"def f(x):\\n    return x\\n\"}\n{\"text\": \"import os\\n\"}\n");
  const std::string cmd = eaglet("extract -q -m " + pycode() + " --data " + dir + "/rows.jsonl --out " + dir +
                                 "/out --rows-per-shard 1 --draft-vocab 256");
  const auto r = run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, AllOf(HasSubstr("2 rows"), HasSubstr("2 shards (0 already there and checked, 0 redone)"),
                           HasSubstr("256 ids covering")));
  for (const char* f :
       {"manifest.json", "shard-00000.safetensors", "shard-00001.safetensors", "draft_vocab.safetensors"})
    EXPECT_TRUE(fs::exists(dir + "/out/" + f)) << f;
  const auto again = run_command(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("2 shards (2 already there and checked, 0 redone)"));
  test::write_file(dir + "/bad.jsonl", "{\"prompt\": \"x\"}\n");
  expect_clean_failure(
      run_command(eaglet("extract -q -m " + pycode() + " --data " + dir + "/bad.jsonl --out " + dir + "/out2")), 1,
      "bad.jsonl:1");
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// eaglet convert-draft: a SpecForge drafter to speculators and back to SGLang, then served; a drafter SGLang would
// compute differently is refused with exit code 1 and the reason.
TEST(CliConvertDraft, ConvertsBothWaysAndRefusesWhatSglangCannotCompute) {
  const std::string dir = test::temp_dir("cli_convert");
  const std::string target = tiny("llama_fp32"), drafters = test::fixtures_dir() + "/drafters/";
  const auto a = run_command(eaglet("convert-draft -m " + target + " -d " + drafters +
                                    "specforge --format speculators --out " + dir + "/spec"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b =
      run_command(eaglet("convert-draft -m " + target + " -d " + dir + "/spec --format sglang --out " + dir + "/sgl"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto plain = run_command(eaglet("generate -m " + target + " -p hi -n 12"));
  const auto spec = run_command(eaglet("generate -m " + target + " -d " + dir + "/sgl -p hi -n 12"));
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  expect_clean_failure(run_command(eaglet("convert-draft -m " + target + " -d " + drafters +
                                          "speculators --format sglang --out " + dir + "/no")),
                       1, "norm_before_residual");
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// Values that pass a range check without being numbers, sizes without bound, a directory for a file and a tokenizer
// of another model: each fails with one line and exit 1, nothing crashes or runs away.
TEST(BadInputCli, HostileValuesFailCleanly) {
  expect_clean_failure(run_command(eaglet("generate -m " + tiny("llama_fp32") + " -p hi -n 4 --temp nan")), 1,
                       "temperature");
  expect_clean_failure(run_command(eaglet("generate -m " + tiny("llama_fp32") + " -p hi -n 4 --temp 1 --top-p nan")), 1,
                       "top_p");
  // A context whose KV cache could never be allocated, a directory given as a file, a tokenizer of another model.
  expect_clean_failure(run_command(eaglet("generate -m " + tiny("llama_fp32") + " -p hi -n 2000000000")), 1,
                       "KV cache");
  expect_clean_failure(run_command(eaglet("perplexity -m " + tiny("llama_fp32") + " -f " + tiny("llama_fp32"))), 1,
                       "is a directory");
  // A device never ends (reading /dev/zero hung); a negative seed wrapped to 2^64 - 1.
  expect_clean_failure(run_command(eaglet("tokenize -m " + tiny("llama_fp32") + " -f /dev/zero")), 1, "is a device");
  expect_clean_failure(run_command(eaglet("generate -m " + tiny("llama_fp32") + " -p hi -n 2 --seed -1")), 2,
                       "expected a number >= 0, found -1");
  const std::string mixed = test::temp_dir("cli_mixed_tokenizer");
  fs::copy(tiny("llama_fp32"), mixed, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy_file(pycode() + "/tokenizer.json", mixed + "/tokenizer.json", fs::copy_options::overwrite_existing);
  test::write_file(mixed + "/text.py", "def f(x):\n    return x + 1\n");
  expect_clean_failure(run_command(eaglet("perplexity -m " + mixed + " -f " + mixed + "/text.py --ctx 8")), 1,
                       "smaller than the tokenizer's");
  expect_clean_failure(run_command(eaglet("bench spec -m " + tiny("llama_fp32") + " -d " + test::fixtures_dir() +
                                          "/drafters/eagle_official --prompts /dev/null --setting 100000,1,100001")),
                       1, "--setting");
  // An empty prompts file has no prompts; a device, even /dev/null, is not a file (io/files.h refuses them all).
  const std::string empty = mixed + "/empty.txt";
  test::write_file(empty, "");
  expect_clean_failure(run_command(eaglet("bench spec -m " + tiny("llama_fp32") + " -d " + test::fixtures_dir() +
                                          "/drafters/eagle_official --prompts " + empty + " --setting 2,1,3")),
                       1, empty + ": no prompts");
  expect_clean_failure(run_command(eaglet("bench spec -m " + tiny("llama_fp32") + " -d " + test::fixtures_dir() +
                                          "/drafters/eagle_official --prompts /dev/null --setting 2,1,3")),
                       1, "/dev/null: is a device (character device), not a regular file");
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

using ::testing::Not;

// A full context ends generation with a note on stderr; speculative decoding drafts shallower trees near the end, so
// it stops at exactly the plain loop's token (a context of C holds C positions: C - prompt + 1 tokens are produced).
TEST(CliSpeculative, FullContextStopsAtThePlainLoopsToken) {
  const std::string target = drafter("targets/echo_fp32"), args = " -m " + target + " -n 100 -p 'def f(x): return x'";
  const auto tok = run_command(eaglet("tokenize --bos -m " + target + " -p 'def f(x): return x'"));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const size_t prompt = ids_of(tok.out).size();
  for (const int ctx : {static_cast<int>(prompt) + 1, static_cast<int>(prompt) + 2, 20, 23}) {
    const std::string c = " -c " + std::to_string(ctx);
    const auto plain = run_command(eaglet("generate" + args + c));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const size_t produced = static_cast<size_t>(ctx) - prompt + 1;
    EXPECT_THAT(plain.err, HasSubstr("note: the context of " + std::to_string(ctx) + " tokens is full after " +
                                     std::to_string(produced) + " generated tokens (raise -c/--ctx)"));
    for (const std::string shape : {"", " --speculative-eagle-topk 1 --speculative-num-steps 3"}) {
      const auto spec = run_command(eaglet("generate" + args + c + " --compare -d " + drafter("exact_echo") + shape));
      ASSERT_EQ(spec.exit_code, 0) << spec.err;
      EXPECT_EQ(spec.out, plain.out) << "ctx " << ctx << shape;
      EXPECT_THAT(spec.err, HasSubstr("decode: " + std::to_string(produced) + " tokens")) << ctx << shape;
      EXPECT_THAT(spec.err, HasSubstr("outputs identical")) << ctx << shape;
      EXPECT_THAT(spec.err, HasSubstr("tokens is full after " + std::to_string(produced))) << ctx << shape;
    }
  }
  // The -n limit reached first: no note.
  EXPECT_THAT(run_command(eaglet("generate" + args + " -n 4 -c 20")).err, Not(HasSubstr("is full")));
}

// Flags out of range are usage errors whose message states the bound; -t 0 keeps meaning all cores.
TEST(BadInputCli, FlagBoundsAreStated) {
  const std::string model = " -m " + tiny("llama_fp32") + " -p hi";
  for (const std::string flag : {" -t -5", " --threads 100000"})
    expect_clean_failure(run_command(eaglet("generate" + model + flag)), 2, "not in range 0 to 1024");
  const auto negative_n = run_command(eaglet("generate" + model + " -n -3"));
  expect_clean_failure(negative_n, 2, "expected a number >= 1, found -3");
  EXPECT_THAT(negative_n.err, Not(HasSubstr("1797693")));
  expect_clean_failure(run_command(eaglet("perplexity -m x -f y -b 0")), 2, ">= 1");
  expect_clean_failure(run_command(eaglet("bench plain --threads 0")), 2, "not in range 1 to 1024");
  EXPECT_EQ(run_command(eaglet("generate" + model + " -n 2 -t 0")).exit_code, 0);
}

// HF runs past max_position_embeddings with a reminder; so does eaglet (a warning, the output unchanged).
TEST(Cli, ContextPastTrainedPositionsIsWarned) {
  const std::string dir = test::temp_dir("cli_max_position");
  fs::copy(tiny("llama_fp32"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  config["max_position_embeddings"] = 8;
  test::write_file(dir + "/config.json", config.dump());
  const auto r = run_command(eaglet("generate -m " + dir + " -p hi -n 12"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: a context of 15 tokens goes past max_position_embeddings 8 of " + dir));
  EXPECT_EQ(r.out, run_command(eaglet("generate -m " + tiny("llama_fp32") + " -p hi -n 12")).out);
  EXPECT_THAT(run_command(eaglet("generate -m " + dir + " -p hi -n 5")).err, Not(HasSubstr("max_position_embeddings")));
}

// JSON with a NUL byte (where the parser would silently stop reading): a training row and a config.json.
TEST(BadInputCli, NulBytesInJsonAreRefused) {
  const std::string dir = test::temp_dir("cli_nul");
  test::write_file(dir + "/rows.jsonl", std::string("{\"text\": \"hi\"}\0junk\n", 20));
  expect_clean_failure(
      run_command(eaglet("extract -q -m " + tiny("llama_fp32") + " --data " + dir + "/rows.jsonl --out " + dir + "/o")),
      1, "rows.jsonl:1: not valid JSON (a NUL byte at offset 14)");
  fs::copy(tiny("llama_fp32"), dir + "/model", fs::copy_options::recursive);
  test::write_file(dir + "/model/config.json", test::read_file(dir + "/model/config.json") + std::string(1, '\0'));
  expect_clean_failure(run_command(eaglet("generate -m " + dir + "/model -p hi -n 2")), 1,
                       "config.json: not valid JSON");
}

// A chat template whose markers the tokenizer lacks, and a target model given as the drafter.
TEST(BadInputCli, MismatchedFoldersAreNamed) {
  const std::string dir = test::temp_dir("cli_chat_markers");
  fs::copy(tiny("llama_fp32"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  test::write_file(dir + "/chat_template.jinja",
                   "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"
                   "{% endfor %}");
  expect_clean_failure(run_command(eaglet("generate --chat -m " + dir + " -p hi -n 2")), 1,
                       "writes <|start_header_id|>, which this tokenizer does not have as one token");
  const std::string target = tiny("llama_fp32");
  expect_clean_failure(run_command(eaglet("generate -m " + target + " -d " + target + " -p hi")), 1,
                       "this is a target model (architectures: LlamaForCausalLM), not an EAGLE-3 drafter");
}

}  // namespace
}  // namespace eaglet
