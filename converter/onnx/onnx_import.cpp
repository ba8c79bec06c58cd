// ONNX import: the entry points and the order of the model-level steps. The
// steps live in the files onnx_importer.h lists.
#include "onnx/onnx_import.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <utility>

#include <sys/stat.h>

#include "onnx/onnx_importer.h"

namespace kite::converter {

namespace onnx_detail {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

int Scope::find(const std::string& name) const {
  auto it = names.find(name);
  if (it != names.end()) return it->second;
  for (const Scope* s = parent; s; s = s->parent) {
    auto pit = s->names.find(name);
    if (pit != s->names.end()) {
      outer_refs.insert(pit->second);
      return pit->second;
    }
  }
  return -1;
}

bool Importer::run(onnx::ModelProto* proto) {
  if (!proto->has_graph()) return fail("the ONNX model has no graph");
  if (!read_opsets(*proto)) return false;
  model_->producer = proto->producer_name();
  if (!proto->producer_version().empty()) {
    model_->producer += (model_->producer.empty() ? "" : " ") + proto->producer_version();
  }
  name_nodes(proto->mutable_graph());
  if (!check_supported_ops(proto->graph())) return false;
  int main_index = -1;
  std::set<int> outer;
  if (!import_graph(proto->graph(), nullptr, true, "main", &main_index, &outer)) return false;
  if (main_index != 0) return fail("internal error: main graph is not graph 0");
  return check_no_nul_bytes();
}

}  // namespace onnx_detail

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool import_parsed(onnx::ModelProto* proto, const ImportOptions& options,
                   const std::string& model_dir, ir::Model* out, std::string* err) {
  ir::Model model;
  onnx_detail::Importer importer(options, model_dir, &model);
  if (!importer.run(proto)) {
    if (err) *err = importer.error();
    return false;
  }
  *out = std::move(model);
  return true;
}

// What protobuf cannot parse, and what to do about it.
std::string too_large_message(const std::string& what, uint64_t size) {
  return what + " " + std::to_string(size) +
         " bytes; protobuf cannot parse more than 2 GiB: save the weights as external data "
         "(onnx.save_model(..., save_as_external_data=True))";
}

}  // namespace

bool import_onnx_bytes(const void* data, size_t size, const ImportOptions& options,
                       ir::Model* out, std::string* err) {
  if (!out || (!data && size > 0)) {
    if (err) *err = "import_onnx_bytes: null argument";
    return false;
  }
  if (size > static_cast<size_t>(INT_MAX)) {
    if (err) {
      *err = too_large_message("the ONNX model is", static_cast<uint64_t>(size));
    }
    return false;
  }
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) {
    if (err) *err = "cannot parse the data as an ONNX model (not a valid ModelProto)";
    return false;
  }
  return import_parsed(&proto, options, options.model_dir, out, err);
}

bool import_onnx_file(const std::string& path, const ImportOptions& options, ir::Model* out,
                      std::string* err) {
  auto set_err = [&](const std::string& message) {
    if (err) *err = message;
    return false;
  };
  if (!out) return set_err("import_onnx_file: null argument");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return set_err("cannot open '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return set_err("'" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return set_err("cannot open '" + path + "': " + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) return set_err("cannot read '" + path + "'");
  if (size > INT_MAX) {
    return set_err(too_large_message("'" + path + "' is", static_cast<uint64_t>(size)));
  }
  onnx::ModelProto proto;
  {
    // Scoped so the file's bytes are freed before the import copies weights.
    std::string bytes(static_cast<size_t>(size), '\0');
    in.seekg(0);
    if (size > 0 && !in.read(&bytes[0], size)) return set_err("cannot read '" + path + "'");
    if (!proto.ParseFromString(bytes)) {
      return set_err("cannot parse '" + path + "' as an ONNX model (not a valid ModelProto)");
    }
  }
  const std::string model_dir = options.model_dir.empty() ? directory_of(path) : options.model_dir;
  if (!import_parsed(&proto, options, model_dir, out, err)) {
    if (err) *err = "'" + path + "': " + *err;
    return false;
  }
  return true;
}

}  // namespace kite::converter
