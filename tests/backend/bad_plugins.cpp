// Plugins that the runtime must refuse, one per build of this file:
//   KITE_BAD_ABI       exports the entry point but claims ABI version 999
//   KITE_NO_ENTRY      exports no entry point at all
#include "kite/backend.h"

#ifdef KITE_BAD_ABI
static kite_backend_api g_api = {999u, sizeof(kite_backend_api), "badabi", KITE_BACKEND_MEMORY_HOST};
extern "C" __attribute__((visibility("default"))) const kite_backend_api* kite_backend_entry(void) {
  return &g_api;
}
#endif

#ifdef KITE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) int kite_backend_something_else(void) { return 1; }
#endif
