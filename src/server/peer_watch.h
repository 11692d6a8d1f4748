#pragma once
// Whether the client of a request that is answered at its end (not streamed) is still there, so that its job is
// cancelled when it leaves instead of decoding to max_tokens. The socket is the one the HTTP front answers on this
// thread (http_front.h); its peer is checked against the request's address each time before it is read, so that a
// descriptor reused by another connection is never taken for it.
#include <string>

namespace eaglet::server {

// One end of a connected socket: numeric address and port (port -1: not an IP socket).
struct SocketEnd {
  std::string address;
  int port = -1;
};
SocketEnd socket_endpoint(int fd, bool peer);  // getpeername (peer) or getsockname

class PeerWatch {
 public:
  // `fd`: the request's socket (-1: unknown), whose peer must be remote_addr:remote_port.
  PeerWatch(int fd, const std::string& remote_addr, int remote_port);
  bool found() const { return fd_ >= 0; }
  // The client closed the connection (an end of stream with no request left unread), or its socket is gone. False
  // when the socket was not found: a request is never cancelled on a guess.
  bool gone() const;

 private:
  bool is_the_connection(int fd) const;
  std::string remote_addr_;
  int remote_port_ = -1;
  int fd_ = -1;
};

}  // namespace eaglet::server
