#pragma once
// The file system as users can break it: every file eaglet reads and every file or folder it writes goes through
// these, so that a symlink loop, a FIFO, a device, a file where a folder should be, a read-only folder or a full
// disk end in one Error naming the path and what is wrong (never a hang, a half-written file or an internal error).
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace eaglet {

// The system's message for an errno value, lower-case, with a hint where the system's words are cryptic:
// ELOOP -> "too many levels of symbolic links (a symlink loop)", ENOTDIR -> "not a directory (a parent in the path is
// a file)", EROFS -> "read-only file system", ENOSPC -> "no space left on device".
std::string describe_errno(int err);
std::string describe_error_code(const std::error_code& ec);  // the same for a std::filesystem error

// True if something is at `path` (symlinks followed); false if nothing is (ENOENT, or ENOTDIR as std::filesystem
// has it). Any other failure (a symlink loop, permission denied) is an Error naming the path.
bool path_exists(const std::string& path);
// True if `path` is a directory; false if nothing is there; an Error for a loop or permission denied.
bool is_directory_path(const std::string& path);

// An Error unless `path` is a directory: "PATH: not found", "PATH: is a regular file, not a folder (what)",
// "PATH: too many levels of symbolic links (a symlink loop)". `what` says what the folder is for, e.g.
// "expected a Hugging Face model folder".
void require_directory(const std::string& path, const std::string& what);

// The one way eaglet opens a file to read it. An Error naming the path unless it is a regular file: the kind found
// ("is a pipe (FIFO), not a regular file", "is a directory, not a regular file", "is a device (character device)...")
// or why it cannot be opened ("cannot open: no such file or directory", "cannot open: permission denied"). A FIFO
// is never waited on (opened non-blocking, checked with fstat on the opened descriptor). Returns the descriptor,
// which the caller closes.
int open_regular_file(const std::string& path);
// The same check without keeping the file open.
void require_regular_file(const std::string& path);
// The whole file (through open_regular_file), every read checked.
std::string read_regular_file(const std::string& path);

// Creates the output folder `path` and its parents. An Error naming the path: "exists and is not a folder",
// "cannot create the folder: not a directory (a parent in the path is a file)", "...: read-only file system".
// It then checks that a file can be created inside ("cannot write in the folder: permission denied").
void create_output_dir(const std::string& path);

// An output file written whole or not at all: the bytes go to PATH.tmp-PID in the same folder, are flushed to disk
// (fsync) and closed, each step checked, and only then renamed to PATH. A failure (disk full, file size limit,
// read-only folder) removes the temporary file and throws an Error naming PATH and the system's message; the
// destructor of an uncommitted file removes the temporary file too. An existing PATH stays untouched until commit.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void abandon(const std::string& what, int err);
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// PATH's whole content, atomically (AtomicFile).
void write_file_atomic(const std::string& path, std::string_view bytes);
// A copy of the regular file `from` at `to`, atomically, read and written in blocks (files larger than memory).
void copy_file_atomic(const std::string& from, const std::string& to);
// For writers that take a file name (torch::save): `write` writes the temporary name it is given; the file is then
// checked, flushed to disk and renamed to `path`. An exception from `write` (disk full inside libtorch) removes the
// temporary file and becomes an Error naming `path`.
void write_atomically(const std::string& path, const std::function<void(const std::string& temp_path)>& write);

}  // namespace eaglet
