// Finds and opens backend plugins: shared modules named
// libkite_backend_<name>.so that export KITE_BACKEND_ENTRY_SYMBOL.
// Search order: the session option's path list, KITE_BACKEND_PATH, then the
// folder that holds libkite itself, then its kite/backends subfolder (the
// install layout: <libdir>/kite/backends).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "status.h"

namespace kite::rt {

// An open plugin; closes its handle (dlclose) when the last user lets go.
class Plugin {
 public:
  ~Plugin();
  const kite_backend_api* api() const { return api_; }
  const std::string& path() const { return path_; }

 private:
  friend Status open_plugin_file(const std::string& path, std::shared_ptr<Plugin>* out);
  void* handle_ = nullptr;
  const kite_backend_api* api_ = nullptr;
  std::string path_;
};

// Opens one file and checks its entry point and ABI; errors name the file.
Status open_plugin_file(const std::string& path, std::shared_ptr<Plugin>* out);

// Directories searched for name, in order (colon-separated option first).
std::vector<std::string> plugin_search_path(const std::string& option_path);

// Looks for libkite_backend_<name>.so along the search path. KITE_ERROR_NOT_FOUND
// when no such file exists (the message lists the folders searched); other
// errors when a file exists but cannot be used.
Status find_plugin(const std::string& name, const std::string& option_path,
                   std::shared_ptr<Plugin>* out);

}  // namespace kite::rt
