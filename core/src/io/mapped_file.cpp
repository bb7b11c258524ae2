#include "ckptdoc/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ckptdoc/error.h"

namespace ckptdoc {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(path, "", std::string("cannot stat: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(path, "", "is a directory, expected a file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->mapped_ = true;
  f->device_ = static_cast<uint64_t>(st.st_dev);
  f->inode_ = static_cast<uint64_t>(st.st_ino);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(path, "", std::string("cannot map: ") + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::from_memory(const std::string& name, std::vector<uint8_t> bytes) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->size_ = f->owned_.size();
  f->data_ = f->owned_.empty() ? nullptr : f->owned_.data();
  return f;
}

MappedFile::~MappedFile() {
  if (data_ && owned_.empty()) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::span<const uint8_t> MappedFile::slice(uint64_t offset, uint64_t length, const char* what) const {
  if (offset > size_ || length > size_ - offset) {
    throw Error(path_, at_offset(offset),
                std::string(what) + " of " + std::to_string(length) + " bytes runs past the end of the file (" +
                    std::to_string(size_) + " bytes)");
  }
  return {data_ + offset, static_cast<size_t>(length)};
}

namespace {
void advise(const uint8_t* base, uint64_t size, uint64_t offset, uint64_t length, int advice) {
  if (!base || offset >= size) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = std::min(size, offset + length);
  ::madvise(const_cast<uint8_t*>(base) + start, end - start, advice);
}
}  // namespace

void MappedFile::will_need(uint64_t offset, uint64_t length) const {
  advise(data_, size_, offset, length, MADV_WILLNEED);
}
void MappedFile::dont_need(uint64_t offset, uint64_t length) const {
  advise(data_, size_, offset, length, MADV_DONTNEED);
}

int MappedFile::reopen() const {
  if (!mapped_) return -1;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != device_ || static_cast<uint64_t>(st.st_ino) != inode_ ||
      static_cast<uint64_t>(st.st_size) < size_) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace ckptdoc
