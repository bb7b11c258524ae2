// A real Hugging Face Trainer run under DeepSpeed ZeRO (transformers, accelerate and DeepSpeed 0.19 from the
// judges' venv, on the CPU: tests/realds/hf_trainer_train.py) writes checkpoint-N/ folders as users get them.
// ckptdoc opens such a folder as one checkpoint, says what its verdict rests on, exports a folder that
// from_pretrained loads with DeepSpeed's own zero_to_fp32.py values, and repairs stale masters into a folder
// the Trainer resumes from (resume_from_checkpoint) with the weights as masters and the moments unchanged.
// Without DeepSpeed (hf_trainer_plain_train.py) the Trainer keeps its optimizer beside the weights as
// optimizer.pt: read and checked, its params and step as torch reads them.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <sstream>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string script(const std::string& name) {
  return test::source_dir() + "/tests/realds/" + name;
}

// hf_trainer_resume_check.py: the Trainer resumes from `ckpt` like `e`'s run and takes one step; returns the
// path of its dump (the engine's masters, weights and moments after the load).
std::string resume(const realds::Entry& e, const std::string& ckpt, const test::TempDir& dir,
                   const std::string& as) {
  std::vector<std::string> args{script("hf_trainer_resume_check.py"),
                                "--ckpt",
                                ckpt,
                                "--out",
                                dir.file(as + "-run"),
                                "--dump",
                                dir.file(as + ".dump"),
                                "--stage",
                                std::to_string(e.stage)};
  if (e.spec["gather"].toBool()) args.push_back("--gather");
  if (e.spec["tied"].toBool()) args.push_back("--tied");
  const auto r = realds::launch(args, e.dp, "0.19", dir.file(as + "-logs"));
  if (r.exit_code != 0)
    throw std::runtime_error("hf_trainer_resume_check.py failed:\n" + realds::describe(r));
  return dir.file(as + ".dump");
}

}  // namespace

class TestRealdsHfTrainer : public QObject {
  Q_OBJECT

 private slots:
  // ZeRO-3 with its gathered 16-bit weights beside (and a tied head), ZeRO-3 without them (the Trainer then
  // saves no weights file), ZeRO-2 (weights in DeepSpeed's model file and in model.safetensors).
  void trainerFolderIsOneCheckpoint_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("compared");  // the masters can be compared with 16-bit weights
    QTest::newRow("z3 gathered, tied") << "v019_hf_trainer_z3" << true;
    QTest::newRow("z3 without weights") << "v019_hf_trainer_z3_nogather" << false;
    QTest::newRow("z2") << "v019_hf_trainer_z2" << true;
  }
  void trainerFolderIsOneCheckpoint() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    QFETCH(bool, compared);
    const auto e = realds::checkpoint(name.toStdString());
    QCOMPARE(fs::path(e.save_dir).filename().string(), std::string("checkpoint-4"));

    // The verdict says what it rests on: the masters compared with the gathered weights, or with nothing.
    const auto report = realds::diagnose_json(e.save_dir, 0);
    const auto verdict = report["verdict"].toObject();
    const int params = e.spec["tied"].toBool() ? 20 : 21;  // the tied head is the embedding
    QCOMPARE(verdict["moments_checked"].toInt(), params);
    if (compared) {
      QCOMPARE(verdict["kind"].toString(), QString("clean"));
      QCOMPARE(verdict["masters_compared"].toInt(), params);
      QVERIFY(verdict["not_checked"].toArray().isEmpty());
    } else {
      QCOMPARE(verdict["kind"].toString(), QString("nothing-compared"));
      QCOMPARE(verdict["masters_compared"].toInt(), 0);
      QVERIFY(!verdict["not_checked"].toArray().isEmpty());
      const auto text = test::run_cli({"diagnose", e.save_dir, "--device", "cpu"});
      QVERIFY2(text.out.find("No problems found") == std::string::npos, text.out.c_str());
      QVERIFY2(text.out.find("compared with nothing") != std::string::npos, text.out.c_str());
    }
    if (e.stage == 3)
      QVERIFY(realds::has_code(report, "info", compared ? "lp-source-compared" : "not-analysed"));

    // Pointed one folder too high (the Trainer's output_dir, two saves in it): refused, naming both.
    const auto high = test::run_cli({"diagnose", fs::path(e.save_dir).parent_path().string()});
    QCOMPARE(high.exit_code, 2);
    QVERIFY2(high.err.find("checkpoint-2") != std::string::npos &&
                 high.err.find("checkpoint-4") != std::string::npos,
             high.err.c_str());

    // Exported into a folder: the Trainer folder's config comes along, and transformers loads the folder with
    // exactly the tensors DeepSpeed 0.19's own zero_to_fp32.py consolidates.
    test::TempDir dir;
    const auto r =
        test::run_cli({"export", e.save_dir, "-o", dir.file("model"), "--max-shard-size", "100KB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(
        r.out.find("copied from the model folder, for from_pretrained: config.json generation_config.json") !=
            std::string::npos,
        r.out.c_str());
    QVERIFY(fs::exists(dir.file("model/model.safetensors.index.json")));
    const auto loaded = realds::python_with_deepspeed(
        {script("hf_from_pretrained_check.py"), dir.file("model"), realds::reference(e.name, "zero_to_fp32")},
        "0.19");
    QVERIFY2(loaded.exit_code == 0, realds::describe(loaded).c_str());
  }

  // Stale masters on one rank of a Trainer folder (the 16-bit weights beside are the trained ones): named;
  // repaired into a folder that keeps the Trainer's files; the real Trainer resumes from it with every master
  // equal to its weight and the moments it resumes with from the undamaged folder, and trains a step.
  void staleMastersRepairedTrainerResumes() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_hf_trainer_z3");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed({script("damage.py"), in, "stale-fp32", "1"}, e.ds), 0);
    const auto report = realds::diagnose_json(in, 1);
    QVERIFY(realds::has_code(report, "error", "fp32-master-mismatch"));

    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(in, out, {"--refresh-fp32"}), 0);
    for (const auto* f : {"trainer_state.json", "config.json", "model.safetensors", "rng_state_1.pth"})
      QVERIFY2(fs::exists(out + "/" + f), f);
    const auto fixed = realds::diagnose_json(out, 0);
    QCOMPARE(fixed["verdict"].toObject()["masters_compared"].toInt(), 20);

    const auto original = resume(e, e.save_dir, dir, "original");
    const auto repaired = resume(e, out, dir, "repaired");
    const auto cmp = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\n"
         "a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
         "assert a['global_step'] == b['global_step'] == 4, (a['global_step'], b['global_step'])\n"
         "bad = [n for n in b['fp32'] if not torch.equal(b['fp32'][n], b['lp'][n])]\n"
         "bad += [k + ' ' + n for k in ('exp_avg', 'exp_avg_sq', 'lp') for n in a[k] if not "
         "torch.equal(a[k][n], "
         "b[k][n])]\n"
         "assert not bad, bad\n"
         "assert any(not torch.equal(a['fp32'][n], b['fp32'][n]) for n in a['fp32'])  # trained masters "
         "differ\n"
         "print('ok', len(b['fp32']), a['loss'], b['loss'])\n",
         original, repaired},
        "0.19");
    QVERIFY2(cmp.exit_code == 0, realds::describe(cmp).c_str());
  }

  // A Trainer run without DeepSpeed: checkpoint-4 holds model.safetensors, optimizer.pt (torch.save of
  // optimizer.state_dict()), scheduler.pt, rng_state.pth and training_args.bin. optimizer.pt is read and
  // checked (the verdict gives its params and step as torch reads them); the scheduler and RNG state are
  // named as not read. `inspect` lists the state.
  void plainTrainerOptimizerIsRead() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    QCOMPARE(fs::path(e.save_dir).filename().string(), std::string("checkpoint-4"));
    QVERIFY(fs::exists(e.save_dir + "/optimizer.pt") && fs::exists(e.save_dir + "/training_args.bin"));
    // torch's own reading: params with a state, the one step they share, params the groups list
    const auto t = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\nsd = torch.load(sys.argv[1] + '/optimizer.pt')\n"
         "steps = {float(s['step']) for s in sd['state'].values()}\nassert len(steps) == 1, steps\n"
         "print(len(sd['state']), int(steps.pop()), sum(len(g['params']) for g in sd['param_groups']))\n",
         e.save_dir},
        "0.19");
    QVERIFY2(t.exit_code == 0, realds::describe(t).c_str());
    std::istringstream torch_read(t.out);
    int params = 0, step = 0, in_groups = 0;
    torch_read >> params >> step >> in_groups;
    QVERIFY2(params > 0 && step > 0, t.out.c_str());

    const auto r = realds::diagnose_json(e.save_dir, 0);
    const auto verdict = r["verdict"].toObject();
    QCOMPARE(verdict["kind"].toString(), QString("clean"));
    const QString expected =
        QString("the optimizer state in optimizer.pt was read (%1 params, step %2)").arg(params).arg(step);
    QVERIFY2(verdict["basis"].toString().contains(expected), qPrintable(verdict["basis"].toString()));
    const QString not_checked = QJsonDocument(verdict["not_checked"].toArray()).toJson();
    QVERIFY2(not_checked.contains("(rng_state.pth, scheduler.pt) was not read"), qPrintable(not_checked));
    QVERIFY2(!not_checked.contains("optimizer.pt"), qPrintable(not_checked));
    const auto files = r["optimizer_files"].toArray();
    QCOMPARE(files.size(), 1);
    const auto o = files[0].toObject();
    QCOMPARE(o["file"].toString(), QString("optimizer.pt"));
    QVERIFY(o["read"].toBool());
    QCOMPARE(o["params_with_state"].toInt(), params);
    QCOMPARE(o["params_in_groups"].toInt(), in_groups);
    QCOMPARE(o["step"].toDouble(), double(step));
    QCOMPARE(o["shapes_matched"].toInt(), params);  // every moment's shape found among the weights

    const auto text = test::run_cli({"inspect", e.save_dir});
    CKPTDOC_EXPECT_EXIT(text, 0);
    QVERIFY2(text.out.find("Optimizer state optimizer.pt") != std::string::npos, text.out.c_str());
  }

  // A NaN in one moment of optimizer.pt (the real file loaded and written back with torch.save): named, with
  // the file and the param.
  void damagedTrainerOptimizerIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto w = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\nsd = torch.load(sys.argv[1])\nsd['state'][1]['exp_avg'].view(-1)[3] = "
         "float('nan')\ntorch.save(sd, sys.argv[1])\n",
         in + "/optimizer.pt"},
        "0.19");
    QVERIFY2(w.exit_code == 0, realds::describe(w).c_str());
    const auto r = realds::diagnose_json(in, 1);
    const auto f = realds::finding(r, "nonfinite-values");
    QVERIFY2(!f.isEmpty(), qPrintable(QJsonDocument(r["findings"].toArray()).toJson()));
    QCOMPARE(f["severity"].toString(), QString("error"));
    QCOMPARE(f["files"].toArray(), QJsonArray{"optimizer.pt"});
    QVERIFY2(f["message"].toString().startsWith("optimizer.pt"), qPrintable(f["message"].toString()));
    QVERIFY2(f["params"].toArray().contains("state[1].exp_avg"),
             qPrintable(QJsonDocument(f["params"].toArray()).toJson()));
  }

  // A truncated optimizer.pt (a save cut short): named as unreadable with the file, the verdict says it was
  // not read, and its repair is refused naming the file, with nothing written.
  void truncatedTrainerOptimizerIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    fs::resize_file(in + "/optimizer.pt", fs::file_size(in + "/optimizer.pt") / 2);
    const auto r = realds::diagnose_json(in, 1);
    const auto f = realds::finding(r, "optimizer-file-unreadable");
    QVERIFY2(!f.isEmpty(), qPrintable(QJsonDocument(r["findings"].toArray()).toJson()));
    QCOMPARE(f["severity"].toString(), QString("error"));
    QCOMPARE(f["files"].toArray(), QJsonArray{"optimizer.pt"});
    QVERIFY2(f["message"].toString().startsWith("optimizer.pt"), qPrintable(f["message"].toString()));
    const QString not_checked = QJsonDocument(r["verdict"].toObject()["not_checked"].toArray()).toJson();
    QVERIFY2(not_checked.contains("optimizer.pt"), qPrintable(not_checked));

    const auto repair = test::run_cli({"repair", in, "-o", dir.file("out"), "--reset-optimizer"});
    QCOMPARE(repair.exit_code, 2);
    QVERIFY2(repair.err.find("optimizer.pt") != std::string::npos, repair.err.c_str());
    QVERIFY(!fs::exists(dir.file("out")));
  }
};

QTEST_GUILESS_MAIN(TestRealdsHfTrainer)
#include "test_realds_hf_trainer.moc"
