#pragma once
// Whether the client of a request that is answered at its end (not streamed) is still there, so that its job is
// cancelled when it leaves instead of decoding to max_tokens. cpp-httplib 0.11 does not hand a handler its socket:
// the socket is found once among this process's descriptors by its addresses (getsockname/getpeername), and checked
// again each time before it is read, so that a descriptor reused by another connection is never taken for it.
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
  PeerWatch(const std::string& remote_addr, int remote_port, int local_port);
  bool found() const { return fd_ >= 0; }
  // The client closed the connection (an end of stream with no request left unread), or its socket is gone. False
  // when the socket was not found: a request is never cancelled on a guess.
  bool gone() const;

 private:
  bool is_the_connection(int fd) const;
  std::string remote_addr_;
  int remote_port_ = -1, local_port_ = -1;
  int fd_ = -1;
};

}  // namespace eaglet::server
