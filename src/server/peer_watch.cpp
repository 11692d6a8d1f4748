#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace eaglet::server {

SocketEnd socket_endpoint(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &size)
            : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size)) != 0)
    return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return {text, ntohs(v4.sin_port)};
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return {text, ntohs(v6.sin6_port)};
  }
  return {};
}

PeerWatch::PeerWatch(int fd, const std::string& remote_addr, int remote_port)
    : remote_addr_(remote_addr), remote_port_(remote_port) {
  if (fd >= 0 && is_the_connection(fd)) fd_ = fd;
}

bool PeerWatch::is_the_connection(int fd) const {
  const SocketEnd peer = socket_endpoint(fd, true);
  return peer.port == remote_port_ && peer.address == remote_addr_;
}

bool PeerWatch::gone() const {
  if (fd_ < 0) return false;
  if (!is_the_connection(fd_)) return true;  // closed, and maybe the descriptor reused
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLHUP | POLLERR)) != 0) return true;
  char byte = 0;
  return (p.revents & POLLIN) != 0 && recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace eaglet::server
