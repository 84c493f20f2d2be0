// Asio 1.18's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include "keel/http/http_server.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <future>
#include <list>
#include <optional>

#include "keel/util/error.h"

namespace keel::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// What a refused connection reads and drops before it closes: at least this much, or the body
// its request declared, up to the cap (the drain also ends after half a second).
constexpr size_t kDrainBytes = size_t{1} << 20;
constexpr size_t kMaxDrainBytes = size_t{256} << 20;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A header value a handler set, made safe to put on the wire: CR and LF would end the header
// early and let a value (a folder name, say) write headers of its own.
std::string field_value(std::string_view v) {
  std::string out;
  for (char ch : v) out += (ch == '\r' || ch == '\n') ? ' ' : ch;
  return out;
}

std::string status_line(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(bhttp::obsolete_reason(bhttp::int_to_status(status))) +
         "\r\n";
}

// The response head: status line, the handler's headers, and the framing this server owns.
std::string response_head(const Response& res, std::string_view framing, bool keep_alive) {
  std::string head = status_line(res.status);
  for (const auto& [name, value] : res.headers) {
    if (iequals(name, "content-length") || iequals(name, "transfer-encoding") || iequals(name, "connection")) continue;
    head += field_value(name) + ": " + field_value(value) + "\r\n";
  }
  head += framing;
  if (!keep_alive) head += "Connection: close\r\n";
  return head + "\r\n";
}

// "%2F" and the like in a path, decoded as routes and names expect them; a '%' not followed by two
// hex digits stays as it is.
std::string percent_decoded(std::string_view path) {
  auto hex = [](char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
  };
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && hex(path[i + 1]) >= 0 && hex(path[i + 2]) >= 0) {
      out += static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
      i += 2;
    } else {
      out += path[i];
    }
  }
  return out;
}

bool is_disconnect(const error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::operation_aborted || ec == net::error::broken_pipe || ec == beast::error::timeout ||
         ec == net::error::bad_descriptor;
}

// What a failed read of a request head or body is answered with (0: close without an answer).
int refusal_status(const error_code& ec) {
  if (ec == bhttp::error::header_limit) return 431;
  if (ec == bhttp::error::body_limit) return 413;
  if (ec == beast::error::timeout) return 408;
  if (is_disconnect(ec) || ec == bhttp::error::partial_message) return 0;
  return 400;
}

// A transfer or content coding this server cannot decode, as the status and reason to refuse it
// with: a gzip body must not reach a handler as if it were plain JSON.
std::optional<std::pair<int, std::string>> unsupported_coding(const Request& req) {
  auto trimmed = [](std::string v) {
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t") + 1);
    return v.substr(0, 100);
  };
  const std::string te = trimmed(req.header("transfer-encoding"));
  if (req.header_count("transfer-encoding") > 1 || (req.has_header("transfer-encoding") && !iequals(te, "chunked")))
    return std::pair{501, "Transfer-Encoding '" + te + "' is not supported: send the body as it is, or chunked"};
  const std::string ce = trimmed(req.header("content-encoding"));
  if (req.has_header("content-encoding") && !iequals(ce, "identity"))
    return std::pair{415, "Content-Encoding '" + ce + "' is not supported: send the body uncompressed"};
  return std::nullopt;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return "";
}

bool Request::has_header(std::string_view name) const { return header_count(name) > 0; }

size_t Request::header_count(std::string_view name) const {
  return static_cast<size_t>(
      std::count_if(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); }));
}

void Response::set_header(std::string name, std::string value) {
  for (auto& [n, v] : headers)
    if (iequals(n, name)) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

std::string Response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return "";
}

void Response::set_content(std::string content, std::string content_type) {
  body = std::move(content);
  set_header("Content-Type", std::move(content_type));
}

// One client connection. Its socket is used on the I/O thread only; `gone` is read by workers.
// Everything else is the I/O thread's.
struct Connection {
  explicit Connection(tcp::socket socket)
      : stream(std::move(socket)),
        read_deadline(stream.get_executor()),
        watch_tick(stream.get_executor()),
        watch_over(stream.get_executor()) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;  // read but not yet parsed: a pipelined request's bytes stay here
  std::atomic<bool> gone{false};
  bool busy = false;  // reading a body or answering: not idle
  std::list<std::weak_ptr<Connection>>::iterator entry;  // in Impl::live

  // The deadline of the read under way. When it passes the read is cancelled and the socket kept
  // (beast's own expiry closes it), so that the 408 can still be written.
  net::steady_timer read_deadline;
  uint64_t read_generation = 0;  // which read a deadline belongs to: a stale expiry does nothing
  bool read_timed_out = false;

  // While a handler runs (Impl::watch_for_close).
  bool answer_started = false;  // a stream's first bytes are on their way
  bool answer_done = false;     // the handler returned: the watcher stops
  // The watcher read the client's end of stream: nothing more will come than c->buffer holds. (A
  // read after an end of stream that was already read never completes: Asio's reactor waits for
  // the socket to become readable again, and edge-triggered epoll does not say so twice.)
  bool client_shut = false;
  net::steady_timer watch_tick;  // between polls, once the client has shut its sending side
  net::steady_timer watch_over;  // at time_point::min() once the watcher has returned
};

namespace {

// Starts the deadline of the read that follows.
void arm_read_deadline(const std::shared_ptr<Connection>& c, std::chrono::milliseconds deadline) {
  c->stream.expires_never();  // a write's deadline must not cut the read short
  c->read_timed_out = false;
  c->read_deadline.expires_after(deadline);
  c->read_deadline.async_wait([weak = std::weak_ptr<Connection>(c), generation = ++c->read_generation](error_code ec) {
    auto c = weak.lock();
    // An expiry already queued when its read ended (cancel() cannot take it back) is stale.
    if (ec || !c || c->read_generation != generation) return;
    c->read_timed_out = true;
    c->stream.socket().cancel(ec);
  });
}

// How the read ended, a cancellation by its deadline reported as beast's timeout. Stops the deadline.
error_code read_result(Connection& c, error_code ec) {
  c.read_deadline.cancel();
  ++c.read_generation;
  return c.read_timed_out && ec == net::error::operation_aborted ? error_code(beast::error::timeout) : ec;
}

// The bytes of the request bodies being received, held from the head to the body's last byte.
struct BodyReservation {
  size_t& in_flight;
  size_t bytes;
  BodyReservation(size_t& total, size_t n) : in_flight(total), bytes(n) { in_flight += bytes; }
  ~BodyReservation() { in_flight -= bytes; }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
};

}  // namespace

// A request on its way through a worker: shared by the I/O coroutine waiting for it and the
// worker running it, so neither outlives what it uses.
struct Job {
  explicit Job(net::io_context& io) : done(io, net::steady_timer::time_point::max()) {}
  Request request;
  Response response;
  bool keep_alive = true;
  bool head_only = false;
  bool streamed = false;
  bool stream_ok = true;
  net::steady_timer done;  // cancelled (on the I/O thread) when the worker is finished
};

struct Server::Impl {
  Impl(Limits l, Handler h, RefusalHandler r, HeadCheck check)
      : limits(l),
        handler(std::move(h)),
        refusal(std::move(r)),
        head_check(std::move(check)),
        workers(std::max<size_t>(1, l.workers)) {}

  class Sink;

  Limits limits;
  Handler handler;
  RefusalHandler refusal;
  HeadCheck head_check;
  size_t body_bytes_in_flight = 0;  // I/O thread only: BodyReservation
  // Before io: the coroutines io destroys at the end still leave these.
  std::list<std::weak_ptr<Connection>> live;  // I/O thread only
  std::atomic<size_t> connections{0};
  std::atomic<bool> draining{false};  // stop_accepting(): answer what is in flight, then close
  std::atomic<bool> stopping{false};  // stop(): close everything now
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  net::thread_pool workers;  // last: joined first, while the I/O objects still exist

  net::awaitable<void> accept_loop();
  net::awaitable<void> serve(std::shared_ptr<Connection> c);
  net::awaitable<bool> answer(const std::shared_ptr<Connection>& c, const std::shared_ptr<Job>& job);
  net::awaitable<void> write_whole(const std::shared_ptr<Connection>& c, const Response& res, bool keep_alive,
                                   bool head_only);
  net::awaitable<void> refuse(std::shared_ptr<Connection> c, Request partial, int status, std::string why,
                              bool head_only = false);
  net::awaitable<void> send_refusal(std::shared_ptr<Connection> c, Request partial, Response res, bool head_only);
  net::awaitable<void> close_gracefully(std::shared_ptr<Connection> c, size_t drain);
  void run_job(const std::shared_ptr<Connection>& c, const std::shared_ptr<Job>& job);
  bool send_from_worker(const std::shared_ptr<Connection>& c, std::string bytes);
  net::awaitable<void> watch_for_close(std::shared_ptr<Connection> c, bool http11);
};

// Streams a response's body as HTTP chunks from the worker running it.
class Server::Impl::Sink final : public ChunkSink {
 public:
  Sink(Server::Impl& server, std::shared_ptr<Connection> c, std::string head)
      : server_(server), c_(std::move(c)), head_(std::move(head)) {}

  bool write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;  // an empty chunk would end the stream
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return send(std::string(size) + std::string(data) + "\r\n");
  }
  // The last chunk; the head too if nothing was written.
  bool finish() { return !failed_ && send("0\r\n\r\n"); }

 private:
  bool send(std::string bytes) {
    if (!head_.empty()) bytes = std::exchange(head_, "") + bytes;
    failed_ = !server_.send_from_worker(c_, std::move(bytes));
    return !failed_;
  }

  Server::Impl& server_;
  std::shared_ptr<Connection> c_;
  std::string head_;  // not yet sent
  bool failed_ = false;
};

bool Server::Impl::send_from_worker(const std::shared_ptr<Connection>& c, std::string bytes) {
  auto result = std::make_shared<std::promise<bool>>();
  auto sent = result->get_future();
  auto data = std::make_shared<std::string>(std::move(bytes));
  net::post(io, [this, c, data, result] {
    c->answer_started = true;
    c->stream.expires_after(limits.write_deadline);
    net::async_write(c->stream, net::buffer(*data), [c, data, result](error_code ec, size_t) {
      if (ec) c->gone = true;
      result->set_value(!ec);
    });
  });
  // The write's own deadline bounds the wait; stop() ends it sooner (the I/O thread may be gone).
  while (sent.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
    if (stopping) return false;
  return sent.get();
}

// Watches the client while its handler runs, until answer() says the answer is ready. What the
// client sends meanwhile is read into c->buffer (a pipelined request stays there for the next
// read); c->gone is set once it has gone.
//
// An end of stream is either a client that closed, or one that only shut its sending side (a
// POST, then shutdown(SHUT_WR)) and waits for the answer; both read the same. HTTP/1.1 tells them
// apart with an interim "100 Continue", which every HTTP/1.1 client must accept: a closed socket
// answers it with a reset, and poll() reports that. A stream's own chunks probe the same way.
// HTTP/1.0 has no interim answers: its end of stream counts as gone.
net::awaitable<void> Server::Impl::watch_for_close(std::shared_ptr<Connection> c, bool http11) {
  struct Over {  // however the watcher ends, answer() may go on
    Connection& c;
    ~Over() { c.watch_over.expires_at(net::steady_timer::time_point::min()); }
  } over{*c};
  error_code ec;
  while (!c->client_shut) {
    // A client pipelining more than a request head's worth is not watched further.
    if (c->answer_done || c->buffer.size() >= limits.max_header_bytes) co_return;
    const size_t n = co_await c->stream.socket().async_read_some(c->buffer.prepare(4096),
                                                                 net::redirect_error(net::use_awaitable, ec));
    c->buffer.commit(n);
    if (!ec) continue;
    if (ec == net::error::operation_aborted) co_return;  // the answer is ready
    if (ec == net::error::eof && http11) {
      c->client_shut = true;
      break;
    }
    c->gone = true;
    co_return;
  }
  // Probe while the answer has not started, again every second (a client may read one probe and
  // close later), and only into an empty send queue: the probe must never block this thread, nor
  // go out half-written.
  static const std::string kProbe = "HTTP/1.1 100 Continue\r\n\r\n";
  const int fd = c->stream.socket().native_handle();
  auto last_probe = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  while (!c->answer_done) {
    const auto now = std::chrono::steady_clock::now();
    int queued = 0;
    if (!c->answer_started && now - last_probe >= std::chrono::seconds(1) && ::ioctl(fd, SIOCOUTQ, &queued) == 0 &&
        queued == 0) {
      last_probe = now;
      const ssize_t sent = ::send(fd, kProbe.data(), kProbe.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent != static_cast<ssize_t>(kProbe.size()) && !(sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
        c->gone = true;  // the peer is gone, or a probe went out in part: the answer could not follow it
        co_return;
      }
    }
    pollfd p{fd, 0, 0};  // POLLERR and POLLHUP are always reported
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP))) {
      c->gone = true;
      co_return;
    }
    c->watch_tick.expires_after(std::chrono::milliseconds(20));
    co_await c->watch_tick.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

void Server::Impl::run_job(const std::shared_ptr<Connection>& c, const std::shared_ptr<Job>& job) {
  Response& res = job->response;
  try {
    handler(job->request, res);
  } catch (const std::exception& e) {
    res = Response{};
    refusal(job->request, 500, std::string("internal error: ") + e.what(), res);
    res.status = 500;
  }
  if (res.stream && !job->head_only) {
    job->streamed = true;
    Sink sink(*this, c, response_head(res, "Transfer-Encoding: chunked\r\n", job->keep_alive));
    try {
      res.stream(sink);
    } catch (...) {
      job->keep_alive = false;  // the stream is cut mid-body: the client sees no last chunk
    }
    job->stream_ok = sink.finish();
  }
  net::post(io, [job] { job->done.cancel(); });
}

net::awaitable<void> Server::Impl::write_whole(const std::shared_ptr<Connection>& c, const Response& res,
                                                bool keep_alive, bool head_only) {
  auto bytes = std::make_shared<std::string>(
      response_head(res, "Content-Length: " + std::to_string(res.body.size()) + "\r\n", keep_alive));
  if (!head_only) *bytes += res.body;
  error_code ec;
  c->stream.expires_after(limits.write_deadline);
  co_await net::async_write(c->stream, net::buffer(*bytes), net::redirect_error(net::use_awaitable, ec));
  if (ec) c->gone = true;
}

// Runs the request's handler on a worker, then writes the answer. False: close the connection.
net::awaitable<bool> Server::Impl::answer(const std::shared_ptr<Connection>& c, const std::shared_ptr<Job>& job) {
  job->request.client_gone = [this, weak = std::weak_ptr<Connection>(c)] {
    auto alive = weak.lock();
    return stopping || !alive || alive->gone.load();
  };
  c->answer_started = c->answer_done = false;
  c->watch_over.expires_at(net::steady_timer::time_point::max());
  net::co_spawn(io, watch_for_close(c, job->request.version == "HTTP/1.1"), net::detached);
  net::post(workers, [this, c, job] { run_job(c, job); });
  error_code ec;
  co_await job->done.async_wait(net::redirect_error(net::use_awaitable, ec));
  // Stop the watcher and wait for it: its read must be over before the next one starts.
  c->answer_done = true;
  c->stream.socket().cancel(ec);
  c->watch_tick.cancel();
  co_await c->watch_over.async_wait(net::redirect_error(net::use_awaitable, ec));
  if (stopping || c->gone) co_return false;
  if (job->streamed) co_return job->stream_ok && job->keep_alive;
  co_await write_whole(c, job->response, job->keep_alive, job->head_only);
  co_return job->keep_alive && !c->gone;
}

// Answers a request the server will not pass on, then closes the connection.
net::awaitable<void> Server::Impl::refuse(std::shared_ptr<Connection> c, Request partial, int status, std::string why,
                                          bool head_only) {
  Response res;
  refusal(partial, status, why, res);
  if (res.status < 400) res.status = status;  // else an access rule refused it first, with its own body
  co_await send_refusal(std::move(c), std::move(partial), std::move(res), head_only);
}

// Sends a refusal (its head alone for a HEAD request) and closes the connection.
net::awaitable<void> Server::Impl::send_refusal(std::shared_ptr<Connection> c, Request partial, Response res,
                                                bool head_only) {
  co_await write_whole(c, res, /*keep_alive=*/false, head_only);
  // A client refused for its body's size usually writes the whole body before it reads the
  // answer: drain what it declared, so the answer is not lost to a reset.
  size_t declared = 0;
  const std::string length = partial.header("content-length");
  if (!length.empty() && length.find_first_not_of("0123456789") == std::string::npos && length.size() < 19)
    declared = std::stoull(length);
  co_await close_gracefully(std::move(c), std::min(std::max(declared, kDrainBytes), kMaxDrainBytes));
}

// Shuts the sending side, then reads (and drops) up to `drain` bytes the client still sends,
// for half a second at most, so that the answer is not lost to a reset from unread bytes.
net::awaitable<void> Server::Impl::close_gracefully(std::shared_ptr<Connection> c, size_t drain) {
  error_code ec;
  c->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 16384> sink;
  size_t drained = 0;
  c->stream.expires_after(std::chrono::milliseconds(500));
  while (!ec && drained < drain) {
    drained += co_await c->stream.async_read_some(net::buffer(sink), net::redirect_error(net::use_awaitable, ec));
  }
  c->stream.socket().close(ec);
}

static Request head_of(const bhttp::request_parser<bhttp::string_body>& parser, const Connection& c) {
  Request req;
  const auto& msg = parser.get();
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = percent_decoded(req.target.substr(0, req.target.find('?')));
  req.version = msg.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  for (const auto& field : msg) req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  error_code ec;
  const auto remote = c.stream.socket().remote_endpoint(ec);
  if (!ec) req.remote_addr = remote.address().to_string(), req.remote_port = remote.port();
  const auto local = c.stream.socket().local_endpoint(ec);
  if (!ec) req.local_addr = local.address().to_string(), req.local_port = local.port();
  return req;
}

net::awaitable<void> Server::Impl::serve(std::shared_ptr<Connection> c) {
  struct Leave {  // however the coroutine ends
    Impl& s;
    Connection& c;
    ~Leave() {
      s.live.erase(c.entry);
      --s.connections;
    }
  } leave{*this, *c};
  bool first = true;
  while (!stopping && !draining) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
    parser.body_limit(limits.max_body_bytes);
    error_code ec;
    // A client that has shut its sending side can only have sent what the buffer holds, and a head
    // it left unfinished stays so: it times out at once.
    if (c->client_shut && c->buffer.size() == 0) break;
    // A total deadline for the whole head: a client sending a byte at a time gains nothing.
    arm_read_deadline(c, c->client_shut ? std::chrono::milliseconds(0) : first ? limits.head_deadline : limits.idle_timeout);
    co_await bhttp::async_read_header(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
    ec = read_result(*c, ec);
    if (ec) {
      // A kept-alive connection that stays quiet, or goes, just closes.
      const int status = !first && c->buffer.size() == 0 && ec == beast::error::timeout ? 0 : refusal_status(ec);
      // (Arguments of a coroutine call are named locals here: GCC 12 destroys some prvalue
      // arguments twice.)
      Request partial = head_of(parser, *c);  // what was read of it: often the method and path
      std::string why = ec.message();
      if (status) co_await refuse(c, std::move(partial), status, std::move(why));
      co_return;
    }
    first = false;
    c->busy = true;
    Request req = head_of(parser, *c);
    const bool head_only = req.method == "HEAD";
    if (head_only) req.method = "GET";
    const bool has_body_framing = parser.content_length().has_value() || parser.chunked();
    if (req.headers.size() > limits.max_header_count) {
      std::string why = "more than " + std::to_string(limits.max_header_count) + " headers";
      co_await refuse(c, std::move(req), 431, std::move(why), head_only);
      co_return;
    }
    // The handler's own rules (who may send it) before a byte of the body is read.
    if (head_check) {
      Response res;
      if (head_check(req, res)) {
        co_await send_refusal(c, std::move(req), std::move(res), head_only);
        co_return;
      }
    }
    if (auto coding = unsupported_coding(req)) {
      std::string why = std::move(coding->second);
      co_await refuse(c, std::move(req), coding->first, std::move(why), head_only);
      co_return;
    }
    if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") && !has_body_framing) {
      std::string why = "a request body needs Content-Length or chunked transfer encoding";
      co_await refuse(c, std::move(req), 411, std::move(why), head_only);
      co_return;
    }
    std::optional<BodyReservation> reservation;
    if (!parser.is_done()) {
      const size_t bytes = std::min<size_t>(parser.content_length().value_or(limits.max_body_bytes), limits.max_body_bytes);
      if (body_bytes_in_flight + bytes > std::max(limits.max_body_bytes_in_flight, limits.max_body_bytes)) {
        std::string why = "other request bodies being received hold its share of memory; retry shortly";
        co_await refuse(c, std::move(req), 503, std::move(why), head_only);
        co_return;
      }
      reservation.emplace(body_bytes_in_flight, bytes);
    }
    if (iequals(req.header("expect"), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      c->stream.expires_after(limits.write_deadline);  // a client that does not read cannot hold its reservation
      co_await net::async_write(c->stream, net::buffer(kContinue), net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
    }
    if (!parser.is_done()) {
      arm_read_deadline(c, c->client_shut ? std::chrono::milliseconds(0) : limits.body_deadline);
      co_await bhttp::async_read(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
      ec = read_result(*c, ec);
      if (ec) {
        std::string why = ec.message();
        if (const int status = refusal_status(ec)) co_await refuse(c, std::move(req), status, std::move(why));
        co_return;
      }
    }
    reservation.reset();  // the body is whole: the handler's memory bounds (api/) take it from here
    c->stream.expires_never();
    auto job = std::make_shared<Job>(io);
    job->keep_alive = parser.get().keep_alive();
    job->head_only = head_only;
    req.body = std::move(parser.get().body());
    job->request = std::move(req);
    if (!co_await answer(c, job)) break;
    c->busy = false;
  }
  error_code ec;
  c->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  c->stream.socket().close(ec);
}

net::awaitable<void> Server::Impl::accept_loop() {
  while (acceptor.is_open()) {
    error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open() || ec == net::error::operation_aborted) co_return;
      // Out of descriptors or a connection gone before it was taken: wait a moment, go on.
      net::steady_timer pause(io, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // stream events go out as they are written
    auto c = std::make_shared<Connection>(std::move(socket));
    if (connections >= limits.max_connections) {
      // Refused at once, so a flood of connections costs no more than this answer.
      c->stream.expires_after(std::chrono::seconds(1));
      Request none;
      std::string why = "it has too many connections open";
      net::co_spawn(io, refuse(c, std::move(none), 503, std::move(why)), net::detached);
      continue;
    }
    ++connections;
    live.push_front(c);
    c->entry = live.begin();
    net::co_spawn(io, serve(std::move(c)), net::detached);
  }
}

Server::Server(Limits limits, Handler handler, RefusalHandler refusal, HeadCheck head_check)
    : impl_(std::make_unique<Impl>(limits, std::move(handler), std::move(refusal), std::move(head_check))) {}

Server::~Server() {
  stop();
  impl_->workers.join();
}

int Server::listen(const std::string& host, int port) {
  error_code ec;
  tcp::resolver resolver(impl_->io);
  const auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  const tcp::endpoint endpoint = found.begin()->endpoint();
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close();
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + " (" + ec.message() + ")");
  }
  return a.local_endpoint().port();
}

void Server::run() {
  net::co_spawn(impl_->io, impl_->accept_loop(), net::detached);
  impl_->io.run();
}

void Server::stop_accepting() {
  impl_->draining = true;
  net::post(impl_->io, [this] {
    error_code ec;
    impl_->acceptor.close(ec);
    // Idle connections close now; busy ones after their answer.
    for (auto& weak : impl_->live)
      if (auto c = weak.lock(); c && !c->busy) c->stream.socket().close(ec);
  });
}

void Server::stop() {
  if (impl_->stopping.exchange(true)) return;
  net::post(impl_->io, [this] {
    error_code ec;
    impl_->acceptor.close(ec);
    for (auto& weak : impl_->live)
      if (auto c = weak.lock()) c->stream.socket().close(ec);
    impl_->io.stop();
  });
}

size_t Server::open_connections() const { return impl_->connections; }

}  // namespace keel::http
