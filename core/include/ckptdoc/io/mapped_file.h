#pragma once
// A read-only memory map of a whole file. Views into it (spans) stay valid while any shared_ptr to the
// MappedFile lives, so tensors read from a checkpoint keep their file mapped, never copied.
//
// A file that shrinks while it is mapped (a save still running, another host on NFS truncating it) would
// kill the process with SIGBUS at the first read past its new end. Every mapping is registered with a SIGBUS
// handler that instead puts zero pages over the part that is gone and marks the file changed; readers call
// check_unchanged() when they are done with a file, which throws ckptdoc::Error "changed while being read",
// so those zeros never reach a result.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ckptdoc {

class MappedFile {
 public:
  // Throws ckptdoc::Error naming the path when the file cannot be opened or mapped. Empty files map to an
  // empty span.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  // An in-memory "file" (fuzzers, tests, data produced on the fly), named for error messages.
  static std::shared_ptr<const MappedFile> from_memory(const std::string& name, std::vector<uint8_t> bytes);
  // Bytes [offset, offset+length) of `whole` as a file of their own, named `name` in errors, without a copy
  // (a torch.save zip stored inside a bigger file, as DCP does). Keeps `whole` mapped and is changed() when
  // it is. Throws ckptdoc::Error (truncated) when the range runs past the end of `whole`.
  static std::shared_ptr<const MappedFile> view(std::shared_ptr<const MappedFile> whole, uint64_t offset,
                                                uint64_t length, const std::string& name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }
  // Bounds-checked sub-span; throws ckptdoc::Error naming the file and the range when out of bounds.
  std::span<const uint8_t> slice(uint64_t offset, uint64_t length, const char* what = "range") const;
  // Advises the kernel that [offset, offset+length) will be read soon / is no longer needed.
  void will_need(uint64_t offset, uint64_t length) const;
  void dont_need(uint64_t offset, uint64_t length) const;
  // Opens the mapped file again for reading (kernel copies) and checks it is still the inode that was mapped,
  // at least as long; -1 for in-memory files or when the path now names another file.
  int reopen() const;
  uint64_t device() const { return device_; }  // st_dev and st_ino of the mapped file (0 in memory)
  uint64_t inode() const { return inode_; }
  // Whether a read hit a part of the file that no longer exists (see above); stays true once set.
  bool changed() const;
  // Throws ckptdoc::Error naming the file when changed(): what was read from it cannot be trusted.
  void check_unchanged() const;
  // Process-wide: how many times any mapped file was found changed so far. Writers compare it before and
  // after (AtomicFile::commit refuses when it moved), so no output is built from zeros.
  static uint64_t change_count();
  // Throws the check_unchanged() error of some changed mapped file still open, or a generic one.
  [[noreturn]] static void throw_changed(const std::string& while_doing);

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::vector<uint8_t> owned_;  // backing store of from_memory(); empty for mapped files
  bool mapped_ = false;         // a real file (not from_memory)
  uint64_t device_ = 0, inode_ = 0;
  int guard_slot_ = -1;                      // slot in the SIGBUS guard's registry; -1 when not registered
  std::shared_ptr<const MappedFile> whole_;  // the file a view() lies in; null otherwise
};

}  // namespace ckptdoc
