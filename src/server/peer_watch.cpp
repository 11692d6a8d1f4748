#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

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

PeerWatch::PeerWatch(const std::string& remote_addr, int remote_port, int local_port)
    : remote_addr_(remote_addr), remote_port_(remote_port), local_port_(local_port) {
  if (remote_port < 0 || local_port < 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (is_the_connection(static_cast<int>(fd))) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool PeerWatch::is_the_connection(int fd) const {
  const SocketEnd peer = socket_endpoint(fd, true);
  return peer.port == remote_port_ && peer.address == remote_addr_ && socket_endpoint(fd, false).port == local_port_;
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
