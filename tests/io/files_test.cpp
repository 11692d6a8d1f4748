// io/files.h: every special file refused by kind and path, every output written whole or not at all.
#include "io/files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/json_util.h"
#include "io/prompts_file.h"
#include "io/safetensors.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Files, DescribesTheSystemErrorsUsersMeet) {
  EXPECT_EQ(describe_errno(ELOOP), "too many levels of symbolic links (a symlink loop)");
  EXPECT_EQ(describe_errno(ENOTDIR), "not a directory (a parent in the path is a file)");
  EXPECT_EQ(describe_errno(EROFS), "read-only file system");
  EXPECT_EQ(describe_errno(EACCES), "permission denied");
  EXPECT_EQ(describe_errno(ENOSPC), "no space left on device");
  EXPECT_EQ(describe_errno(EBUSY), "device or resource busy");  // any other: the system's words, lower-case
  EXPECT_EQ(describe_error_code(std::make_error_code(std::errc::too_many_symbolic_link_levels)),
            "too many levels of symbolic links (a symlink loop)");
}

// Every kind of non-regular file, through each reader: named, with its kind, and never waited on.
TEST(Files, EveryReaderRefusesWhatIsNotARegularFile) {
  const std::string dir = test::temp_dir("files_special");
  const std::string fifo = dir + "/fifo", sock = dir + "/sock", loop = dir + "/loop", file = dir + "/file";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("loop", loop);
  test::write_file(file, "x");
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, fifo + ": is a pipe (FIFO), not a regular file"},
      {sock, sock + ": is a socket, not a regular file"},
      {"/dev/zero", "/dev/zero: is a device (character device), not a regular file"},
      {dir, dir + ": is a directory, not a regular file"},
      {loop, loop + ": cannot open: too many levels of symbolic links (a symlink loop)"},
      {file + "/x", file + "/x: cannot open: not a directory (a parent in the path is a file)"},
      {dir + "/missing", dir + "/missing: cannot open: no such file or directory"},
  };
  for (const auto& [path, message] : cases) {
    EXPECT_THAT(error_of([&] { read_file(path); }), HasSubstr(message));
    EXPECT_THAT(error_of([&] { read_json_file(path); }), HasSubstr(message));
    EXPECT_THAT(error_of([&] { read_prompts_file(path, 0); }), HasSubstr(message));
    EXPECT_THAT(error_of([&] { SafetensorsFile::open(path); }), HasSubstr(message));
    EXPECT_THAT(error_of([&] { require_regular_file(path); }), HasSubstr(message));
  }
  close(s);
  EXPECT_EQ(read_regular_file(file), "x");
}

TEST(Files, ExistenceAndFoldersNameALoop) {
  const std::string dir = test::temp_dir("files_exists");
  const std::string loop = dir + "/loop", file = dir + "/file";
  fs::create_symlink("loop", loop);
  test::write_file(file, "x");
  EXPECT_THAT(error_of([&] { path_exists(loop); }), HasSubstr(loop + ": too many levels of symbolic links"));
  EXPECT_THAT(error_of([&] { path_exists(loop + "/config.json"); }), HasSubstr(loop + "/config.json: too many levels"));
  EXPECT_THAT(error_of([&] { is_directory_path(loop); }), HasSubstr(loop + ": too many levels"));
  EXPECT_FALSE(path_exists(dir + "/missing"));
  EXPECT_FALSE(path_exists(file + "/x"));  // as std::filesystem::exists has it
  EXPECT_TRUE(path_exists(file));
  EXPECT_TRUE(is_directory_path(dir));
  EXPECT_FALSE(is_directory_path(file));
  EXPECT_THAT(error_of([&] { require_directory(loop, "a model"); }),
              HasSubstr(loop + ": too many levels of symbolic links (a symlink loop) (a model)"));
  EXPECT_THAT(error_of([&] { require_directory(file, "a model"); }),
              HasSubstr(file + ": is a regular file, not a folder (a model)"));
  EXPECT_THAT(error_of([&] { require_directory(dir + "/missing", ""); }),
              HasSubstr(dir + "/missing: no such file or directory"));
  EXPECT_EQ(error_of([&] { require_directory(dir, "a model"); }), "(no error)");
}

TEST(Files, OutputFoldersThatCannotBeMade) {
  const std::string dir = test::temp_dir("files_out_dir");
  const std::string loop = dir + "/loop", file = dir + "/file";
  fs::create_symlink("loop", loop);
  test::write_file(file, "x");
  EXPECT_THAT(error_of([&] { create_output_dir(file + "/out"); }),
              HasSubstr(file + "/out: not a directory (a parent in the path is a file)"));
  EXPECT_THAT(error_of([&] { create_output_dir(file); }),
              HasSubstr(file + ": exists and is not a folder (it is a regular file)"));
  EXPECT_THAT(error_of([&] { create_output_dir(loop); }), HasSubstr(loop + ": too many levels of symbolic links"));
  EXPECT_THAT(error_of([&] { create_output_dir(loop + "/out"); }), HasSubstr(loop + "/out: too many levels"));
  create_output_dir(dir + "/a/b/c");
  EXPECT_TRUE(fs::is_directory(dir + "/a/b/c"));
  create_output_dir(dir + "/a/b/c");  // exists: fine
}

TEST(Files, ReadOnlyPlaces) {
  if (geteuid() == 0) {
    // Root passes permission checks; /sys refuses even root.
    if (!fs::is_directory("/sys")) GTEST_SKIP() << "running as root (permissions do not bind) and no /sys";
    EXPECT_THAT(error_of([] { create_output_dir("/sys/eaglet-files-test"); }),
                HasSubstr("/sys/eaglet-files-test: cannot create the folder: operation not permitted"));
    EXPECT_THAT(error_of([] { write_file_atomic("/sys/eaglet-files-test.json", "{}"); }),
                HasSubstr("/sys/eaglet-files-test.json: cannot write: permission denied"));
    return;
  }
  const std::string ro = test::temp_dir("files_read_only") + "/ro";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THAT(error_of([&] { create_output_dir(ro); }),
              HasSubstr(ro + ": cannot write in the folder: permission denied"));
  EXPECT_THAT(error_of([&] { create_output_dir(ro + "/x"); }),
              HasSubstr(ro + "/x: cannot create the folder: permission denied"));
  EXPECT_THAT(error_of([&] { write_file_atomic(ro + "/x.json", "{}"); }),
              HasSubstr(ro + "/x.json: cannot write: permission denied"));
  fs::permissions(ro, fs::perms::owner_all);
  EXPECT_THAT(listing(ro), IsEmpty());
}

TEST(Files, AtomicWritesReplaceWholeAndLeaveNoTemporary) {
  const std::string dir = test::temp_dir("files_atomic");
  const std::string path = dir + "/out.json";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(test::read_file(path), "second");
  {
    AtomicFile abandoned(path);  // never committed: its temporary file goes, the old content stays
    abandoned.write("half");
    EXPECT_TRUE(fs::exists(abandoned.temp_path()));
  }
  EXPECT_EQ(test::read_file(path), "second");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"out.json"});
  // A writer that takes a file name (torch::save) and fails: an Error naming the output, no temporary left.
  const std::string pt = dir + "/params.pt";
  EXPECT_THAT(error_of([&] {
                write_atomically(pt, [](const std::string& temp) {
                  test::write_file(temp, "torn");
                  throw std::runtime_error("PytorchStreamWriter failed writing file data/0\nbacktrace...");
                });
              }),
              AllOf(HasSubstr(pt + ": write failed (PytorchStreamWriter failed writing file data/0)"),
                    ::testing::Not(HasSubstr("backtrace"))));
  write_atomically(dir + "/ok.pt", [](const std::string& temp) { test::write_file(temp, "whole"); });
  EXPECT_EQ(test::read_file(dir + "/ok.pt"), "whole");
  copy_file_atomic(dir + "/ok.pt", dir + "/copy.pt");
  EXPECT_EQ(test::read_file(dir + "/copy.pt"), "whole");
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"copy.pt", "ok.pt", "out.json"}));
}

// A full disk, simulated in a child process by a file size limit (SIGXFSZ ignored: the write fails with EFBIG).
// Returns the child's error message ("" if none was thrown).
std::string write_with_file_size_limit(rlim_t limit, const std::function<void()>& write) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{limit, limit};
    setrlimit(RLIMIT_FSIZE, &rl);
    std::string message;
    try {
      write();
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("not an eaglet::Error: ") + e.what();
    }
    if (!message.empty() && ::write(pipe_fds[1], message.data(), message.size()) < 0) _exit(3);
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) message.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return message;
}

TEST(Files, AFullDiskLeavesNothingUnderTheFinalName) {
  const std::string dir = test::temp_dir("files_full_disk");
  const std::string big(64 * 1024, 'x');
  const std::string json = dir + "/config.json";
  EXPECT_THAT(write_with_file_size_limit(16 * 1024, [&] { write_file_atomic(json, big); }),
              HasSubstr(json + ": write failed: file too large (over the file size limit)"));
  EXPECT_THAT(listing(dir), IsEmpty());

  // An older file of that name stays whole.
  write_file_atomic(json, "old");
  EXPECT_THAT(write_with_file_size_limit(16 * 1024, [&] { write_file_atomic(json, big); }),
              HasSubstr(json + ": write failed: file too large"));
  EXPECT_EQ(test::read_file(json), "old");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"config.json"});

  // The safetensors writer, tensor by tensor; and a copy.
  const std::string st = dir + "/model.safetensors";
  std::vector<float> weights(32 * 1024, 1.0f);
  EXPECT_THAT(write_with_file_size_limit(16 * 1024,
                                         [&] {
                                           write_safetensors(st, {{"w", DType::F32, {32, 1024}, weights.data()}});
                                         }),
              HasSubstr(st + ": write failed: file too large"));
  EXPECT_FALSE(fs::exists(st));
  test::write_file(dir + "/big", big);
  EXPECT_THAT(write_with_file_size_limit(16 * 1024, [&] { copy_file_atomic(dir + "/big", dir + "/copy"); }),
              HasSubstr(dir + "/copy: write failed: file too large"));
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"big", "config.json"}));
  // Below the limit the same writes succeed.
  EXPECT_EQ(write_with_file_size_limit(1 << 20, [&] { write_file_atomic(json, big); }), "");
  EXPECT_EQ(test::read_file(json), big);
}

}  // namespace
}  // namespace eaglet
