#pragma once
// The log sink: library code reports notes, warnings and progress through it instead of writing to stderr, so that
// each front end decides where they go (llama.cpp's common/log.h plays this part there). The CLI keeps the default,
// stderr; the server prefixes the request id (LogContext); tests capture lines (ScopedLogCapture).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace eaglet {

enum class LogLevel { Info, Note, Warning };

// One line (no trailing newline) with its level; Note and Warning lines arrive prefixed "note: " / "warning: ".
using LogSink = std::function<void(LogLevel, const std::string&)>;

// Replaces the sink (null: stderr); returns the previous one. Calls from any thread are serialized.
LogSink set_log_sink(LogSink sink);

void log_info(const std::string& line);     // start-up lines, summaries: as given
void log_note(const std::string& line);     // "note: ..."
void log_warning(const std::string& line);  // "warning: ..."
// A note said once per process, however many times the code that finds it runs (a drafter loaded by several checks).
void log_note_once(const std::string& line);
// A progress line that rewrites itself ("\r...") on stderr; a sink set by set_log_sink gets none of them.
// log_progress_done() ends the line.
void log_progress(const std::string& line);
void log_progress_done();

// The effective configuration of a command: a title line, then one "  group: value" line each (generate, serve and
// bench print theirs once every check has passed).
void log_configuration(const std::string& title, const std::vector<std::pair<std::string, std::string>>& groups);

// printf-style formatting into a std::string, for the calls above.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Lines logged by this thread while it lives start with `prefix` (the server: "request 12: ").
class LogContext {
 public:
  explicit LogContext(std::string prefix);
  ~LogContext();
  LogContext(const LogContext&) = delete;
  LogContext& operator=(const LogContext&) = delete;

 private:
  std::string previous_;
};

// Collects every line logged while it lives (tests); the previous sink is restored afterwards.
class ScopedLogCapture {
 public:
  ScopedLogCapture();
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;
  std::vector<std::string> lines() const;
  std::string text() const;  // the lines joined by newlines
  int count(const std::string& substring) const;

 private:
  LogSink previous_;
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace eaglet
