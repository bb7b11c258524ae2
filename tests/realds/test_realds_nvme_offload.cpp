// NVMe offload (DeepSpeed 0.18.0+): with ZeRO-3 `offload_optimizer: {device: nvme}` save_checkpoint copies
// every rank's swap folder to <tag>/offloaded_tensors/rankNN/ (engine.py, `<param id>.tensor.swp`).
// DeepSpeed's async_io op could not be JIT-built here in time (docs/testing.md), so this check is derived: a
// real 0.19 ZeRO-3 job's tag folder with such a folder added. Before, ckptdoc skipped the folder without a
// word and called the checkpoint as without it; now a warning names it, its rank folders and files, and the
// verdict says they were not read, while the same files without the folder stay clean.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

class TestRealdsNvmeOffload : public QObject {
  Q_OBJECT

 private slots:
  void offloadedTensorsFolderIsNamedNotIgnored() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_z3_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir);
    const auto clean = realds::diagnose_json(ckpt, 0);
    QVERIFY(realds::codes(clean, "warning").empty() && realds::codes(clean, "error").empty());
    QVERIFY(
        !QJsonDocument(clean["verdict"].toObject()["not_checked"].toArray()).toJson().contains("offloaded"));

    const fs::path off = fs::path(ckpt) / e.tag / "offloaded_tensors";
    for (const char* rank : {"rank00", "rank01"}) {
      fs::create_directories(off / rank);
      for (const char* f : {"0.tensor.swp", "1.tensor.swp"})
        std::ofstream(off / rank / f) << std::string(64, '\0');
    }
    const auto report = realds::diagnose_json(ckpt, 0);
    QVERIFY(realds::has_code(report, "warning", "nvme-offload-not-read"));
    QString msg;
    for (const auto& f : report["findings"].toArray())
      if (f.toObject()["code"].toString() == "nvme-offload-not-read")
        msg = f.toObject()["message"].toString();
    QVERIFY2(msg.contains("4 files, 256 bytes in rank00 (2 files), rank01 (2 files)") &&
                 msg.contains("not checked"),
             qPrintable(msg));
    const auto verdict = report["verdict"].toObject();
    QCOMPARE(verdict["headline"].toString(), QString("1 warning."));
    QVERIFY2(QJsonDocument(verdict["not_checked"].toArray()).toJson().contains("offloaded_tensors/"),
             qPrintable(QJsonDocument(verdict).toJson()));

    // export reads the optimizer files as before and says what it left out
    const auto ex = test::run_cli({"export", ckpt, "-o", dir.file("w.safetensors")});
    CKPTDOC_EXPECT_EXIT(ex, 0);
    QVERIFY2(ex.err.find("nvme-offload-not-read") != std::string::npos, ex.err.c_str());
  }
};

QTEST_GUILESS_MAIN(TestRealdsNvmeOffload)
#include "test_realds_nvme_offload.moc"
