// kite-run: load a .kite model, run it on .npy or random inputs, summarise the
// outputs, optionally save them and time repeated runs.
//
// Exit status: 0 success, 1 a runtime or file error, 2 bad command line.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <kite/kite.h>
#include <kite/ops/half.h>

#include "common/npy.h"

namespace {

using kite::apps::NpyArray;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

constexpr const char kUsage[] =
    "usage: kite-run MODEL.kite [options]\n"
    "\n"
    "Runs MODEL once and prints one summary line per output.\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE.npy  value of input NAME (repeatable); inputs not given\n"
    "                         are filled with seeded random values\n"
    "  --output-dir DIR       write each output to DIR/<name>.npy\n"
    "  --backend LIST         backend preference list, e.g. vulkan,cpu (default: cpu)\n"
    "  --threads N            CPU worker threads (default 0: one per core)\n"
    "  --warmup N             untimed runs before timing (default 0)\n"
    "  --iterations N         timed runs; prints latency statistics (default 0)\n"
    "  --seed S               seed for random inputs (default 0)\n"
    "  --backend-path DIRS    colon-separated folders searched first for backend\n"
    "                         plugins (then KITE_BACKEND_PATH, then libkite's folder\n"
    "                         and its kite/backends subfolder)\n"
    "  --backend-option NAME:KEY=VALUE\n"
    "                         an option for backend NAME (repeatable), e.g.\n"
    "                         devsim:unified=1 or cpu:threads=2\n"
    "  --strict               fail instead of falling back to another backend\n"
    "  --poison               fill the arena with NaN bytes before each run\n"
    "  --json FILE            write placement, transfers, segments, latency (and the\n"
    "                         profile) as JSON\n"
    "  --placement            print the backend chosen for every node\n"
    "  --profile              time every node (its backend measures it) over the\n"
    "                         timed runs (--iterations, default 10 here) and print\n"
    "                         a table sorted by time, with totals per op and backend\n"
    "  --version              print the runtime, format and backend ABI versions\n"
    "  --quiet                print only the output summaries and latency\n"
    "  -h, --help             print this help\n"
    "\n"
    "exit status: 0 success, 1 runtime or file error, 2 bad command line\n";

struct Options {
  std::string model_path;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, file
  std::string output_dir;
  std::string backends;
  int32_t threads = 0;
  int64_t warmup = 0;
  int64_t iterations = 0;
  uint64_t seed = 0;
  bool placement = false;
  bool quiet = false;
  std::string backend_path;
  bool strict = false;
  bool poison = false;
  std::string json_path;
  bool profile = false;
  bool version = false;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> backend_options;
};

// What --json writes, gathered while running.
struct JsonReport {
  std::string placement;  // JSON array
  std::string latency;    // JSON object or "null"
  std::string profile = "null";   // JSON object or "null"
  std::string backends;   // JSON array
  std::string notes;      // JSON array
  int32_t transfers = 0;
  int32_t segments = 0;
  int32_t uploads = 0;
  int32_t downloads = 0;
  int32_t syncs = 0;
};

std::string json_string(const char* s) {
  std::string out = "\"";
  for (const char* p = s ? s : ""; *p; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// ---- small helpers ---------------------------------------------------------

struct ModelDeleter {
  void operator()(kite_model* m) const { kite_model_destroy(m); }
};
struct OptionsDeleter {
  void operator()(kite_session_options* o) const { kite_session_options_destroy(o); }
};
struct SessionDeleter {
  void operator()(kite_session* s) const { kite_session_destroy(s); }
};
using ModelPtr = std::unique_ptr<kite_model, ModelDeleter>;
using OptionsPtr = std::unique_ptr<kite_session_options, OptionsDeleter>;
using SessionPtr = std::unique_ptr<kite_session, SessionDeleter>;

int usage_error(const std::string& message) {
  std::fprintf(stderr, "kite-run: %s\n\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

// Reports a failed kite call. The library's message says what went wrong;
// the status string is the fallback if the library left none.
int kite_error(kite_status status, const char* doing) {
  const char* message = kite_last_error();
  if (message && *message)
    std::fprintf(stderr, "kite-run: %s\n", message);
  else
    std::fprintf(stderr, "kite-run: %s: %s\n", doing, kite_status_string(status));
  return kExitError;
}

bool parse_int(const char* text, int64_t min, int64_t max, int64_t* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

bool parse_u64(const char* text, uint64_t* out) {
  if (!text || !*text || *text == '-' || *text == '+') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

std::string shape_string(const int64_t* shape, size_t rank) {
  if (rank == 0) return "scalar";
  std::string s;
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string dtype_string(kite_dtype dtype) {
  const char* name = kite_dtype_name(dtype);
  return name ? name : "dtype" + std::to_string(static_cast<int>(dtype));
}

std::string describe(const kite_tensor_info& info) {
  return "'" + std::string(info.name) + "' " +
         shape_string(info.shape, static_cast<size_t>(info.rank)) + " " +
         dtype_string(info.dtype);
}

// Deterministic across platforms: mt19937_64's sequence is fixed by the
// standard, unlike std::uniform_*_distribution's.
void fill_random(const kite_tensor_info& info, std::mt19937_64& rng, std::vector<uint8_t>* out) {
  out->assign(static_cast<size_t>(info.byte_size), 0);
  const size_t itemsize = kite_dtype_size(info.dtype);
  const size_t count = itemsize ? out->size() / itemsize : 0;
  auto unit = [&rng]() {  // uniform in [0, 1) with 24 random bits
    return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
  };
  auto small_int = [&rng]() { return static_cast<int32_t>((rng() >> 32) % 10u); };
  uint8_t* p = out->data();
  for (size_t i = 0; i < count; ++i) {
    switch (info.dtype) {
      case KITE_DTYPE_FLOAT32: {
        const float v = unit() * 2.0f - 1.0f;
        std::memcpy(p + i * 4, &v, 4);
        break;
      }
      case KITE_DTYPE_FLOAT16: {
        const uint16_t v = kite::float_to_half(unit() * 2.0f - 1.0f);
        std::memcpy(p + i * 2, &v, 2);
        break;
      }
      case KITE_DTYPE_INT64: {
        const int64_t v = small_int();
        std::memcpy(p + i * 8, &v, 8);
        break;
      }
      case KITE_DTYPE_INT32: {
        const int32_t v = small_int();
        std::memcpy(p + i * 4, &v, 4);
        break;
      }
      case KITE_DTYPE_INT8:
      case KITE_DTYPE_UINT8:
        p[i] = static_cast<uint8_t>(small_int());
        break;
      case KITE_DTYPE_BOOL:
        p[i] = static_cast<uint8_t>(rng() >> 63);
        break;
      default:
        break;  // unknown dtype: left as zeros
    }
  }
}

double element_as_double(kite_dtype dtype, const uint8_t* p) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case KITE_DTYPE_FLOAT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return kite::half_to_float(v);
    }
    case KITE_DTYPE_INT64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case KITE_DTYPE_INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case KITE_DTYPE_INT8:
      return static_cast<int8_t>(*p);
    case KITE_DTYPE_UINT8:
    case KITE_DTYPE_BOOL:
      return *p;
    default:
      return 0.0;
  }
}

std::string format_element(kite_dtype dtype, const uint8_t* p) {
  char buf[64];
  if (dtype == KITE_DTYPE_INT64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof(buf), "%" PRId64, v);
  } else if (dtype == KITE_DTYPE_FLOAT32 || dtype == KITE_DTYPE_FLOAT16) {
    std::snprintf(buf, sizeof(buf), "%.6g", element_as_double(dtype, p));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", element_as_double(dtype, p));
  }
  return buf;
}

// One line: name, shape, dtype, up to five values, sum and sum of |x|.
void print_output_summary(const kite_tensor_info& info, const std::vector<uint8_t>& data) {
  const size_t itemsize = kite_dtype_size(info.dtype);
  const size_t count = itemsize ? data.size() / itemsize : 0;
  std::string first;
  for (size_t i = 0; i < count && i < 5; ++i) {
    if (i) first += ", ";
    first += format_element(info.dtype, data.data() + i * itemsize);
  }
  if (count > 5) first += ", ...";
  double sum = 0.0, abs_sum = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double v = element_as_double(info.dtype, data.data() + i * itemsize);
    sum += v;
    abs_sum += std::fabs(v);
  }
  std::printf("output %s first=[%s] sum=%.6f abs_sum=%.6f\n", describe(info).c_str(),
              first.c_str(), sum, abs_sum);
}

// Characters outside [A-Za-z0-9._-] become '_', so a tensor name can never
// escape DIR or name a hidden path component.
std::string file_stem_for(const std::string& name) {
  std::string stem = name;
  for (char& c : stem) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (stem.empty()) stem = "_";
  return stem;
}

// ---- command line ----------------------------------------------------------

// Returns kExitOk to continue, or the exit status to stop with.
int parse_args(int argc, char** argv, Options* opt, bool* help, bool* version) {
  *help = false;
  *version = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return kExitOk;
    }
    if (arg == "--version") {
      *version = true;
      opt->version = true;
      return kExitOk;
    }
    if (arg == "--placement") {
      opt->placement = true;
      continue;
    }
    if (arg == "--quiet") {
      opt->quiet = true;
      continue;
    }
    if (arg == "--strict") {
      opt->strict = true;
      continue;
    }
    if (arg == "--poison") {
      opt->poison = true;
      continue;
    }
    if (arg == "--profile") {
      opt->profile = true;
      continue;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (arg.size() > 1 && arg[0] == '-') return usage_error("unknown option '" + arg + "'");
      if (!opt->model_path.empty())
        return usage_error("more than one model given ('" + opt->model_path + "' and '" + arg +
                           "')");
      opt->model_path = arg;
      continue;
    }
    // Options with a value: "--name value" or "--name=value".
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      static const std::set<std::string> kWithValue = {"--input",   "--output-dir", "--backend",
                                                       "--threads", "--warmup",     "--iterations",
                                                       "--seed", "--backend-path", "--json",
                                                       "--backend-option"};
      if (!kWithValue.count(name)) return usage_error("unknown option '" + arg + "'");
      if (i + 1 >= argc) return usage_error(name + " needs a value");
      value = argv[++i];
    }
    int64_t n = 0;
    if (name == "--input") {
      const size_t sep = value.find('=');
      if (sep == std::string::npos || sep == 0 || sep + 1 == value.size())
        return usage_error("--input expects NAME=FILE.npy, got '" + value + "'");
      std::string input_name = value.substr(0, sep);
      for (const auto& given : opt->inputs)
        if (given.first == input_name)
          return usage_error("input '" + input_name + "' given more than once");
      opt->inputs.emplace_back(std::move(input_name), value.substr(sep + 1));
    } else if (name == "--output-dir") {
      if (value.empty()) return usage_error("--output-dir needs a directory");
      opt->output_dir = value;
    } else if (name == "--backend") {
      if (value.empty()) return usage_error("--backend needs a list, e.g. cpu");
      opt->backends = value;
    } else if (name == "--threads") {
      if (!parse_int(value.c_str(), 0, INT32_MAX, &n))
        return usage_error("--threads expects an integer >= 0, got '" + value + "'");
      opt->threads = static_cast<int32_t>(n);
    } else if (name == "--warmup") {
      if (!parse_int(value.c_str(), 0, INT32_MAX, &n))
        return usage_error("--warmup expects an integer >= 0, got '" + value + "'");
      opt->warmup = n;
    } else if (name == "--iterations") {
      if (!parse_int(value.c_str(), 0, INT32_MAX, &n))
        return usage_error("--iterations expects an integer >= 0, got '" + value + "'");
      opt->iterations = n;
    } else if (name == "--backend-option") {
      const size_t colon = value.find(':');
      const size_t eq = value.find('=', colon == std::string::npos ? 0 : colon);
      if (colon == std::string::npos || colon == 0 || eq == std::string::npos || eq == colon + 1)
        return usage_error("--backend-option expects NAME:KEY=VALUE, got '" + value + "'");
      opt->backend_options.push_back(
          {value.substr(0, colon), {value.substr(colon + 1, eq - colon - 1), value.substr(eq + 1)}});
    } else if (name == "--backend-path") {
      opt->backend_path = value;
    } else if (name == "--json") {
      if (value.empty()) return usage_error("--json needs a file name");
      opt->json_path = value;
    } else if (name == "--seed") {
      if (!parse_u64(value.c_str(), &opt->seed))
        return usage_error("--seed expects an unsigned integer, got '" + value + "'");
    } else {
      return usage_error("unknown option '" + name + "'");
    }
  }
  if (opt->model_path.empty()) return usage_error("no model given");
  return kExitOk;
}

// ---- the steps ---------------------------------------------------------------

int print_placement(kite_session* session, bool every_node, bool print, JsonReport* json) {
  int32_t node_count = 0;
  kite_status st = kite_session_get_node_count(session, &node_count);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_node_count");
  std::vector<std::pair<std::string, int>> per_backend;  // in order of first use
  int fused = 0, decomposed = 0;
  for (int32_t i = 0; i < node_count; ++i) {
    kite_node_placement p{};
    st = kite_session_get_node_placement(session, i, &p);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_node_placement");
    const std::string backend = p.backend ? p.backend : "?";
    auto it = std::find_if(per_backend.begin(), per_backend.end(),
                           [&](const auto& e) { return e.first == backend; });
    if (it == per_backend.end())
      per_backend.emplace_back(backend, 1);
    else
      ++it->second;
    fused += p.fused && !p.decomposed;
    decomposed += p.decomposed != 0;
    json->placement += std::string(i ? ",\n    " : "\n    ") + "{\"node\": " + json_string(p.node_name) +
                       ", \"op\": " + json_string(p.op) + ", \"backend\": " + json_string(p.backend) +
                       ", \"fused\": " + (p.fused ? "true" : "false") + ", \"decomposed\": " +
                       (p.decomposed ? "true" : "false") + ", \"reason\": " + json_string(p.reason) + "}";
    if (every_node) {
      const char* how = p.decomposed ? "decomposed" : p.fused ? "fused" : "-";
      std::string tail = how;  // then the reason, if any, in its own column
      if (p.reason && *p.reason) {
        tail.resize(std::max<size_t>(tail.size(), 10), ' ');
        tail += std::string(" ") + p.reason;
      }
      std::printf("  node %4d %-32s %-24s %-8s %s\n", i, p.node_name ? p.node_name : "",
                  p.op ? p.op : "", backend.c_str(), tail.c_str());
    }
  }
  std::string line = "placement: " + std::to_string(node_count) + " nodes";
  if (per_backend.size() == 1) {
    line += " on " + per_backend[0].first;
  } else if (!per_backend.empty()) {
    line += ":";
    for (size_t i = 0; i < per_backend.size(); ++i)
      line += (i ? ", " : " ") + std::to_string(per_backend[i].second) + " on " +
              per_backend[i].first;
  }
  if (fused || decomposed)
    line += " (" + std::to_string(fused) + " fused, " + std::to_string(decomposed) +
            " decomposed)";
  st = kite_session_get_transfer_count(session, &json->transfers);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_transfer_count");
  if (json->transfers > 0) line += ", " + std::to_string(json->transfers) + " transfers per run";
  if (print) std::printf("%s\n", line.c_str());
  int32_t notes = 0;
  st = kite_session_get_note_count(session, &notes);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_note_count");
  for (int32_t i = 0; i < notes; ++i) {
    const char* note = kite_session_get_note(session, i);
    if (print) std::printf("note: %s\n", note);
    json->notes += std::string(i ? ", " : "") + json_string(note);
  }
  return kExitOk;
}

// Backends of the preference list that are not available: always on
// stderr (the run falls back), with where the runtime looked.
int report_backends(kite_session* session, const Options& opt, JsonReport* json) {
  int32_t count = 0;
  kite_status st = kite_session_get_backend_count(session, &count);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_backend_count");
  for (int32_t i = 0; i < count; ++i) {
    kite_session_backend b{};
    b.struct_size = sizeof b;
    st = kite_session_get_backend(session, i, &b);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_backend");
    if (!b.available) {
      std::fprintf(stderr, "kite-run: warning: backend '%s' is not available, its nodes fall back: %s\n",
                   b.name, b.reason);
    } else if (!opt.quiet && b.device_memory) {
      std::printf("backend %s: %s (device %d%s), arena %" PRIu64 " B, weights %" PRIu64 " B%s, workspace %" PRIu64
                  " B, %d kernels in %d segments\n",
                  b.name, b.device_name, b.device_index, b.unified ? ", unified: its arena is the host arena" : "",
                  b.arena_bytes, b.weights_bytes, b.weights_imported ? " (imported from the file)" : "",
                  b.workspace_bytes, b.kernels, b.segments);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\": %s, \"available\": %s, \"device\": %s, \"abi_version\": %d, "
                  "\"device_memory\": %s, \"unified\": %s, \"weights_imported\": %s, \"kernels\": %d, "
                  "\"segments\": %d, \"weight_uploads\": %d, \"arena_bytes\": %" PRIu64
                  ", \"weights_bytes\": %" PRIu64 ", \"workspace_bytes\": %" PRIu64 "}",
                  i ? ",\n    " : "\n    ", json_string(b.name).c_str(), b.available ? "true" : "false",
                  json_string(b.device_name).c_str(), b.abi_version, b.device_memory ? "true" : "false",
                  b.unified ? "true" : "false", b.weights_imported ? "true" : "false", b.kernels, b.segments,
                  b.weight_uploads, b.arena_bytes, b.weights_bytes, b.workspace_bytes);
    json->backends += buf;
  }
  return kExitOk;
}

// The profile table: nodes sorted by mean time, then totals per op type and
// per backend.
int print_profile(kite_session* session, JsonReport* json) {
  int32_t count = 0;
  kite_status st = kite_session_get_node_count(session, &count);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_node_count");
  struct Row {
    int32_t index;
    std::string node, op, backend, how;
    double ms;
    bool measured;
  };
  std::vector<Row> rows;
  uint64_t runs = 0;
  double total = 0.0;
  for (int32_t i = 0; i < count; ++i) {
    kite_node_placement p{};
    kite_node_profile prof{};
    st = kite_session_get_node_placement(session, i, &p);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_node_placement");
    st = kite_session_get_node_profile(session, i, &prof);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_node_profile");
    Row r{i, p.node_name ? p.node_name : "", p.op ? p.op : "", p.backend ? p.backend : "",
          p.decomposed ? "decomposed" : p.fused ? "fused" : "-", static_cast<double>(prof.mean_ns) / 1e6,
          prof.measured != 0};
    runs = std::max<uint64_t>(runs, prof.runs);
    if (r.measured) total += r.ms;
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  // Long node names (fused chains) keep their start and end in the table.
  auto column = [](const std::string& text, size_t width) {
    if (text.size() <= width) return text;
    const size_t head = (width - 3) / 2;
    return text.substr(0, head) + "..." + text.substr(text.size() - (width - 3 - head));
  };
  std::printf("profile over %" PRIu64 " runs (mean time per run, as each backend measured it):\n", runs);
  std::printf("  %-36s %-22s %-8s %-10s %10s %7s\n", "node", "op", "backend", "how", "mean ms", "share");
  std::map<std::string, double> per_op, per_backend;
  std::string json_nodes;
  for (const Row& r : rows) {
    const double share = total > 0.0 ? 100.0 * r.ms / total : 0.0;
    if (r.measured) {
      std::printf("  %-36s %-22s %-8s %-10s %10.4f %6.1f%%\n", column(r.node, 36).c_str(), r.op.c_str(),
                  r.backend.c_str(), r.how.c_str(), r.ms, share);
      per_op[r.op] += r.ms;
      per_backend[r.backend] += r.ms;
    } else {
      std::printf("  %-36s %-22s %-8s %-10s %10s %7s\n", column(r.node, 36).c_str(), r.op.c_str(),
                  r.backend.c_str(), r.how.c_str(), "n/a", "");
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, ", \"mean_ms\": %.6f, \"share\": %.4f, \"measured\": %s}", r.ms,
                  share / 100.0, r.measured ? "true" : "false");
    json_nodes += std::string(json_nodes.empty() ? "\n      " : ",\n      ") + "{\"index\": " +
                  std::to_string(r.index) + ", \"node\": " + json_string(r.node.c_str()) +
                  ", \"op\": " + json_string(r.op.c_str()) + ", \"backend\": " +
                  json_string(r.backend.c_str()) + ", \"how\": " + json_string(r.how.c_str()) + buf;
  }
  auto totals = [&](const char* title, const std::map<std::string, double>& m, const char* key) {
    std::vector<std::pair<std::string, double>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::printf("  %s:", title);
    std::string j;
    for (size_t i = 0; i < v.size(); ++i) {
      std::printf("%s %s %.4f ms (%.1f%%)", i ? "," : "", v[i].first.c_str(), v[i].second,
                  total > 0.0 ? 100.0 * v[i].second / total : 0.0);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6f", v[i].second);
      j += std::string(i ? ", " : "") + json_string(v[i].first.c_str()) + ": " + buf;
    }
    std::printf("\n");
    return std::string("\"") + key + "\": {" + j + "}";
  };
  const std::string by_op = totals("total by op type", per_op, "by_op_ms");
  const std::string by_backend = totals("total by backend", per_backend, "by_backend_ms");
  std::printf("  total measured: %.4f ms per run\n", total);
  char head[96];
  std::snprintf(head, sizeof head, "{\n    \"runs\": %" PRIu64 ", \"total_ms\": %.6f,\n    ", runs, total);
  json->profile = std::string(head) + by_op + ",\n    " + by_backend + ",\n    \"nodes\": [" + json_nodes + "\n    ]\n  }";
  return kExitOk;
}

std::string list_inputs(const std::vector<kite_tensor_info>& inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + describe(inputs[i]);
  return s.empty() ? "(none)" : s;
}

int set_inputs(kite_session* session, const Options& opt) {
  int32_t count = 0;
  kite_status st = kite_session_get_input_count(session, &count);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_input_count");
  std::vector<kite_tensor_info> inputs(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    st = kite_session_get_input_info(session, i, &inputs[static_cast<size_t>(i)]);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_input_info");
  }

  std::vector<bool> given(inputs.size(), false);
  for (const auto& name_and_file : opt.inputs) {
    // Not a structured binding: C++17 lambdas cannot capture those.
    const std::string& name = name_and_file.first;
    const std::string& file = name_and_file.second;
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const kite_tensor_info& in) { return name == in.name; });
    if (it == inputs.end()) {
      std::fprintf(stderr, "kite-run: model has no input '%s'; its inputs are: %s\n",
                   name.c_str(), list_inputs(inputs).c_str());
      return kExitUsage;
    }
    const kite_tensor_info& info = *it;
    NpyArray array;
    std::string err;
    if (!kite::apps::read_npy(file, &array, &err)) {
      std::fprintf(stderr, "kite-run: input '%s': %s\n", name.c_str(), err.c_str());
      return kExitError;
    }
    const bool same_shape =
        array.shape.size() == static_cast<size_t>(info.rank) &&
        std::equal(array.shape.begin(), array.shape.end(), info.shape);
    if (array.dtype != info.dtype || !same_shape) {
      std::fprintf(stderr, "kite-run: input '%s': expected %s %s, got %s %s from %s\n",
                   name.c_str(), shape_string(info.shape, static_cast<size_t>(info.rank)).c_str(),
                   dtype_string(info.dtype).c_str(),
                   shape_string(array.shape.data(), array.shape.size()).c_str(),
                   dtype_string(array.dtype).c_str(), file.c_str());
      return kExitError;
    }
    const int32_t index = static_cast<int32_t>(it - inputs.begin());
    st = kite_session_set_input(session, index, array.data.data(), array.data.size());
    if (st != KITE_OK) return kite_error(st, "kite_session_set_input");
    given[static_cast<size_t>(index)] = true;
    if (!opt.quiet) std::printf("input %s <- %s\n", describe(info).c_str(), file.c_str());
  }

  std::mt19937_64 rng(opt.seed);
  std::string randomised;
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (given[i]) continue;
    fill_random(inputs[i], rng, &buffer);
    st = kite_session_set_input(session, static_cast<int32_t>(i), buffer.data(), buffer.size());
    if (st != KITE_OK) return kite_error(st, "kite_session_set_input");
    randomised += (randomised.empty() ? "" : ", ") + describe(inputs[i]);
  }
  if (!randomised.empty() && !opt.quiet)
    std::printf("random inputs (seed %" PRIu64
                "; float in [-1, 1), int in [0, 10), bool 0/1): %s\n",
                opt.seed, randomised.c_str());
  return kExitOk;
}

// Created before the model loads, so a bad path fails before a long run.
int make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "kite-run: cannot create output directory '%s': %s\n", dir.c_str(),
                 ec ? ec.message().c_str() : "exists and is not a directory");
    return kExitError;
  }
  return kExitOk;
}

int report_outputs(kite_session* session, const Options& opt) {
  int32_t count = 0;
  kite_status st = kite_session_get_output_count(session, &count);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_output_count");

  std::set<std::string> used_stems;
  for (int32_t i = 0; i < count; ++i) {
    kite_tensor_info info{};
    st = kite_session_get_output_info(session, i, &info);
    if (st != KITE_OK) return kite_error(st, "kite_session_get_output_info");
    NpyArray array;
    array.dtype = info.dtype;
    array.shape.assign(info.shape, info.shape + info.rank);
    array.data.resize(static_cast<size_t>(info.byte_size));
    st = kite_session_get_output(session, i, array.data.data(), array.data.size());
    if (st != KITE_OK) return kite_error(st, "kite_session_get_output");
    print_output_summary(info, array.data);

    if (opt.output_dir.empty()) continue;
    // Two names may sanitise to the same stem ("a/b", "a:b"); keep both files.
    std::string stem = file_stem_for(info.name);
    for (int k = 1; used_stems.count(stem); ++k)
      stem = file_stem_for(info.name) + "_" + std::to_string(k);
    used_stems.insert(stem);
    const std::string path = (std::filesystem::path(opt.output_dir) / (stem + ".npy")).string();
    std::string err;
    if (!kite::apps::write_npy(path, array, &err)) {
      std::fprintf(stderr, "kite-run: output '%s': %s\n", info.name, err.c_str());
      return kExitError;
    }
    if (!opt.quiet) std::printf("  wrote %s\n", path.c_str());
  }
  return kExitOk;
}

int time_runs(kite_session* session, const Options& opt, JsonReport* json) {
  for (int64_t i = 0; i < opt.warmup; ++i) {
    const kite_status st = kite_session_run(session);
    if (st != KITE_OK) return kite_error(st, "kite_session_run");
  }
  if (opt.iterations <= 0) return kExitOk;
  std::vector<double> ms(static_cast<size_t>(opt.iterations));
  for (double& t : ms) {
    const auto start = std::chrono::steady_clock::now();
    const kite_status st = kite_session_run(session);
    const auto stop = std::chrono::steady_clock::now();
    if (st != KITE_OK) return kite_error(st, "kite_session_run");
    t = std::chrono::duration<double, std::milli>(stop - start).count();
  }
  double total = 0.0;
  for (double t : ms) total += t;
  std::sort(ms.begin(), ms.end());
  // Nearest-rank percentile: the smallest sample with at least p% at or below it.
  auto percentile = [&ms](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ms.size())));
    return ms[std::min(std::max<size_t>(rank, 1), ms.size()) - 1];
  };
  std::printf("latency over %zu runs: mean %.3f ms, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, "
              "min %.3f ms\n",
              ms.size(), total / static_cast<double>(ms.size()), percentile(50), percentile(90),
              percentile(99), ms.front());
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"runs\": %zu, \"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, "
                "\"min\": %.4f}",
                ms.size(), total / static_cast<double>(ms.size()), percentile(50), percentile(90),
                percentile(99), ms.front());
  json->latency = buf;
  return kExitOk;
}

int run(const Options& opt) {
  if (kite_version_number() != KITE_VERSION_NUMBER)
    std::fprintf(stderr, "kite-run: warning: built against kite %s, running with %s\n",
                 KITE_VERSION_STRING, kite_version_string());

  if (!opt.output_dir.empty()) {
    if (int rc = make_output_dir(opt.output_dir); rc != kExitOk) return rc;
  }

  // Load to ready session, timed (--json load_ms): the model (map and
  // verify) and the session (place, prepare: weight packing when the file
  // has no packed forms).
  const auto load_start = std::chrono::steady_clock::now();
  kite_model* raw_model = nullptr;
  kite_status st = kite_model_load_file(opt.model_path.c_str(), &raw_model);
  const auto model_ready = std::chrono::steady_clock::now();
  if (st != KITE_OK) return kite_error(st, "kite_model_load_file");
  ModelPtr model(raw_model);

  if (!opt.quiet) {
    int32_t major = 0, minor = 0;
    st = kite_model_get_format_version(model.get(), &major, &minor);
    if (st != KITE_OK) return kite_error(st, "kite_model_get_format_version");
    const char* producer = kite_model_get_producer(model.get());
    std::printf("model: %s (format %d.%d, producer '%s', kite %s)\n", opt.model_path.c_str(),
                major, minor, producer ? producer : "", kite_version_string());
  }

  kite_session_options* raw_options = nullptr;
  st = kite_session_options_create(&raw_options);
  if (st != KITE_OK) return kite_error(st, "kite_session_options_create");
  OptionsPtr options(raw_options);
  if (!opt.backends.empty()) {
    st = kite_session_options_set_backends(options.get(), opt.backends.c_str());
    if (st != KITE_OK) return kite_error(st, "kite_session_options_set_backends");
  }
  st = kite_session_options_set_threads(options.get(), opt.threads);
  if (st != KITE_OK) return kite_error(st, "kite_session_options_set_threads");
  if (!opt.backend_path.empty()) {
    st = kite_session_options_set_backend_path(options.get(), opt.backend_path.c_str());
    if (st != KITE_OK) return kite_error(st, "kite_session_options_set_backend_path");
  }
  st = kite_session_options_set_strict(options.get(), opt.strict ? 1 : 0);
  if (st != KITE_OK) return kite_error(st, "kite_session_options_set_strict");
  st = kite_session_options_set_poison(options.get(), opt.poison ? 1 : 0);
  if (st != KITE_OK) return kite_error(st, "kite_session_options_set_poison");
  for (const auto& o : opt.backend_options) {
    st = kite_session_options_set_backend_option(options.get(), o.first.c_str(), o.second.first.c_str(),
                                                 o.second.second.c_str());
    if (st != KITE_OK) return kite_error(st, "kite_session_options_set_backend_option");
  }
  st = kite_session_options_set_profiling(options.get(), opt.profile ? 1 : 0);
  if (st != KITE_OK) return kite_error(st, "kite_session_options_set_profiling");

  kite_session* raw_session = nullptr;
  const auto session_start = std::chrono::steady_clock::now();
  st = kite_session_create(model.get(), options.get(), &raw_session);
  if (st != KITE_OK) return kite_error(st, "kite_session_create");
  SessionPtr session(raw_session);
  const auto session_ready = std::chrono::steady_clock::now();
  auto ms = [](std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  const double model_ms = ms(model_ready - load_start);
  const double session_ms = ms(session_ready - session_start);
  if (!opt.quiet) {
    std::printf("load: %.2f ms to a ready session (model %.2f ms, session %.2f ms)\n", model_ms + session_ms,
                model_ms, session_ms);
  }

  JsonReport json;
  json.latency = "null";
  if (int rc = report_backends(session.get(), opt, &json); rc != kExitOk) return rc;
  if (int rc = print_placement(session.get(), opt.placement, !opt.quiet || opt.placement, &json);
      rc != kExitOk) {
    return rc;
  }
  if (int rc = set_inputs(session.get(), opt); rc != kExitOk) return rc;

  st = kite_session_run(session.get());
  if (st != KITE_OK) return kite_error(st, "kite_session_run");
  kite_run_stats stats{};
  stats.struct_size = sizeof stats;
  st = kite_session_get_run_stats(session.get(), &stats);
  if (st != KITE_OK) return kite_error(st, "kite_session_get_run_stats");
  json.segments = stats.segments;
  json.transfers = stats.transfers;
  json.uploads = stats.uploads;
  json.downloads = stats.downloads;
  json.syncs = stats.syncs;
  if (!opt.quiet) {
    std::printf("run: %d segments, %d transfers (%d uploads, %d downloads), %d device copies, %d syncs\n",
                stats.segments, stats.transfers, stats.uploads, stats.downloads, stats.buffer_copies,
                stats.syncs);
  }
  if (int rc = report_outputs(session.get(), opt); rc != kExitOk) return rc;

  Options timing = opt;
  if (opt.profile && timing.iterations == 0) timing.iterations = 10;
  if (opt.profile) {
    // Warm-up first, then measure only the timed runs.
    for (int64_t i = 0; i < timing.warmup; ++i) {
      st = kite_session_run(session.get());
      if (st != KITE_OK) return kite_error(st, "kite_session_run");
    }
    timing.warmup = 0;
    st = kite_session_reset_profile(session.get());
    if (st != KITE_OK) return kite_error(st, "kite_session_reset_profile");
  }
  if (int rc = time_runs(session.get(), timing, &json); rc != kExitOk) return rc;
  if (opt.profile) {
    if (int rc = print_profile(session.get(), &json); rc != kExitOk) return rc;
  }
  if (!opt.json_path.empty()) {
    std::FILE* f = std::fopen(opt.json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "kite-run: cannot write '%s'\n", opt.json_path.c_str());
      return kExitError;
    }
    int32_t inputs = 0, outputs = 0;
    kite_session_get_input_count(session.get(), &inputs);
    kite_session_get_output_count(session.get(), &outputs);
    std::fprintf(f, "{\n  \"inputs\": %d,\n  \"outputs\": %d,", inputs, outputs);
    std::fprintf(f,
                 "\n  \"model\": %s,\n  \"segments_per_run\": %d,\n  \"transfers_per_run\": %d,\n"
                 "  \"uploads_per_run\": %d,\n  \"downloads_per_run\": %d,\n  \"syncs_per_run\": %d,\n"
                 "  \"load_ms\": {\"model\": %.3f, \"session\": %.3f},\n"
                 "  \"latency_ms\": %s,\n  \"backends\": [%s\n  ],\n  \"notes\": [%s],\n"
                 "  \"placement\": [%s\n  ],\n  \"profile\": %s\n}\n",
                 json_string(opt.model_path.c_str()).c_str(), json.segments, json.transfers, json.uploads,
                 json.downloads, json.syncs, model_ms, session_ms, json.latency.c_str(), json.backends.c_str(),
                 json.notes.c_str(),
                 json.placement.c_str(), json.profile.c_str());
    if (std::fclose(f) != 0) {
      std::fprintf(stderr, "kite-run: cannot write '%s'\n", opt.json_path.c_str());
      return kExitError;
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool help = false, version = false;
  if (int rc = parse_args(argc, argv, &opt, &help, &version); rc != kExitOk) return rc;
  if (help) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (opt.version) {
    int32_t major = 0, minor = 0;
    kite_format_version_supported(&major, &minor);
    std::printf("kite-run %s (runtime library %s); reads .kite format up to %d.%d; "
                "backend ABI versions 1 to %d\n",
                KITE_VERSION_STRING, kite_version_string(), major, minor, kite_backend_abi_version());
    return kExitOk;
  }
  return run(opt);
}
