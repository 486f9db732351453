// TCP plumbing for the rendezvous store and the launcher: an owning socket handle, listening,
// connecting with retries until a deadline, and the length-prefixed frames the store speaks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tg::distributed::net {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor and closes it on destruction, so no path leaks a socket.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // The descriptor, or -1 when empty.
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release();
  // Closes now (idempotent).
  void close();

 private:
  int fd_ = -1;
};

// Listens on every interface at `port` (0: a free port the kernel picks) with SO_REUSEADDR, so a
// restarted job can reuse its port at once; the socket is non-blocking. Throws tg::Error on failure.
Socket listen_any(int port, int backlog = 128);
// The local port a bound socket ended up on (to learn the port chosen for port 0).
int local_port(int fd);
// A port that was free a moment ago (bind to port 0, read it, close); another program may take it
// before it is used, which callers accept as torchrun's --standalone does.
int find_free_port();

// Connects to host:port, retrying refused or unreachable attempts until `deadline` (the server may
// start later). Returns an empty socket on expiry and describes the last failure in `last_error`.
Socket connect_until(const std::string& host, int port, Clock::time_point deadline, std::string& last_error);

// Accepts one connection on a non-blocking listening socket, waiting at most until `deadline`
// (empty on expiry). The new socket is non-blocking, with TCP_NODELAY.
Socket accept_until(int listener, Clock::time_point deadline);
// Puts a socket into (non-)blocking mode.
void set_blocking(int fd, bool blocking);
// The numeric address peers should dial to reach this host: the first IPv4 (else IPv6) address of
// interface `ifname` when it is non-empty (an unknown interface throws, listing the ones present);
// otherwise the local address of the route toward host:port (the rendezvous master, which every
// host reaches), falling back to 127.0.0.1 when that route cannot be found.
std::string advertised_address(const std::string& toward_host, int toward_port, const std::string& ifname);

// Writes all of `data` (blocking socket; no SIGPIPE). False when the peer is gone.
bool send_all(int fd, std::string_view data);
// Outcome of a bounded read.
enum class ReadStatus { kOk, kClosed, kTimedOut };
// Reads exactly `size` bytes into `out`, waiting at most until `deadline`.
ReadStatus recv_exact(int fd, char* out, size_t size, Clock::time_point deadline);

// Appends fixed-width little-endian integers and length-prefixed byte strings to a frame body.
void put_u8(std::string& out, uint8_t v);
void put_u32(std::string& out, uint32_t v);
void put_i64(std::string& out, int64_t v);
void put_bytes(std::string& out, std::string_view bytes);
// Prefixes a body with its 32-bit length, making it a frame.
std::string frame(std::string_view body);
// Reads a little-endian 32-bit length from 4 bytes.
uint32_t read_u32(const char* p);

// Reads the fields of one frame body in order; any read past the end marks it malformed.
class Reader {
 public:
  explicit Reader(std::string_view body) : rest_(body) {}
  uint8_t u8();
  int64_t i64();
  std::string bytes();
  // False once a read ran past the end (the frame is malformed).
  bool ok() const { return ok_; }

 private:
  std::string_view take(size_t n);
  std::string_view rest_;
  bool ok_ = true;
};

// Largest frame accepted, so a stray connection sending garbage cannot make the server allocate
// without bound.
inline constexpr uint32_t kMaxFrame = 256u << 20;

// "30 s", "1.5 s" or "200 ms": how timeouts appear in messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace tg::distributed::net
