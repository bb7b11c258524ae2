// `ckptdoc export` equals DeepSpeed's own zero_to_fp32.py, run from the DeepSpeed version that wrote the
// checkpoint, tensor for tensor and bit for bit (same names and order, dtypes, shapes, bytes), on real
// checkpoints of every layout: ZeRO-1/2/3, fp16/bf16, tied and frozen params, ZeRO-3 sub-groups, v0.14.5.
#include <QtTest>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

class TestRealdsExport : public QObject {
  Q_OBJECT

 private slots:
  void exportEqualsZeroToFp32_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"z1_fp16_dp4_edge", "z2_fp16_dp3_edge", "z2_bf16_dp4", "z2_fp16_dp1_fresh",
                          "z3_fp16_dp4_subgroups", "z3_bf16_dp3_fresh", "v145_z2_fp16_dp2", "v145_z2_bf16_dp3"})
      QTest::newRow(n) << QString(n);
  }
  void exportEqualsZeroToFp32() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("model.pt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out, "--format", "torch"}), 0);
    const auto ref = realds::reference(e.name, "zero_to_fp32");
    CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/compare_state_dicts.py"), {out, ref}), 0);
    // The same for safetensors, the format people pass on.
    const auto st = dir.file("model.safetensors");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", st, "--format", "safetensors"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/compare_state_dicts.py"), {st, ref}), 0);
  }
};

CKPTDOC_TEST_MAIN(TestRealdsExport)
#include "test_realds_export.moc"
