#pragma once
// Server-sent events for a streaming generation: one `data: {chunk}` per piece of new text, the finishing chunk,
// the usage chunk when asked, then `data: [DONE]`. A client that goes away cancels its job.
#include <httplib.h>
#include <functional>
#include <memory>

#include "server/job.h"
#include "server/responses.h"

namespace eaglet::server {

// Sets `res` to stream `job`; `closed` runs once the stream ends, however it ends.
void stream_job(httplib::Response& res, std::shared_ptr<Job> job, const ResponseIds& ids, std::function<void()> closed);

}  // namespace eaglet::server
