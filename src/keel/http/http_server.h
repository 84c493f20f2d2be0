#pragma once
// keel's HTTP/1.1 server: event-driven connections (Boost.Beast on Asio), handlers on worker
// threads. It owns the wire and its limits; what a request means belongs to api/.
//
// Why not a thread per connection: an idle keep-alive connection or a client that sends its
// request head one byte at a time would hold a thread for as long as it likes, and a few hundred
// of them stop the server for everyone. Here a connection that is not running a handler costs a
// socket and a small coroutine frame on the one I/O thread, and every read has a total deadline.
//
// Threads: one I/O thread runs every connection (run()); `workers` threads run handlers and
// streams. A handler may block (it waits for the engine); it never runs on the I/O thread.
// listen() and run() belong to the thread that owns the server; stop_accepting() and stop() may
// be called from any thread, including a signal-watching one.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::http {

struct Request {
  std::string method;  // "GET", "POST", ... (HEAD requests reach the handler as GET)
  std::string target;  // as sent: path and query
  std::string path;    // target without the query, percent-decoded
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // in the order sent
  std::string body;
  std::string remote_addr, local_addr;
  int remote_port = 0, local_port = 0;
  // Whether the client has gone while the handler runs (a non-streaming answer nobody will read
  // should stop early). Bytes it sends meanwhile (a pipelined request) are kept for later; a
  // client that only shuts its sending side (HTTP/1.1) still gets its answer. Thread-safe; false
  // when unknown.
  std::function<bool()> client_gone = [] { return false; };

  // The first value of a header, matched case-insensitively; "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  size_t header_count(std::string_view name) const;  // a header sent twice counts twice
};

// Where a streamed body goes. write() sends one chunk and returns once it is on the wire, false
// when the client has gone or stopped reading (then nothing more is sent). Used by the one
// worker thread running the stream.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool write(std::string_view data) = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set: the body is streamed (chunked) by this function, run on the handler's worker thread
  // after the head is sent. It returns when the stream is complete or a write failed.
  std::function<void(ChunkSink&)> stream;

  void set_header(std::string name, std::string value);  // replaces a header of that name
  std::string header(std::string_view name) const;       // "" when absent
  void set_content(std::string content, std::string content_type);
};

struct Limits {
  size_t max_connections = 4096;  // beyond: 503 and close at once
  std::chrono::milliseconds head_deadline{10'000};   // the whole request head, first request
  std::chrono::milliseconds idle_timeout{60'000};    // a kept-alive connection's next head, whole
  std::chrono::milliseconds body_deadline{60'000};   // the whole body, once the head is read
  std::chrono::milliseconds write_deadline{60'000};  // each write to a client that stopped reading
  size_t max_header_bytes = 64 << 10;  // request line and headers: 431 beyond
  size_t max_header_count = 128;       // 431 beyond
  size_t max_body_bytes = 32 << 20;    // 413 at once when Content-Length says more, or when a
                                       // chunked body passes it
  // The bytes of every body being received, across connections: a request whose body would pass
  // it is answered 503 before its body is read. Content-Length counts; a chunked body counts as
  // max_body_bytes. At least max_body_bytes (one largest body always fits).
  size_t max_body_bytes_in_flight = size_t{128} << 20;
  size_t workers = 16;                 // threads running handlers
};

// Handles one request on a worker thread: fills `res` (or sets res.stream).
using Handler = std::function<void(const Request& req, Response& res)>;
// Answers what the server refuses before any handler runs (malformed or oversized requests, too
// many connections): `req` holds what was read of the head (often only the method and path).
// Runs on the I/O thread: must not block.
// `res` starts as status 200; a handler that sets an error status of its own (an access rule that
// refuses the request first) keeps it, else `status` is sent.
using RefusalHandler = std::function<void(const Request& req, int status, const std::string& why, Response& res)>;
// Looks at a request's head before its body is read: true refuses it with `res` (an error status),
// sent at once on a closing connection, and the body is never read. Runs on the I/O thread: must
// not block.
using HeadCheck = std::function<bool(const Request& head, Response& res)>;

class Server {
 public:
  Server(Limits limits, Handler handler, RefusalHandler refusal, HeadCheck head_check = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (port 0: any free port); returns the port. Throws keel::Error.
  int listen(const std::string& host, int port);
  // Serves until stop(); returns when every connection is closed and every handler returned.
  void run();
  // Closes the listening socket: new connections are refused, open ones go on.
  void stop_accepting();
  // Closes every connection and ends run(). Running handlers finish (their writes fail).
  void stop();

  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::http
