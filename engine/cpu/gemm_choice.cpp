#include "engine/cpu/gemm_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "engine/error.h"

namespace dpv::cpu {

namespace {

size_t shape_hash(const CpuGemmShape& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the fields
  for (uint64_t v : {static_cast<uint64_t>(s.trans_a), static_cast<uint64_t>(s.trans_b), static_cast<uint64_t>(s.rows),
                     static_cast<uint64_t>(s.cols), static_cast<uint64_t>(s.inner), static_cast<uint64_t>(s.beta_zero)}) {
    h ^= v;
    h *= 0x100000001b3ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

double multiply_adds(const CpuGemmShape& s) {
  return static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(s.inner);
}

}  // namespace

GemmChooser::GemmChooser(bool onednn_built, CpuGemmPin pin) : onednn_built_(onednn_built), pin_(pin) {}

const GemmChooser::Slot* GemmChooser::find(const CpuGemmShape& shape) const {
  const size_t start = shape_hash(shape) % kSlots;
  for (size_t i = 0; i < kSlots; ++i) {
    const Slot& slot = slots_[(start + i) % kSlots];
    if (!slot.used.load(std::memory_order_acquire)) return nullptr;  // slots fill in probe order
    if (slot.shape == shape) return &slot;
  }
  return nullptr;
}

void GemmChooser::remember(const CpuGemmShape& shape, CpuGemmLibrary library) {
  // The probe order of find(): the shape's own slot if it has one, else the first free slot.
  const size_t start = shape_hash(shape) % kSlots;
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& slot = slots_[(start + i) % kSlots];
    if (slot.used.load(std::memory_order_relaxed)) {
      if (slot.shape == shape) {
        slot.library.store(library, std::memory_order_release);
        return;
      }
      continue;
    }
    slot.shape = shape;
    slot.library.store(library, std::memory_order_relaxed);
    slot.used.store(true, std::memory_order_release);
    return;
  }
  // Full (thousands of shapes): not remembered; the shape is timed again when it comes back.
}

bool GemmChooser::timed(const CpuGemmShape& shape) const {
  return onednn_built_ && multiply_adds(shape) >= kUntimedProduct;
}

CpuGemmLibrary GemmChooser::choose(const CpuGemmShape& shape, const GemmTimer& timer) {
  if (pin_ == CpuGemmPin::OpenBlas) return CpuGemmLibrary::OpenBlas;
  if (pin_ == CpuGemmPin::Onednn) return CpuGemmLibrary::Onednn;
  if (const Slot* slot = find(shape)) return slot->library.load(std::memory_order_acquire);
  if (!timed(shape)) return CpuGemmLibrary::OpenBlas;
  // A first product: one thread times it while the others that meet the same shape wait for its answer.
  std::lock_guard lock(mutex_);
  if (const Slot* slot = find(shape)) return slot->library.load(std::memory_order_acquire);
  const auto time_here = [&] { return faster_library(timer, kRepeats, kBudgetSeconds); };
  const CpuGemmLibrary library = sharing_ ? sharing_->agree(shape, time_here) : time_here();
  timed_.fetch_add(1, std::memory_order_relaxed);
  remember(shape, library);
  return library;
}

std::optional<CpuGemmLibrary> GemmChooser::chosen(const CpuGemmShape& shape) const {
  if (pin_ == CpuGemmPin::OpenBlas) return CpuGemmLibrary::OpenBlas;
  if (pin_ == CpuGemmPin::Onednn) return CpuGemmLibrary::Onednn;
  if (const Slot* slot = find(shape)) return slot->library.load(std::memory_order_acquire);
  if (!timed(shape)) return CpuGemmLibrary::OpenBlas;
  return std::nullopt;
}

std::vector<CpuGemmChoice> GemmChooser::choices() const {
  std::vector<CpuGemmChoice> out;
  for (const Slot& slot : slots_)
    if (slot.used.load(std::memory_order_acquire))
      out.push_back({slot.shape, slot.library.load(std::memory_order_acquire)});
  std::sort(out.begin(), out.end(), [](const CpuGemmChoice& a, const CpuGemmChoice& b) { return a.shape < b.shape; });
  return out;
}

void GemmChooser::set(const std::vector<CpuGemmChoice>& choices) {
  std::lock_guard lock(mutex_);
  for (const CpuGemmChoice& c : choices) {
    // A checkpoint of a build with oneDNN read by one without: OpenBLAS is all there is.
    remember(c.shape, onednn_built_ ? c.library : CpuGemmLibrary::OpenBlas);
  }
}

void GemmChooser::set_sharing(CpuGemmSharing* sharing) {
  std::lock_guard lock(mutex_);
  sharing_ = sharing;
}

CpuGemmLibrary faster_library(const GemmTimer& timer, int repeats, double budget_seconds) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  (void)timer(CpuGemmLibrary::OpenBlas);
  (void)timer(CpuGemmLibrary::Onednn);
  double openblas = timer(CpuGemmLibrary::OpenBlas), onednn = timer(CpuGemmLibrary::Onednn);
  for (int i = 1; i < repeats; ++i) {
    if (std::chrono::duration<double>(clock::now() - start).count() > budget_seconds) break;
    openblas = std::min(openblas, timer(CpuGemmLibrary::OpenBlas));
    onednn = std::min(onednn, timer(CpuGemmLibrary::Onednn));
  }
  return onednn < openblas ? CpuGemmLibrary::Onednn : CpuGemmLibrary::OpenBlas;
}

CpuGemmPin parse_gemm_pin(const char* value, bool onednn_built) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return CpuGemmPin::Auto;
  if (v == "openblas") return CpuGemmPin::OpenBlas;
  if (v == "onednn") {
    check(onednn_built, "DPV_GEMM=onednn, but this build has no oneDNN (libdnnl-dev was not found when it was built); "
                        "unset DPV_GEMM or set it to openblas", ErrorClass::ValueError);
    return CpuGemmPin::Onednn;
  }
  std::string shown = v.substr(0, 40);
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  throw Error("DPV_GEMM='" + shown + "' is not a GEMM library: set it to auto (time both per shape, the default), "
              "openblas or onednn, or unset it", ErrorClass::ValueError);
}

GemmChooser& process_gemm_chooser() {
  // Made on first use; if DPV_GEMM is bad the constructor's throw leaves it unmade and the next call says so again.
  static GemmChooser chooser(built_with_onednn(), parse_gemm_pin(std::getenv("DPV_GEMM"), built_with_onednn()));
  return chooser;
}

}  // namespace dpv::cpu

namespace dpv {

namespace {

const char* library_word(CpuGemmLibrary library) { return library == CpuGemmLibrary::Onednn ? "onednn" : "openblas"; }

// One "NT:256x1024x784:0=onednn" entry, or a dpv::Error naming `source`.
CpuGemmChoice parse_choice(const std::string& item, const std::string& source) {
  const auto bad = [&] {
    return Error(source + ": '" + item.substr(0, 60) + "' is not a GEMM choice (want e.g. NT:256x1024x784:0=onednn)");
  };
  CpuGemmChoice c;
  if (item.size() < 3 || (item[0] != 'N' && item[0] != 'T') || (item[1] != 'N' && item[1] != 'T') || item[2] != ':')
    throw bad();
  c.shape.trans_a = item[0] == 'T';
  c.shape.trans_b = item[1] == 'T';
  const size_t eq = item.find('=');
  if (eq == std::string::npos) throw bad();
  const std::string lib = item.substr(eq + 1);
  if (lib != "onednn" && lib != "openblas") throw bad();
  c.library = lib == "onednn" ? CpuGemmLibrary::Onednn : CpuGemmLibrary::OpenBlas;
  // rows x cols x inner : beta0
  std::string dims = item.substr(3, eq - 3);
  int64_t* fields[] = {&c.shape.rows, &c.shape.cols, &c.shape.inner};
  size_t at = 0;
  for (int f = 0; f < 3; ++f) {
    const size_t end = dims.find(f < 2 ? 'x' : ':', at);
    const std::string digits = dims.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (end == std::string::npos || digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    *fields[f] = std::stoll(digits);
    at = end + 1;
  }
  const std::string beta = dims.substr(at);
  if (beta != "0" && beta != "1") throw bad();
  c.shape.beta_zero = beta == "0";
  return c;
}

}  // namespace

std::string cpu_gemm_library_name(CpuGemmLibrary library) {
  return library == CpuGemmLibrary::Onednn ? "oneDNN sgemm" : "OpenBLAS sgemm";
}

std::string cpu_gemm_library(bool float64, const CpuGemmShape& shape) {
  if (float64) return "OpenBLAS dgemm";
  const std::optional<CpuGemmLibrary> library = cpu::process_gemm_chooser().chosen(shape);
  return library ? cpu_gemm_library_name(*library) : "not timed yet";
}

bool cpu_has_onednn() { return cpu::built_with_onednn(); }

CpuGemmPin cpu_gemm_pin() { return cpu::process_gemm_chooser().pin(); }

std::vector<CpuGemmChoice> cpu_gemm_choices() { return cpu::process_gemm_chooser().choices(); }

void set_cpu_gemm_choices(const std::vector<CpuGemmChoice>& choices) { cpu::process_gemm_chooser().set(choices); }

void install_cpu_gemm_sharing(CpuGemmSharing* sharing) { cpu::process_gemm_chooser().set_sharing(sharing); }

RankZeroGemmSharing::RankZeroGemmSharing(int rank, Publish publish, WaitFor wait_for)
    : rank_(rank), publish_(std::move(publish)), wait_for_(std::move(wait_for)) {}

CpuGemmLibrary RankZeroGemmSharing::agree(const CpuGemmShape& shape, const std::function<CpuGemmLibrary()>& time_here) {
  // "NT:256x1024x784:0=onednn" split at '=': the shape names the key, the library is the value.
  const std::string entry = cpu_gemm_choices_text({{shape, CpuGemmLibrary::OpenBlas}});
  const std::string shape_text = entry.substr(0, entry.find('='));
  const std::string key = "dpv/gemm/" + shape_text;
  if (rank_ == 0) {
    const CpuGemmLibrary library = time_here();
    publish_(key, library_word(library));
    return library;
  }
  const std::string value = wait_for_(key);
  return parse_cpu_gemm_choices(shape_text + "=" + value, "rank 0's GEMM choice under key '" + key + "'").at(0).library;
}

std::string cpu_gemm_choices_text(const std::vector<CpuGemmChoice>& choices) {
  std::string text;
  for (const CpuGemmChoice& c : choices) {
    const CpuGemmShape& s = c.shape;
    if (!text.empty()) text += ';';
    text += s.trans_a ? 'T' : 'N';
    text += s.trans_b ? 'T' : 'N';
    text.append(":").append(std::to_string(s.rows)).append("x").append(std::to_string(s.cols)).append("x");
    text.append(std::to_string(s.inner)).append(s.beta_zero ? ":0=" : ":1=").append(library_word(c.library));
  }
  return text;
}

std::vector<CpuGemmChoice> parse_cpu_gemm_choices(const std::string& text, const std::string& source) {
  std::vector<CpuGemmChoice> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(';', at), text.size());
    out.push_back(parse_choice(text.substr(at, end - at), source));
    at = end + 1;
  }
  return out;
}

}  // namespace dpv
