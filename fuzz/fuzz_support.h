#pragma once
// What the fuzz targets share: a scratch folder for the files the parsers read, input splitting, and the verdict on
// an input (a clean eaglet::Error is the expected outcome of bad bytes; anything else aborts, so the fuzzer and the
// replay tests see it).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace eaglet::fuzz {

// A folder of this process's own (removed at exit), and a new folder `name` inside it.
std::string scratch_dir();
std::string scratch_subdir(const std::string& name);
// fuzz/data/NAME: the fixed files some targets read besides the input.
std::string data_path(const std::string& name);

void write_file(const std::string& path, std::string_view bytes);
// An optional file: written when `bytes` is not empty, else removed.
void write_or_remove(const std::string& path, std::string_view bytes);
std::string_view as_text(const uint8_t* data, size_t size);

// Splits at the first NUL byte: {before, after}; without one, {everything, ""}.
std::pair<std::string_view, std::string_view> split_at_nul(std::string_view input);

// Runs `f`. An eaglet::Error must carry a one-line, non-empty message (the project's loud contract); any other
// exception is a bug (the CLI would print "internal error") and aborts with its message.
void expect_clean(const std::function<void()>& f);

}  // namespace eaglet::fuzz
