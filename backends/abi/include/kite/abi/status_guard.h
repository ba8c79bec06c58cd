#pragma once
// No C++ exception crosses the C ABI: every C entry point (the runtime's and
// the converter's C APIs, the plugin tables of kite/abi/plugin.h) runs its body
// through guard_exceptions, which turns an escaping exception into a status
// and a message naming the entry point.
#include "kite/kite.h"

#include <exception>
#include <new>
#include <string>

namespace kite::abi {

// Returns body(); an exception becomes fail(KITE_ERROR_OUT_OF_MEMORY,
// "<fn>: out of memory") for std::bad_alloc, else fail(KITE_ERROR_INTERNAL,
// "<fn>: <what()>" or "<fn>: unknown error"). fail(code, message) records the
// message where the caller's API reports it and returns code.
template <typename Body, typename Fail>
kite_status guard_exceptions(const char* fn, Body&& body, Fail&& fail) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(KITE_ERROR_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KITE_ERROR_INTERNAL, std::string(fn) + ": " + e.what());
  } catch (...) {
    return fail(KITE_ERROR_INTERNAL, std::string(fn) + ": unknown error");
  }
}

}  // namespace kite::abi
