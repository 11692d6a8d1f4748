#include "io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace eaglet {

namespace {

// "is a pipe (FIFO), not a regular file (...)": what a non-regular file is, for messages.
std::string not_regular(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, not a regular file";
  if (S_ISFIFO(mode)) return "is a pipe (FIFO), not a regular file (reading it would wait for a writer, maybe forever)";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  if (S_ISCHR(mode))
    return "is a device (character device), not a regular file (a device such as /dev/zero never ends)";
  if (S_ISBLK(mode)) return "is a device (block device), not a regular file";
  return "is not a regular file";
}

std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a pipe (FIFO)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a folder";
}

std::string temp_name(const std::string& path) { return path + ".tmp-" + std::to_string(::getpid()); }

}  // namespace

std::string describe_errno(int err) {
  switch (err) {
    case ELOOP: return "too many levels of symbolic links (a symlink loop)";
    case ENOTDIR: return "not a directory (a parent in the path is a file)";
    case ENOENT: return "no such file or directory";
    case EACCES: return "permission denied";
    case EPERM: return "operation not permitted";
    case EROFS: return "read-only file system";
    case ENOSPC: return "no space left on device";
    case EDQUOT: return "disk quota exceeded";
    case EFBIG: return "file too large (over the file size limit)";
    case EISDIR: return "is a directory";
    case ENAMETOOLONG: return "file name too long";
    case EIO: return "input/output error";
    default: break;
  }
  std::string text = std::strerror(err);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string describe_error_code(const std::error_code& ec) {
  if (ec.category() == std::generic_category() || ec.category() == std::system_category())
    return describe_errno(ec.value());
  return ec.message();
}

bool path_exists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  fail(path, ": ", describe_errno(errno));
}

bool is_directory_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  if (errno == ENOENT || errno == ENOTDIR) return false;
  fail(path, ": ", describe_errno(errno));
}

void require_directory(const std::string& path, const std::string& what) {
  const std::string why = what.empty() ? "" : " (" + what + ")";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, ": ", describe_errno(errno), why);
  if (!S_ISDIR(st.st_mode)) fail(path, ": is ", kind_of(st.st_mode), ", not a folder", why);
}

int open_regular_file(const std::string& path) {
  struct stat st {};
  // stat first: a device is not even opened (opening one can have effects), and the errors read plainly.
  if (::stat(path.c_str(), &st) != 0) fail(path, ": cannot open: ", describe_errno(errno));
  if (!S_ISREG(st.st_mode)) fail(path, ": ", not_regular(st.st_mode));
  // Non-blocking: should the path have become a FIFO since, opening it must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(path, ": cannot open: ", describe_errno(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (!S_ISREG(st.st_mode)) fail(path, ": ", not_regular(st.st_mode));
    fail(path, ": cannot open: ", describe_errno(err));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

void require_regular_file(const std::string& path) { ::close(open_regular_file(path)); }

std::string read_regular_file(const std::string& path) {
  const int fd = open_regular_file(path);
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) text.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(path, ": read failed: ", describe_errno(err));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void create_output_dir(const std::string& path) {
  if (path.empty()) fail("the output folder is an empty path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) fail(path, ": exists and is not a folder (it is ", kind_of(st.st_mode), ")");
  } else if (errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) fail(path, ": cannot create the folder: ", describe_error_code(ec));
  } else {
    fail(path, ": ", describe_errno(errno));
  }
  // Root passes any permission check, but not a read-only mount; a user is stopped by either, here rather than
  // after the work.
  if (::access(path.c_str(), W_OK | X_OK) != 0) fail(path, ": cannot write in the folder: ", describe_errno(errno));
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), temp_(temp_name(path_)) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST || attempt > 0) break;
    ::unlink(temp_.c_str());  // left by a killed process that had our process id
  }
  const int err = errno;
  if (err == ENOENT || err == ENOTDIR || err == ELOOP) {  // name the folder, which is what is wrong
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    if (!dir.empty()) {
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0) fail(path_, ": cannot write: ", dir, ": ", describe_errno(errno));
      if (!S_ISDIR(st.st_mode)) fail(path_, ": cannot write: ", dir, " is ", kind_of(st.st_mode), ", not a folder");
    }
  }
  fail(path_, ": cannot write: ", describe_errno(err));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFile::abandon(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
  committed_ = true;  // nothing left for the destructor
  fail(path_, ": ", what, ": ", describe_errno(err));
}

void AtomicFile::write(const void* data, size_t n) {
  if (committed_) fail(path_, ": written after it was closed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      abandon("write failed", errno);
    }
    if (done == 0) abandon("write failed", ENOSPC);
    p += done;
    n -= static_cast<size_t>(done);
  }
}

void AtomicFile::commit() {
  if (committed_) return;
  if (::fsync(fd_) != 0 && errno != EINVAL) abandon("write failed (flushing to disk)", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) abandon("write failed (closing)", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) abandon("cannot rename " + temp_ + " to it", errno);
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

void copy_file_atomic(const std::string& from, const std::string& to) {
  const int fd = open_regular_file(from);
  AtomicFile out(to);
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(from, ": read failed: ", describe_errno(err));
    }
    try {
      out.write(buffer.data(), static_cast<size_t>(n));
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  ::close(fd);
  out.commit();
}

void write_atomically(const std::string& path, const std::function<void(const std::string& temp_path)>& write) {
  const std::string temp = temp_name(path);
  ::unlink(temp.c_str());
  const auto discard = [&](const std::string& what, int err) {
    ::unlink(temp.c_str());
    fail(path, ": ", what, err != 0 ? ": " + describe_errno(err) : std::string());
  };
  try {
    write(temp);
  } catch (const Error&) {
    ::unlink(temp.c_str());
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();  // libtorch's messages run over many lines (a backtrace): the first says it
    what = what.substr(0, what.find('\n'));
    discard("write failed (" + what + ")", 0);
  }
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) discard("write failed (" + temp + " was not written)", errno);
  const int synced = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (synced != 0 && err != EINVAL) discard("write failed (flushing to disk)", err);
  if (::rename(temp.c_str(), path.c_str()) != 0) discard("cannot rename " + temp + " to it", errno);
}

}  // namespace eaglet
