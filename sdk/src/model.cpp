#include "model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kite::rt {
namespace {

// Read-only private mapping of a whole file. MAP_PRIVATE keeps our view if
// the file is replaced by rename; truncation by another process is the one
// case mmap cannot defend against (documented in kite.h's load function).
class MappedFile final : public FileBytes {
 public:
  MappedFile(void* addr, uint64_t size) : addr_(addr), size_(size) {}
  ~MappedFile() override {
    if (addr_ != nullptr) munmap(addr_, size_);
  }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(addr_); }
  uint64_t size() const override { return size_; }

 private:
  void* addr_;
  uint64_t size_;
};

// A heap copy aligned like a page (and padded to whole pages), so blob
// alignment in the file holds in memory too and device backends can import
// the weights from it as from an mmap (import_host wants whole pages).
class HeapBytes final : public FileBytes {
 public:
  explicit HeapBytes(uint64_t size) : size_(size) {
    data_ = static_cast<uint8_t*>(std::aligned_alloc(4096, round_up(size == 0 ? 1 : size)));
  }
  ~HeapBytes() override { std::free(data_); }
  bool ok() const { return data_ != nullptr; }
  uint8_t* mutable_data() { return data_; }
  const uint8_t* data() const override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  static uint64_t round_up(uint64_t n) { return (n + 4095) / 4096 * 4096; }
  uint8_t* data_ = nullptr;
  uint64_t size_;
};

}  // namespace

const uint8_t* Model::file_data() const { return bytes_ ? bytes_->data() : nullptr; }
uint64_t Model::file_size() const { return bytes_ ? bytes_->size() : 0; }

Status Model::load_file(const std::string& path, std::shared_ptr<Model>* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(KITE_ERROR_IO, "cannot open '" + path + "': " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status(KITE_ERROR_IO, "cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(KITE_ERROR_IO, "'" + path + "' is not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    return Status(KITE_ERROR_INVALID_MODEL, "'" + path + "' is empty (0 bytes)");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (addr == MAP_FAILED) {
    return Status(KITE_ERROR_IO, "cannot map '" + path + "': " + std::strerror(e));
  }
  return decode_and_verify(std::make_unique<MappedFile>(addr, size), path, out);
}

Status Model::load_memory(const void* data, size_t size, std::shared_ptr<Model>* out) {
  if (size == 0) return Status(KITE_ERROR_INVALID_MODEL, "model data is empty (0 bytes)");
  if (data == nullptr) return Status(KITE_ERROR_INVALID_ARGUMENT, "model data is NULL");
  auto bytes = std::unique_ptr<HeapBytes>(new (std::nothrow) HeapBytes(size));
  if (!bytes || !bytes->ok()) {
    return Status(KITE_ERROR_OUT_OF_MEMORY,
                  "cannot allocate " + std::to_string(size) + " bytes for the model copy");
  }
  std::memcpy(bytes->mutable_data(), data, size);
  return decode_and_verify(std::move(bytes), "<memory>", out);
}

}  // namespace kite::rt
