#include "server/sse.h"

#include <atomic>

#include "server/api_error.h"

namespace eaglet::server {

namespace {

bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// The events after the last text: the finishing chunk (or an error object), usage, [DONE].
bool send_end(httplib::DataSink& sink, const Job& job, const ResponseIds& ids) {
  const JobResult r = job.result();
  bool ok = r.error.empty()
                ? send_event(sink, chunk_json(job, ids, "", &r).dump())
                : send_event(sink, ApiError(500, "server_error", "generation failed: " + r.error).body().dump());
  if (ok && job.request.include_usage) ok = send_event(sink, usage_chunk_json(job, ids, r).dump());
  return ok && send_event(sink, "[DONE]");
}

}  // namespace

void stream_job(httplib::Response& res, std::shared_ptr<Job> job, const ResponseIds& ids,
                std::function<void()> closed) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, ids](size_t, httplib::DataSink& sink) {
        // A client that left is noticed here too, not only when a write fails: while the job is queued or
        // prefilling nothing is written (is_writable peeks at the socket).
        if (sink.is_writable && !sink.is_writable()) {
          job->cancel();
          return false;
        }
        const Job::Update u = job->wait(std::chrono::milliseconds(100));
        const bool news = !u.text.empty() || !u.pieces.empty() || !u.logprobs.empty();
        const bool ok =
            (!news || send_event(sink, chunk_json(*job, ids, u.text, nullptr, u.pieces, u.logprobs).dump())) &&
            (!u.finished || send_end(sink, *job, ids));
        if (!ok) {  // the client is gone: free the sequence at its next step
          job->cancel();
          return false;
        }
        if (u.finished) sink.done();
        return true;
      },
      [job, closed = std::move(closed), once = std::make_shared<std::atomic<bool>>(false)](bool success) {
        if (!success) job->cancel();
        if (!once->exchange(true)) closed();
      });
}

}  // namespace eaglet::server
