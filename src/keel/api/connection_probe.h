#pragma once
// Tells whether the client of a request is still connected, so work it abandoned can stop early.
//
// cpp-httplib (0.11) does not hand its handlers the socket, and a write to a closed connection
// only fails on the second try, after a ping interval or more. The probe finds the connection's
// socket once, by its address pair, and then polls it: a peer that closed (or reset) the
// connection shows up as end-of-file or an error within one poll. The socket stays valid while the
// handler (and its content provider) runs, because httplib closes it only after they return.
// Owned and used by one HTTP thread.
#include <string>

namespace keel::api {

class ConnectionProbe {
 public:
  // The connection between local_addr:local_port and remote_addr:remote_port (httplib::Request's
  // fields). If it cannot be found, client_gone() always answers false.
  ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

  // True once the peer has closed or reset the connection. Never blocks; pipelined bytes the
  // client sent after its request do not count as gone.
  bool client_gone() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace keel::api
