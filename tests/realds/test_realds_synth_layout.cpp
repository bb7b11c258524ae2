// The synthetic writer's layout (`ckptdoc synth --vocab`, what tests/bench/make_1b_dp64.sh writes at 1B
// params and dp 64) against real DeepSpeed 0.19 of the same recipe: synth_recipe_train.py builds the writer's
// transformer as a torch model (same names, order, groups, buffer and tied head), trains it two steps and
// saves it (realds.py entries v019_synthrecipe_*). `ckptdoc synth` then writes the same shapes, world, stage
// and dtype with the same ds_version, and the two must agree field by field: torch's reading of every file
// (compare_synth_layout.py: file names, keys in order, tensor dtypes, shapes, storage sizes and offsets,
// paddings, slice mappings, shared_params) and ckptdoc's (inspect --json: groups, partitions, fragments).
// Values differ (random weights); the layout must not.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

// Drops, at any depth, where the checkpoint is, its files' sizes in bytes ("bytes", "file_bytes": other
// values pickle to other sizes) and the fp16 loss scale (a setting of the run: initial_scale_power).
QJsonValue layout_only(const QJsonValue& v) {
  static const QSet<QString> run_specific = {"save_dir", "tag_dir", "bytes", "file_bytes", "cur_scale"};
  if (v.isObject()) {
    QJsonObject out;
    const QJsonObject o = v.toObject();
    for (auto it = o.begin(); it != o.end(); ++it)
      if (!run_specific.contains(it.key())) out.insert(it.key(), layout_only(it.value()));
    return out;
  }
  if (v.isArray()) {
    QJsonArray out;
    for (const auto& x : v.toArray()) out.append(layout_only(x));
    return out;
  }
  return v;
}

// Where a and b differ, one path a line.
void differences(const QJsonValue& a, const QJsonValue& b, const QString& path, QStringList& out) {
  if (a.isObject() && b.isObject()) {
    const QJsonObject x = a.toObject(), y = b.toObject();
    QStringList keys = x.keys() + y.keys();
    keys.removeDuplicates();
    for (const auto& k : keys) differences(x.value(k), y.value(k), path + "/" + k, out);
  } else if (a.isArray() && b.isArray() && a.toArray().size() == b.toArray().size()) {
    for (qsizetype i = 0; i < a.toArray().size(); ++i)
      differences(a.toArray().at(i), b.toArray().at(i), path + "[" + QString::number(i) + "]", out);
  } else if (a != b) {
    auto text = [](const QJsonValue& v) {
      return QString::fromUtf8(QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact)).left(200);
    };
    out << path + ": DeepSpeed's " + text(a) + ", synth's " + text(b);
  }
}

QJsonObject inspect(const std::string& path) {
  const auto r = test::run_cli({"inspect", "--json", path});
  if (r.exit_code != 0) qWarning("%s", realds::describe(r).c_str());
  return realds::parse(r.out);
}

}  // namespace

class TestRealdsSynthLayout : public QObject {
  Q_OBJECT

 private slots:
  void sameLayout_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QStringList>("known");  // differences ckptdoc's writer cannot write (see the rows)
    QTest::newRow("zero2-bf16-dp2") << "v019_synthrecipe_z2_bf16_dp2" << QStringList{};
    QTest::newRow("zero2-bf16-dp4") << "v019_synthrecipe_z2_bf16_dp4" << QStringList{};
    // 0.19's ZeRO-3 fp32 partitions carry a `ds_id` attribute (pickled through torch's
    // _rebuild_from_type_v2); the writer pickles plain tensors (ckptdoc reads both alike).
    QTest::newRow("zero3-fp16-dp2") << "v019_synthrecipe_z3_fp16_dp2"
                                    << QStringList{"*/fp32_flat_groups/*#attrs"};
  }
  void sameLayout() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    QFETCH(QStringList, known);
    const auto e = realds::checkpoint(name.toStdString());
    const QJsonObject real = inspect(e.save_dir);
    const std::string version = real.value("ds_version").toString().toStdString();
    QVERIFY2(version.rfind("0.19.", 0) == 0, version.c_str());

    test::TempDir dir;
    const std::string synth = dir.file("synth");
    const auto spec = e.spec.value("synth").toObject();
    const auto w =
        test::run_cli({"synth", synth, "--stage", std::to_string(e.stage), "--dtype", e.dtype, "--dp",
                       std::to_string(e.dp), "--vocab", std::to_string(spec.value("vocab").toInt()),
                       "--hidden", std::to_string(spec.value("hidden").toInt()), "--layers",
                       std::to_string(spec.value("layers").toInt()), "--steps", std::to_string(e.steps),
                       "--ds-version", version});
    QVERIFY2(w.exit_code == 0, realds::describe(w).c_str());

    std::vector<std::string> args = {test::source_dir() + "/tests/realds/compare_synth_layout.py", e.save_dir,
                                     synth};
    for (const auto& k : known) {
      args.emplace_back("--known");
      args.push_back(k.toStdString());
    }
    const auto torch_view = realds::python_with_deepspeed(args, e.ds);
    qInfo("%s", torch_view.out.c_str());
    QVERIFY2(torch_view.exit_code == 0, realds::describe(torch_view).c_str());

    // ckptdoc's reading of both: the same groups, partitions, fragments, paddings and tied head.
    QStringList diffs;
    differences(layout_only(real), layout_only(inspect(synth)), QString(), diffs);
    QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join('\n')));
  }
};

QTEST_GUILESS_MAIN(TestRealdsSynthLayout)
#include "test_realds_synth_layout.moc"
