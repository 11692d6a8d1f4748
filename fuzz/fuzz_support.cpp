#include "fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace eaglet::fuzz {

namespace fs = std::filesystem;

std::string scratch_dir() {
  // Never freed: the exit handler that removes the folder runs after static destructors.
  static const std::string* dir = [] {
    std::string pattern = (fs::temp_directory_path() / "eaglet-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(scratch_dir(), ignored);
    });
    return new std::string(pattern);
  }();
  return *dir;
}

std::string scratch_subdir(const std::string& name) {
  const std::string dir = scratch_dir() + "/" + name;
  fs::create_directories(dir);
  return dir;
}

std::string data_path(const std::string& name) { return std::string(EAGLET_FUZZ_DATA) + "/" + name; }

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

void write_or_remove(const std::string& path, std::string_view bytes) {
  if (bytes.empty()) {
    fs::remove(path);
  } else {
    write_file(path, bytes);
  }
}

std::string_view as_text(const uint8_t* data, size_t size) {
  return size == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), size);
}

std::pair<std::string_view, std::string_view> split_at_nul(std::string_view input) {
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return {input, {}};
  return {input.substr(0, nul), input.substr(nul + 1)};
}

void expect_clean(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.empty() || message.find('\n') != std::string::npos) {
      std::fprintf(stderr, "fuzz: an eaglet::Error must be one non-empty line, got: [%s]\n", message.c_str());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: escaped as %s instead of a clear eaglet::Error: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace eaglet::fuzz
