// `eaglet doctor` as a command: the table, --json, exit status 1 on a FAIL, 2 on bad usage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "doctor/doctor_fixtures.h"
#include "test_env.h"

namespace eaglet::test {
namespace {

std::string doctor(const std::string& drafter, const std::string& flags = "") {
  const std::string prompts = temp_dir("doctor_cli_prompts") + "/prompts.jsonl";
  write_file(prompts, "{\"prompt\": \"the quick brown fox\"}\nabc def ghi\n");
  return eaglet_bin() + " doctor -t 1 -n 16 -m " + fixtures_dir() + "/drafters/targets/echo_fp32 -d " + drafter +
         " --prompts " + prompts + flags;
}

TEST(DoctorCli, WorkingDrafterExitsZeroWithOneLinePerCheck) {
  const CommandResult r = run_command(doctor(fixtures_dir() + "/drafters/exact_echo"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS  fc "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  acceptance chain 4/1/5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 WARN, 0 FAIL"), std::string::npos) << r.out;
}

TEST(DoctorCli, JsonAndExitOneOnAFail) {
  const std::string dir =
      make_drafter("cli_no_fc", "exact_echo", [](nlohmann::json&, Tensors& t) { t.erase("fc.weight"); });
  const CommandResult r = run_command(doctor(dir, " --json"));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["failed"].get<bool>());
  bool fc_failed = false;
  for (const auto& c : j["checks"]) fc_failed = fc_failed || (c["name"] == "fc" && c["status"] == "FAIL");
  EXPECT_TRUE(fc_failed) << r.out;
  const CommandResult table = run_command(doctor(dir));
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_NE(table.out.find("FAIL  fc "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("fix: "), std::string::npos) << table.out;
}

TEST(DoctorCli, ChatPromptsAndBuiltinPrompts) {
  const CommandResult chat = run_command(doctor(fixtures_dir() + "/drafters/exact_echo", " --chat"));
  EXPECT_EQ(chat.exit_code, 0) << chat.out << chat.err;
  const CommandResult builtin =
      run_command(eaglet_bin() + " doctor -t 1 -n 8 --json -m " + fixtures_dir() + "/drafters/targets/echo_fp32 -d " +
                  fixtures_dir() + "/drafters/exact_echo");
  ASSERT_EQ(builtin.exit_code, 0) << builtin.out << builtin.err;
  EXPECT_EQ(nlohmann::json::parse(builtin.out)["measured"]["prompts"].get<int>(), 4);
}

// The doctor loads a drafter several times (the live checks, each probe); a note about its checkpoint is said once.
TEST(DoctorCli, ANoteAboutTheDrafterIsPrintedOnce) {
  const std::string dir = make_drafter("cli_rotary", "exact_echo", [](nlohmann::json&, Tensors& t) {
    t["target_model.model.rotary_emb.inv_freq"] = f32_tensor({8}, std::vector<float>(8, 0.5f));
  });
  const CommandResult r = run_command(doctor(dir));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string note = "note: " + dir +
                           "/model.safetensors: ignoring 1 tensor(s) such as "
                           "target_model.model.rotary_emb.inv_freq";
  size_t count = 0;
  for (size_t at = r.err.find(note); at != std::string::npos; at = r.err.find(note, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << r.err;
}

TEST(DoctorCli, BadUsageAndBadInput) {
  EXPECT_EQ(run_command(eaglet_bin() + " doctor -m " + fixtures_dir() + "/drafters/targets/echo_fp32").exit_code, 2);
  const CommandResult missing =
      run_command(eaglet_bin() + " doctor -m " + fixtures_dir() + "/drafters/targets/echo_fp32 -d " + fixtures_dir() +
                  "/drafters/exact_echo --prompts /nonexistent");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent: cannot open"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace eaglet::test
