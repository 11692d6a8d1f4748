#pragma once
// The page at `/`: a chat that streams the answer with every token marked by origin (a draft token the target
// accepted, or the target's own), live accept len and tok/s, and a switch between plain and speculative decoding.
// Static HTML and JavaScript compiled in; it speaks to the server's own /v1 routes.
#include <string_view>

namespace eaglet::server {

std::string_view index_page();

}  // namespace eaglet::server
