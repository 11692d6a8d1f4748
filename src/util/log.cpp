#include "util/log.h"

#include <cstdarg>
#include <memory>
#include <mutex>
#include <set>

namespace eaglet {

namespace {

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}
LogSink& current_sink() {
  static LogSink sink;
  return sink;
}
thread_local std::string t_prefix;
bool progress_open = false;  // a "\r" line is on the terminal (guarded by log_mutex)

void emit(LogLevel level, const std::string& text) {
  const std::string line = t_prefix + text;
  std::lock_guard<std::mutex> lock(log_mutex());
  if (const LogSink& sink = current_sink()) {
    sink(level, line);
    return;
  }
  if (progress_open) {
    std::fputc('\n', stderr);
    progress_open = false;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(log_mutex());
  LogSink previous = std::move(current_sink());
  current_sink() = std::move(sink);
  return previous;
}

void log_info(const std::string& line) { emit(LogLevel::Info, line); }
void log_note(const std::string& line) { emit(LogLevel::Note, "note: " + line); }
void log_warning(const std::string& line) { emit(LogLevel::Warning, "warning: " + line); }

void log_note_once(const std::string& line) {
  static std::mutex m;
  static std::set<std::string> said;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!said.insert(line).second) return;
  }
  log_note(line);
}

void log_progress(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mutex());
  if (current_sink()) return;
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
  progress_open = true;
}

void log_progress_done() {
  std::lock_guard<std::mutex> lock(log_mutex());
  if (!progress_open) return;
  std::fputc('\n', stderr);
  progress_open = false;
}

void log_configuration(const std::string& title, const std::vector<std::pair<std::string, std::string>>& groups) {
  std::string s = title;
  for (const auto& [name, value] : groups) s += "\n  " + name + ": " + value;
  log_info(s);
}

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

LogContext::LogContext(std::string prefix) : previous_(std::move(t_prefix)) { t_prefix = std::move(prefix); }
LogContext::~LogContext() { t_prefix = std::move(previous_); }

struct ScopedLogCapture::Shared {
  mutable std::mutex m;
  std::vector<std::string> lines;
};

ScopedLogCapture::ScopedLogCapture() : shared_(std::make_shared<Shared>()) {
  previous_ = set_log_sink([s = shared_](LogLevel, const std::string& line) {
    std::lock_guard<std::mutex> lock(s->m);
    s->lines.push_back(line);
  });
}
ScopedLogCapture::~ScopedLogCapture() { set_log_sink(std::move(previous_)); }

std::vector<std::string> ScopedLogCapture::lines() const {
  std::lock_guard<std::mutex> lock(shared_->m);
  return shared_->lines;
}

std::string ScopedLogCapture::text() const {
  std::string out;
  for (const std::string& l : lines()) out += l + "\n";
  return out;
}

int ScopedLogCapture::count(const std::string& substring) const {
  int n = 0;
  for (const std::string& l : lines()) n += l.find(substring) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace eaglet
