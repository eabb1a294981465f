#include "engine/process_groups/multiprocess/tcp_store.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>

#include "engine/error.h"
#include "engine/process_groups/multiprocess/store_request.h"

namespace dpv::dist {
namespace {

// Wire format (host byte order: every rank of a job runs the same build on the same architecture).
// Request: store_request.h (encode_request, decode_request).
// Reply:   u8 status, u64 payload length + bytes (the value, or the error text), i64 number.
enum Status : uint8_t { kOk = 0, kTimeout = 1, kRefused = 2 };

// A far deadline for a server waiting on an idle client; poll() waits in chunks, shutdown wakes it.
Clock::time_point idle_deadline() { return Clock::now() + std::chrono::hours(24 * 365); }

template <typename T>
void put(Bytes& out, T v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
void put_bytes(Bytes& out, const char* data, size_t size) {
  put<uint64_t>(out, size);
  out.insert(out.end(), data, data + size);
}

template <typename T>
T get_value(Socket& s, Clock::time_point deadline, const std::string& what) {
  T v{};
  s.recv_all(&v, sizeof(T), deadline, what);
  return v;
}

// Received in steps of this size, so memory grows with the bytes that really arrive: a peer that
// claims a 1 GiB value and sends nothing costs a megabyte, not a gigabyte.
constexpr uint64_t kReceiveStep = 1ull << 20;

Bytes get_blob(Socket& s, uint64_t max, Clock::time_point deadline, const std::string& what) {
  uint64_t size = get_value<uint64_t>(s, deadline, what);
  if (size > max) throw Error("malformed message from " + what + " (a value of " + std::to_string(size) + " bytes)");
  Bytes b;
  while (b.size() < size) {
    const size_t had = b.size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(kReceiveStep, size - had));
    b.resize(had + step);
    s.recv_all(b.data() + had, step, deadline, what);
  }
  return b;
}

// Reads one request: its bytes arrive in steps of at most kReceiveStep, as many as decode_request
// says are still missing, so memory grows with what really arrives and nothing past the request is
// read. Empty when the client left between requests or sent something that is not a request.
std::optional<StoreRequest> receive_request(Socket& s, const std::string& what) {
  Bytes pending;  // this request's bytes so far
  Clock::time_point deadline = idle_deadline();
  for (;;) {
    DecodedRequest decoded = decode_request(pending.data(), pending.size());
    if (decoded.outcome == DecodedRequest::Outcome::kRequest) return std::move(decoded.request);
    if (decoded.outcome == DecodedRequest::Outcome::kMalformed) return std::nullopt;
    const size_t had = pending.size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(decoded.missing, kReceiveStep));
    pending.resize(had + step);
    if (had == 0) {
      if (!s.recv_all_or_eof(pending.data(), step, deadline, what)) return std::nullopt;
      deadline = Clock::now() + std::chrono::seconds(30);  // once a request starts, all of it within 30 s
    } else {
      s.recv_all(pending.data() + had, step, deadline, what);
    }
  }
}

// A wait's milliseconds from the wire, kept where adding them to now() cannot overflow.
std::chrono::milliseconds wire_wait(int64_t ms) {
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, int64_t{1000} * 3600 * 24 * 365));
}

// The integer an add counts from; false for a value that is not one.
bool parse_counter(const Bytes& value, int64_t& out) {
  const std::string text = to_string(value);
  const auto [stop, err] = std::from_chars(text.data(), text.data() + text.size(), out, 10);
  return err == std::errc() && stop == text.data() + text.size() && !text.empty();
}

void reply(Socket& s, Status status, const Bytes& payload, int64_t number) {
  Bytes out;
  put<uint8_t>(out, status);
  put_bytes(out, payload.data(), payload.size());
  put<int64_t>(out, number);
  s.send_all(out.data(), out.size(), Clock::now() + std::chrono::seconds(30), "a store client");
}

}  // namespace

// ---- server

TcpStoreServer::TcpStoreServer(const std::string& host, int port, int world_size)
    : listener_(listen_tcp(host, port)), port_(bound_port(listener_)), world_size_(world_size) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& c : connections_)
      if (!c->done) c->socket.shutdown_both();
  }
  changed_.notify_all();
  acceptor_.join();
  for (auto& c : connections_) c->thread.join();
}

int TcpStoreServer::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int open = 0;
  for (const auto& c : connections_) open += c->done ? 0 : 1;
  return open;
}

void TcpStoreServer::accept_loop() {
  for (;;) {
    Socket client = accept_tcp(listener_, std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    // Connections whose client left: their socket is closed already; join their thread.
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!(*it)->done) {
        ++it;
        continue;
      }
      (*it)->thread.join();
      it = connections_.erase(it);
    }
    if (!client.valid()) continue;
    connections_.push_back(std::make_unique<Connection>());
    Connection* c = connections_.back().get();
    c->socket = std::move(client);
    c->thread = std::thread([this, c] { serve(c); });
  }
}

void TcpStoreServer::serve(Connection* connection) {
  serve_requests(&connection->socket);
  // Closed here, under the lock the destructor's shutdown takes, so no descriptor outlives its
  // client and none is shut down after the number was reused.
  std::lock_guard<std::mutex> lock(mutex_);
  connection->socket.close();
  connection->done = true;
}

bool TcpStoreServer::wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                              Clock::time_point deadline) {
  auto all_present = [&] {
    if (stopping_ || !abort_reason_.empty()) return true;
    for (const std::string& k : keys)
      if (!data_.count(k)) return false;
    return true;
  };
  if (all_present()) return !stopping_ && abort_reason_.empty();
  ++waiting_;
  const bool present = changed_.wait_until(lock, deadline, all_present);
  --waiting_;
  return present && !stopping_ && abort_reason_.empty();
}

void TcpStoreServer::serve_requests(Socket* client) {
  const std::string what = "a store client";
  try {
    for (;;) {
      std::optional<StoreRequest> request = receive_request(*client, what);
      if (!request) return;  // the client left, or sent something that is not a request
      auto& [command, keys, value, number] = *request;

      std::unique_lock<std::mutex> lock(mutex_);
      switch (command) {
        case kStoreHello:
          if (number != world_size_) {
            // The job cannot form: every rank waiting here (or arriving later) is told at once,
            // instead of waiting its whole timeout for a rank that was refused.
            abort_reason_ = "the job cannot form: a rank joined with WORLD_SIZE=" + std::to_string(number) +
                            " but rank 0 hosting the store has WORLD_SIZE=" + std::to_string(world_size_) +
                            " (every rank must be started with the same WORLD_SIZE; the other rank's error says which)";
            lock.unlock();
            changed_.notify_all();
            reply(*client, kRefused,
                  to_bytes("world size mismatch: this rank was started with WORLD_SIZE=" + std::to_string(number) +
                           " but rank 0 hosting the store has WORLD_SIZE=" + std::to_string(world_size_) +
                           " (every rank must be started with the same WORLD_SIZE)"),
                  0);
            return;
          }
          lock.unlock();
          reply(*client, kOk, {}, 0);
          break;
        case kStoreSet:
          if (keys.size() != 1) return;
          data_[keys[0]] = std::move(value);
          lock.unlock();
          changed_.notify_all();
          reply(*client, kOk, {}, 0);
          break;
        case kStoreGet:
        case kStoreWait: {
          bool ok = wait_for(lock, keys, Clock::now() + wire_wait(number));
          Bytes out;
          if (ok && command == kStoreGet && keys.size() == 1) out = data_[keys[0]];
          const std::string aborted = abort_reason_;
          lock.unlock();
          if (!aborted.empty()) reply(*client, kRefused, to_bytes(aborted), 0);
          else reply(*client, ok ? kOk : kTimeout, out, 0);
          break;
        }
        case kStoreAdd: {
          if (keys.size() != 1) return;
          int64_t current = 0;
          auto it = data_.find(keys[0]);
          if (it != data_.end() && !parse_counter(it->second, current)) {
            // A value someone set is no counter: that caller is told, the store and its other clients go on.
            lock.unlock();
            reply(*client, kRefused, to_bytes("cannot add to key '" + keys[0] + "': its value is not an integer"), 0);
            break;
          }
          if (__builtin_add_overflow(current, number, &current)) {  // past int64: no counter either
            lock.unlock();
            reply(*client, kRefused, to_bytes("cannot add to key '" + keys[0] + "': the sum overflows int64"), 0);
            break;
          }
          data_[keys[0]] = to_bytes(std::to_string(current));
          lock.unlock();
          changed_.notify_all();
          reply(*client, kOk, {}, current);
          break;
        }
        case kStoreCheck: {
          bool present = keys.size() == 1 && data_.count(keys[0]);
          lock.unlock();
          reply(*client, kOk, {}, present ? 1 : 0);
          break;
        }
        default:
          return;  // not our protocol: drop the connection
      }
    }
  } catch (const std::exception&) {
    // A client that vanished or sent garbage only loses its own connection.
  }
}

// ---- client

TcpStore::TcpStore(const std::string& host, int port, int world_size, std::chrono::milliseconds timeout)
    : socket_(connect_tcp(host, port, timeout)), where_("the store at " + endpoint_text(host, port)), timeout_(timeout) {
  request(kStoreHello, {}, {}, world_size, std::chrono::milliseconds(0), "");
}

Bytes TcpStore::request(uint8_t command, const std::vector<std::string>& keys, const Bytes& value, int64_t number,
                        std::chrono::milliseconds wait_timeout, const std::string& awaited) {
  const Bytes out = encode_request(StoreRequest{command, keys, value, number});
  // The server answers a wait itself when its time is up; the extra seconds cover a slow network.
  const Clock::time_point deadline = Clock::now() + wait_timeout + timeout_ + std::chrono::seconds(5);
  socket_.send_all(out.data(), out.size(), deadline, where_);
  uint8_t status = get_value<uint8_t>(socket_, deadline, where_);
  Bytes payload = get_blob(socket_, kMaxStoreValueBytes, deadline, where_);
  int64_t result = get_value<int64_t>(socket_, deadline, where_);
  if (status == kTimeout) {
    throw Error("timed out after " + describe_seconds(wait_timeout) + " waiting for " + awaited + " in " + where_ +
                " (a rank did not arrive: did it fail or start late? raise DPV_TIMEOUT if the job is just slow)").about_settings({"DPV_TIMEOUT"});
  }
  // The store refuses a rank whose WORLD_SIZE is not rank 0's, every wait once it did (the job
  // cannot form), and an add to a value that is no integer.
  if (status == kRefused) throw Error(to_string(payload) + " [" + where_ + "]").about_settings({"WORLD_SIZE"});
  if (command == kStoreAdd || command == kStoreCheck) return to_bytes(std::to_string(result));
  return payload;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  request(kStoreSet, {key}, value, 0, std::chrono::milliseconds(0), "");
}

Bytes TcpStore::get(const std::string& key) {
  return request(kStoreGet, {key}, {}, timeout_.count(), timeout_, "key '" + key + "'");
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  return std::stoll(to_string(request(kStoreAdd, {key}, {}, delta, std::chrono::milliseconds(0), "")));
}

bool TcpStore::check(const std::string& key) {
  return to_string(request(kStoreCheck, {key}, {}, 0, std::chrono::milliseconds(0), "")) == "1";
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  request(kStoreWait, keys, {}, timeout.count(), timeout, describe_keys(keys));
}

}  // namespace dpv::dist
