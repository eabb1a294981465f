#include "engine/process_groups/multiprocess/c10d_store.h"

#include <type_traits>

namespace dpv::dist {
namespace {

// PyTorch 1.13's c10d::detail::QueryType: the first byte of every request. Only the queries a
// rank needs are sent (not COMPARE_SET, GETNUMKEYS, WATCH_KEY, DELETE_KEY).
enum class Query : uint8_t { kSet = 0, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5 };
// CheckResponseType and WaitResponseType: one status byte.
constexpr uint8_t kCheckReady = 0, kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0;
// The join counter every PyTorch TCPStore client bumps on connecting (without the "/" prefix).
const char* const kJoinCounterKey = "init/";

// One request in the store's framing; sent in one piece.
class Request {
 public:
  explicit Request(Query query) { bytes_.push_back(static_cast<char>(query)); }
  template <typename T>
  Request& number(T value) {
    static_assert(std::is_integral_v<T>);
    const char* p = reinterpret_cast<const char*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  Request& text(const std::string& s) {
    number<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  Request& bytes(const Bytes& b) {
    number<uint64_t>(b.size());
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  // WAIT and CHECK take a count and the keys.
  Request& key_list(const std::vector<std::string>& keys) {
    number<uint64_t>(keys.size());
    for (const std::string& k : keys) text(k);
    return *this;
  }
  const Bytes& data() const { return bytes_; }

 private:
  Bytes bytes_;
};

}  // namespace

std::string torchelastic_worker_prefix(int restart_count) { return "/worker/attempt_" + std::to_string(restart_count); }

C10dStoreClient::C10dStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout,
                                 std::string prefix, const std::string& name)
    : host_(host), port_(port), timeout_(timeout), prefix_(std::move(prefix)) {
  where_ = name + " at " + endpoint_text(host, port);
  ensure_connected();
  // The first round trip also proves that a TCPStore answers there.
  add_wire_key(kJoinCounterKey, 1, "joining (adding 1 to '" + std::string(kJoinCounterKey) + "')");
}

std::string C10dStoreClient::wire_key(const std::string& key) const {
  return prefix_.empty() ? "/" + key : "/" + prefix_ + "/" + key;
}

void C10dStoreClient::ensure_connected() {
  if (socket_.valid()) return;
  socket_ = connect_tcp(host_, port_, timeout_, where_,
                        "is torchrun running there, and are MASTER_ADDR / MASTER_PORT the ones it set? (with "
                        "TORCHELASTIC_USE_AGENT_STORE=True the launcher's agent hosts the store, not rank 0)");
}

Error C10dStoreClient::broken(const std::string& message) {
  socket_.close();
  return Error(message);
}

void C10dStoreClient::send(const Bytes& request, Clock::time_point deadline, const std::string& action) {
  try {
    socket_.send_all(request.data(), request.size(), deadline, where_);
  } catch (const Error& e) {
    throw broken(std::string(e.what()) + " (" + action + ")");
  }
}

template <typename T>
T C10dStoreClient::receive(Clock::time_point deadline, const std::string& action) {
  T value{};
  try {
    socket_.recv_all(&value, sizeof(T), deadline, where_);
  } catch (const Error& e) {
    throw broken(std::string(e.what()) + " (" + action + ")");
  }
  return value;
}

Bytes C10dStoreClient::receive_bytes(Clock::time_point deadline, const std::string& action) {
  const uint64_t size = receive<uint64_t>(deadline, action);
  if (size > kMaxC10dValueBytes) {
    throw broken("malformed answer from " + where_ + " (" + action + "): a value of " + std::to_string(size) +
                 " bytes, over the limit of " + std::to_string(kMaxC10dValueBytes) +
                 " (is a PyTorch TCPStore listening there?)");
  }
  Bytes value(size);
  try {
    if (size) socket_.recv_all(value.data(), size, deadline, where_);
  } catch (const Error& e) {
    throw broken(std::string(e.what()) + " (" + action + ")");
  }
  return value;
}

void C10dStoreClient::set(const std::string& key, const Bytes& value) {
  ensure_connected();
  send(Request(Query::kSet).text(wire_key(key)).bytes(value).data(), Clock::now() + timeout_,
       "setting key '" + key + "'");
}

Bytes C10dStoreClient::get(const std::string& key) {
  wait({key}, timeout_);  // the store drops a client that gets a missing key
  const std::string action = "getting key '" + key + "'";
  const Clock::time_point deadline = Clock::now() + timeout_;
  send(Request(Query::kGet).text(wire_key(key)).data(), deadline, action);
  return receive_bytes(deadline, action);
}

int64_t C10dStoreClient::add(const std::string& key, int64_t delta) {
  return add_wire_key(wire_key(key), delta, "adding to key '" + key + "'");
}

int64_t C10dStoreClient::add_wire_key(const std::string& wire, int64_t delta, const std::string& action) {
  ensure_connected();
  const Clock::time_point deadline = Clock::now() + timeout_;
  send(Request(Query::kAdd).text(wire).number<int64_t>(delta).data(), deadline, action);
  return receive<int64_t>(deadline, action);
}

bool C10dStoreClient::check(const std::string& key) {
  ensure_connected();
  const std::string action = "checking key '" + key + "'";
  const Clock::time_point deadline = Clock::now() + timeout_;
  send(Request(Query::kCheck).key_list({wire_key(key)}).data(), deadline, action);
  const uint8_t answer = receive<uint8_t>(deadline, action);
  if (answer != kCheckReady && answer != kCheckNotReady) {
    throw broken("malformed answer from " + where_ + " (" + action + "): status " + std::to_string(answer) +
                 ", expected 0 (ready) or 1 (not ready)");
  }
  return answer == kCheckReady;
}

void C10dStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  ensure_connected();
  const std::string action = "waiting for " + describe_keys(keys);
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  const Clock::time_point deadline = Clock::now() + timeout;
  send(Request(Query::kWait).key_list(wire).data(), deadline, action);
  // The store answers only once every key exists: no answer by the deadline is the timeout. Its
  // answer may still come later, so the connection cannot be reused (broken() closes it).
  if (!socket_.readable_before(deadline)) {
    throw broken("timed out after " + describe_seconds(timeout) + " waiting for " + describe_keys(keys) +
                 " (stored as " + quoted_keys(wire) + ") in " + where_ +
                 " (a rank did not arrive: did it fail or start late? raise DPV_TIMEOUT if the job is just slow)")
        .about_settings({"DPV_TIMEOUT"});
  }
  const uint8_t answer = receive<uint8_t>(deadline + std::chrono::seconds(1), action);
  if (answer != kStopWaiting) {
    throw broken("malformed answer from " + where_ + " (" + action + "): status " + std::to_string(answer) +
                 ", expected 0 (stop waiting)");
  }
}

}  // namespace dpv::dist
