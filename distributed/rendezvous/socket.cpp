// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/rendezvous/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "tensor/check.h"

namespace tg::distributed::net {

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Binds a dual-stack IPv6 socket (which also accepts IPv4), or an IPv4 one where IPv6 is off.
Socket bind_any(int port, std::string& error) {
  for (int family : {AF_INET6, AF_INET}) {
    Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      error = std::strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
      setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_any;
      addr.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    if (rc == 0) return s;
    error = std::strerror(errno);
    if (errno == EADDRINUSE) break;  // the same port is taken on IPv4 too
  }
  return Socket();
}

}  // namespace

Socket listen_any(int port, int backlog) {
  std::string error;
  Socket s = bind_any(port, error);
  TG_CHECK(s.valid(), "[distributed] cannot listen on port ", port, ": ", error,
           ": expected a free port (is another job or rendezvous server using it? pick another MASTER_PORT)");
  TG_CHECK(::listen(s.fd(), backlog) == 0, "[distributed] listen on port ", port, " failed: ", std::strerror(errno));
  set_nonblocking(s.fd(), true);
  return s;
}

int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  TG_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "[distributed] getsockname failed: ",
           std::strerror(errno));
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

int find_free_port() {
  std::string error;
  Socket s = bind_any(0, error);
  TG_CHECK(s.valid(), "[distributed] cannot find a free port: ", error);
  return local_port(s.fd());
}

Socket connect_until(const std::string& host, int port, Clock::time_point deadline, std::string& last_error) {
  auto backoff = std::chrono::milliseconds(20);
  std::string service = std::to_string(port);
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int gai = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (gai != 0) {
      last_error = std::string("cannot resolve the host name: ") + gai_strerror(gai);
    }
    for (addrinfo* ai = gai == 0 ? found : nullptr; ai != nullptr; ai = ai->ai_next) {
      Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!s.valid()) {
        last_error = std::strerror(errno);
        continue;
      }
      // Non-blocking connect, so an unanswered attempt cannot outlive the deadline.
      set_nonblocking(s.fd(), true);
      int rc = ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        pollfd p{s.fd(), POLLOUT, 0};
        int n;
        do {
          n = ::poll(&p, 1, std::min(remaining_ms(deadline), 2000));
        } while (n < 0 && errno == EINTR);
        socklen_t len = sizeof(err);
        if (n <= 0) err = ETIMEDOUT;
        else if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
      if (err == 0) {
        set_nonblocking(s.fd(), false);
        int one = 1;
        setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        freeaddrinfo(found);
        return s;
      }
      last_error = std::strerror(err);
    }
    if (found != nullptr) freeaddrinfo(found);
    if (Clock::now() >= deadline) return Socket();
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

void set_blocking(int fd, bool blocking) { set_nonblocking(fd, !blocking); }

Socket accept_until(int listener, Clock::time_point deadline) {
  while (true) {
    Socket s(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (s.valid()) {
      int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) return Socket();
    const int wait = remaining_ms(deadline);
    if (wait == 0) return Socket();
    pollfd p{listener, POLLIN, 0};
    ::poll(&p, 1, wait);
  }
}

namespace {

// The numeric form of a socket address ("10.0.0.7", "fe80::1").
std::string numeric_host(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(addr, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  std::string out = host;
  if (auto pct = out.find('%'); pct != std::string::npos) out.resize(pct);  // a scope id ("%eth0")
  return out;
}

std::string interface_address(const std::string& ifname) {
  ifaddrs* all = nullptr;
  TG_CHECK(getifaddrs(&all) == 0, "[distributed] cannot list the network interfaces: ", std::strerror(errno));
  std::string v4, v6, present;
  for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (present.find(std::string(" ") + a->ifa_name + ",") == std::string::npos) present += std::string(" ") + a->ifa_name + ",";
    if (ifname != a->ifa_name) continue;
    if (family == AF_INET && v4.empty()) v4 = numeric_host(a->ifa_addr, sizeof(sockaddr_in));
    if (family == AF_INET6 && v6.empty() &&
        !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr))
      v6 = numeric_host(a->ifa_addr, sizeof(sockaddr_in6));
  }
  freeifaddrs(all);
  if (!present.empty()) present.pop_back();
  TG_CHECK(!v4.empty() || !v6.empty(), "[distributed] network interface '", ifname, "' has no usable address: ",
           "expected one of the interfaces with an address:", present);
  return v4.empty() ? v6 : v4;
}

// The local address the kernel would use to reach host:port (a UDP "connect" sends nothing).
std::string route_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string out;
  for (addrinfo* ai = found; ai != nullptr && out.empty(); ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid() || ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len) == 0)
      out = numeric_host(reinterpret_cast<sockaddr*>(&local), len);
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace

std::string advertised_address(const std::string& toward_host, int toward_port, const std::string& ifname) {
  if (!ifname.empty()) return interface_address(ifname);
  std::string route = route_address(toward_host, toward_port);
  return route.empty() ? "127.0.0.1" : route;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

ReadStatus recv_exact(int fd, char* out, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadStatus::kClosed;
    if (n == 0) return ReadStatus::kTimedOut;
    ssize_t got = ::recv(fd, out, size, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return ReadStatus::kClosed;
    out += got;
    size -= static_cast<size_t>(got);
  }
  return ReadStatus::kOk;
}

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_i64(std::string& out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes);
}

std::string frame(std::string_view body) {
  TG_CHECK(body.size() <= kMaxFrame, "[distributed] a store message of ", body.size(),
           " bytes is too large: expected at most ", kMaxFrame, " bytes");
  std::string out;
  out.reserve(4 + body.size());
  put_u32(out, static_cast<uint32_t>(body.size()));
  out.append(body);
  return out;
}

uint32_t read_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string_view Reader::take(size_t n) {
  if (!ok_ || rest_.size() < n) {
    ok_ = false;
    return {};
  }
  std::string_view out = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return out;
}

uint8_t Reader::u8() {
  auto s = take(1);
  return ok_ ? static_cast<uint8_t>(s[0]) : 0;
}

int64_t Reader::i64() {
  auto s = take(8);
  if (!ok_) return 0;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return static_cast<int64_t>(u);
}

std::string Reader::bytes() {
  auto len = take(4);
  if (!ok_) return {};
  return std::string(take(read_u32(len.data())));
}

std::string format_duration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms / 1000) + "." + std::to_string((ms % 1000) / 100) + " s";
}

}  // namespace tg::distributed::net
