// The file system as a hostile user leaves it, through the real command line (issue 23, deliverable 7): a symlink
// loop for a folder or a file, a FIFO where a file is read, an output under a regular file or in a read-only place,
// and a full disk. Each ends with exit code 1 and one line "eaglet: error: PATH: what is wrong", never an internal
// error, a hang (every command runs under `timeout 20`: a blocked read would exit 124) or a torn output file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "test_env.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string tiny(const std::string& v) { return test::fixtures_dir() + "/tiny/" + v; }
std::string target() { return tiny("llama_fp32"); }
std::string drafter() { return test::fixtures_dir() + "/drafters/specforge"; }  // serves target()

// eaglet ARGS, killed after 20 s (exit 124) should it wait on a FIFO; stdin closed so that nothing waits on it.
test::CommandResult eaglet(const std::string& args) {
  return test::run_command("timeout 20 " + test::eaglet_bin() + " " + args + " </dev/null");
}

// Exit code 1; stderr ends with one "eaglet: error: " line holding every needle; no internal error anywhere.
// (train-draft logs progress lines before it; every other command prints only the error.)
void expect_error(const test::CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 1) << "(124: it blocked) " << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
  std::string last = r.err;
  if (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  EXPECT_THAT(last, StartsWith("eaglet: error: ")) << r.err;
  EXPECT_EQ(r.err.find("eaglet: error: "), r.err.rfind("eaglet: error: ")) << "one error line: " << r.err;
  for (const std::string& needle : needles) EXPECT_THAT(last, HasSubstr(needle)) << r.err;
}

const std::string kLoop = ": too many levels of symbolic links (a symlink loop)";
const std::string kFifo = ": is a pipe (FIFO), not a regular file";

// A copy of the tiny target whose `file` is replaced by what `make` puts at the path.
std::string model_with(const std::string& name, const std::string& file,
                       const std::function<void(const std::string&)>& make) {
  const std::string dir = test::temp_dir(name);
  fs::copy(target(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::remove(dir + "/" + file);
  make(dir + "/" + file);
  return dir;
}

// Every temporary file a writer may leave: NAME.tmp-PID.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) found.push_back(e.path().string());
  return found;
}

TEST(FsHostileCli, SymlinkLoopForAModelDrafterDataOrOutputFolder) {
  const std::string dir = test::temp_dir("fs_loop");
  const std::string loop = dir + "/loop";
  fs::create_symlink("loop", loop);  // ln -s loop loop
  expect_error(eaglet("generate -m " + loop + " -p x"), {loop + kLoop});
  expect_error(eaglet("tokenize -m " + loop + " -p x"), {loop + kLoop});
  expect_error(eaglet("generate -m " + target() + " -d " + loop + " -p x -n 2"), {loop + kLoop});
  expect_error(eaglet("extract -m " + target() + " --data " + loop + " --out " + dir + "/o"),
               {loop + ": cannot open" + kLoop});
  expect_error(eaglet("perplexity -m " + target() + " -f " + loop), {loop + ": cannot open" + kLoop});
  expect_error(eaglet("train-draft -m " + target() + " --data " + loop + " --out " + dir + "/t"), {loop + kLoop});
  expect_error(eaglet("quantize -m " + target() + " --to int8 --out " + loop), {loop + kLoop});
  expect_error(eaglet("convert-draft -m " + target() + " -d " + drafter() + " --format sglang --out " + loop + "/c"),
               {loop + "/c" + kLoop});
  expect_error(eaglet("hidden -m " + target() + " -p x --out " + loop + "/h.safetensors"),
               {loop + "/h.safetensors: cannot write: " + loop + kLoop});
  EXPECT_TRUE(fs::is_symlink(loop));
}

TEST(FsHostileCli, ConfigOrTokenizerThatIsASymlinkToItself) {
  const std::string config =
      model_with("fs_config_loop", "config.json", [](const std::string& p) { fs::create_symlink("config.json", p); });
  expect_error(eaglet("generate -m " + config + " -p x -n 2"), {config + "/config.json" + kLoop});
  const std::string tok = model_with("fs_tokenizer_loop", "tokenizer.json",
                                     [](const std::string& p) { fs::create_symlink("tokenizer.json", p); });
  expect_error(eaglet("tokenize -m " + tok + " -p x"), {tok + "/tokenizer.json" + kLoop});
  expect_error(eaglet("generate -m " + tok + " -p x -n 2"), {tok + "/tokenizer.json" + kLoop});
  const std::string weights = model_with("fs_weights_loop", "model.safetensors",
                                         [](const std::string& p) { fs::create_symlink("model.safetensors", p); });
  expect_error(eaglet("generate -m " + weights + " -p x -n 2"), {weights + "/model.safetensors" + kLoop});
}

// A FIFO nobody writes, wherever a file is read: refused at once, named, with its kind.
TEST(FsHostileCli, FifoWhereAFileIsReadIsRefusedNotWaitedOn) {
  for (const std::string file :
       {"config.json", "tokenizer.json", "model.safetensors", "generation_config.json", "tokenizer_config.json"}) {
    const std::string dir =
        model_with("fs_fifo_" + file, file, [](const std::string& p) { ASSERT_EQ(mkfifo(p.c_str(), 0600), 0); });
    expect_error(eaglet("generate -m " + dir + " -p x -n 2"), {dir + "/" + file + kFifo});
  }
  const std::string dir = test::temp_dir("fs_fifo_inputs");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error(eaglet("tokenize -m " + target() + " -f " + fifo), {fifo + kFifo});
  expect_error(eaglet("perplexity -m " + target() + " -f " + fifo), {fifo + kFifo});
  expect_error(eaglet("bench spec -m " + target() + " -d " + drafter() + " --prompts " + fifo), {fifo + kFifo});
  expect_error(eaglet("extract -m " + target() + " --data " + fifo + " --out " + dir + "/o"), {fifo + kFifo});
  expect_error(eaglet("train-draft -m " + target() + " --online --data " + fifo + " --out " + dir + "/t"),
               {fifo + kFifo});
  expect_error(eaglet("train-draft -m " + target() + " --data " + fifo + " --out " + dir + "/t"),
               {fifo + ": is a pipe (FIFO), not a folder"});
  expect_error(eaglet("generate -m " + fifo + " -p x"), {fifo + ": is a pipe (FIFO), not a folder"});
  // The drafter's config and weights too.
  const std::string d = test::temp_dir("fs_fifo_drafter");
  fs::copy(drafter(), d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::remove(d + "/config.json");
  ASSERT_EQ(mkfifo((d + "/config.json").c_str(), 0600), 0);
  expect_error(eaglet("generate -m " + target() + " -d " + d + " -p x -n 2"), {d + "/config.json" + kFifo});
}

// --out below a regular file: the path cannot exist; named with what is wrong, before any work.
TEST(FsHostileCli, OutputUnderARegularFile) {
  const std::string dir = test::temp_dir("fs_out_under_file");
  const std::string file = dir + "/file";
  test::write_file(file, "x");
  const std::string parent_is_file = ": not a directory (a parent in the path is a file)";
  expect_error(eaglet("quantize -m " + target() + " --to int8 --out " + file + "/q"), {file + "/q" + parent_is_file});
  expect_error(eaglet("convert-draft -m " + target() + " -d " + drafter() + " --format sglang --out " + file + "/c"),
               {file + "/c" + parent_is_file});
  expect_error(eaglet("extract -m " + target() + " --data " + file + " --out " + file + "/e"),
               {file + "/e" + parent_is_file});
  expect_error(eaglet("hidden -m " + target() + " -p x --out " + file + "/h.safetensors"),
               {file + "/h.safetensors: cannot write: " + file + " is a regular file, not a folder"});
  expect_error(eaglet("hidden -m " + target() + " -p x --out /etc/passwd/x"),
               {"/etc/passwd/x: cannot write: /etc/passwd is a regular file, not a folder"});
  expect_error(eaglet("quantize -m " + target() + " --to int8 --out /etc/passwd/x"),
               {"/etc/passwd/x" + parent_is_file});
  expect_error(eaglet("quantize -m " + target() + " --to int8 --out " + file), {file + ": exists and is not a folder"});
  EXPECT_EQ(test::read_file(file), "x");
}

// A folder nobody may write in. Root passes permission checks, so as root the place is /sys, where even root can
// create nothing; otherwise a folder of mode 0555.
TEST(FsHostileCli, ReadOnlyOutputLocation) {
  std::string ro, cannot_create_folder, cannot_create_file;
  if (geteuid() == 0) {
    if (!fs::is_directory("/sys") || access("/sys", F_OK) != 0) GTEST_SKIP() << "running as root, and no /sys";
    ro = "/sys";
    cannot_create_folder = ": cannot create the folder: operation not permitted";
    cannot_create_file = ": cannot write: permission denied";
  } else {
    ro = test::temp_dir("fs_read_only") + "/ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
    cannot_create_folder = ": cannot create the folder: permission denied";
    cannot_create_file = ": cannot write: permission denied";
  }
  const std::string q = ro + "/eaglet-fs-hostile-q", c = ro + "/eaglet-fs-hostile-c", h = ro + "/eaglet-fs-hostile.st";
  expect_error(eaglet("quantize -m " + target() + " --to int8 --out " + q), {q + cannot_create_folder});
  expect_error(eaglet("convert-draft -m " + target() + " -d " + drafter() + " --format sglang --out " + c),
               {c + cannot_create_folder});
  expect_error(eaglet("hidden -m " + target() + " -p x --out " + h), {h + cannot_create_file});
  EXPECT_FALSE(fs::exists(q));
  EXPECT_FALSE(fs::exists(h));
  if (geteuid() != 0) {
    // The folder itself given as --out: it exists, but nothing can be written in it.
    expect_error(eaglet("quantize -m " + target() + " --to int8 --out " + ro),
                 {ro + ": cannot write in the folder: permission denied"});
    fs::permissions(ro, fs::perms::owner_all);
  }
}

// A full disk, simulated by a file size limit (bash: ulimit -f, in KiB; SIGXFSZ ignored, so the write fails with
// EFBIG): the command fails naming its output, which is not left under its final name, nor any temporary file.
TEST(FsHostileCli, FullDiskLeavesNoFileUnderTheFinalName) {
  const std::string dir = test::temp_dir("fs_full_disk");
  const auto limited = [](const std::string& args) {
    return test::run_command("bash -c \"trap '' XFSZ; ulimit -f 4; exec timeout 60 " + test::eaglet_bin() + " " + args +
                             " </dev/null\"");
  };
  const std::string too_large = ": write failed: file too large (over the file size limit)";
  const std::string h = dir + "/h.safetensors";
  // A short prompt (16 tokens, 37 KB of output: well over the 4 KiB limit): the whole tokenizer.json as the prompt
  // (8,500 tokens) ran past the 60 s timeout under ASan.
  const std::string prompt = " -p 'def add(a, b): return a + b'";
  expect_error(limited("hidden -m " + target() + prompt + " --out " + h), {h + too_large});
  EXPECT_FALSE(fs::exists(h));
  // The same command without the limit writes it (the limit, not something else, made it fail).
  ASSERT_EQ(eaglet("hidden -m " + target() + prompt + " --out " + dir + "/ok.safetensors").exit_code, 0);
  ASSERT_TRUE(fs::is_regular_file(dir + "/ok.safetensors"));
  EXPECT_GT(fs::file_size(dir + "/ok.safetensors"), 4096u);

  const std::string q = dir + "/q";
  const auto quantized = limited("quantize -m " + target() + " --to int8 --out " + q);
  expect_error(quantized, {q + "/model.safetensors" + too_large});
  EXPECT_FALSE(fs::exists(q + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(q + "/config.json"));  // written last: the folder does not pass for a model

  const std::string c = dir + "/c";
  expect_error(limited("convert-draft -m " + target() + " -d " + drafter() + " --format sglang --out " + c),
               {c + "/model.safetensors" + too_large});
  EXPECT_FALSE(fs::exists(c + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(c + "/config.json"));
  EXPECT_THAT(temporaries(dir), ::testing::IsEmpty());
}

}  // namespace
}  // namespace eaglet
