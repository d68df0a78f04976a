// widen_listen_backlog (serve/server.h): a socket listening with cpp-httplib's backlog of 5 and
// never accepting completes only about that many handshakes of a burst of connects (the kernel
// drops the other SYNs until a retransmit, about 1 s later); widened, the whole burst completes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

#include "serve/server.h"

namespace golinear::serve {
namespace {

// A burst of `n` non-blocking connects to 127.0.0.1:port; how many complete within `ms`.
int connects_completed(int port, int n, int ms) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, (sockaddr*)&a, sizeof a);
    fds.push_back(fd);
  }
  usleep(ms * 1000);
  int done = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 0) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      ++done;
    close(fd);
  }
  return done;
}

// A socket on a free loopback port listening with `backlog`; its port in *port.
int listening_socket(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, (sockaddr*)&a, sizeof a), 0);
  EXPECT_EQ(listen(fd, backlog), 0);
  socklen_t len = sizeof a;
  getsockname(fd, (sockaddr*)&a, &len);
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(ListenBacklog, WideningLetsABurstOfConnectsComplete) {
  int narrow_port = 0, wide_port = 0;
  const int narrow = listening_socket(5, &narrow_port);
  const int wide = listening_socket(5, &wide_port);
  ASSERT_TRUE(widen_listen_backlog(wide_port));
  EXPECT_FALSE(widen_listen_backlog(0));  // no accepting socket of port 0
  EXPECT_LE(connects_completed(narrow_port, 64, 300), 16);
  EXPECT_EQ(connects_completed(wide_port, 64, 300), 64);
  close(narrow);
  close(wide);
}

}  // namespace
}  // namespace golinear::serve
