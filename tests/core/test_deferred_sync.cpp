// DeferredSyncIo (the FileIo of a folder published by rename): files written through it are made durable in
// batches, by their own descriptors, before flush() returns, and a failed fsync is reported naming the file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QtTest>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/io/deferred_sync.h"
#include "ckptdoc/io/fault_injection.h"
#include "ckptdoc/io/file_io.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// The real POSIX calls, counted; fsync fails with `fsync_error` for the file descriptors of `failing`.
class CountingIo : public FileIo {
 public:
  std::atomic<int> fsyncs{0}, dir_fsyncs{0}, open_fds{0}, max_open_fds{0};
  std::set<ino_t> fsynced_inodes;
  std::string failing;
  int open_write(const std::string& path, int* fd) override {
    const int e = posix_io().open_write(path, fd);
    if (e == 0) max_open_fds = std::max(max_open_fds.load(), ++open_fds);
    return e;
  }
  int write(int fd, const uint8_t* d, size_t n, size_t* w) override { return posix_io().write(fd, d, n, w); }
  int fsync(int fd) override {
    ++fsyncs;
    const std::string path = fs::read_symlink("/proc/self/fd/" + std::to_string(fd)).string();
    struct stat st {};
    ::fstat(fd, &st);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fsynced_inodes.insert(st.st_ino);
    }
    if (!failing.empty() && path == failing) return EIO;
    return posix_io().fsync(fd);
  }
  int close(int fd) override {
    --open_fds;
    return posix_io().close(fd);
  }
  int rename(const std::string& a, const std::string& b) override { return posix_io().rename(a, b); }
  int unlink(const std::string& p) override { return posix_io().unlink(p); }
  int mkdir(const std::string& p) override { return posix_io().mkdir(p); }
  int fsync_dir(const std::string& p) override {
    ++dir_fsyncs;
    return posix_io().fsync_dir(p);
  }

 private:
  std::mutex mutex_;
};

void write_file(const std::string& path, FileIo& io, size_t bytes) {
  AtomicFile f(path, io);
  f.write(std::vector<uint8_t>(bytes, 7));
  f.commit();
}

}  // namespace

class TestDeferredSync : public QObject {
  Q_OBJECT
 private slots:
  // Nothing is fsynced while writing; flush() fsyncs every file once (under its final name) and each folder.
  void flushMakesEveryFileDurableOnce() {
    test::TempDir dir;
    CountingIo counting;
    io::DeferredSyncIo deferred(counting);
    const int n = 300;  // more than one batch
    for (int i = 0; i < n; ++i) write_file(dir.file("f" + std::to_string(i)), deferred, 100 + i);
    QVERIFY2(counting.fsyncs.load() < n, "every file was fsynced while writing");
    QVERIFY2(counting.max_open_fds.load() <= 130, std::to_string(counting.max_open_fds.load()).c_str());
    deferred.flush();
    QCOMPARE(counting.fsyncs.load(), n);
    QCOMPARE(counting.dir_fsyncs.load(), 1);  // their one folder, once
    QCOMPARE(counting.open_fds.load(), 0);
    for (int i = 0; i < n; ++i) {
      struct stat st {};
      QCOMPARE(::stat(dir.file("f" + std::to_string(i)).c_str(), &st), 0);
      QVERIFY(counting.fsynced_inodes.count(st.st_ino) == 1);
      QCOMPARE(fs::file_size(dir.file("f" + std::to_string(i))), static_cast<uintmax_t>(100 + i));
    }
  }

  // A failed fsync surfaces from flush() naming the file, even when it happened in an earlier batch.
  void failedFsyncNamesTheFile() {
    test::TempDir dir;
    CountingIo counting;
    io::DeferredSyncIo deferred(counting);
    counting.failing =
        fs::canonical(dir.path()).string() + "/g5";  // renamed into place before its batch syncs
    for (int i = 0; i < 200; ++i) write_file(dir.file("g" + std::to_string(i)), deferred, 10);
    try {
      deferred.flush();
      QFAIL("the failed fsync was not reported");
    } catch (const Error& e) {
      const std::string what = e.what();
      QVERIFY2(what.find("g5") != std::string::npos && what.find("fsync") != std::string::npos, what.c_str());
    }
  }

  // Through FaultyIo (the test hook CKPTDOC_FAULT installs): an fsync failing with ENOSPC is reported by
  // flush.
  void faultyFsyncIsReported() {
    test::TempDir dir;
    auto plan = FaultPlan::parse("fail@3:fsync:ENOSPC");
    QVERIFY(plan);
    FaultyIo faulty(posix_io(), *plan);
    io::DeferredSyncIo deferred(faulty);
    for (int i = 0; i < 5; ++i) write_file(dir.file("h" + std::to_string(i)), deferred, 10);
    bool thrown = false;
    try {
      deferred.flush();
    } catch (const Error& e) {
      thrown = std::string(e.what()).find("fsync") != std::string::npos;
    }
    QVERIFY(thrown);
    QVERIFY(faulty.fired());
  }
};

QTEST_GUILESS_MAIN(TestDeferredSync)
#include "test_deferred_sync.moc"
