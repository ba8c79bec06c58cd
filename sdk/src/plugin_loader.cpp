#include "plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend_registry.h"

namespace kite::rt {
namespace {

std::vector<std::string> split_path(const std::string& list) {
  std::vector<std::string> dirs;
  size_t start = 0;
  while (start <= list.size()) {
    size_t colon = list.find(':', start);
    if (colon == std::string::npos) colon = list.size();
    if (colon > start) dirs.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return dirs;
}

std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&library_dir), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// dlerror() is process-global; serialise our use of it.
std::mutex g_dl_mutex;

}  // namespace

Plugin::~Plugin() {
  if (handle_ == nullptr) return;
  // Under dlopen's lock: once the last handle goes, another thread may load
  // the library again at the same address, and the lock orders this
  // thread's last use of the plugin's code and data before that thread's
  // first (the loader's own lock is invisible to ThreadSanitizer, which
  // otherwise reports the new copy's static initialisation as a race with
  // reads of the old one).
  std::lock_guard<std::mutex> lock(g_dl_mutex);
  dlclose(handle_);
}

Status open_plugin_file(const std::string& path, std::shared_ptr<Plugin>* out) {
  std::lock_guard<std::mutex> lock(g_dl_mutex);
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return Status(KITE_ERROR_BACKEND, "cannot load backend plugin '" + path + "': " +
                                          (e ? e : "unknown dlopen error"));
  }
  dlerror();
  void* sym = dlsym(handle, KITE_BACKEND_ENTRY_SYMBOL);
  if (sym == nullptr) {
    dlclose(handle);
    return Status(KITE_ERROR_BACKEND, "backend plugin '" + path + "' does not export '" +
                                          KITE_BACKEND_ENTRY_SYMBOL + "'");
  }
  kite_backend_entry_fn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(sym), "function and object pointers differ in size");
  std::memcpy(&entry, &sym, sizeof(entry));
  const kite_backend_api* api = entry();  // nothing thrown crosses a C entry point
  Status s = validate_backend_api(api, "backend plugin '" + path + "'");
  if (!s.is_ok()) {
    dlclose(handle);
    return s;
  }
  auto plugin = std::shared_ptr<Plugin>(new Plugin());
  plugin->handle_ = handle;
  plugin->api_ = api;
  plugin->path_ = path;
  *out = std::move(plugin);
  return Status::ok();
}

std::vector<std::string> plugin_search_path(const std::string& option_path) {
  std::vector<std::string> dirs = split_path(option_path);
  if (const char* env = std::getenv("KITE_BACKEND_PATH")) {
    for (const std::string& d : split_path(env)) dirs.push_back(d);
  }
  // The build tree keeps plugins next to libkite; an install keeps them in
  // <libdir>/kite/backends, found from libkite's own location so that a
  // relocated or unpacked install needs no environment variable.
  const std::string own = library_dir();
  if (!own.empty()) {
    dirs.push_back(own);
    dirs.push_back(own + "/kite/backends");
  }
  return dirs;
}

Status find_plugin(const std::string& name, const std::string& option_path,
                   std::shared_ptr<Plugin>* out) {
  const std::string file = "libkite_backend_" + name + ".so";
  std::string searched;
  for (const std::string& dir : plugin_search_path(option_path)) {
    const std::string path = dir + "/" + file;
    searched += (searched.empty() ? "" : ", ") + dir;
    if (!is_file(path)) continue;
    Status s = open_plugin_file(path, out);
    if (!s.is_ok()) return s;
    if (name != (*out)->api()->name) {
      const std::string got = (*out)->api()->name;
      out->reset();
      return Status(KITE_ERROR_BACKEND, "backend plugin '" + path + "' calls itself '" + got +
                                            "', expected '" + name + "'");
    }
    return Status::ok();
  }
  return Status(KITE_ERROR_NOT_FOUND, "backend '" + name + "' not found: no " + file + " in " +
                                          (searched.empty() ? "(no folders)" : searched) +
                                          " (set KITE_BACKEND_PATH or the session's backend path)");
}

}  // namespace kite::rt
