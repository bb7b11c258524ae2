// The DeepSpeed catalog and partition layout: the algorithms on the worked examples of
// deepspeed-format.md §5, and every real fixture against its checkpoint.reference.json.
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "deepspeed_reference.h"

using namespace ckptdoc;
using namespace ckptdoc::deepspeed;

namespace {

std::vector<ParamEntry> params_of(std::initializer_list<std::pair<const char*, int64_t>> list) {
  std::vector<ParamEntry> out;
  for (const auto& [n, k] : list) out.push_back(ParamEntry{n, {k}, k, 0});
  return out;
}

std::vector<int64_t> ints(const QJsonValue& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.toArray()) out.push_back(x.toInteger());
  return out;
}

std::string problems_text(const Catalog& c) {
  std::string s;
  for (const auto& p : c.problems) s += p.code + ": " + p.message + "\n";
  return s;
}

}  // namespace

class TestDeepspeedCatalog : public QObject {
  Q_OBJECT

 private slots:
  void layoutWorkedExampleDp3() {
    // §5.1: dp = 3, a (5) then b (3): A = 6, N = 8, P = 4.
    const auto g = layout_zero12(0, params_of({{"a", 5}, {"b", 3}}), 3, zero12_rules_for_version("0.16.5"));
    QCOMPARE(g.partition_numel, 4);
    QCOMPARE(g.padded_numel, 12);
    QCOMPARE(g.partitions[0].saved_numel, 4);
    QCOMPARE(g.partitions[1].saved_numel, 4);
    QCOMPARE(g.partitions[2].saved_numel, 0);
    QCOMPARE(g.partitions[2].recorded_padding, 4);
    const auto m1 = expected_slice_mappings(g, 1);
    QCOMPARE(m1.size(), size_t(2));
    QCOMPARE(m1[0].name, std::string("a"));
    QCOMPARE(m1[0].numel, 1);
    QCOMPARE(m1[0].start, 0);
    QCOMPARE(m1[1].numel, 3);
    QCOMPARE(m1[1].start, 1);
    QVERIFY(expected_slice_mappings(g, 2).empty());
  }

  void layoutPaddingRulesByVersion() {
    // §5.1: dp = 4, N = 9: A = 8, flat 16, P = 4.
    const auto newer = layout_zero12(0, params_of({{"w", 9}}), 4, zero12_rules_for_version("0.16.4"));
    QCOMPARE(
        (std::vector<int64_t>{newer.partitions[0].recorded_padding, newer.partitions[1].recorded_padding,
                              newer.partitions[2].recorded_padding, newer.partitions[3].recorded_padding}),
        (std::vector<int64_t>{0, 0, 3, 4}));
    QCOMPARE((std::vector<int64_t>{newer.partitions[0].saved_numel, newer.partitions[1].saved_numel,
                                   newer.partitions[2].saved_numel, newer.partitions[3].saved_numel}),
             (std::vector<int64_t>{4, 4, 1, 0}));
    const auto older =
        layout_zero12(0, params_of({{"w", 9}}), 4, zero12_rules_for_version("0.12.6+c00388a2e"));
    QCOMPARE(older.partitions[3].recorded_padding, 7);
    QCOMPARE((std::vector<int64_t>{older.partitions[0].saved_numel, older.partitions[1].saved_numel,
                                   older.partitions[2].saved_numel, older.partitions[3].saved_numel}),
             (std::vector<int64_t>{4, 4, 4, 1}));
    // Before v0.5.2 the alignment was dp.
    const auto old = layout_zero12(0, params_of({{"w", 9}}), 4, zero12_rules_for_version("0.5.1"));
    QCOMPARE(old.padded_numel, 12);
    QCOMPARE(old.partitions[3].recorded_padding, 3);
    QCOMPARE(zero12_rules_for_version("").alignment_factor, 1);
    QVERIFY(zero12_rules_for_version("0.4.2").round_robin);
    QVERIFY(!zero12_rules_for_version("0.4.4").round_robin);
  }

  void layoutBf16OptimizerKeepsFullPartition() {
    const auto g = layout_bf16_optimizer(0, params_of({{"w", 9}}), 4);
    for (const auto& rp : g.partitions) QCOMPARE(rp.saved_numel, 4);
    QCOMPARE(g.partitions[3].recorded_padding, 7);  // may exceed P (§5.2)
    QCOMPARE(g.partitions[2].padding, 3);
  }

  void layoutZero3WorkedExample() {
    // §5.3: n = 10, dp = 4 -> part 3; rank 3 holds element 9 and 2 padding.
    const auto g = layout_zero3(0, params_of({{"w", 10}, {"b", 2}}), 4);
    QCOMPARE(g.partition_numel, 4);  // 3 + 1
    QCOMPARE(g.params[1].offset, 3);
    QCOMPARE(g.partitions[3].fragments.size(), size_t(1));
    QCOMPARE(g.partitions[3].fragments[0].param_offset, 9);
    QCOMPARE(g.partitions[3].fragments[0].numel, 1);
    QCOMPARE(g.partitions[3].padding, 3);
    QCOMPARE(g.partitions[1].fragments.back().param_offset, 1);  // b[1] on rank 1
  }

  void roundRobinAndVersions() {
    QCOMPARE(round_robin_order(5, 2), (std::vector<size_t>{0, 2, 4, 1, 3}));
    QCOMPARE(round_robin_order(2, 4), (std::vector<size_t>{0, 1}));
    const auto v = parse_ds_version("0.12.6+c00388a2e");
    QVERIFY(v.has_value());
    QCOMPARE(v->minor, 12);
    QCOMPARE(v->patch, 6);
    QVERIFY(!parse_ds_version("dev").has_value());
  }

  void fixtureMetadata_data() {
    QTest::addColumn<QString>("name");
    for (const auto& n : test::deepspeed_fixture_names())
      QTest::newRow(n.c_str()) << QString::fromStdString(n);
  }
  void fixtureMetadata() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto ref = test::fixture_reference(n);
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    const Catalog& c = ck->catalog();
    QVERIFY2(c.problems.empty(), problems_text(c).c_str());
    QCOMPARE(c.tag, std::string("global_step5"));
    QCOMPARE(c.dp_world_size, 2);
    QCOMPARE(c.mp_world_size, 1);
    QCOMPARE(c.optim_file_count, 2);
    QCOMPARE(c.ds_version, std::string("0.12.6+c00388a2e"));
    QCOMPARE(c.global_steps, 5);
    QCOMPARE(c.global_samples, 40);
    QCOMPARE(c.buffer_names, std::vector<std::string>{"out_scale"});
    QCOMPARE(c.optimizer_name_hint, std::string("AdamW"));
    QVERIFY(c.frozen_params.empty());
    QVERIFY(c.shared_params.empty());
    QCOMPARE(c.trainable_numel(), 84307);
    const bool bf16 = n.find("bf16") != std::string::npos;
    QCOMPARE(c.lp_dtype, bf16 ? DType::BF16 : DType::F16);
    if (n.rfind("bf16opt", 0) == 0) {
      QCOMPARE(c.wrapper, OptimizerWrapper::BF16Optimizer);
      QCOMPARE(c.zero_stage, 1);
    } else if (n.rfind("zero3", 0) == 0) {
      QCOMPARE(c.wrapper, OptimizerWrapper::Zero3);
      QCOMPARE(c.zero_stage, 3);
    } else {
      QCOMPARE(c.wrapper, OptimizerWrapper::Zero12);
      QCOMPARE(c.zero_stage, n[4] - '0');
    }
    const auto osd = ref["optim_states"].toObject()["0"].toObject();
    const auto inner = osd.contains("base_optimizer_state") ? osd["base_optimizer_state"].toObject()
                                                            : osd["optimizer_state_dict"].toObject();
    const QJsonArray step_values =
        inner["state"].toObject()["0"].toObject()["step"].toObject()["tensor"].toArray();
    QVERIFY(!step_values.isEmpty());
    const double ref_step = step_values.at(0).toDouble();
    if (!bf16) {
      QVERIFY(c.loss_scaler.present);
      QVERIFY(c.loss_scaler.dynamic);
      QCOMPARE(c.loss_scaler.cur_scale, 256.0);
      QCOMPARE(c.loss_scaler.cur_iter, 5);
    }
    QVERIFY(c.optimizer_step.has_value());
    QCOMPARE(static_cast<double>(*c.optimizer_step), ref_step);
    QVERIFY(std::find(c.optimizer_state_keys.begin(), c.optimizer_state_keys.end(), "exp_avg_sq") !=
            c.optimizer_state_keys.end());
    // Files: roles and ranks parsed from names; sizes from the reference.
    const auto files = ref["files"].toObject();
    int model = 0, optim = 0;
    for (const auto& f : c.files) {
      const auto entry = files[QString::fromStdString("global_step5/" + f.path)].toObject();
      QCOMPARE(static_cast<int64_t>(f.bytes), entry["size"].toInteger());
      if (f.role == FileRole::Model) ++model;
      if (f.role == FileRole::Optim) {
        ++optim;
        QVERIFY(f.dp_rank == 0 || f.dp_rank == 1);
        QCOMPARE(f.mp_rank, 0);
        QCOMPARE(f.bf16_prefix, bf16);
      }
    }
    QCOMPARE(model, n.rfind("zero3", 0) == 0 ? 2 : 1);
    QCOMPARE(optim, 2);
  }

  void fixtureLayout_data() { fixtureMetadata_data(); }
  void fixtureLayout() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto layout = test::fixture_reference(n)["layout"].toObject();
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    const Catalog& c = ck->catalog();
    const auto groups = layout["groups"].toArray();
    QCOMPARE(c.groups.size(), static_cast<size_t>(groups.size()));
    const bool zero3 = c.wrapper == OptimizerWrapper::Zero3;
    for (qsizetype gi = 0; gi < groups.size(); ++gi) {
      const auto rg = groups[gi].toObject();
      const GroupLayout& g = c.groups[static_cast<size_t>(gi)];
      QCOMPARE(static_cast<int>(g.partitions.size()), layout["world_size"].toInt());
      const auto saved = ints(rg["saved_fp32_numel_per_rank"]);
      for (size_t r = 0; r < g.partitions.size(); ++r) QCOMPARE(g.partitions[r].saved_numel, saved[r]);
      const auto params = rg["params"].toArray();
      QCOMPARE(g.params.size(), static_cast<size_t>(params.size()));
      if (!zero3) {
        QCOMPARE(g.numel, rg["numel"].toInteger());
        QCOMPARE(g.padded_numel, rg["padded_numel"].toInteger());
        QCOMPARE(g.partition_numel, rg["partition_numel"].toInteger());
        const auto real = ints(rg["real_numel_per_rank"]);
        const auto pad = ints(rg["padding_per_rank"]);
        for (size_t r = 0; r < g.partitions.size(); ++r) {
          QCOMPARE(g.partitions[r].real_numel, real[r]);
          QCOMPARE(g.partitions[r].padding, pad[r]);
        }
        for (qsizetype pi = 0; pi < params.size(); ++pi) {
          const auto rp = params[pi].toObject();
          const ParamEntry& p = g.params[static_cast<size_t>(pi)];
          QCOMPARE(p.name, rp["name"].toString().toStdString());
          QCOMPARE(p.shape, ints(rp["shape"]));
          QCOMPARE(p.offset, rp["flat_offset"].toInteger());
          // Every reference piece is one of our fragments.
          for (const auto& pieceV : rp["pieces"].toArray()) {
            const auto piece = pieceV.toObject();
            const auto& frs = g.partitions[static_cast<size_t>(piece["rank"].toInt())].fragments;
            const bool found = std::any_of(frs.begin(), frs.end(), [&](const Fragment& f) {
              return f.param == pi && f.param_offset == piece["param_offset"].toInteger() &&
                     f.partition_offset == piece["partition_offset"].toInteger() &&
                     f.numel == piece["numel"].toInteger();
            });
            QVERIFY2(found, (p.name + " piece on rank " + std::to_string(piece["rank"].toInt())).c_str());
          }
          size_t count = 0;
          for (const auto& rp2 : g.partitions)
            for (const auto& f : rp2.fragments) count += f.param == pi ? 1 : 0;
          QCOMPARE(count, static_cast<size_t>(rp["pieces"].toArray().size()));
        }
      } else {
        QCOMPARE(g.partition_numel, rg["rank_flat_numel"].toInteger());
        for (qsizetype pi = 0; pi < params.size(); ++pi) {
          const auto rp = params[pi].toObject();
          const ParamEntry& p = g.params[static_cast<size_t>(pi)];
          QCOMPARE(p.name, rp["name"].toString().toStdString());
          QCOMPARE(p.offset, rp["offset_in_rank_flat"].toInteger());
          const auto real = ints(rp["real_numel_per_rank"]);
          for (size_t r = 0; r < g.partitions.size(); ++r) {
            int64_t got = 0;
            for (const auto& f : g.partitions[r].fragments) {
              if (f.param == pi) {
                got += f.numel;
                QCOMPARE(f.partition_offset, p.offset);
                QCOMPARE(f.param_offset, static_cast<int64_t>(r) * rp["partition_numel"].toInteger());
              }
            }
            QCOMPARE(got, real[r]);
          }
        }
      }
    }
  }

  void fixtureSliceMappings_data() { fixtureMetadata_data(); }
  void fixtureSliceMappings() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    if (n.rfind("zero3", 0) == 0) QSKIP("ZeRO-3 files carry no param_slice_mappings");
    const auto optim = test::fixture_reference(n)["optim_states"].toObject();
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    for (int r = 0; r < 2; ++r) {
      const auto maps = optim[QString::number(r)].toObject()["param_slice_mappings"].toArray();
      QCOMPARE(static_cast<size_t>(maps.size()), ck->catalog().groups.size());
      for (qsizetype g = 0; g < maps.size(); ++g) {
        const auto want = maps[g].toObject();
        const auto got = expected_slice_mappings(ck->catalog().groups[static_cast<size_t>(g)], r);
        QCOMPARE(static_cast<size_t>(want.size()), got.size());
        for (const auto& m : got) {
          const auto fa = want[QString::fromStdString(m.name)].toObject();
          QCOMPARE(m.numel, fa["numel"].toInteger());
          QCOMPARE(m.start, fa["start"].toInteger());
        }
      }
    }
  }

  void openFromEveryKindOfPath() {
    const std::string root = test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint";
    for (const std::string& p :
         {root, root + "/global_step5", root + "/global_step5/mp_rank_00_model_states.pt",
          root + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt"}) {
      const auto ck = Checkpoint::open(p);
      QCOMPARE(ck->catalog().tag, std::string("global_step5"));
      QCOMPARE(ck->catalog().groups.size(), size_t(2));
    }
    OpenOptions o;
    o.tag = "global_step5";
    QCOMPARE(Checkpoint::open(root, o)->catalog().zero_stage, 2);
    o.tag = "global_step99";
    try {
      Checkpoint::open(root, o);
      QFAIL("a tag that is not there was opened");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::NotFound);
    }
  }

  void oldOptimFileSpellingIsRecognised() {
    test::TempDir tmp;
    test::copy_tree(test::deepspeed_fixture("zero1_fp16_ws2") + "/checkpoint", tmp.file("ck"));
    const std::string d = tmp.file("ck/global_step5/");
    std::filesystem::rename(d + "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                            d + "zero_pp_rank_1_mp_rank_00optim_states.pt");
    const auto ck = Checkpoint::open(tmp.file("ck"));
    QVERIFY2(ck->catalog().problems.empty(), problems_text(ck->catalog()).c_str());
    QVERIFY(ck->catalog().optim_file(1) != nullptr);
  }

  void openingReadsNoTensorBytes() {
    // Catalog building must stay cheap: opening twice the biggest fixture takes far less than reading it.
    const auto ck = Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    const auto t = ck->fp32_partition(0, 0);
    QVERIFY(t.has_value());
    QVERIFY(t->storage && t->storage->file);  // a view on the mapped file, not a copy
  }
};

CKPTDOC_TEST_MAIN(TestDeepspeedCatalog)
#include "test_deepspeed_catalog.moc"
