// The converter's C API (kite/converter.h): argument checks, status codes and
// the per-thread last error around kite::converter. No exception leaves here.
#include "kite/converter.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "kite/abi/status_guard.h"
#include "kite/converter/convert.h"
#include "passes/pass.h"
#include "writer/kite_writer.h"

struct kite_convert_options {
  kite::converter::ConvertOptions options;
};

namespace {

thread_local std::string t_last_error;

kite_status ok() {
  t_last_error.clear();
  return KITE_OK;
}

kite_status fail(kite_status code, const std::string& message) {
  t_last_error = message;
  return code;
}

// body(), an exception turned into a status and this thread's last error.
template <typename F>
kite_status guarded(const char* fn, F&& body) {
  return kite::abi::guard_exceptions(fn, std::forward<F>(body), fail);
}

kite_status null_options(const char* fn) {
  return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": options is NULL");
}

kite_status status_of_step(const std::string& step) {
  if (step == "support") return KITE_ERROR_UNSUPPORTED;
  return KITE_ERROR_INVALID_MODEL;
}

}  // namespace

extern "C" {

int kite_converter_version_number(void) { return KITE_VERSION_NUMBER; }

const char* kite_converter_last_error(void) { return t_last_error.c_str(); }

kite_status kite_convert_options_create(kite_convert_options** out_options) {
  return guarded("kite_convert_options_create", [&] {
    if (out_options == nullptr) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_convert_options_create: out_options is NULL");
    }
    *out_options = new kite_convert_options();
    return ok();
  });
}

void kite_convert_options_destroy(kite_convert_options* options) { delete options; }

kite_status kite_convert_options_set_input_shape(kite_convert_options* options, const char* name,
                                                 const int64_t* dims, int32_t rank) {
  const char* fn = "kite_convert_options_set_input_shape";
  return guarded(fn, [&] {
    if (options == nullptr) return null_options(fn);
    if (name == nullptr || name[0] == '\0') {
      return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": name is NULL or empty");
    }
    if (rank < 0 || rank > KITE_MAX_RANK || (rank > 0 && dims == nullptr)) {
      return fail(KITE_ERROR_INVALID_ARGUMENT,
                  std::string(fn) + ": input '" + name + "': rank " + std::to_string(rank) +
                      " (expected 0.." + std::to_string(KITE_MAX_RANK) + " with dims given)");
    }
    std::vector<int64_t> shape(dims, dims + rank);
    for (int32_t i = 0; i < rank; ++i) {
      if (shape[static_cast<size_t>(i)] < 0) {
        return fail(KITE_ERROR_INVALID_ARGUMENT,
                    std::string(fn) + ": input '" + name + "': dimension " + std::to_string(i) +
                        " is " + std::to_string(shape[static_cast<size_t>(i)]) +
                        " (expected >= 0)");
      }
    }
    options->options.input_shapes[name] = std::move(shape);
    return ok();
  });
}

kite_status kite_convert_options_set_opt_level(kite_convert_options* options, int32_t level) {
  const char* fn = "kite_convert_options_set_opt_level";
  if (options == nullptr) return null_options(fn);
  if (level < 0 || level > 2) {
    return fail(KITE_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": level " + std::to_string(level) + " (expected 0, 1 or 2)");
  }
  options->options.opt_level = level;
  return ok();
}

kite_status kite_convert_options_disable_pass(kite_convert_options* options,
                                              const char* pass_name) {
  const char* fn = "kite_convert_options_disable_pass";
  return guarded(fn, [&] {
    if (options == nullptr) return null_options(fn);
    if (pass_name == nullptr) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": pass_name is NULL");
    }
    if (!kite::passes::is_pass_name(pass_name)) {
      std::string known;
      for (const kite::passes::Pass& p : kite::passes::all_passes()) {
        known += std::string(known.empty() ? "" : ", ") + p.name;
      }
      return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": unknown pass '" + pass_name +
                                                   "' (passes: " + known + ")");
    }
    options->options.disabled_passes.push_back(pass_name);
    return ok();
  });
}

kite_status kite_convert_options_set_memory_budget(kite_convert_options* options,
                                                   uint64_t bytes) {
  if (options == nullptr) return null_options("kite_convert_options_set_memory_budget");
  options->options.memory_budget = bytes;
  options->options.memory_budget_ratio = 0;
  return ok();
}

kite_status kite_convert_options_set_memory_budget_ratio(kite_convert_options* options,
                                                         double ratio) {
  if (options == nullptr) return null_options("kite_convert_options_set_memory_budget_ratio");
  if (!(ratio >= 0 && ratio <= 1e6)) {  // also NaN
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_convert_options_set_memory_budget_ratio: ratio " +
                                                 std::to_string(ratio) + " is not in [0, 1e6]");
  }
  options->options.memory_budget_ratio = ratio;
  options->options.memory_budget = 0;
  return ok();
}

kite_status kite_convert_options_set_inplace(kite_convert_options* options, int32_t allow) {
  if (options == nullptr) return null_options("kite_convert_options_set_inplace");
  options->options.allow_aliasing = allow != 0;
  return ok();
}

kite_status kite_convert_options_set_precision(kite_convert_options* options, const char* precision,
                                              double fp16_tolerance) {
  const char* fn = "kite_convert_options_set_precision";
  if (options == nullptr) return null_options(fn);
  kite::converter::Precision p;
  if (precision == nullptr || !kite::converter::parse_precision(precision, &p)) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": precision '" +
                                                 (precision ? precision : "(null)") +
                                                 "' (expected fp32, fp16 or mixed)");
  }
  if (!(fp16_tolerance > 0) || !std::isfinite(fp16_tolerance)) {
    return fail(KITE_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": fp16_tolerance " + std::to_string(fp16_tolerance) + " is not > 0 and finite");
  }
  options->options.precision.precision = p;
  options->options.precision.tolerance = fp16_tolerance;
  return ok();
}

kite_status kite_convert_options_set_pack_for(kite_convert_options* options, const char* levels) {
  const char* fn = "kite_convert_options_set_pack_for";
  if (options == nullptr) return null_options(fn);
  std::vector<std::string> requested;
  std::string err;
  if (levels == nullptr || !kite::converter::parse_pack_for(levels, &requested, &err)) {
    return fail(KITE_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": " + (levels ? err : std::string("levels is NULL")));
  }
  options->options.pack_for = requested;
  return ok();
}

kite_status kite_convert_file(const char* onnx_path, const char* kite_path,
                              const kite_convert_options* options, char** out_report_json) {
  const char* fn = "kite_convert_file";
  return guarded(fn, [&] {
    if (onnx_path == nullptr || kite_path == nullptr) {
      return fail(KITE_ERROR_INVALID_ARGUMENT,
                  std::string(fn) + ": " + (onnx_path ? "kite_path" : "onnx_path") + " is NULL");
    }
    // Unreadable input is an I/O error, not a bad model.
    if (std::FILE* f = std::fopen(onnx_path, "rb")) {
      std::fclose(f);
    } else {
      return fail(KITE_ERROR_IO, std::string("cannot open '") + onnx_path + "': " +
                                     std::strerror(errno));
    }
    const kite::converter::ConvertOptions defaults;
    const kite::converter::ConvertOptions& opts = options ? options->options : defaults;
    kite::ir::Model model;
    kite::converter::ConvertReport report;
    std::string err;
    if (!kite::converter::convert_onnx_file(onnx_path, opts, &model, &report, &err)) {
      return fail(status_of_step(report.failed_step), err);
    }
    if (!kite::converter::check_memory_budget(opts, model, report, &err)) {
      return fail(KITE_ERROR_OUT_OF_MEMORY, err);
    }
    model.producer = std::string("kite-convert ") + KITE_VERSION_STRING;
    std::vector<uint8_t> bytes;
    if (!kite::writer::serialize(model, &bytes, &err)) {
      return fail(KITE_ERROR_INTERNAL, err);
    }
    // The report is ready before the file is written, so that a failure
    // leaves neither a file nor a report behind.
    char* report_copy = nullptr;
    if (out_report_json != nullptr) {
      const std::string json = kite::converter::report_to_json(onnx_path, kite_path,
                                                               opts.opt_level, model, report,
                                                               bytes.size());
      report_copy = static_cast<char*>(std::malloc(json.size() + 1));
      if (report_copy == nullptr) {
        return fail(KITE_ERROR_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
      }
      std::memcpy(report_copy, json.c_str(), json.size() + 1);
    }
    if (!kite::writer::write_bytes(bytes, kite_path, &err)) {
      std::free(report_copy);
      return fail(KITE_ERROR_IO, err);
    }
    if (out_report_json != nullptr) *out_report_json = report_copy;
    return ok();
  });
}

void kite_converter_free_string(char* string) { std::free(string); }

}  // extern "C"
