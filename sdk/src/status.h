// Internal status: a kite_status code plus the detailed message that becomes
// kite_last_error() when it reaches the C API.
#pragma once

#include <string>
#include <utility>

#include "kite/kite.h"

namespace kite::rt {

class Status {
 public:
  Status() = default;
  Status(kite_status code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == KITE_OK; }
  kite_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  kite_status code_ = KITE_OK;
  std::string message_;
};

// Per-thread last error, read by kite_last_error().
void set_last_error(const std::string& message);
void clear_last_error();
const char* last_error();

}  // namespace kite::rt
