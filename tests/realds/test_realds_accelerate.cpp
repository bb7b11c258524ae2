// Hugging Face Accelerate's FSDP save_state folder as Accelerate 1.16 writes it (tests/realds/
// accelerate_fsdp_train.py: a tiny transformers GPT-2, 2 layers, tied lm_head, FSDP2 SHARDED_STATE_DICT over
// gloo at world 2, 3 AdamW steps): pytorch_model_fsdp_0/ and optimizer_0/ (DCP), scheduler.bin,
// random_states_<rank>.pkl. ckptdoc opens the folder as one checkpoint (the "accelerate" source over
// sources/dcp/), and its export is what Accelerate's own merge_fsdp_weights (`accelerate merge-weights`)
// wrote into the entry's ref/.
#include <QDir>
#include <QtTest>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "app_repair.h"
#include "ckptdoc/session/session.h"
#include "ckptdoc/sources/registry.h"
#include "job_watching_io.h"
#include "moments_diff_judge.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

constexpr const char* kEntry = "accelerate_fsdp2_ws2";
constexpr const char* kStep2 = "accelerate_fsdp2_ws2_step2";  // the same run saved after 2 steps, not 3
constexpr const char* kFull = "accelerate_fsdp2_full_ws2";    // the same run with FULL_STATE_DICT
// GPT-2 with n_layer 2: wte, wpe, 12 tensors per block, ln_f. The tied lm_head is one more model key, but one
// param for the optimizer.
constexpr int kParams = 2 + 2 * 12 + 2;

QStringList problem_codes(const QJsonObject& report, const QString& severity) {
  QStringList out;
  for (const auto& p : report["problems"].toArray())
    if (p.toObject()["severity"].toString() == severity) out << p.toObject()["code"].toString();
  return out;
}

QJsonObject problem(const QJsonObject& report, const QString& code) {
  for (const auto& p : report["problems"].toArray())
    if (p.toObject()["code"].toString() == code) return p.toObject();
  return {};
}

QJsonObject part_report(const QJsonObject& report, const QString& folder) {
  for (const auto& p : report["parts"].toArray())
    if (p.toObject()["folder"].toString() == folder) return p.toObject()["report"].toObject();
  return {};
}

QJsonObject diagnose(const std::string& path, int want_exit) {
  const auto r = test::run_cli({"diagnose", path, "--json"});
  if (r.exit_code != want_exit)
    QTest::qFail(("diagnose " + path + " exit " + std::to_string(r.exit_code) + ", wanted " +
                  std::to_string(want_exit) + ":\n" + r.out + r.err)
                     .c_str(),
                 __FILE__, __LINE__);
  return realds::parse(r.out);
}

// A plain (non-FSDP) Accelerate save_state of a 3-layer MLP after 3 AdamW steps, written by the judges' venv:
// model.safetensors, optimizer.bin, scheduler.bin, random_states_0.pkl.
std::string plain_save_state(const std::string& save) {
  const auto w = realds::python_with_deepspeed(
      {"-c",
       "import sys, torch\n"
       "from accelerate import Accelerator\n"
       "acc = Accelerator(cpu=True)\n"
       "m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\n"
       "opt = torch.optim.AdamW(m.parameters(), lr=1e-3)\n"
       "sch = torch.optim.lr_scheduler.StepLR(opt, 10)\n"
       "m, opt, sch = acc.prepare(m, opt, sch)\n"
       "for _ in range(3):\n"
       "    acc.backward(m(torch.randn(8, 16)).pow(2).mean()); opt.step(); sch.step(); opt.zero_grad()\n"
       "acc.save_state(sys.argv[1])\n",
       save},
      "0.19");
  if (w.exit_code != 0) QTest::qFail((w.out + w.err).c_str(), __FILE__, __LINE__);
  if (test::files_in(save) !=
      std::vector<std::string>{"model.safetensors", "optimizer.bin", "random_states_0.pkl", "scheduler.bin"})
    QTest::qFail("save_state wrote other files", __FILE__, __LINE__);
  return save;
}

// Every file under a folder and its bytes.
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file())
      out[f.path().lexically_relative(dir).string()] = test::read_text(f.path().string());
  return out;
}

}  // namespace

class TestRealdsAccelerate : public QObject {
  Q_OBJECT

 private slots:
  void saveStateFolderDiagnosesClean() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    // What Accelerate wrote, and nothing else.
    QCOMPARE(test::files_in(e.save_dir),
             (std::vector<std::string>{"optimizer_0", "pytorch_model_fsdp_0", "random_states_0.pkl",
                                       "random_states_1.pkl", "scheduler.bin"}));
    for (const char* part : {"optimizer_0", "pytorch_model_fsdp_0"})
      QCOMPARE(test::files_in(e.save_dir + "/" + part),
               (std::vector<std::string>{".metadata", "__0_0.distcp", "__1_0.distcp"}));

    const QJsonObject r = diagnose(e.save_dir, 0);
    QCOMPARE(r["format"].toString(), QString("accelerate-fsdp"));
    QVERIFY(r["verdict"].toObject()["clean"].toBool());
    QVERIFY2(r["problems"].toArray().isEmpty(), qPrintable(QJsonDocument(r["problems"].toArray()).toJson()));
    const QJsonObject model = part_report(r, "pytorch_model_fsdp_0");
    const QJsonObject optim = part_report(r, "optimizer_0");
    QCOMPARE(model["tensors"].toArray().size(), kParams + 1);
    QCOMPARE(model["files_read"].toArray().size(), 2);
    // Adam step 3 for every param (AdamW's 0-d step tensors), every param a model key.
    const QJsonObject steps = optim["adam_steps"].toObject();
    QCOMPARE(steps.size(), kParams);
    for (const auto& s : steps) QCOMPARE(s.toDouble(), 3.0);
    QVERIFY(steps.contains("transformer.wte.weight"));
    QCOMPARE(r["optimizer_params_matched"].toInt(), kParams);
    const QString verdict = r["verdict"].toObject()["text"].toString();
    QVERIFY2(verdict.contains("Adam moments of 28 params judged"), qPrintable(verdict));
    // The pickles beside the parts: their values not read, what loading them would run judged (nothing unsafe
    // in what Accelerate wrote).
    QCOMPARE(r["not_read"].toArray().size(), 3);
    QCOMPARE(r["pickles_checked"].toInt(), 3);
    const QString not_checked = QJsonDocument(r["verdict"].toObject()["not_checked"].toArray()).toJson();
    for (const char* f :
         {"not read: scheduler.bin", "not read: random_states_0.pkl", "not read: random_states_1.pkl"})
      QVERIFY2(not_checked.contains(f), qPrintable(not_checked));

    // inspect shows both parts.
    const auto ins = test::run_cli({"inspect", e.save_dir, "--json"});
    QCOMPARE(ins.exit_code, 0);
    const QJsonObject ij = realds::parse(ins.out);
    QCOMPARE(ij["parts"].toArray().size(), 2);
    QCOMPARE(ij["parts"].toArray()[1].toObject()["role"].toString(), QString("optimizer"));

    // The model part alone is still a plain DCP folder.
    const QJsonObject plain = diagnose(e.save_dir + "/pytorch_model_fsdp_0", 0);
    QCOMPARE(plain["format"].toString(), QString("pytorch-dcp"));
    QVERIFY(plain["verdict"].toObject()["clean"].toBool());
  }

  // `ckptdoc export SAVE_STATE -o model.safetensors` is Accelerate's merge_fsdp_weights output byte for byte;
  // `-o pytorch_model.bin` holds the tensors of its torch form (--unsafe_serialization) bit for bit.
  // `ckptdoc diff` of the save_state folder against `accelerate merge-weights`' output of it (both its
  // safetensors and its torch file): every weight equal, and a weight changed in a copy of that output is
  // named with its max |A-B|.
  void diffAgainstMergeWeights() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const std::string ref = fs::path(e.save_dir).parent_path().string() + "/ref";
    for (const char* file : {"model.safetensors", "pytorch_model.bin"}) {
      const auto r = test::run_cli({"diff", e.save_dir, ref + "/" + file});
      QVERIFY2(r.exit_code == 0, qPrintable(QString::fromStdString(r.out + r.err)));
      QVERIFY2(r.out.find("29 tensors compared: 29 equal, 0 different; 0 only in A, 0 only in B") !=
                   std::string::npos,
               r.out.c_str());
    }
    const test::TempDir dir;
    const std::string changed = dir.file("changed.safetensors");
    const auto edit =
        realds::python_with_deepspeed({"-c",
                                       "import sys\n"
                                       "from safetensors.torch import load_file, save_file\n"
                                       "sd = load_file(sys.argv[1])\n"
                                       "sd['transformer.h.0.mlp.c_fc.bias'][3] += 0.5\n"
                                       "save_file(sd, sys.argv[2], metadata={'format': 'pt'})\n",
                                       ref + "/model.safetensors", changed},
                                      "0.19");
    QVERIFY2(edit.exit_code == 0, qPrintable(QString::fromStdString(edit.out + edit.err)));
    const auto r = test::run_cli({"diff", e.save_dir, changed});
    QVERIFY2(r.exit_code == 1, qPrintable(QString::fromStdString(r.out + r.err)));
    QVERIFY2(r.out.find("28 equal, 1 different") != std::string::npos, r.out.c_str());
    QVERIFY2(r.out.find("transformer.h.0.mlp.c_fc.bias") != std::string::npos, r.out.c_str());
  }

  void exportEqualsMergeWeights() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const std::string ref = fs::path(e.save_dir).parent_path().string() + "/ref";
    const test::TempDir dir;
    const std::string out = dir.file("model.safetensors");
    const auto r = test::run_cli({"export", e.save_dir, "-o", out});
    QVERIFY2(r.exit_code == 0, qPrintable(QString::fromStdString(r.out + r.err)));
    QVERIFY(test::read_text(out) == test::read_text(ref + "/model.safetensors"));

    const auto check = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/fixtures/dcp/check_dcp_export.py", e.save_dir + "/pytorch_model_fsdp_0",
         out, "--reference-pt", ref + "/pytorch_model.bin"},
        "0.19");
    QVERIFY2(check.exit_code == 0, qPrintable(QString::fromStdString(check.out + check.err)));

    // The torch form: the same names, dtypes, shapes and bytes as merge-weights' pytorch_model.bin (not the
    // same file bytes: torch.save's zip records and key order are its own), loaded with weights_only=True.
    const std::string bin = dir.file("pytorch_model.bin");
    const auto rt = test::run_cli({"export", e.save_dir, "-o", bin});
    QVERIFY2(rt.exit_code == 0, qPrintable(QString::fromStdString(rt.out + rt.err)));
    const auto same = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\n"
         "a = torch.load(sys.argv[1], weights_only=True)\n"
         "b = torch.load(sys.argv[2], weights_only=True)\n"
         "assert type(a) is dict and sorted(a) == sorted(b), (sorted(a), sorted(b))\n"
         "for k in b:\n"
         "    x, y = a[k], b[k]\n"
         "    assert x.dtype == y.dtype and x.shape == y.shape, k\n"
         "    assert torch.equal(x.contiguous().view(-1).view(torch.uint8), "
         "y.contiguous().view(-1).view(torch.uint8)), k\n"
         "print(len(b), 'tensors equal')\n",
         bin, ref + "/pytorch_model.bin"},
        "0.19");
    QVERIFY2(same.exit_code == 0 && same.out.find("29 tensors equal") != std::string::npos,
             qPrintable(QString::fromStdString(same.out + same.err)));
    // The model part named alone (the dcp source) exports the same file.
    const auto part =
        test::run_cli({"export", e.save_dir + "/pytorch_model_fsdp_0", "-o", dir.file("part.bin")});
    QVERIFY2(part.exit_code == 0, qPrintable(QString::fromStdString(part.out + part.err)));
    QVERIFY(test::read_text(dir.file("part.bin")) == test::read_text(bin));
  }

  // repair --drop-optimizer is refused, as for a plain save_state folder (test_realds_weights_folder_repair's
  // accelerateDropIsRefused), naming why: the user resumes with Accelerator.load_state, which reads
  // optimizer_<i>/ for every prepared optimizer, and under FSDP2 prepare() takes the model only together with
  // its optimizer. Nothing is written, the input untouched; the apps' repair (Session::repair_source) refuses
  // it the same way, and the source says so up front (repair_refusal: the control is off). Why, by
  // Accelerate itself (accelerate_drop_check.py, world 2): the input's copy without optimizer_0/ (made here
  // with std::filesystem) loads its model with accelerate.utils.load_fsdp_model, but load_state with the
  // model and a fresh AdamW prepared fails on it. main wrote such a copy (exit 0).
  // repair --refresh-fp32 is refused (FSDP's torch optimizer steps the saved params themselves: no fp32
  // masters beside them), and the source says so before Repair is pressed (repair_refusal), so both apps grey
  // the control out with that reason (docs/gui.md). main said nothing up front: the apps offered the refresh.
  void refreshIsRefusedUpFront() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto r = test::run_cli({"repair", e.save_dir, "-o", dir.file("r"), "--refresh-fp32"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY(!fs::exists(dir.file("r")));
    const auto source = sources::find_source(e.save_dir);
    QVERIFY(source);
    const auto off = source->repair_refusal(sources::RepairAction::RefreshFp32, e.save_dir);
    QVERIFY(off);
    QVERIFY2(
        off->find("an Accelerate FSDP save_state folder holds no fp32 master copy of its weights") == 0 &&
            off->find("{refresh_fp32}") != std::string::npos,
        off->c_str());
  }

  void dropOptimizerIsRefusedAsLoadStateNeedsIt() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const auto before = tree(e.save_dir);
    test::TempDir dir;
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--drop-optimizer"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.find("optimizer_0/") != std::string::npos &&
                 r.err.find("Accelerator.load_state") != std::string::npos &&
                 r.err.find("--reset-optimizer") != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(out));
    QVERIFY(tree(e.save_dir) == before);

    sources::RepairRequest request;
    request.drop_optimizer = true;
    request.output = dir.file("app");
    test::JobWatchingIo watched;
    const auto app = test::app_repair(e.save_dir, request, watched);
    QVERIFY(app && app->error);
    QCOMPARE(std::string(session::error_kind_name(app->error->kind)), std::string("input"));
    QVERIFY2(app->error->message.find("load_state") != std::string::npos, app->error->message.c_str());
    QVERIFY(!fs::exists(dir.file("app")));
    const auto source = sources::find_source(e.save_dir);
    QVERIFY(source);
    const auto off = source->repair_refusal(sources::RepairAction::DropOptimizer, e.save_dir);
    QVERIFY(off && off->find("optimizer_0/") != std::string::npos);
    QVERIFY(!source->repair_refusal(sources::RepairAction::ResetOptimizer, e.save_dir));

    const std::string without = dir.file("without");
    fs::copy(e.save_dir, without, fs::copy_options::recursive);
    QVERIFY(fs::remove_all(without + "/optimizer_0") > 0);
    const auto load = realds::launch({test::source_dir() + "/tests/realds/accelerate_drop_check.py",
                                      e.save_dir, without, "--json", dir.file("drop.json")},
                                     2, "0.19", dir.file("logs"));
    QVERIFY2(load.exit_code == 0, realds::describe(load).c_str());
    const auto t = realds::parse(test::read_text(dir.file("drop.json")));
    QCOMPARE(t["params_equal_to_input"].toInt(), kParams);  // the judge reads the copy: not blind
    const auto failed = t["resume_with_optimizer_error"].toString();
    QVERIFY2(!failed.isEmpty(), "load_state with an optimizer read the folder without optimizer_0/");
    qInfo("load_state without optimizer_0/: %s", qPrintable(failed));
  }

  // `ckptdoc diff --what exp_avg / exp_avg_sq` of save_state folders against torch's comparison
  // (diff_reference.py --what: optimizer_0/'s state read with dcp_to_torch_save, named by
  // pytorch_model_fsdp_0/'s weights), tensor by tensor: names, dtypes, equal elements, non-finite mismatches
  // and max |A-B| (moments_diff_judge.h). The folder against itself (every moment equal), against the same
  // run saved after 2 steps instead of 3 (every moment moved) and against its --reset-optimizer copy (zeros).
  void diffOfMomentsAgreesWithTorch_data() {
    QTest::addColumn<QString>("what");
    QTest::addColumn<QString>("other");  // an entry, or "reset" for the copy
    QTest::addColumn<int>("different");
    QTest::newRow("exp_avg, itself") << "exp_avg" << kEntry << 0;
    QTest::newRow("exp_avg_sq, itself") << "exp_avg_sq" << kEntry << 0;
    QTest::newRow("exp_avg, 2 steps") << "exp_avg" << kStep2 << kParams;
    QTest::newRow("exp_avg_sq, 2 steps") << "exp_avg_sq" << kStep2 << kParams;
    QTest::newRow("exp_avg, reset copy") << "exp_avg"
                                         << "reset" << kParams;
    QTest::newRow("exp_avg_sq, reset copy") << "exp_avg_sq"
                                            << "reset" << kParams;
  }
  void diffOfMomentsAgreesWithTorch() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, what);
    QFETCH(QString, other);
    QFETCH(int, different);
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    std::string b;
    if (other == "reset") {
      b = dir.file("reset");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", e.save_dir, "-o", b, "--reset-optimizer"}), 0);
    } else {
      b = realds::checkpoint(other.toStdString()).save_dir;
    }
    const auto d = realds::moments_diff_against_torch(e.save_dir, b, e.save_dir, b, what.toStdString());
    QVERIFY2(d.problems.empty(), d.problems.c_str());
    qInfo("%d tensors, %d different, max |A-B| %g", d.tensors, d.different, d.max_abs);
    QCOMPARE(d.tensors, kParams);  // every param's moment (the tied lm_head is one param), compared by both
    QCOMPARE(d.different, different);
  }

  // Accelerate's save_state without FSDP (one process on the CPU): model.safetensors beside optimizer.bin,
  // scheduler.bin and random_states_0.pkl. ckptdoc reads the weights only; its verdict names the optimizer
  // state beside them as not read, never says the folder holds none.
  // A plain (non-FSDP) save_state: model.safetensors, and optimizer.bin (torch.save of
  // optimizer.state_dict(), params by index) read and checked beside it; scheduler.bin and
  // random_states_0.pkl named as not read.
  void plainSaveStateChecksItsOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const std::string save = plain_save_state(dir.file("save"));
    const QJsonObject r = diagnose(save, 0);
    const QJsonObject verdict = r["verdict"].toObject();
    QCOMPARE(verdict["kind"].toString(), QString("clean"));
    QCOMPARE(verdict["tensors_scanned"].toInt(), 4);
    const QString not_checked = QJsonDocument(verdict["not_checked"].toArray()).toJson();
    QVERIFY2(not_checked.contains("(random_states_0.pkl, scheduler.bin) was not read"),
             qPrintable(not_checked));
    QVERIFY2(!not_checked.contains("optimizer.bin"), qPrintable(not_checked));
    QVERIFY2(
        verdict["basis"].toString().contains("optimizer state in optimizer.bin was read (4 params, step 3)"),
        qPrintable(verdict["basis"].toString()));
    const QJsonObject o = r["optimizer_files"].toArray()[0].toObject();
    QCOMPARE(o["file"].toString(), QString("optimizer.bin"));
    QVERIFY(o["read"].toBool());
    QCOMPARE(o["params_in_groups"].toInt(), 4);
    QCOMPARE(o["params_with_state"].toInt(), 4);
    QCOMPARE(o["step"].toDouble(), 3.0);
    QCOMPARE(o["keys"].toArray(), (QJsonArray{"exp_avg", "exp_avg_sq", "step"}));
    QCOMPARE(o["tensors_scanned"].toInt(), 8);
    QCOMPARE(o["shapes_matched"].toInt(), 4);

    // inspect lists the state: params, step, keys, and each param's moments (index 0 is Linear(16,
    // 32).weight).
    const auto text = test::run_cli({"inspect", save});
    QCOMPARE(text.exit_code, 0);
    for (const char* line :
         {"Optimizer state optimizer.bin", "1, 4 params, 4 with state", "step             3",
          "keys             exp_avg, exp_avg_sq, step", "exp_avg float32 [32, 16]"})
      QVERIFY2(text.out.find(line) != std::string::npos, qPrintable(QString::fromStdString(line + text.out)));
    const auto json = test::run_cli({"inspect", save, "--json"});
    QCOMPARE(json.exit_code, 0);
    const QJsonObject i = realds::parse(json.out)["optimizer_files"].toArray()[0].toObject();
    QCOMPARE(i["params_with_state"].toInt(), 4);
    QCOMPARE(
        i["params"].toArray()[2].toObject()["tensors"].toObject()["exp_avg_sq"].toObject()["shape"].toArray(),
        (QJsonArray{4, 32}));
  }

  // Damaged copies of optimizer.bin (rewritten by torch.save from the real one): each named, with the file.
  void damagedPlainOptimizerIsNamed_data() {
    QTest::addColumn<QString>("damage");  // Python over `sd`, the loaded state dict
    QTest::addColumn<QString>("code");
    QTest::addColumn<QString>("param");
    QTest::newRow("nan") << "sd['state'][1]['exp_avg'][3] = float('nan')"
                         << "nonfinite-values"
                         << "state[1].exp_avg";
    QTest::newRow("missing") << "del sd['state'][2]['exp_avg_sq']"
                             << "optimizer-state-incomplete"
                             << "state[2].exp_avg_sq";
    QTest::newRow("lost") << "sd['state'][0]['exp_avg'].zero_()"
                          << "optimizer-step-inconsistent"
                          << "state[0].exp_avg";
    QTest::newRow("step") << "sd['state'][3]['step'] = torch.tensor(7.)"
                          << "optimizer-step-inconsistent"
                          << "";
    QTest::newRow("other-model")
        << "sd['state'][0] = {k: (v if k == 'step' else torch.zeros(8, 16)) for k, v in "
           "sd['state'][0].items()}"
        << "optimizer-state-shape-mismatch"
        << "";
    QTest::newRow("truncated") << ""
                               << "optimizer-file-unreadable"
                               << "";
  }

  void damagedPlainOptimizerIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, damage);
    QFETCH(QString, code);
    QFETCH(QString, param);
    test::TempDir dir;
    const std::string save = plain_save_state(dir.file("save"));
    const std::string bin = save + "/optimizer.bin";
    if (damage.isEmpty()) {
      fs::resize_file(bin, fs::file_size(bin) / 2);
    } else {
      const auto w =
          realds::python_with_deepspeed({"-c",
                                         "import sys, torch\nsd = torch.load(sys.argv[1])\n" +
                                             damage.toStdString() + "\ntorch.save(sd, sys.argv[1])\n",
                                         bin},
                                        "0.19");
      QVERIFY2(w.exit_code == 0, qPrintable(QString::fromStdString(w.out + w.err)));
    }
    const QJsonObject r = diagnose(save, 1);
    QJsonObject f;
    for (const auto& x : r["findings"].toArray())
      if (x.toObject()["code"].toString() == code) f = x.toObject();
    QVERIFY2(!f.isEmpty(), qPrintable(QJsonDocument(r["findings"].toArray()).toJson()));
    QCOMPARE(f["severity"].toString(), QString("error"));
    QCOMPARE(f["files"].toArray(), QJsonArray{"optimizer.bin"});
    QVERIFY2(f["message"].toString().startsWith("optimizer.bin"), qPrintable(f["message"].toString()));
    if (!param.isEmpty()) QVERIFY(f["params"].toArray().contains(param));
    if (damage.isEmpty()) {  // not read: the verdict says so, and nothing claims it was checked
      const QString not_checked = QJsonDocument(r["verdict"].toObject()["not_checked"].toArray()).toJson();
      QVERIFY2(not_checked.contains("optimizer.bin"), qPrintable(not_checked));
    }
  }

  // FSDP with FULL_STATE_DICT (accelerate_fsdp_full_train.py): pytorch_model_fsdp.bin (the whole model,
  // torch.save) read as the weights, optimizer.bin (keyed by FQN) checked against them by name; the export
  // holds what torch.load gives of pytorch_model_fsdp.bin.
  void fullStateDictSaveIsRead() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kFull);
    QCOMPARE(test::files_in(e.save_dir),
             (std::vector<std::string>{"optimizer.bin", "pytorch_model_fsdp.bin", "random_states_0.pkl",
                                       "random_states_1.pkl", "scheduler.bin"}));
    const QJsonObject r = diagnose(e.save_dir, 0);
    const QJsonObject verdict = r["verdict"].toObject();
    QCOMPARE(verdict["kind"].toString(), QString("clean"));
    QCOMPARE(verdict["tensors_scanned"].toInt(), kParams + 1);  // the tied lm_head.weight is a key of its own
    const QJsonObject o = r["optimizer_files"].toArray()[0].toObject();
    QCOMPARE(o["matched_by"].toString(), QString("name"));
    QCOMPARE(o["params_with_state"].toInt(), kParams);
    QCOMPARE(o["names_matched"].toInt(), kParams);
    QCOMPARE(o["step"].toDouble(), 3.0);
    QVERIFY2(verdict["basis"].toString().contains("matched to the weights by name (28 of 28)"),
             qPrintable(verdict["basis"].toString()));

    const test::TempDir dir;
    const std::string out = dir.file("model.safetensors");
    const auto x = test::run_cli({"export", e.save_dir, "-o", out});
    QVERIFY2(x.exit_code == 0, qPrintable(QString::fromStdString(x.out + x.err)));
    const auto same = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\nfrom safetensors.torch import load_file\n"
         "a = torch.load(sys.argv[1], weights_only=True); b = load_file(sys.argv[2])\n"
         "assert sorted(a) == sorted(b), (sorted(a), sorted(b))\n"
         "assert all(torch.equal(a[k], b[k]) for k in a)\n",
         e.save_dir + "/pytorch_model_fsdp.bin", out},
        "0.19");
    QVERIFY2(same.exit_code == 0, qPrintable(QString::fromStdString(same.out + same.err)));

    // An optimizer saved for another model: a state named for a param the weights lack, and one whose moments
    // have another shape than its weight.
    const std::string other = realds::copy_of(e, dir, "other");
    const auto w = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\nsd = torch.load(sys.argv[1])\n"
         "sd['state']['transformer.h.9.mlp.c_fc.weight'] = "
         "sd['state'].pop('transformer.h.1.mlp.c_fc.weight')\n"
         "s = sd['state']['transformer.wpe.weight']\n"
         "s['exp_avg'] = torch.randn(16, 32); s['exp_avg_sq'] = torch.rand(16, 32)\n"
         "torch.save(sd, sys.argv[1])\n",
         other + "/optimizer.bin"},
        "0.19");
    QVERIFY2(w.exit_code == 0, qPrintable(QString::fromStdString(w.out + w.err)));
    const QJsonObject d = diagnose(other, 1);
    QStringList codes;
    for (const auto& f : d["findings"].toArray()) {
      codes << f.toObject()["code"].toString();
      QCOMPARE(f.toObject()["files"].toArray(), QJsonArray{"optimizer.bin"});
    }
    QCOMPARE(codes, (QStringList{"optimizer-state-shape-mismatch", "accelerate-optimizer-param-unknown"}));
  }

  void damagedCopiesAreNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const test::TempDir dir;

    // An optimizer shard lost: named; the weights (complete) still export.
    const std::string lost = realds::copy_of(e, dir, "lost");
    fs::remove(lost + "/optimizer_0/__1_0.distcp");
    const QJsonObject r1 = diagnose(lost, 1);
    QVERIFY(!r1["verdict"].toObject()["clean"].toBool());
    QCOMPARE(problem(r1, "dcp-file-missing")["file"].toString(), QString("optimizer_0/__1_0.distcp"));
    QVERIFY(problem_codes(r1, "error").contains("dcp-file-missing"));

    // A model shard cut short: named; export refuses and writes nothing.
    const std::string cut = realds::copy_of(e, dir, "cut");
    const std::string shard = cut + "/pytorch_model_fsdp_0/__1_0.distcp";
    fs::resize_file(shard, fs::file_size(shard) / 2);
    const QJsonObject r2 = diagnose(cut, 1);
    QCOMPARE(problem(r2, "dcp-file-truncated")["file"].toString(),
             QString("pytorch_model_fsdp_0/__1_0.distcp"));
    const std::string out = dir.file("cut.safetensors");
    const auto x = test::run_cli({"export", cut, "-o", out});
    QVERIFY(x.exit_code != 0);
    QVERIFY2(x.err.find("__1_0.distcp") != std::string::npos, qPrintable(QString::fromStdString(x.err)));
    QVERIFY(!fs::exists(out));
    QCOMPARE(test::files_in(dir.path()), (std::vector<std::string>{"cut", "lost"}));

    // A scheduler.bin whose unpickling would call os.system (torch.save of a __reduce__ payload): named, and
    // never run.
    const std::string hostile = realds::copy_of(e, dir, "hostile");
    const auto w = realds::python_with_deepspeed({"-c",
                                                  "import os, sys, torch\n"
                                                  "class P:\n"
                                                  "    def __reduce__(self): return (os.system, ('true',))\n"
                                                  "torch.save({'last_epoch': 6, 'x': P()}, sys.argv[1])\n",
                                                  hostile + "/scheduler.bin"},
                                                 "0.19");
    QVERIFY2(w.exit_code == 0, qPrintable(QString::fromStdString(w.out + w.err)));
    const QJsonObject r4 = diagnose(hostile, 1);
    QCOMPARE(problem(r4, "unsafe-pickle")["file"].toString(), QString("scheduler.bin"));
    QCOMPARE(problem(r4, "unsafe-pickle")["severity"].toString(), QString("error"));

    // The whole optimizer folder gone, scheduler.bin still there: a warning, not an all-clear.
    const std::string no_opt = realds::copy_of(e, dir, "no_optimizer");
    fs::remove_all(no_opt + "/optimizer_0");
    const QJsonObject r3 = diagnose(no_opt, 0);
    QCOMPARE(problem_codes(r3, "warning"), QStringList{"accelerate-optimizer-missing"});
    const auto t3 = test::run_cli({"diagnose", no_opt});
    QVERIFY2(t3.out.find("CLEAN") == std::string::npos, qPrintable(QString::fromStdString(t3.out)));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsAccelerate)
#include "test_realds_accelerate.moc"
