// PyTorch Distributed Checkpoints: ckptdoc's reading of a real FSDP2 checkpoint (torch 2.10, world 2, written
// by tests/fixtures/dcp/make_fsdp2_dcp.sh) against torch's own reading of it (fsdp2_ws2.reference.json:
// metadata as torch parses it, values as dcp_to_torch_save loads them), then damaged copies, each named by
// its problem and file, and a hostile .metadata refused without being run. The CLI is run as a user runs it.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/metadata.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string fixture() {
  return test::fixtures_dir() + "/dcp/fsdp2_ws2";
}
std::string damaged(const std::string& name) {
  return test::fixtures_dir() + "/dcp/damaged/" + name;
}

QJsonObject reference_keys(const std::string& checkpoint = fixture()) {
  const auto doc =
      QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(checkpoint + ".reference.json")));
  return doc.object()["keys"].toObject();
}

std::vector<int64_t> ints(const QJsonValue& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.toArray()) out.push_back(static_cast<int64_t>(x.toDouble()));
  return out;
}

// A copy of the fixture to damage (the committed one is never written).
std::string copy_of(const test::TempDir& dir) {
  const std::string ck = dir.file("ck");
  test::copy_tree(fixture(), ck);
  return ck;
}

const dcp::Problem* find_problem(const dcp::Report& r, const std::string& code) {
  for (const auto& p : r.problems)
    if (p.code == code) return &p;
  return nullptr;
}

std::string problems_text(const dcp::Report& r) {
  std::string s = r.verdict + "\n";
  for (const auto& p : r.problems)
    s += std::string(model::severity_name(p.severity)) + " " + p.code + " " + p.message + "\n";
  return s;
}

}  // namespace

class TestDcp : public QObject {
  Q_OBJECT
 private slots:
  // Every key's kind, dtype, global shape, chunks and storage items are torch's.
  void metadataEqualsTorchs() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    const auto& md = ckpt->metadata();
    const QJsonObject ref = reference_keys();
    QCOMPARE(md.entries.size(), static_cast<size_t>(ref.size()));
    QCOMPARE(md.version, std::string("1.0.0"));
    QVERIFY(md.hazards.empty());
    QVERIFY(md.unreferenced_items.empty());
    for (const auto& e : md.entries) {
      const QJsonObject r = ref[QString::fromStdString(e.key)].toObject();
      QVERIFY2(!r.isEmpty(), e.key.c_str());
      const bool tensor = r["kind"].toString() == "tensor";
      QCOMPARE(e.kind == dcp::EntryKind::Tensor, tensor);
      QJsonArray storage = r["storage"].toArray();
      if (!tensor) {
        QVERIFY2(e.bytes_item.has_value() && storage.size() == 1, e.key.c_str());
        QCOMPARE(e.bytes_item->file, storage[0].toObject()["file"].toString().toStdString());
        QCOMPARE(static_cast<double>(e.bytes_item->offset), storage[0].toObject()["offset"].toDouble());
        QCOMPARE(static_cast<double>(e.bytes_item->length), storage[0].toObject()["length"].toDouble());
        continue;
      }
      QCOMPARE(e.dtype, r["dtype"].toString().toStdString());
      QCOMPARE(e.size, ints(r["size"]));
      const QJsonArray chunks = r["chunks"].toArray();
      QCOMPARE(e.chunks.size(), static_cast<size_t>(chunks.size()));
      for (qsizetype i = 0; i < chunks.size(); ++i) {
        const auto& c = e.chunks[static_cast<size_t>(i)];
        QCOMPARE(c.offsets, ints(chunks[i].toObject()["offsets"]));
        QCOMPARE(c.sizes, ints(chunks[i].toObject()["sizes"]));
        // storage_data, as torch reads it, for the item at these offsets
        bool found = false;
        for (const auto& s : storage) {
          const QJsonObject so = s.toObject();
          if (ints(so["offsets"]) != c.offsets) continue;
          found = true;
          QVERIFY2(c.item.has_value(), e.key.c_str());
          QCOMPARE(c.item->file, so["file"].toString().toStdString());
          QCOMPARE(static_cast<double>(c.item->offset), so["offset"].toDouble());
          QCOMPARE(static_cast<double>(c.item->length), so["length"].toDouble());
        }
        QVERIFY2(found, e.key.c_str());
      }
    }
    // what the fixture is meant to hold: an uneven dim 0, bf16 and fp32, a 0-d step
    const auto* embed = md.find("embed.weight");
    QVERIFY(embed && embed->chunks.size() == 2 && embed->chunks[1].sizes[0] == 18 &&
            embed->dtype == "float32");
    QCOMPARE(md.find("head.weight")->dtype, std::string("bfloat16"));
    QVERIFY(md.find("optimizer.state.head.weight.step")->size.empty());
  }

  // Values assembled from the chunks equal dcp's load: sum in float64, the first values, NaN/Inf counts.
  void valuesEqualTorchs() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    const QJsonObject ref = reference_keys();
    int tensors = 0;
    for (const auto& e : ckpt->metadata().entries) {
      if (e.kind != dcp::EntryKind::Tensor) continue;
      const QJsonObject r = ref[QString::fromStdString(e.key)].toObject();
      const std::vector<double> v = ckpt->read_global(e);
      QCOMPARE(static_cast<double>(v.size()), r["numel"].toDouble());
      double sum = 0, magnitude = 0;
      for (double x : v) {
        sum += x;
        magnitude += std::fabs(x);
      }
      QVERIFY2(
          std::fabs(sum - r["sum"].toDouble()) <= 1e-12 * (1 + magnitude),
          (e.key + ": " + std::to_string(sum) + " vs torch " + std::to_string(r["sum"].toDouble())).c_str());
      const QJsonArray first = r["first"].toArray();
      for (qsizetype i = 0; i < first.size(); ++i) QCOMPARE(v[static_cast<size_t>(i)], first[i].toDouble());
      QCOMPARE(r["nan"].toInt(), 0);
      ++tensors;
    }
    QCOMPARE(tensors, 20);
  }

  // Bytes items are torch.save zips too: the train state reads back as torch wrote it.
  void bytesItemsEqualTorchs() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    const QJsonObject ref = reference_keys();
    const auto* step = ckpt->metadata().find("train_state.step");
    const auto* tag = ckpt->metadata().find("train_state.tag");
    QVERIFY(step && step->bytes_item && tag && tag->bytes_item);
    QCOMPARE(ref["train_state.step"].toObject()["repr"].toString(), QString("3"));
    QCOMPARE(ckpt->open_item(*step->bytes_item).root.as_int(), int64_t{3});
    QCOMPARE(ref["train_state.tag"].toObject()["repr"].toString(), QString("b'fsdp2-ws2'"));
    const Value t = ckpt->open_item(*tag->bytes_item).root;
    QVERIFY(t.is(Value::Kind::Bytes));
    QCOMPARE(t.as_str(), std::string("fsdp2-ws2"));
  }

  // The healthy checkpoint: no problem, every element read, and a verdict that says so and what it rests on.
  void healthyCheckpointIsClean() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    const dcp::Report r = dcp::diagnose(*ckpt);
    QVERIFY2(r.problems.empty() && r.clean, problems_text(r).c_str());
    QCOMPARE(r.files_read, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
    QCOMPARE(r.bytes_items_read, r.bytes_items);
    QCOMPARE(r.adam_steps.size(), static_cast<size_t>(5));
    for (const auto& [param, step] : r.adam_steps) QCOMPARE(step, 3.0);
    QVERIFY2(r.verdict.find("Adam step 3 for all 5 params") != std::string::npos, r.verdict.c_str());
    QVERIFY2(r.verdict.find("chunks tile every tensor") != std::string::npos, r.verdict.c_str());
    QCOMPARE(r.adam_moments_judged, static_cast<size_t>(5));
    QVERIFY2(r.verdict.find("Adam moments of 5 params judged against their steps") != std::string::npos,
             r.verdict.c_str());
    const QJsonObject ref = reference_keys();
    for (const auto& t : r.tensors) {
      QCOMPARE(t.elements_read, t.numel);
      const double torch_sum = ref[QString::fromStdString(t.key)].toObject()["sum"].toDouble();
      QVERIFY2(std::fabs(t.sum - torch_sum) <= 1e-6 * (1 + std::fabs(torch_sum)), t.key.c_str());
    }
  }

  // The same run with a NaN and an Inf saved and head left out of the last step (torch wrote it): the counts
  // and the steps are torch's, and both are named.
  void divergedRunIsNamed() {
    const std::string diverged = fixture() + "_diverged";
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(diverged));
    const QJsonObject ref = reference_keys(diverged);
    int non_finite_keys = 0;
    for (const auto& t : r.tensors) {
      const QJsonObject k = ref[QString::fromStdString(t.key)].toObject();
      QCOMPARE(t.nan, static_cast<int64_t>(k["nan"].toInt()));
      QCOMPARE(t.inf, static_cast<int64_t>(k["inf"].toInt()));
      if (t.nan || t.inf) {
        ++non_finite_keys;
        bool named = false;
        for (const auto& p : r.problems) named |= p.code == "dcp-non-finite" && p.key == t.key;
        QVERIFY2(named, problems_text(r).c_str());
      }
    }
    QCOMPARE(non_finite_keys, 2);
    for (const auto& [param, step] : r.adam_steps)
      QCOMPARE(
          step,
          ref[QString::fromStdString("optimizer.state." + param + ".step")].toObject()["sum"].toDouble());
    QCOMPARE(r.adam_steps.at("head.weight"), 2.0);
    const auto* steps = find_problem(r, "dcp-adam-step-mismatch");
    QVERIFY2(steps && steps->severity == model::Severity::Warning, problems_text(r).c_str());
    QVERIFY(!r.clean && r.has_error());
  }

  // fsdp2_ws2 resumed by FSDP2, trained to step 5 and saved with proj.weight's moments zeroed and
  // embed.weight's exp_avg_sq alone (make_moments_lost_dcp.py): every tensor's zero and negative counts are
  // torch's, and exactly the params whose exp_avg_sq torch reads as all zero at step >= 2 are named, with
  // their step and which moments.
  void lostMomentsAreNamed() {
    const std::string ck = fixture() + "_moments_lost";
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const QJsonObject ref = reference_keys(ck);
    auto all_zero = [&](const std::string& key) {
      const QJsonObject k = ref[QString::fromStdString(key)].toObject();
      return k["zeros"].toInt() == k["numel"].toInt();
    };
    std::map<std::string, bool> torch_lost;  // param -> exp_avg lost too
    for (const auto& t : r.tensors) {
      const QJsonObject k = ref[QString::fromStdString(t.key)].toObject();
      QCOMPARE(t.elements_read, t.numel);
      QCOMPARE(t.zeros, static_cast<int64_t>(k["zeros"].toInt()));
      QCOMPARE(t.negative, static_cast<int64_t>(k["negative"].toInt()));
      const std::string param = dcp::optimizer_state_param(t.key, "exp_avg_sq");
      if (param.empty() || !all_zero(t.key)) continue;
      const double step =
          ref[QString::fromStdString("optimizer.state." + param + ".step")].toObject()["sum"].toDouble();
      if (step >= 2) torch_lost[param] = all_zero("optimizer.state." + param + ".exp_avg");
    }
    // what the fixture is meant to hold
    QCOMPARE(torch_lost, (std::map<std::string, bool>{{"embed.weight", false}, {"proj.weight", true}}));
    std::set<std::string> named;
    for (const auto& p : r.problems) {
      if (p.code != "dcp-moments-lost") continue;
      const std::string param = dcp::optimizer_state_param(p.key, "exp_avg_sq");
      named.insert(param);
      QCOMPARE(p.severity, model::Severity::Error);
      const char* which =
          torch_lost[param] ? "exp_avg and exp_avg_sq) are all zero" : "exp_avg_sq is all zero";
      QVERIFY2(p.message.find(which) != std::string::npos && p.message.find("step is 5") != std::string::npos,
               p.message.c_str());
    }
    QCOMPARE(named, (std::set<std::string>{"embed.weight", "proj.weight"}));
    QCOMPARE(r.adam_moments_judged, static_cast<size_t>(5));
    QVERIFY2(r.verdict.find("Adam moments of 5 params judged against their steps") != std::string::npos,
             r.verdict.c_str());
    QVERIFY(!r.clean);
  }

  // An Adam that never stepped, saved by FSDP2 (make_fresh_optimizer_dcp.py): torch's get_state_dict gives it
  // step 1 with all-zero moments, the healthy state of a job saved before its first step. Judged, not named.
  void freshOptimizerIsNotLost() {
    const std::string ck = fixture() + "_fresh_optimizer";
    const QJsonObject ref = reference_keys(ck);
    for (const auto& key : ref.keys()) {
      const QJsonObject k = ref[key].toObject();
      if (key.endsWith(".step") && key.startsWith("optimizer.state.")) QCOMPARE(k["sum"].toDouble(), 1.0);
      if (key.endsWith(".exp_avg") || key.endsWith(".exp_avg_sq"))
        QCOMPARE(k["zeros"].toInt(), k["numel"].toInt());
    }
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    QVERIFY2(r.problems.empty() && r.clean, problems_text(r).c_str());
    QCOMPARE(r.adam_moments_judged, static_cast<size_t>(5));
    QVERIFY2(r.verdict.find("Adam step 1 for all 5 params") != std::string::npos, r.verdict.c_str());
  }

  // The same checkpoint: head.bias's exp_avg_sq holds the negative value its script wrote (torch counts it).
  void negativeExpAvgSqIsNamed() {
    const std::string ck = fixture() + "_moments_lost";
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const QJsonObject ref = reference_keys(ck);
    const int torch_negative = ref["optimizer.state.head.bias.exp_avg_sq"].toObject()["negative"].toInt();
    QCOMPARE(torch_negative, 1);
    std::vector<const dcp::Problem*> negative;
    for (const auto& p : r.problems)
      if (p.code == "dcp-moments-negative") negative.push_back(&p);
    QVERIFY2(negative.size() == 1 && negative[0]->key == "optimizer.state.head.bias.exp_avg_sq" &&
                 negative[0]->severity == model::Severity::Error,
             problems_text(r).c_str());
    QVERIFY2(negative[0]->message.find("1 negative of 5") != std::string::npos, negative[0]->message.c_str());
  }

  // torch's own Metadata with the storage_data entry of proj.weight's second chunk dropped
  // (make_item_missing_metadata.py; torch's load fails on it with a KeyError): the key is named, and its
  // other chunk is still read.
  void itemMissingFromMetadataIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::copy_file(damaged("item_missing.metadata"), ck + "/.metadata", fs::copy_options::overwrite_existing);
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const auto* p = find_problem(r, "dcp-item-missing");
    QVERIFY2(p && p->key == "proj.weight" && p->severity == model::Severity::Error && p->file == ".metadata",
             problems_text(r).c_str());
    QVERIFY2(p->message.find("1 chunk with no storage item") != std::string::npos, p->message.c_str());
    size_t errors = 0;
    for (const auto& q : r.problems) errors += q.severity == model::Severity::Error;
    QCOMPARE(errors, static_cast<size_t>(1));
    for (const auto& t : r.tensors)
      if (t.key == "proj.weight") QCOMPARE(t.elements_read, int64_t{12 * 16});  // rank 0's rows 0-11
    QVERIFY(!r.clean);
    const auto cli = test::run_cli({"diagnose", ck});
    CKPTDOC_EXPECT_EXIT(cli, 1);
    QVERIFY2(cli.out.find("dcp-item-missing") != std::string::npos, cli.out.c_str());
  }

  // dcp.save(..., use_collectives=False) (make_per_rank_dcp.py): no .metadata, one __<rank>.metadata per rank
  // holding what that rank wrote. ckptdoc's metadata is the union of torch's per-rank readings: per key the
  // chunk boxes of all ranks, each once, with the storage item of the lowest rank that wrote it.
  void perRankMetadataIsTheUnionOfTorchs() {
    const std::string ck = fixture() + "_per_rank";
    const auto ckpt = dcp::Checkpoint::open(ck);
    const auto& md = ckpt->metadata();
    QVERIFY(!fs::exists(ck + "/.metadata"));
    QCOMPARE(md.merged_from, (std::vector<std::string>{ck + "/__0.metadata", ck + "/__1.metadata"}));
    const auto doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(ck + ".reference.json"))).object();
    const QJsonArray ranks = doc["ranks"].toArray();
    QCOMPARE(ranks.size(), 2);
    std::set<std::string> torch_keys;
    for (const auto& rank : ranks)
      for (const auto& key : rank.toObject().keys()) torch_keys.insert(key.toStdString());
    QCOMPARE(md.entries.size(), torch_keys.size());
    size_t replicated = 0;
    for (const auto& e : md.entries) {
      struct Want {
        std::vector<int64_t> sizes;
        QJsonObject storage;
      };
      std::map<std::vector<int64_t>, Want> boxes;  // offsets -> the lowest rank's chunk
      bool in_both = true;
      for (const auto& rank : ranks) {
        const QJsonObject r = rank.toObject()[QString::fromStdString(e.key)].toObject();
        if (r.isEmpty()) {
          in_both = false;
          continue;
        }
        QCOMPARE(e.kind == dcp::EntryKind::Tensor, r["kind"].toString() == "tensor");
        const QJsonArray storage = r["storage"].toArray();
        if (e.kind == dcp::EntryKind::Bytes) {
          if (boxes.empty()) boxes[{}] = {{}, storage[0].toObject()};
          continue;
        }
        QCOMPARE(e.dtype, r["dtype"].toString().toStdString());
        QCOMPARE(e.size, ints(r["size"]));
        for (const auto& c : r["chunks"].toArray()) {
          const auto offsets = ints(c.toObject()["offsets"]);
          QJsonObject item;
          for (const auto& st : storage)
            if (ints(st.toObject()["offsets"]) == offsets) item = st.toObject();
          boxes.try_emplace(offsets, Want{ints(c.toObject()["sizes"]), item});
        }
      }
      replicated += in_both && boxes.size() == 1;
      auto same_item = [](const dcp::StorageItem& i, const QJsonObject& want) {
        return i.file == want["file"].toString().toStdString() &&
               static_cast<double>(i.offset) == want["offset"].toDouble() &&
               static_cast<double>(i.length) == want["length"].toDouble();
      };
      if (e.kind == dcp::EntryKind::Bytes) {
        QVERIFY2(e.bytes_item && same_item(*e.bytes_item, boxes.begin()->second.storage), e.key.c_str());
        continue;
      }
      QCOMPARE(e.chunks.size(), boxes.size());
      for (const auto& c : e.chunks) {
        const auto want = boxes.find(c.offsets);
        QVERIFY2(want != boxes.end() && want->second.sizes == c.sizes, e.key.c_str());
        QVERIFY2(c.item && same_item(*c.item, want->second.storage), e.key.c_str());
      }
    }
    QVERIFY(replicated > 0);  // the steps and bytes items: written by both ranks, kept once
    QCOMPARE(md.find("optimizer.state.proj.weight.step")->chunks.front().item->file,
             std::string("__0_0.distcp"));
  }

  // The merged checkpoint reads back as the run saved it (the DTensors gathered by torch), and diagnoses
  // clean.
  void perRankValuesEqualTheRuns() {
    const std::string ck = fixture() + "_per_rank";
    const auto ckpt = dcp::Checkpoint::open(ck);
    const auto doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(ck + ".reference.json"))).object();
    const QJsonObject values = doc["values"].toObject();
    int tensors = 0;
    for (const auto& e : ckpt->metadata().entries) {
      if (e.kind != dcp::EntryKind::Tensor) continue;
      const QJsonObject r = values[QString::fromStdString(e.key)].toObject();
      QVERIFY2(!r.isEmpty(), e.key.c_str());
      const std::vector<double> v = ckpt->read_global(e);
      QCOMPARE(static_cast<double>(v.size()), r["numel"].toDouble());
      double sum = 0, magnitude = 0;
      for (double x : v) {
        sum += x;
        magnitude += std::fabs(x);
      }
      QVERIFY2(std::fabs(sum - r["sum"].toDouble()) <= 1e-12 * (1 + magnitude), e.key.c_str());
      const QJsonArray first = r["first"].toArray();
      for (qsizetype i = 0; i < first.size(); ++i) QCOMPARE(v[static_cast<size_t>(i)], first[i].toDouble());
      ++tensors;
    }
    QCOMPARE(tensors, 20);
    const dcp::Report r = dcp::diagnose(*ckpt);
    QVERIFY2(r.problems.empty() && r.clean, problems_text(r).c_str());
    QCOMPARE(r.files_read, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
    const auto cli = test::run_cli({"diagnose", ck});
    CKPTDOC_EXPECT_EXIT(cli, 0);
    QVERIFY2(cli.out.find("No problems found") != std::string::npos, cli.out.c_str());
    const auto inspect = test::run_cli({"inspect", ck});
    CKPTDOC_EXPECT_EXIT(inspect, 0);
    QVERIFY2(inspect.out.find("per rank, read as their union (saved without collectives): __0.metadata "
                              "__1.metadata") != std::string::npos,
             inspect.out.c_str());
    const auto j = test::run_cli({"inspect", ck, "--json"});
    CKPTDOC_EXPECT_EXIT(j, 0);
    QCOMPARE(
        QJsonDocument::fromJson(QByteArray::fromStdString(j.out)).object()["merged_from"].toArray().size(),
        2);
  }

  // Per-rank files of two saves in one folder (make_per_rank_mixed_dcp.py: rank 0's after step 3, rank 1's
  // after step 4, all bytes torch's): exactly the replicated items torch's values say changed between the
  // steps are named, and every other rank's copy was compared.
  void perRankCopiesOfDifferentStepsAreNamed() {
    const std::string ck = fixture() + "_per_rank_mixed";
    const auto ref =
        QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(ck + ".reference.json"))).object();
    std::set<std::string> differing, named;
    for (const auto& k : ref["differing"].toArray()) differing.insert(k.toString().toStdString());
    QVERIFY(differing.count("optimizer.state.proj.weight.step") && differing.count("train_state.step"));
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    for (const auto& p : r.problems) {
      QVERIFY2(p.code == "dcp-replica-mismatch" && p.severity == model::Severity::Error &&
                   p.file == "__1_0.distcp",
               problems_text(r).c_str());
      named.insert(p.key);
    }
    QCOMPARE(named, differing);
    const std::string compared = std::to_string(ref["replicated"].toArray().size()) +
                                 " other ranks' copies of replicated items compared";
    QVERIFY2(r.verdict.find(compared) != std::string::npos, r.verdict.c_str());
  }

  // A folder holding only a per-rank save's metadata (its .distcp files lost) is still DCP, and each lost
  // file is named; a name that only looks like one (`__x.metadata`) does not make a folder DCP.
  void perRankMetadataAloneIsDcp() {
    test::TempDir dir;
    const std::string ck = dir.file("ck");
    fs::create_directory(ck);
    for (const char* name : {"__0.metadata", "__1.metadata"})
      fs::copy_file(fixture() + "_per_rank/" + name, ck + "/" + name);
    QVERIFY(dcp::is_dcp_folder(ck));
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    std::set<std::string> missing;
    for (const auto& p : r.problems)
      if (p.code == "dcp-file-missing") missing.insert(p.file);
    QCOMPARE(missing, (std::set<std::string>{"__0_0.distcp", "__1_0.distcp"}));
    const std::string other = dir.file("other");
    fs::create_directory(other);
    fs::copy_file(fixture() + "_per_rank/__0.metadata", other + "/__x.metadata");
    QVERIFY(!dcp::is_dcp_folder(other));
  }

  // A per-rank save whose rank 1 metadata is lost: what rank 1 alone wrote is named as unsaved.
  void perRankFileMissingLeavesGaps() {
    test::TempDir dir;
    const std::string ck = dir.file("ck");
    test::copy_tree(fixture() + "_per_rank", ck);
    fs::remove(ck + "/__1.metadata");
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const dcp::Problem* gap = nullptr;
    for (const auto& p : r.problems)
      if (p.code == "dcp-chunk-gap" && p.key == "embed.weight") gap = &p;
    QVERIFY2(gap && gap->message.find("288 elements") != std::string::npos,  // rows 19-36 x 16
             problems_text(r).c_str());
    QVERIFY(!r.clean);
  }

  void truncatedDistcpIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::resize_file(ck + "/__1_0.distcp", 50000);  // rank 1's file cut mid-way, as a killed save leaves it
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const auto* p = find_problem(r, "dcp-file-truncated");
    QVERIFY2(p && p->file == "__1_0.distcp" && p->severity == model::Severity::Error,
             problems_text(r).c_str());
    QVERIFY(!r.clean && r.has_error());
    QVERIFY2(r.verdict.rfind("1 error. Checked:", 0) == 0, r.verdict.c_str());
  }

  // One bit of a tensor's bytes flipped on disk (bit rot, a bad copy): the record's CRC-32 names it.
  void flippedBitIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    const auto ckpt = dcp::Checkpoint::open(fixture());
    const auto& item = *ckpt->metadata().find("proj.weight")->chunks[0].item;
    uint64_t data_at = 0;  // where the tensor's record starts in the .distcp file
    {
      const ZipReader zip(ckpt->open_item(item).file);
      for (const auto& z : zip.entries())
        if (z.name.find("/data/") != std::string::npos) data_at = item.offset + z.data_offset;
    }
    QVERIFY(data_at > item.offset);
    {
      std::fstream f(ck + "/" + item.file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(data_at + 100));
      const char c = static_cast<char>(f.get() ^ 0x10);
      f.seekp(static_cast<std::streamoff>(data_at + 100));
      f.put(c);
    }
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const auto* p = find_problem(r, "dcp-item-crc-mismatch");
    QVERIFY2(p && p->key == "proj.weight" && p->file == item.file, problems_text(r).c_str());
    QCOMPARE(r.problems.size(), static_cast<size_t>(1));
  }

  void missingDistcpIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::remove(ck + "/__0_0.distcp");
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const auto* p = find_problem(r, "dcp-file-missing");
    QVERIFY2(p && p->file == "__0_0.distcp", problems_text(r).c_str());
    QVERIFY(!r.clean);
    QCOMPARE(r.files_read, std::vector<std::string>{"__1_0.distcp"});
  }

  // torch's own Metadata with one chunk of embed.weight deleted and pickled again (make_fsdp2_dcp.py).
  void chunkRemovedFromMetadataIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::copy_file(damaged("chunk_removed.metadata"), ck + "/.metadata", fs::copy_options::overwrite_existing);
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(ck));
    const auto* gap = find_problem(r, "dcp-chunk-gap");
    QVERIFY2(gap && gap->key == "embed.weight", problems_text(r).c_str());
    QVERIFY2(gap->message.find("288 elements") != std::string::npos, gap->message.c_str());  // 18 rows x 16
    QVERIFY2(find_problem(r, "dcp-item-unreferenced"), problems_text(r).c_str());
    QCOMPARE(r.problems.front().code, std::string("dcp-chunk-gap"));  // the only error
  }

  // A stored item whose tensor is not what .metadata says (the metadata of another save with other shapes).
  void chunkOfOtherShapeIsNamed() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    dcp::Entry e = *ckpt->metadata().find("embed.weight");
    e.chunks[1].sizes = {19, 16};  // rank 1 holds 18 rows
    const auto err = [&]() -> std::optional<Error> {
      try {
        (void)ckpt->read_chunk(e, e.chunks[1]);
      } catch (const Error& x) {
        return x;
      }
      return std::nullopt;
    }();
    QVERIFY(err.has_value());
    QCOMPARE(err->kind(), ErrorKind::Inconsistent);
    QVERIFY2(std::string(err->what()).find("__1_0.distcp") != std::string::npos, err->what());
  }

  void overlapAndOutsideAreNamed() {
    const auto ckpt = dcp::Checkpoint::open(fixture());
    dcp::Entry e = *ckpt->metadata().find("embed.weight");
    e.chunks[1].offsets = {
        20, 0};  // rows 20..37 of 37: leaves the tensor, and rows 19..36 are then saved by none
    const auto problems = dcp::tiling_problems(e);
    QCOMPARE(problems.size(), static_cast<size_t>(2));
    QCOMPARE(problems[0].code, std::string("dcp-chunk-outside"));
    QCOMPARE(problems[1].code, std::string("dcp-chunk-gap"));
    e.chunks[1].offsets = {17, 0};
    e.chunks[1].sizes = {18, 16};
    const auto overlap = dcp::tiling_problems(e);
    QVERIFY(overlap.size() == 1 && overlap[0].code == "dcp-chunk-overlap");
    QVERIFY(dcp::tiling_problems(*ckpt->metadata().find("embed.weight")).empty());
  }

  // An item's range that runs past its file (MappedFile::view) is an error naming the range, never a read
  // past the map.
  void viewPastTheEndIsTruncated() {
    const auto whole = MappedFile::open(fixture() + "/__0_0.distcp");
    const auto inside = MappedFile::view(whole, 100, 200, "item");
    QCOMPARE(inside->size(), uint64_t{200});
    QCOMPARE(inside->bytes().data(), whole->bytes().data() + 100);
    try {
      (void)MappedFile::view(whole, whole->size() - 10, 20, "item");
      QFAIL("a view past the end was made");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::Truncated);
      QVERIFY2(std::string(e.what()).find("__0_0.distcp") != std::string::npos, e.what());
    }
  }

  // A .metadata whose pickle calls os.system: refused as unsafe, and nothing ran.
  void hostileMetadataIsRefusedUnrun() {
    const std::string marker = "/tmp/ckptdoc-dcp-hostile-metadata-ran";
    fs::remove(marker);
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::copy_file(damaged("hostile.metadata"), ck + "/.metadata", fs::copy_options::overwrite_existing);
    try {
      (void)dcp::Checkpoint::open(ck);
      QFAIL("a hostile .metadata was read");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::UnsafePickle);
      QVERIFY2(std::string(e.what()).find(".metadata") != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find("system") != std::string::npos, e.what());
    }
    const auto r = test::run_cli({"diagnose", ck});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("unsafe-pickle") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(marker));
  }

  // torch's own Metadata with embed.weight's storage item pointing out of the folder ("../__0_0.distcp",
  // make_path_escape_metadata.py): inspect, diagnose and export refuse it naming the path; export writes
  // nothing.
  void storagePathOutOfTheFolderIsRefused() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::copy_file(damaged("path_escape.metadata"), ck + "/.metadata", fs::copy_options::overwrite_existing);
    const std::string out = dir.file("weights.safetensors");
    for (std::vector<std::string> args :
         {std::vector<std::string>{"inspect", ck}, {"diagnose", ck}, {"export", ck, "-o", out}}) {
      const auto r = test::run_cli(args);
      CKPTDOC_EXPECT_EXIT(r, 2);
      QVERIFY2(r.err.find("path-escape") != std::string::npos &&
                   r.err.find("'../__0_0.distcp'") != std::string::npos,
               r.err.c_str());
    }
    QVERIFY(!fs::exists(out));
  }

  void cliInspectListsKeysAndFiles() {
    const auto r = test::run_cli({"inspect", fixture()});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (const char* s : {"PyTorch Distributed Checkpoint", "embed.weight", "[37, 16]", "bfloat16",
                          "2 chunks", "__0_0.distcp, __1_0.distcp", "optimizer.param_groups.embed.weight.lr",
                          "and 45 more", "20 tensors"})
      QVERIFY2(r.out.find(s) != std::string::npos, (std::string(s) + " not in:\n" + r.out).c_str());
    const auto j = test::run_cli({"inspect", fixture(), "--json"});
    CKPTDOC_EXPECT_EXIT(j, 0);
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(j.out)).object();
    QCOMPARE(o["format"].toString(), QString("pytorch-dcp"));
    QCOMPARE(o["keys"].toArray().size(), reference_keys().size());
  }

  void cliDiagnoseSaysWhatItRestsOn() {
    auto r = test::run_cli({"diagnose", fixture()});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("No problems found. Checked: 20 tensors") != std::string::npos, r.out.c_str());
    QVERIFY2(r.out.find("no fp32-master comparison") != std::string::npos, r.out.c_str());
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::remove(ck + "/__1_0.distcp");
    r = test::run_cli({"diagnose", ck, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
    QCOMPARE(o["verdict"].toObject()["clean"].toBool(), false);
    bool named = false;
    for (const auto& p : o["problems"].toArray())
      named |= p.toObject()["code"].toString() == "dcp-file-missing" &&
               p.toObject()["file"].toString() == "__1_0.distcp";
    QVERIFY2(named, r.out.c_str());
  }

  // A save killed before its last step: the .distcp files are there, .metadata (written last) is not.
  void missingMetadataIsNamed() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::remove(ck + "/.metadata");
    const auto r = test::run_cli({"diagnose", ck});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("[not-found]") != std::string::npos &&
                 r.err.find(ck + "/.metadata: missing") != std::string::npos,
             r.err.c_str());
  }

  // A .metadata cut short (copied while written): an error naming it, not a crash or a partial reading.
  void truncatedMetadataIsAnError() {
    test::TempDir dir;
    const std::string ck = copy_of(dir);
    fs::resize_file(ck + "/.metadata", 9000);
    try {
      (void)dcp::Checkpoint::open(ck);
      QFAIL("a cut .metadata was read");
    } catch (const Error& e) {
      QVERIFY2(e.kind() == ErrorKind::Truncated || e.kind() == ErrorKind::Corrupt, e.what());
      QVERIFY2(e.file() == ck + "/.metadata", e.what());
    }
  }

  // Commands that do not read DCP yet say what the folder is instead of "not a DeepSpeed checkpoint".
  void convertSaysDcpIsNotReadYet() {
    test::TempDir dir;
    const auto r = test::run_cli({"convert", fixture(), "-o", dir.file("out"), "--to", "universal"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("a PyTorch Distributed Checkpoint") != std::string::npos, r.err.c_str());
    QVERIFY2(r.err.find("`repair` and `diff`") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(dir.file("out")));
  }
};

CKPTDOC_TEST_MAIN(TestDcp)
#include "test_dcp.moc"
