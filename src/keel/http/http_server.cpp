// Asio 1.18's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include "keel/http/http_server.h"

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
struct Connection {
  explicit Connection(tcp::socket socket) : stream(std::move(socket)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;  // read but not yet parsed: a pipelined request's bytes stay here
  std::atomic<bool> gone{false};
  bool busy = false;  // reading a body or answering: not idle (I/O thread only)
  std::list<std::weak_ptr<Connection>>::iterator entry;  // in Impl::live
};

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
  Impl(Limits l, Handler h, RefusalHandler r)
      : limits(l), handler(std::move(h)), refusal(std::move(r)), workers(std::max<size_t>(1, l.workers)) {}

  class Sink;

  Limits limits;
  Handler handler;
  RefusalHandler refusal;
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
  net::awaitable<void> refuse(std::shared_ptr<Connection> c, Request partial, int status, std::string why);
  net::awaitable<void> close_gracefully(std::shared_ptr<Connection> c, size_t drain);
  void run_job(const std::shared_ptr<Connection>& c, const std::shared_ptr<Job>& job);
  bool send_from_worker(const std::shared_ptr<Connection>& c, std::string bytes);
  void watch_for_close(const std::shared_ptr<Connection>& c);
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

// Notices a client that closes its end while a handler runs: a peek that finds end-of-stream.
// Bytes of a pipelined request are left where they are, for the next read.
void Server::Impl::watch_for_close(const std::shared_ptr<Connection>& c) {
  if (c->buffer.size() > 0) return;
  c->stream.socket().async_wait(tcp::socket::wait_read, [c](error_code ec) {
    if (ec) return;
    char byte;
    const ssize_t n = ::recv(c->stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) c->gone = true;
  });
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
  watch_for_close(c);
  net::post(workers, [this, c, job] { run_job(c, job); });
  error_code ec;
  co_await job->done.async_wait(net::redirect_error(net::use_awaitable, ec));
  c->stream.socket().cancel(ec);  // the close watcher, if it is still waiting
  if (stopping || c->gone) co_return false;
  if (job->streamed) co_return job->stream_ok && job->keep_alive;
  co_await write_whole(c, job->response, job->keep_alive, job->head_only);
  co_return job->keep_alive && !c->gone;
}

// Answers a request the server will not pass on, then closes the connection.
net::awaitable<void> Server::Impl::refuse(std::shared_ptr<Connection> c, Request partial, int status, std::string why) {
  Response res;
  refusal(partial, status, why, res);
  res.status = status;
  co_await write_whole(c, res, /*keep_alive=*/false, /*head_only=*/false);
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
    // A total deadline for the whole head: a client sending a byte at a time gains nothing.
    c->stream.expires_after(first ? limits.head_deadline : limits.idle_timeout);
    co_await bhttp::async_read_header(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
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
    const bool has_body_framing = parser.content_length().has_value() || parser.chunked();
    if (req.headers.size() > limits.max_header_count) {
      std::string why = "more than " + std::to_string(limits.max_header_count) + " headers";
      co_await refuse(c, std::move(req), 431, std::move(why));
      co_return;
    }
    if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") && !has_body_framing) {
      std::string why = "a request body needs Content-Length or chunked transfer encoding";
      co_await refuse(c, std::move(req), 411, std::move(why));
      co_return;
    }
    if (iequals(req.header("expect"), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      co_await net::async_write(c->stream, net::buffer(kContinue), net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
    }
    if (!parser.is_done()) {
      c->stream.expires_after(limits.body_deadline);
      co_await bhttp::async_read(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        std::string why = ec.message();
        if (const int status = refusal_status(ec)) co_await refuse(c, std::move(req), status, std::move(why));
        co_return;
      }
    }
    c->stream.expires_never();
    auto job = std::make_shared<Job>(io);
    job->keep_alive = parser.get().keep_alive();
    job->head_only = req.method == "HEAD";
    if (job->head_only) req.method = "GET";
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
      std::string why = "too many connections";
      net::co_spawn(io, refuse(c, std::move(none), 503, std::move(why)), net::detached);
      continue;
    }
    ++connections;
    live.push_front(c);
    c->entry = live.begin();
    net::co_spawn(io, serve(std::move(c)), net::detached);
  }
}

Server::Server(Limits limits, Handler handler, RefusalHandler refusal)
    : impl_(std::make_unique<Impl>(limits, std::move(handler), std::move(refusal))) {}

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
