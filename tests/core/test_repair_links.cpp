// Links inside a checkpoint folder that a source repair copies (io::copy_tree, the copy of the input every
// DCP / Megatron repair starts from), on the FSDP2 folder torch wrote
// (tests/fixtures/dcp/fsdp2_ws2_moments_lost): links to a file or folder outside the input are followed, the
// copy holding their bytes as plain files (written only inside the output); a link loop, a link to nothing or
// a socket is refused naming it, in bounded time, with nothing published and the input as it was.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <QTest>
#include <cstring>
#include <filesystem>
#include <map>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// Every file (links followed) under a folder and its bytes.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      out[e.path().lexically_relative(dir).string()] = test::read_text(e.path().string());
  return out;
}

// A copy of the fixture at `dir`/in, to add links to.
std::string input_copy(const test::TempDir& dir) {
  const std::string in = dir.file("in");
  fs::copy(test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost", in, fs::copy_options::recursive);
  return in;
}

test::RunResult repair(const std::string& in, const std::string& out) {
  return test::run_cli({"repair", in, "-o", out, "--reset-optimizer"});
}

}  // namespace

class TestRepairLinks : public QObject {
  Q_OBJECT

 private slots:
  // A file and a folder linked from outside the input (as a Hugging Face cache links its snapshot to
  // ../../blobs/): the repair succeeds, the copy holds them as a plain file and folder with the bytes they
  // lead to, and what they lead to is as it was.
  void linksOutsideAreCopiedAsTheirFiles() {
    test::TempDir dir;
    const std::string in = input_copy(dir);
    fs::create_directories(dir.file("outside/folder"));
    test::write_text(dir.file("outside/notes.txt"), "a file beside the input\n");
    test::write_text(dir.file("outside/folder/inner.txt"), "a file in a folder beside the input\n");
    fs::create_directory_symlink("../outside/folder", in + "/linked-folder");
    fs::create_symlink("../outside/notes.txt", in + "/linked-notes.txt");
    const auto outside = contents(dir.file("outside"));
    const auto r = repair(in, dir.file("out"));
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string out = dir.file("out");
    QVERIFY(!fs::is_symlink(out + "/linked-folder") && fs::is_directory(out + "/linked-folder"));
    QVERIFY(!fs::is_symlink(out + "/linked-notes.txt") && fs::is_regular_file(out + "/linked-notes.txt"));
    QCOMPARE(test::read_text(out + "/linked-notes.txt"), std::string("a file beside the input\n"));
    QCOMPARE(test::read_text(out + "/linked-folder/inner.txt"),
             std::string("a file in a folder beside the input\n"));
    QVERIFY(contents(dir.file("outside")) == outside);
  }

  // A link back to a folder the copy already holds: refused naming the link (not a path that went round the
  // loop), nothing published, the input as it was.
  void linkLoopIsRefusedNamingIt() {
    test::TempDir dir;
    const std::string in = input_copy(dir);
    fs::create_directories(in + "/extra");
    fs::create_directory_symlink("..", in + "/extra/back");
    const auto before = contents(in);
    const auto r = repair(in, dir.file("out"));
    QVERIFY2(r.exit_code != 0, r.out.c_str());
    QVERIFY2(r.err.find(in + "/extra/back:") != std::string::npos ||
                 r.err.find(in + "/extra/back ") != std::string::npos,
             r.err.c_str());
    QVERIFY2(r.err.find("loop") != std::string::npos, r.err.c_str());
    QVERIFY2(r.err.find("extra/back/extra") == std::string::npos, r.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"in"});  // no output, no partial folder
    QVERIFY(contents(in) == before);
  }

  // A link to a folder that holds the output (here the folder the input and the output are in): the copy
  // would copy itself, so it is refused naming the link; nothing published, the input as it was.
  void linkToTheOutputsFolderIsRefusedNamingIt() {
    test::TempDir dir;
    const std::string in = input_copy(dir);
    fs::create_directory_symlink("..", in + "/up");
    const auto before = contents(in);
    const auto r = repair(in, dir.file("out"));
    QVERIFY2(r.exit_code != 0, r.out.c_str());
    QVERIFY2(r.err.find(in + "/up") != std::string::npos, r.err.c_str());
    QVERIFY2(r.err.find("holds the output") != std::string::npos, r.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"in"});
    QVERIFY(contents(in) == before);
  }

  // A link to nothing and a socket: neither is copied, and neither is left out unsaid: refused naming it.
  void whatTheCopyCannotHoldIsRefusedNamingIt() {
    test::TempDir dir;
    const std::string in = input_copy(dir);
    fs::create_symlink("../gone.bin", in + "/dangling.bin");
    auto r = repair(in, dir.file("out"));
    QVERIFY2(r.exit_code != 0, r.out.c_str());
    QVERIFY2(r.err.find(in + "/dangling.bin") != std::string::npos, r.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"in"});
    fs::remove(in + "/dangling.bin");

    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    QVERIFY(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string sock = in + "/control.sock";
    QVERIFY(sock.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
    QVERIFY(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    r = repair(in, dir.file("out"));
    ::close(fd);
    QVERIFY2(r.exit_code != 0, r.out.c_str());
    QVERIFY2(r.err.find(sock) != std::string::npos, r.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"in"});
  }
};

CKPTDOC_TEST_MAIN(TestRepairLinks)
#include "test_repair_links.moc"
