// Verification of an untrusted .kite file. Nothing past this point trusts the
// file: every index, shape, byte size, blob range and arena offset is checked
// here, and each op's shapes are checked again by the backend at prepare.
#include <cstring>
#include <limits>
#include <type_traits>

#include "kite/kite_generated.h"
#include "model.h"

namespace kite::rt {
namespace {

namespace fb = kite::fb;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// FlatBuffers' verifier aligns a vector's length field (4 bytes) but not its
// elements: in a hostile file a vector of 8-byte scalars or structs can sit
// off its alignment, and reading it would be a misaligned load.
template <typename T>
bool elements_aligned(const uint8_t* base, const flatbuffers::Vector<T>* v) {
  if (v == nullptr || v->size() == 0) return true;
  const size_t offset = static_cast<size_t>(v->Data() - base);
  // Vector<const S*> holds structs S in place; Vector<T> holds scalars.
  return offset % alignof(std::remove_const_t<std::remove_pointer_t<T>>) == 0;
}

std::string tensor_label(const std::vector<TensorRec>& tensors, int index) {
  return "tensor " + std::to_string(index) + " '" + tensors[static_cast<size_t>(index)].name + "'";
}

class Verifier {
 public:
  Verifier(const uint8_t* data, uint64_t size, std::string origin)
      : data_(data), size_(size), origin_(std::move(origin)) {}

  Status run(Model* model);

 private:
  Status fail(const std::string& what) const {
    return Status(KITE_ERROR_INVALID_MODEL, "invalid model " + origin_ + ": " + what);
  }
  Status decode_tensors(const fb::Model& m, Model* model);
  Status decode_packed(const fb::Model& m, Model* model);
  Status decode_graph(const fb::Model& m, int graph_index, Model* model);
  Status decode_node(const fb::Node& n, const std::string& where, int graph_index,
                     int graph_count, int depth, const Model& model, NodeRec* out);
  Status decode_plan(const fb::Model& m, Model* model);
  Status check_node_overlap(const Model& model, const NodeRec& node) const;
  Status check_op_rules(const Model& model) const;
  Status check_node_rules(const Model& model, const NodeRec& node, const std::string& where) const;
  Status check_if(const Model& model, const NodeRec& node, const std::string& where) const;
  static std::string what_node(const NodeRec& n) { return n.op + " node '" + n.name + "'"; }

  const uint8_t* data_;
  uint64_t size_;
  std::string origin_;
};

Status Verifier::run(Model* model) {
  if (size_ < 8) {
    return fail("file is " + std::to_string(size_) + " bytes, too short for a Kite model");
  }
  if (!fb::ModelBufferHasIdentifier(data_)) {
    char id[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) {
      char c = static_cast<char>(data_[4 + i]);
      id[i] = (c >= 32 && c < 127) ? c : '?';
    }
    return fail(std::string("file identifier is '") + id + "', expected '" +
                fb::ModelIdentifier() + "' (not a .kite file)");
  }
  if (size_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return fail("file too large");
  }
  // The FlatBuffer part is at most 2 GiB; the verifier checks every table,
  // vector and string against the buffer's length.
  const size_t fb_limit = static_cast<size_t>(
      std::min<uint64_t>(size_, static_cast<uint64_t>(FLATBUFFERS_MAX_BUFFER_SIZE - 1)));
  flatbuffers::Verifier::Options vopts;
  vopts.max_depth = 64;
  vopts.max_tables = 1u << 26;
  flatbuffers::Verifier verifier(data_, fb_limit, vopts);
  if (!fb::VerifyModelBuffer(verifier)) {
    return fail("FlatBuffers verification failed (corrupt or truncated file)");
  }
  const fb::Model& m = *fb::GetModel(data_);

  model->format_major = m.format_major();
  model->format_minor = m.format_minor();
  if (m.format_major() > KITE_FORMAT_MAJOR) {
    return Status(KITE_ERROR_UNSUPPORTED_VERSION,
                  "model " + origin_ + " has format version " + std::to_string(m.format_major()) +
                      "." + std::to_string(m.format_minor()) +
                      ", newer than the newest this runtime reads (" +
                      std::to_string(KITE_FORMAT_MAJOR) + "." + std::to_string(KITE_FORMAT_MINOR) +
                      "); upgrade Kite or convert with an older kite-convert");
  }
  if (m.format_major() == 0) return fail("format major version is 0 (missing)");
  if (m.file_size() != size_) {
    return fail("file is " + std::to_string(size_) + " bytes but its header says " +
                std::to_string(m.file_size()) + " (truncated or padded)");
  }
  model->producer = str(m.producer());
  model->source_opset = m.source_opset();

  Status s = decode_tensors(m, model);
  if (!s.is_ok()) return s;
  s = decode_packed(m, model);
  if (!s.is_ok()) return s;
  if (!m.graphs() || m.graphs()->size() == 0) return fail("no graphs");
  if (m.graphs()->size() > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return fail("too many graphs");
  }
  model->graphs.resize(m.graphs()->size());
  for (int g = 0; g < static_cast<int>(m.graphs()->size()); ++g) {
    s = decode_graph(m, g, model);
    if (!s.is_ok()) return s;
  }
  // The application sees graph 0's inputs and outputs.
  // (op rules are checked after the plan, below)
  const GraphRec& main = model->graphs[0];
  for (int t : main.inputs) {
    if (model->tensors[static_cast<size_t>(t)].kind != TensorKind::Input) {
      return fail("main graph input " + tensor_label(model->tensors, t) + " is not of kind Input");
    }
  }
  for (int t : main.outputs) {
    if (model->tensors[static_cast<size_t>(t)].is_constant()) {
      return fail("main graph output " + tensor_label(model->tensors, t) + " is a constant");
    }
  }
  s = decode_plan(m, model);
  if (!s.is_ok()) return s;
  return check_op_rules(*model);
}

// Every node's declared outputs against the shared op rules (kite_ops), once,
// at load: a backend (a plugin without the C++ op library included) can then
// trust a node's declared shapes and dtypes. A fused node is checked through
// its body (each body node against its op's rules, the body's values flowing
// from the fused node's inputs to its outputs); If against its branches.
Status Verifier::check_op_rules(const Model& model) const {
  for (size_t g = 0; g < model.graphs.size(); ++g) {
    const std::string where = "graph " + std::to_string(g);
    for (const NodeRec& node : model.graphs[g].nodes) {
      Status s = check_node_rules(model, node, where);
      if (!s.is_ok()) return s;
    }
  }
  return Status::ok();
}

Status Verifier::check_if(const Model& model, const NodeRec& node, const std::string& where) const {
  const std::string label = where + " " + what_node(node);
  const kite::ops::Attr* branches[2] = {nullptr, nullptr};
  for (const auto& a : node.attrs) {
    if (a.name == "then_branch") branches[0] = &a;
    if (a.name == "else_branch") branches[1] = &a;
  }
  if (branches[0] == nullptr || branches[1] == nullptr || branches[0]->type != KITE_ATTR_GRAPH ||
      branches[1]->type != KITE_ATTR_GRAPH) {
    return fail(label + " lacks then/else branch graphs");
  }
  if (node.inputs.size() != 1 || node.inputs[0] < 0) return fail(label + " needs exactly one condition");
  const TensorRec& cond = model.tensors[static_cast<size_t>(node.inputs[0])];
  if (cond.dtype != KITE_DTYPE_BOOL || cond.byte_size != 1) {
    return fail(label + ": condition '" + cond.name + "' must hold one bool");
  }
  for (const kite::ops::Attr* branch : branches) {
    const GraphRec& bg = model.graphs[static_cast<size_t>(branch->i)];
    if (bg.outputs.size() != node.outputs.size()) {
      return fail(label + ": branch graph " + std::to_string(branch->i) + " has " +
                  std::to_string(bg.outputs.size()) + " outputs, the node has " +
                  std::to_string(node.outputs.size()));
    }
    for (size_t k = 0; k < bg.outputs.size(); ++k) {
      const TensorRec& src = model.tensors[static_cast<size_t>(bg.outputs[k])];
      const TensorRec& dst = model.tensors[static_cast<size_t>(node.outputs[k])];
      if (src.dtype != dst.dtype || src.shape != dst.shape) {
        return fail(label + ": branch output '" + src.name + "' (" + kite::ops::shape_string(src.shape) +
                    ") does not match output '" + dst.name + "' (" + kite::ops::shape_string(dst.shape) + ")");
      }
    }
  }
  return Status::ok();
}

Status Verifier::check_node_rules(const Model& model, const NodeRec& node, const std::string& where) const {
  const std::string label = where + " " + what_node(node);
  if (node.op == "If" && node.domain.empty()) return check_if(model, node, where);
  if (!node.fused_pattern.empty()) {
    if (node.body.empty()) return fail(label + " is fused ('" + node.fused_pattern + "') but has no body");
    // The body's data flow: fused inputs (and constants) in, fused outputs out.
    std::vector<bool> available(model.tensors.size(), false);
    for (int t : node.inputs) {
      if (t >= 0) available[static_cast<size_t>(t)] = true;
    }
    for (const NodeRec& b : node.body) {
      for (int t : b.inputs) {
        if (t >= 0 && !available[static_cast<size_t>(t)] && !model.tensors[static_cast<size_t>(t)].is_constant()) {
          return fail(label + " body node '" + b.name + "' reads " + tensor_label(model.tensors, t) +
                      ", which is neither an input of the fused node nor made earlier in its body");
        }
      }
      Status s = check_node_rules(model, b, label + " body");
      if (!s.is_ok()) return s;
      for (int t : b.outputs) available[static_cast<size_t>(t)] = true;
    }
    for (int t : node.outputs) {
      bool made = false;
      for (const NodeRec& b : node.body) {
        for (int o : b.outputs) made = made || o == t;
      }
      if (!made) {
        return fail(label + " output " + tensor_label(model.tensors, t) + " is not made by its body");
      }
    }
    return Status::ok();
  }
  if (!node.domain.empty()) return fail(label + " has unknown domain '" + node.domain + "'");
  if (!kite::ops::is_known_op(node.op)) return fail(label + ": op " + node.op + " has no shape rules in this runtime");
  kite::ops::OpNode op = kite::ops::make_op_node(node, [&model](int t, kite::ops::TensorType* in) {
    const TensorRec& r = model.tensors[static_cast<size_t>(t)];
    in->name = r.name;
    in->dtype = r.dtype;
    in->shape = r.shape;
    if (r.is_constant()) in->data = kite::ops::constant_value(r.const_data);
    return true;
  });
  std::vector<kite::ops::TensorType> declared;
  for (int t : node.outputs) {
    const TensorRec& r = model.tensors[static_cast<size_t>(t)];
    kite::ops::TensorType out;
    out.name = r.name;
    out.dtype = r.dtype;
    out.shape = r.shape;
    declared.push_back(std::move(out));
  }
  std::string err;
  if (!kite::ops::check_declared_outputs(op, declared, &err)) return fail(label + ": " + err);
  return Status::ok();
}

Status Verifier::decode_tensors(const fb::Model& m, Model* model) {
  if (!m.tensors()) return fail("no tensor table");
  const auto& tensors = *m.tensors();
  const uint64_t blob_count = m.blobs() ? m.blobs()->size() : 0;
  if (!elements_aligned(data_, m.blobs())) return fail("the blob table is misaligned");
  const uint64_t alignment = m.blob_alignment();
  if (blob_count > 0 && (alignment < 64 || (alignment & (alignment - 1)) != 0)) {
    return fail("blob alignment " + std::to_string(alignment) + " is not a power of two >= 64");
  }
  if (tensors.size() > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return fail("too many tensors");
  }
  model->tensors.resize(tensors.size());
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor* t = tensors.Get(i);
    TensorRec& rec = model->tensors[i];
    rec.name = str(t->name());
    if (has_nul(rec.name)) {
      // The C API finds inputs and outputs by NUL-terminated name.
      return fail("tensor " + std::to_string(i) + " has a name with a NUL byte");
    }
    const std::string label = "tensor " + std::to_string(i) + " '" + rec.name + "'";
    const int dtype = static_cast<int>(t->dtype());
    // Range-check the raw value first: an int outside kite_dtype's values
    // must not be converted to it (undefined behaviour in C++).
    if (dtype <= static_cast<int>(fb::DType::MIN) || dtype > static_cast<int>(fb::DType::MAX) ||
        kite::ops::dtype_size(static_cast<kite_dtype>(dtype)) == 0) {
      return fail(label + " has unknown dtype " + std::to_string(dtype));
    }
    rec.dtype = static_cast<kite_dtype>(dtype);
    const int kind = static_cast<int>(t->kind());
    if (kind < 0 || kind > static_cast<int>(fb::TensorKind::MAX)) {
      return fail(label + " has unknown kind " + std::to_string(kind));
    }
    rec.kind = static_cast<TensorKind>(kind);
    if (!elements_aligned(data_, t->shape())) return fail(label + " has a misaligned shape vector");
    if (t->shape()) {
      if (t->shape()->size() > KITE_MAX_RANK) {
        return fail(label + " has rank " + std::to_string(t->shape()->size()) +
                    ", more than the maximum " + std::to_string(KITE_MAX_RANK));
      }
      rec.shape.assign(t->shape()->begin(), t->shape()->end());
    }
    for (size_t d = 0; d < rec.shape.size(); ++d) {
      if (rec.shape[d] < 0) {
        return fail(label + " has negative dim " + std::to_string(rec.shape[d]) + " at axis " +
                    std::to_string(d));
      }
    }
    if (!kite::ops::checked_byte_size(rec.dtype, rec.shape, &rec.byte_size)) {
      return fail(label + " shape " + kite::ops::shape_string(rec.shape) +
                  " overflows 64-bit byte size");
    }
    if (rec.is_constant()) {
      const int blob = t->blob();
      if (blob < 0 || static_cast<uint64_t>(blob) >= blob_count) {
        return fail(label + " is a constant with blob index " + std::to_string(blob) +
                    " out of range (" + std::to_string(blob_count) + " blobs)");
      }
      const fb::Blob* b = m.blobs()->Get(static_cast<uint32_t>(blob));
      if (b->offset() > size_ || b->size() > size_ - b->offset()) {
        return fail(label + " blob " + std::to_string(blob) + " range [" +
                    std::to_string(b->offset()) + ", +" + std::to_string(b->size()) +
                    ") is past the end of the file (" + std::to_string(size_) + " bytes)");
      }
      if (b->offset() % alignment != 0) {
        return fail(label + " blob " + std::to_string(blob) + " offset " +
                    std::to_string(b->offset()) + " is not aligned to " +
                    std::to_string(alignment));
      }
      if (b->size() != rec.byte_size) {
        return fail(label + " blob " + std::to_string(blob) + " holds " +
                    std::to_string(b->size()) + " bytes, but shape " +
                    kite::ops::shape_string(rec.shape) + " of " +
                    kite::ops::dtype_name(rec.dtype) + " needs " + std::to_string(rec.byte_size));
      }
      rec.const_data = data_ + b->offset();
    } else if (t->blob() != -1) {
      return fail(label + " is not a constant but refers to blob " + std::to_string(t->blob()));
    }
  }
  return Status::ok();
}

// Format 1.1: pre-packed weight forms. Each names a constant, a key and a
// blob inside the file (aligned like every blob); keys are printable ASCII
// without spaces, at most 256 bytes, and unique per tensor. The layout a key
// stands for is its backend's business: the backend checks the size.
Status Verifier::decode_packed(const fb::Model& m, Model* model) {
  const auto* packed = m.packed();
  if (!packed || packed->size() == 0) return Status::ok();
  const uint64_t blob_count = m.blobs() ? m.blobs()->size() : 0;
  const uint64_t alignment = m.blob_alignment();
  if (packed->size() > (1u << 24)) return fail("too many packed forms");
  for (uint32_t i = 0; i < packed->size(); ++i) {
    const fb::PackedForm* f = packed->Get(i);
    const std::string key = str(f->key());
    std::string label = "packed form " + std::to_string(i) + " '" + key + "'";
    const int t = f->tensor();
    if (t < 0 || static_cast<size_t>(t) >= model->tensors.size()) {
      return fail(label + " names tensor " + std::to_string(t) + ", out of range (" +
                  std::to_string(model->tensors.size()) + " tensors)");
    }
    TensorRec& rec = model->tensors[static_cast<size_t>(t)];
    label += " of tensor " + std::to_string(t) + " '" + rec.name + "'";
    if (!rec.is_constant()) return fail(label + ": the tensor is not a constant");
    if (key.empty() || key.size() > 256) {
      return fail(label + ": the key is empty or longer than 256 bytes");
    }
    for (char c : key) {
      if (c <= ' ' || c > '~') return fail(label + ": the key has a byte that is not printable ASCII");
    }
    for (const PackedRec& other : rec.packed) {
      if (other.key == key) return fail(label + ": the tensor has two forms with this key");
    }
    const int blob = f->blob();
    if (blob < 0 || static_cast<uint64_t>(blob) >= blob_count) {
      return fail(label + " has blob index " + std::to_string(blob) + " out of range (" +
                  std::to_string(blob_count) + " blobs)");
    }
    const fb::Blob* b = m.blobs()->Get(static_cast<uint32_t>(blob));
    if (b->offset() > size_ || b->size() > size_ - b->offset()) {
      return fail(label + " blob " + std::to_string(blob) + " range [" + std::to_string(b->offset()) +
                  ", +" + std::to_string(b->size()) + ") is past the end of the file (" +
                  std::to_string(size_) + " bytes)");
    }
    if (alignment == 0 || b->offset() % alignment != 0) {
      return fail(label + " blob " + std::to_string(blob) + " offset " + std::to_string(b->offset()) +
                  " is not aligned to " + std::to_string(alignment));
    }
    PackedRec form;
    form.key = key;
    form.data = data_ + b->offset();
    form.byte_size = b->size();
    rec.packed.push_back(std::move(form));
  }
  // The ABI's view of them, pointing into the records (which stay put now).
  for (TensorRec& rec : model->tensors) {
    for (const PackedRec& form : rec.packed) {
      kite_backend_packed_form abi{};
      abi.struct_size = sizeof abi;
      abi.key = form.key.c_str();
      abi.data = form.data;
      abi.byte_size = form.byte_size;
      rec.packed_abi.push_back(abi);
    }
  }
  return Status::ok();
}

Status Verifier::decode_node(const fb::Node& n, const std::string& where, int graph_index,
                             int graph_count, int depth, const Model& model, NodeRec* out) {
  out->name = str(n.name());
  out->op = str(n.op());
  out->domain = str(n.domain());
  out->fused_pattern = str(n.fused_pattern());
  const std::string label = where + " node '" + out->name + "'";
  if (out->op.empty()) return fail(label + " has no op type");
  // These strings reach backends as C strings: a NUL inside would make the
  // runtime and a backend read different names.
  if (has_nul(out->name) || has_nul(out->op) || has_nul(out->domain) ||
      has_nul(out->fused_pattern)) {
    return fail(where + " has a node whose name, op, domain or pattern contains a NUL byte");
  }
  const int tensor_count = static_cast<int>(model.tensors.size());
  if (n.inputs()) {
    for (uint32_t k = 0; k < n.inputs()->size(); ++k) {
      const int t = n.inputs()->Get(k);
      if (t < -1 || t >= tensor_count) {
        return fail(label + " input " + std::to_string(k) + " refers to tensor " +
                    std::to_string(t) + ", out of range (" + std::to_string(tensor_count) +
                    " tensors)");
      }
      out->inputs.push_back(t);
    }
  }
  if (!n.outputs() || n.outputs()->size() == 0) return fail(label + " has no outputs");
  for (uint32_t k = 0; k < n.outputs()->size(); ++k) {
    const int t = n.outputs()->Get(k);
    if (t < 0 || t >= tensor_count) {
      return fail(label + " output " + std::to_string(k) + " refers to tensor " +
                  std::to_string(t) + ", out of range (" + std::to_string(tensor_count) +
                  " tensors)");
    }
    if (model.tensors[static_cast<size_t>(t)].is_constant()) {
      return fail(label + " writes constant " + tensor_label(model.tensors, t));
    }
    out->outputs.push_back(t);
  }
  if (n.attributes()) {
    for (uint32_t k = 0; k < n.attributes()->size(); ++k) {
      const fb::Attribute* a = n.attributes()->Get(k);
      kite::ops::Attr attr;
      attr.name = str(a->name());
      if (!elements_aligned(data_, a->ints())) {
        return fail(label + " attribute '" + attr.name + "' has a misaligned ints vector");
      }
      const int type = static_cast<int>(a->type());
      if (type < 1 || type > static_cast<int>(fb::AttrType::MAX)) {
        return fail(label + " attribute '" + attr.name + "' has unknown type " +
                    std::to_string(type));
      }
      attr.type = static_cast<kite_attr_type>(type);
      attr.i = a->i();
      attr.f = a->f();
      attr.s = str(a->s());
      if (a->ints()) attr.ints.assign(a->ints()->begin(), a->ints()->end());
      if (a->floats()) attr.floats.assign(a->floats()->begin(), a->floats()->end());
      if (a->strings()) {
        for (const auto* s : *a->strings()) attr.strings.push_back(str(s));
      }
      bool nul = has_nul(attr.name) || has_nul(attr.s);
      for (const std::string& s : attr.strings) nul = nul || has_nul(s);
      if (nul) return fail(label + " has an attribute name or string value with a NUL byte");
      if (attr.type == KITE_ATTR_GRAPH) {
        // Subgraphs only point forward, so control flow cannot recurse.
        if (attr.i <= graph_index || attr.i >= graph_count) {
          return fail(label + " attribute '" + attr.name + "' refers to graph " +
                      std::to_string(attr.i) + " (must be > " + std::to_string(graph_index) +
                      " and < " + std::to_string(graph_count) + ")");
        }
      }
      out->attrs.push_back(std::move(attr));
    }
  }
  // ABI view of the attributes, built once (kite/abi/node.h).
  out->abi_attrs.assign(out->attrs);
  if (n.body() && n.body()->size() > 0) {
    if (out->fused_pattern.empty()) return fail(label + " has a body but no fused pattern");
    if (depth > 0) return fail(label + " nests a fused body inside a fused body");
    for (uint32_t k = 0; k < n.body()->size(); ++k) {
      NodeRec body_node;
      Status s = decode_node(*n.body()->Get(k), label + " body", graph_index, graph_count,
                             depth + 1, model, &body_node);
      if (!s.is_ok()) return s;
      out->body.push_back(std::move(body_node));
    }
  }
  return Status::ok();
}

Status Verifier::decode_graph(const fb::Model& m, int graph_index, Model* model) {
  const fb::Graph* g = m.graphs()->Get(static_cast<uint32_t>(graph_index));
  GraphRec& rec = model->graphs[static_cast<size_t>(graph_index)];
  rec.name = str(g->name());
  const std::string where = "graph " + std::to_string(graph_index);
  const int tensor_count = static_cast<int>(model->tensors.size());
  auto read_ids = [&](const flatbuffers::Vector<int32_t>* ids, const char* what,
                      std::vector<int>* out_ids) -> Status {
    if (!ids) return Status::ok();
    for (uint32_t k = 0; k < ids->size(); ++k) {
      const int t = ids->Get(k);
      if (t < 0 || t >= tensor_count) {
        return fail(where + " " + what + " " + std::to_string(k) + " refers to tensor " +
                    std::to_string(t) + ", out of range (" + std::to_string(tensor_count) +
                    " tensors)");
      }
      out_ids->push_back(t);
    }
    return Status::ok();
  };
  Status s = read_ids(g->inputs(), "input", &rec.inputs);
  if (!s.is_ok()) return s;
  s = read_ids(g->outputs(), "output", &rec.outputs);
  if (!s.is_ok()) return s;
  if (g->nodes()) {
    rec.nodes.reserve(g->nodes()->size());
    for (uint32_t k = 0; k < g->nodes()->size(); ++k) {
      NodeRec node;
      s = decode_node(*g->nodes()->Get(k), where, graph_index,
                      static_cast<int>(m.graphs()->size()), 0, *model, &node);
      if (!s.is_ok()) return s;
      rec.nodes.push_back(std::move(node));
    }
  }
  return Status::ok();
}

Status Verifier::decode_plan(const fb::Model& m, Model* model) {
  const fb::MemoryPlan* p = m.plan();
  if (!p) return fail("no memory plan");
  PlanRec& plan = model->plan;
  plan.arena_size = p->arena_size();
  plan.alignment = p->alignment();
  plan.lower_bound = p->lower_bound();
  plan.naive_size = p->naive_size();
  plan.strategy = str(p->strategy());
  // Kernels load and store floats and int64s (and SIMD vectors) at tensor
  // addresses: every offset must keep at least the 64-byte alignment the
  // session gives the arena itself.
  if (plan.alignment < 64 || (plan.alignment & (plan.alignment - 1)) != 0) {
    return fail("memory plan alignment " + std::to_string(plan.alignment) +
                " is not a power of two >= 64");
  }
  const size_t n = model->tensors.size();
  if (!elements_aligned(data_, p->offsets())) return fail("memory plan offsets are misaligned");
  if (!p->offsets() || p->offsets()->size() != n) {
    return fail("memory plan has " + std::to_string(p->offsets() ? p->offsets()->size() : 0) +
                " offsets for " + std::to_string(n) + " tensors");
  }
  for (size_t i = 0; i < n; ++i) {
    TensorRec& t = model->tensors[i];
    if (t.is_constant()) continue;
    const uint64_t off = p->offsets()->Get(static_cast<uint32_t>(i));
    if (off % plan.alignment != 0) {
      return fail(tensor_label(model->tensors, static_cast<int>(i)) + " arena offset " +
                  std::to_string(off) + " is not aligned to " + std::to_string(plan.alignment));
    }
    if (off > plan.arena_size || t.byte_size > plan.arena_size - off) {
      return fail(tensor_label(model->tensors, static_cast<int>(i)) + " arena range [" +
                  std::to_string(off) + ", +" + std::to_string(t.byte_size) +
                  ") is past the arena's end (" + std::to_string(plan.arena_size) + " bytes)");
    }
    t.arena_offset = off;
  }
  for (const GraphRec& g : model->graphs) {
    for (const NodeRec& node : g.nodes) {
      Status s = check_node_overlap(*model, node);
      for (size_t k = 0; s.is_ok() && k < node.body.size(); ++k) {
        s = check_node_overlap(*model, node.body[k]);
      }
      if (!s.is_ok()) return s;
    }
  }
  return Status::ok();
}

// The arena bytes a kernel writes must not overlap what it reads, except in
// the forms the converter's planner produces (converter/memory/planner.cpp:
// is_view_op, is_inplace_op, Concat views), which the kernels handle. Other
// overlaps would let a hostile plan change a kernel's inputs while it runs:
// wrong values at best, and an out-of-bounds access when the input holds
// indices the kernel has already validated (Gather).
Status Verifier::check_node_overlap(const Model& model, const NodeRec& node) const {
  struct Range {
    uint64_t begin, end;
  };
  auto range_of = [&](int t, Range* r) {
    if (t < 0) return false;
    const TensorRec& rec = model.tensors[static_cast<size_t>(t)];
    if (rec.is_constant() || rec.byte_size == 0) return false;
    *r = Range{rec.arena_offset, rec.arena_offset + rec.byte_size};
    return true;
  };
  auto overlap = [](const Range& a, const Range& b) { return a.begin < b.end && b.begin < a.end; };
  const bool primitive = node.domain.empty() && node.body.empty();
  const std::string& op = node.op;
  const bool view = primitive && (op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
                                  op == "Unsqueeze" || op == "Identity");
  auto inplace = [&](size_t input_index) {
    static const char* const kUnary[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg",
                                         "Sqrt", "Reciprocal", "Erf", "LeakyRelu", "Elu",
                                         "HardSigmoid", "HardSwish", "Clip", "Gelu"};
    static const char* const kBinary[] = {"Add", "Sub", "Mul", "Div"};
    if (!primitive) return false;
    for (const char* u : kUnary) {
      if (op == u && input_index == 0) return true;
    }
    for (const char* b : kBinary) {
      if (op == b && input_index < 2) return true;
    }
    return false;
  };
  auto fail_overlap = [&](int out, int in, const char* what) {
    return fail("memory plan: " + what_node(node) + " " + what + " " +
                tensor_label(model.tensors, out) + " over " + tensor_label(model.tensors, in));
  };
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    Range ro;
    if (!range_of(node.outputs[o], &ro)) continue;
    for (size_t p = o + 1; p < node.outputs.size(); ++p) {
      Range rp;
      if (range_of(node.outputs[p], &rp) && overlap(ro, rp)) {
        return fail_overlap(node.outputs[o], node.outputs[p], "writes output");
      }
    }
    uint64_t concat_cursor = ro.begin;  // where the next Concat input's slice starts
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      Range ri;
      const bool has_range = range_of(in, &ri);
      if (primitive && op == "Concat" && node.outputs.size() == 1 && in >= 0) {
        const uint64_t bytes = model.tensors[static_cast<size_t>(in)].byte_size;
        const bool at_slice = has_range && ri.begin == concat_cursor;
        concat_cursor += bytes;
        if (!has_range || at_slice || !overlap(ro, ri)) continue;
        return fail_overlap(node.outputs[o], in, "places output");
      }
      if (!has_range || !overlap(ro, ri)) continue;
      const TensorRec& to = model.tensors[static_cast<size_t>(node.outputs[o])];
      const TensorRec& ti = model.tensors[static_cast<size_t>(in)];
      const bool same_bytes = ri.begin == ro.begin && ri.end == ro.end;
      const bool ok_view = view && k == 0 && same_bytes;
      const bool ok_inplace = inplace(k) && same_bytes && node.outputs.size() == 1 &&
                              ti.dtype == to.dtype && ti.shape == to.shape;
      if (!ok_view && !ok_inplace) return fail_overlap(node.outputs[o], in, "places output");
    }
  }
  return Status::ok();
}

}  // namespace

Status decode_and_verify(std::unique_ptr<FileBytes> bytes, const std::string& origin,
                         std::shared_ptr<Model>* out) {
  auto model = std::make_shared<Model>();
  Verifier v(bytes->data(), bytes->size(), "'" + origin + "'");
  Status s;
  try {
    s = v.run(model.get());
  } catch (const std::bad_alloc&) {
    return Status(KITE_ERROR_OUT_OF_MEMORY, "out of memory while reading '" + origin + "'");
  }
  if (!s.is_ok()) return s;
  model->bytes_ = std::move(bytes);
  *out = std::move(model);
  return Status::ok();
}

}  // namespace kite::rt
