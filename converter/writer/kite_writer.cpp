#include "writer/kite_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kite/kite.h"
#include "kite/kite_generated.h"

namespace kite::writer {
namespace {

namespace fb = kite::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Offset<fb::Node> build_node(FlatBufferBuilder& b, const ir::Node& n) {
  std::vector<Offset<fb::Attribute>> attrs;
  for (const ir::Attr& a : n.attrs) {
    std::vector<Offset<flatbuffers::String>> strings;
    for (const auto& s : a.strings) strings.push_back(b.CreateString(s));
    attrs.push_back(fb::CreateAttribute(
        b, b.CreateString(a.name), static_cast<fb::AttrType>(a.type), a.i, a.f,
        b.CreateString(a.s), a.ints.empty() ? 0 : b.CreateVector(a.ints),
        a.floats.empty() ? 0 : b.CreateVector(a.floats),
        strings.empty() ? 0 : b.CreateVector(strings)));
  }
  std::vector<Offset<fb::Node>> body;
  for (const ir::Node& bn : n.body) body.push_back(build_node(b, bn));
  std::vector<int32_t> inputs(n.inputs.begin(), n.inputs.end());
  std::vector<int32_t> outputs(n.outputs.begin(), n.outputs.end());
  return fb::CreateNode(b, b.CreateString(n.name), b.CreateString(n.op), b.CreateString(n.domain),
                        b.CreateVector(inputs), b.CreateVector(outputs), b.CreateVector(attrs),
                        b.CreateString(n.fused_pattern),
                        body.empty() ? 0 : b.CreateVector(body));
}

// The IR's tensor kinds are the file's (kite/ops/tensor_kind.h): a plain
// cast writes them, and the loader's plain cast reads them back.
static_assert(static_cast<int>(fb::TensorKind::Activation) == static_cast<int>(ir::TensorKind::Activation) &&
                  static_cast<int>(fb::TensorKind::Input) == static_cast<int>(ir::TensorKind::Input) &&
                  static_cast<int>(fb::TensorKind::Output) == static_cast<int>(ir::TensorKind::Output) &&
                  static_cast<int>(fb::TensorKind::Constant) == static_cast<int>(ir::TensorKind::Constant) &&
                  static_cast<int>(fb::TensorKind::Scratch) == static_cast<int>(ir::TensorKind::Scratch) &&
                  fb::TensorKind::MAX == fb::TensorKind::Scratch,
              "schemas/kite.fbs TensorKind and kite::ops::TensorKind must have the same values");

// Builds the FlatBuffer with blob offsets relative to weights_start. Defaults
// are forced so that the size does not depend on the offsets' values.
// packed_blob[f]: the blob of model.packed[f].
void build(const ir::Model& model, const std::vector<fb::Blob>& relative_blobs,
           const std::vector<int>& blob_of, const std::vector<int>& packed_blob,
           uint64_t weights_start, uint64_t file_size, FlatBufferBuilder& b) {
  b.ForceDefaults(true);
  std::vector<Offset<fb::Tensor>> tensors;
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const ir::Tensor& t = model.tensors[i];
    tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name), static_cast<fb::DType>(t.dtype),
                                       b.CreateVector(t.shape), static_cast<fb::TensorKind>(t.kind),
                                       blob_of[i]));
  }
  std::vector<Offset<fb::Graph>> graphs;
  for (const ir::Graph& g : model.graphs) {
    std::vector<Offset<fb::Node>> nodes;
    for (const ir::Node& n : g.nodes) nodes.push_back(build_node(b, n));
    std::vector<int32_t> in(g.inputs.begin(), g.inputs.end());
    std::vector<int32_t> out(g.outputs.begin(), g.outputs.end());
    graphs.push_back(fb::CreateGraph(b, b.CreateString(g.name), b.CreateVector(nodes),
                                     b.CreateVector(in), b.CreateVector(out)));
  }
  std::vector<fb::Blob> blobs;
  for (const fb::Blob& r : relative_blobs) blobs.emplace_back(r.offset() + weights_start, r.size());
  const ir::MemoryPlan& p = model.plan;
  auto plan = fb::CreateMemoryPlan(b, p.arena_size, p.alignment, p.lower_bound, p.naive_size,
                                   b.CreateString(p.strategy), b.CreateVector(p.offsets));
  // Format 1.1: one entry per key; a form's keys share its blob. Left out
  // altogether when there are none, so such a file reads as 1.0 content.
  Offset<flatbuffers::Vector<Offset<fb::PackedForm>>> packed = 0;
  if (!model.packed.empty()) {
    std::vector<Offset<fb::PackedForm>> entries;
    for (size_t f = 0; f < model.packed.size(); ++f) {
      for (const std::string& key : model.packed[f].keys) {
        entries.push_back(fb::CreatePackedForm(b, model.packed[f].tensor, b.CreateString(key), packed_blob[f]));
      }
    }
    packed = b.CreateVector(entries);
  }
  auto root = fb::CreateModel(b, KITE_FORMAT_MAJOR, KITE_FORMAT_MINOR,
                              b.CreateString(model.producer), model.source_opset,
                              b.CreateVector(tensors), b.CreateVector(graphs),
                              b.CreateVectorOfStructs(blobs), kBlobAlignment, plan, file_size, packed);
  fb::FinishModelBuffer(b, root);
}

}  // namespace

bool serialize(const ir::Model& model, std::vector<uint8_t>* out, std::string* err) {
  if (model.graphs.empty()) {
    *err = "model has no graph";
    return false;
  }
  if (model.plan.offsets.size() != model.tensors.size()) {
    *err = "model has no memory plan (" + std::to_string(model.plan.offsets.size()) +
           " offsets for " + std::to_string(model.tensors.size()) + " tensors)";
    return false;
  }
  // Lay out the weight section: each constant's bytes in its own aligned
  // blob, then each packed form's. The order keeps what a run reads apart
  // from what it does not: constants read as they are, then the packed
  // forms, then the constants that have a form (read only by a runtime
  // without a matching form). Mapped pages come in folios and fault-around
  // windows, not single pages: a cold blob beside a hot one would be
  // resident for nothing.
  std::vector<fb::Blob> relative;
  std::vector<int> blob_of(model.tensors.size(), -1);
  uint64_t weights_size = 0;
  std::vector<bool> has_form(model.tensors.size(), false);
  for (const ir::PackedForm& form : model.packed) {
    if (form.tensor >= 0 && static_cast<size_t>(form.tensor) < model.tensors.size()) {
      has_form[static_cast<size_t>(form.tensor)] = true;
    }
  }
  auto place_constants = [&](bool with_form) {
    for (size_t i = 0; i < model.tensors.size(); ++i) {
      const ir::Tensor& t = model.tensors[i];
      if (!t.is_constant() || has_form[i] != with_form) continue;
      if (t.data.size() != t.byte_size()) {
        *err = "constant '" + t.name + "' holds " + std::to_string(t.data.size()) +
               " bytes, its shape " + kite::ops::shape_string(t.shape) + " needs " +
               std::to_string(t.byte_size());
        return false;
      }
      weights_size = align_up(weights_size, kBlobAlignment);
      blob_of[i] = static_cast<int>(relative.size());
      relative.emplace_back(weights_size, t.data.size());
      weights_size += t.data.size();
    }
    return true;
  };
  if (!place_constants(false)) return false;
  std::vector<int> packed_blob(model.packed.size(), -1);
  for (size_t f = 0; f < model.packed.size(); ++f) {
    const ir::PackedForm& form = model.packed[f];
    if (form.tensor < 0 || static_cast<size_t>(form.tensor) >= model.tensors.size() ||
        !model.tensors[static_cast<size_t>(form.tensor)].is_constant() || form.keys.empty()) {
      *err = "packed form " + std::to_string(f) + " names tensor " + std::to_string(form.tensor) +
             ", which is not a constant, or has no key";
      return false;
    }
    weights_size = align_up(weights_size, kBlobAlignment);
    packed_blob[f] = static_cast<int>(relative.size());
    relative.emplace_back(weights_size, form.data.size());
    weights_size += form.data.size();
  }
  if (!place_constants(true)) return false;
  // Pass 1 measures the FlatBuffer; pass 2 writes the real offsets. Forced
  // defaults and fixed-size structs keep both passes the same size.
  FlatBufferBuilder probe(1 << 16);
  build(model, relative, blob_of, packed_blob, 0, 0, probe);
  const uint64_t fb_size = probe.GetSize();
  if (fb_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    *err = "graph description exceeds the 2 GiB FlatBuffer limit";
    return false;
  }
  const uint64_t weights_start = align_up(fb_size, kBlobAlignment);
  const uint64_t file_size = weights_start + weights_size;
  FlatBufferBuilder b(static_cast<size_t>(fb_size) + 1024);
  build(model, relative, blob_of, packed_blob, weights_start, file_size, b);
  if (b.GetSize() != fb_size) {
    *err = "internal: FlatBuffer size changed between passes";
    return false;
  }
  out->assign(static_cast<size_t>(file_size), 0);
  std::memcpy(out->data(), b.GetBufferPointer(), static_cast<size_t>(fb_size));
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    if (blob_of[i] < 0) continue;
    const fb::Blob& r = relative[static_cast<size_t>(blob_of[i])];
    if (r.size() > 0) {
      std::memcpy(out->data() + weights_start + r.offset(), model.tensors[i].data.data(),
                  static_cast<size_t>(r.size()));
    }
  }
  for (size_t f = 0; f < model.packed.size(); ++f) {
    const fb::Blob& r = relative[static_cast<size_t>(packed_blob[f])];
    if (r.size() > 0) {
      std::memcpy(out->data() + weights_start + r.offset(), model.packed[f].data.data(),
                  static_cast<size_t>(r.size()));
    }
  }
  return true;
}

bool write_file(const ir::Model& model, const std::string& path, std::string* err) {
  std::vector<uint8_t> bytes;
  return serialize(model, &bytes, err) && write_bytes(bytes, path, err);
}

bool write_bytes(const std::vector<uint8_t>& bytes, const std::string& path, std::string* err) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *err = "cannot create '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !flushed || !closed) {
    *err = "cannot write '" + tmp + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace kite::writer
