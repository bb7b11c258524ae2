// Which universal layout convert writes for each DeepSpeed version: the boundaries come from DeepSpeed's
// history (PR #4588 in 0.12.3: step := iteration + 1; PR #5104 in 0.13.2: no init step, moments not restored
// until PR #5263 in 0.14.1; PR #5289 in 0.14.1: step.pt and param_groups, mpu optional).
#include <QtTest>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/convert.h"

using namespace ckptdoc;
using universal::LoaderKind;

class TestUniversalVersion : public QObject {
  Q_OBJECT

 private slots:
  void loaderKindByVersion() {
    QVERIFY(universal::target_version("0.12.3").loader == LoaderKind::Iteration);
    QVERIFY(universal::target_version("0.12.6+c00388a2e").loader == LoaderKind::Iteration);
    QVERIFY(universal::target_version("0.14.0").loader == LoaderKind::Iteration);
    QVERIFY(universal::target_version("0.14.1").loader == LoaderKind::StepFiles);
    QVERIFY(universal::target_version("0.14.5+eb07d41f9").loader == LoaderKind::StepFiles);
    QVERIFY(universal::target_version("0.16.5").loader == LoaderKind::StepFiles);
    QCOMPARE(universal::target_version("0.14.5+eb07d41f9").version, std::string("0.14.5"));
  }
  void caveatsNameTheMpuAndTheMomentGap() {
    const auto v0126 = universal::target_version("0.12.6");
    QCOMPARE(v0126.caveats.size(), size_t(1));  // the mpu
    QVERIFY(v0126.caveats[0].find("mpu") != std::string::npos);
    const auto v0133 = universal::target_version("0.13.3");
    QCOMPARE(v0133.caveats.size(), size_t(2));  // the mpu, and moments not restored
    QVERIFY(v0133.caveats[1].find("moments") != std::string::npos);
    QVERIFY(universal::target_version("0.14.1").caveats.empty());
  }
  void refusesWhatNoLoaderReads() {
    QVERIFY_THROWS_EXCEPTION(Error, universal::target_version("0.12.2"));
    QVERIFY_THROWS_EXCEPTION(Error, universal::target_version("0.9.0"));
    QVERIFY_THROWS_EXCEPTION(Error, universal::target_version("latest"));
    QVERIFY_THROWS_EXCEPTION(Error, universal::target_version(""));
  }
};

QTEST_GUILESS_MAIN(TestUniversalVersion)
#include "test_universal_version.moc"
