// Hugging Face-style sharding: sizes parsed as Hugging Face counts them, shard assignment as
// huggingface_hub's split_torch_state_dict_into_shards makes it (cases worked out by hand from its documented
// behaviour: the docstring's [6, 6, 2, 6, 2, 2] example, an oversized tensor placed before the shard being
// filled, shared storages following their first tensor, zero-byte tensors sharing "data pointer 0"), the
// index text zero_to_fp32.py writes, and the folder writer (atomic new folder, refusal and --force
// replacement).
#include <unistd.h>

#include <QTest>
#include <filesystem>
#include <map>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/weights/shards.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::weights;
namespace fs = std::filesystem;

namespace {

// A tensor of `bytes` uint8 elements whose values are `fill`.
Tensor bytes_tensor(size_t bytes, uint8_t fill = 1) {
  return Tensor::from_bytes(DType::U8, {static_cast<int64_t>(bytes)}, std::vector<uint8_t>(bytes, fill));
}

std::vector<NamedTensor> sized(const std::vector<size_t>& sizes) {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back({"t" + std::to_string(i), bytes_tensor(sizes[i])});
  return out;
}

std::vector<std::vector<size_t>> assignment(const ShardPlan& p) {
  std::vector<std::vector<size_t>> out;
  for (const auto& s : p.shards) out.push_back(s.tensors);
  return out;
}

using Shards = std::vector<std::vector<size_t>>;

}  // namespace

class TestWeightsShards : public QObject {
  Q_OBJECT

 private slots:
  void sizesAsHuggingFaceCountsThem() {
    QCOMPARE(parse_shard_size("5GB"), uint64_t{5000000000});
    QCOMPARE(parse_shard_size("5GiB"), uint64_t{5} << 30);
    QCOMPARE(parse_shard_size("5gb"), uint64_t{5000000000});
    QCOMPARE(parse_shard_size("1.5GB"), uint64_t{1500000000});
    QCOMPARE(parse_shard_size("500MB"), uint64_t{500000000});
    QCOMPARE(parse_shard_size("10KiB"), uint64_t{10240});
    QCOMPARE(parse_shard_size("2TB"), uint64_t{2000000000000});
    QCOMPARE(parse_shard_size(" 3 MiB "), uint64_t{3} << 20);
    QCOMPARE(parse_shard_size("1000"), uint64_t{1000});
    QCOMPARE(parse_shard_size("1e9"), uint64_t{1000000000});
    for (const char* bad : {"", "GB", "5XB", "-1GB", "5 G B", "five GB", "1e30GB"}) {
      try {
        parse_shard_size(bad);
        QFAIL(qPrintable(QString("accepted '%1'").arg(bad)));
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find("--max-shard-size") != std::string::npos, e.what());
      }
    }
  }

  // The example in huggingface_hub's docstring: limit 10, sizes [6, 6, 2, 6, 2, 2] -> [6], [6+2], [6+2+2].
  void docstringExample() {
    const auto t = sized({6, 6, 2, 6, 2, 2});
    const auto p = plan_shards(t, 10, ShardFormat::Safetensors);
    QCOMPARE(assignment(p), (Shards{{0}, {1, 2}, {3, 4, 5}}));
    QCOMPARE(p.total_size, uint64_t{24});
    QCOMPARE(p.shards[0].file, std::string("model-00001-of-00003.safetensors"));
    QCOMPARE(p.shards[2].file, std::string("model-00003-of-00003.safetensors"));
    QCOMPARE(p.shards[1].bytes, uint64_t{8});
  }

  // A tensor over the limit gets its own shard when it is met, so it comes before the shard being filled.
  void oversizedTensorGoesFirst() {
    const auto p = plan_shards(sized({3, 20, 4}), 10, ShardFormat::Torch);
    QCOMPARE(assignment(p), (Shards{{1}, {0, 2}}));
    QCOMPARE(p.shards[0].file, std::string("pytorch_model-00001-of-00002.bin"));
    QCOMPARE(p.total_size, uint64_t{27});
  }

  void limitIsInclusive() {
    QCOMPARE(assignment(plan_shards(sized({5, 5}), 10, ShardFormat::Torch)), (Shards{{0, 1}}));
    QCOMPARE(assignment(plan_shards(sized({5, 6}), 10, ShardFormat::Torch)), (Shards{{0}, {1}}));
  }

  // One shard: the plain name, every tensor in it, no index needed.
  void oneShardKeepsThePlainName() {
    const auto p = plan_shards(sized({1, 2, 3}), 5000000000, ShardFormat::Safetensors);
    QVERIFY(!p.sharded());
    QCOMPARE(p.shards.size(), size_t{1});
    QCOMPARE(p.shards[0].file, std::string("model.safetensors"));
    QCOMPARE(plan_shards(sized({1}), 10, ShardFormat::Torch).shards[0].file,
             std::string("pytorch_model.bin"));
  }

  void manyShardsArePaddedToFiveDigits() {
    const auto p = plan_shards(sized(std::vector<size_t>(12, 7)), 10, ShardFormat::Safetensors);
    QCOMPARE(p.shards.size(), size_t{12});
    QCOMPARE(p.shards[11].file, std::string("model-00012-of-00012.safetensors"));
  }

  // zero_to_fp32 sets state_dict[alias] = state_dict[owner]: one storage, sized once, placed with the owner
  // after that shard's own tensors. torch stores it once; safetensors stores it again.
  void sharedStorageFollowsItsOwner() {
    std::vector<NamedTensor> t = sized({4, 4});
    t.push_back({"alias", t[0].tensor});
    t.push_back({"t3", bytes_tensor(4)});
    const auto pt = plan_shards(t, 8, ShardFormat::Torch);
    QCOMPARE(assignment(pt), (Shards{{0, 1, 2}, {3}}));
    QCOMPARE(pt.shards[0].bytes, uint64_t{8});
    QCOMPARE(pt.total_size, uint64_t{12});
    const auto st = plan_shards(t, 8, ShardFormat::Safetensors);
    QCOMPARE(assignment(st), (Shards{{0, 1, 2}, {3}}));
    QCOMPARE(st.shards[0].bytes, uint64_t{12});
    QCOMPARE(st.total_size, uint64_t{16});
  }

  // torch reports data pointer 0 for every empty tensor, so the splitter takes them for one storage.
  void zeroByteTensorsGroupTogether() {
    std::vector<NamedTensor> t{
        {"z1", bytes_tensor(0)}, {"x", bytes_tensor(6)}, {"z2", bytes_tensor(0)}, {"y", bytes_tensor(6)}};
    QCOMPARE(assignment(plan_shards(t, 8, ShardFormat::Safetensors)), (Shards{{0, 1, 2}, {3}}));
  }

  // As zero_to_fp32.py writes it: json.dumps(index, indent=2, sort_keys=True) + "\n".
  void indexText() {
    std::vector<NamedTensor> t{
        {"b.weight", bytes_tensor(6)}, {"a.bias", bytes_tensor(6)}, {"caf\xc3\xa9", bytes_tensor(1)}};
    const auto p = plan_shards(t, 8, ShardFormat::Safetensors);
    const std::string want =
        "{\n"
        "  \"metadata\": {\n"
        "    \"total_size\": 13\n"
        "  },\n"
        "  \"weight_map\": {\n"
        "    \"a.bias\": \"model-00002-of-00002.safetensors\",\n"
        "    \"b.weight\": \"model-00001-of-00002.safetensors\",\n"
        "    \"caf\\u00e9\": \"model-00002-of-00002.safetensors\"\n"
        "  }\n"
        "}\n";
    QCOMPARE(index_json(t, p), want);
  }

  void writesAFolderAtomically() {
    test::TempDir tmp;
    std::vector<NamedTensor> t{{"w", bytes_tensor(6, 7)}, {"v", bytes_tensor(6, 9)}};
    t.push_back({"tied", t[0].tensor});
    const auto p = plan_shards(t, 8, ShardFormat::Torch);
    const auto out = write_shards(t, p, tmp.file("out"), ShardFormat::Torch, false);
    QCOMPARE(out.files,
             (std::vector<std::string>{"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin",
                                       "pytorch_model.bin.index.json"}));
    QCOMPARE(test::files_in(tmp.path()), std::vector<std::string>{"out"});  // no partial folder left
    const auto shard1 = TorchFile::open(tmp.file("out/pytorch_model-00001-of-00002.bin"));
    QCOMPARE(shard1.archive_name, std::string("pytorch_model-00001-of-00002"));
    QCOMPARE(shard1.storages.size(), size_t{1});  // w and tied: one storage
    QCOMPARE(shard1.root.at("tied").as_tensor().to_bytes(), std::vector<uint8_t>(6, 7));
    QCOMPARE(
        TorchFile::open(tmp.file("out/pytorch_model-00002-of-00002.bin")).root.at("v").as_tensor().to_bytes(),
        std::vector<uint8_t>(6, 9));
    QVERIFY(test::read_text(tmp.file("out/pytorch_model.bin.index.json")).find("\"total_size\": 12") !=
            std::string::npos);
  }

  // An existing folder keeps its other files; weights already there are refused, or replaced with force
  // (stale shards and an index that would still point at them removed).
  void existingFolder() {
    test::TempDir tmp;
    const std::string dir = tmp.file("model");
    const auto t = sized({6, 6, 6});
    write_shards(t, plan_shards(t, 8, ShardFormat::Safetensors), dir, ShardFormat::Safetensors, false);
    test::write_text(dir + "/config.json", "{\"hidden_size\": 6}");
    const auto fewer = sized({6, 6});
    try {
      write_shards(fewer, plan_shards(fewer, 100, ShardFormat::Safetensors), dir, ShardFormat::Safetensors,
                   false);
      QFAIL("overwrote weights without --force");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("--force") != std::string::npos, e.what());
    }
    const auto out = write_shards(fewer, plan_shards(fewer, 100, ShardFormat::Safetensors), dir,
                                  ShardFormat::Safetensors, true);
    QCOMPARE(out.removed.size(), size_t{4});  // three shards and the index
    QCOMPARE(test::files_in(dir), (std::vector<std::string>{"config.json", "model.safetensors"}));
    QCOMPARE(SafetensorsFile::open(dir + "/model.safetensors").entries.size(), size_t{2});
    // Torch weights beside safetensors ones are another family: left alone.
    write_shards(fewer, plan_shards(fewer, 100, ShardFormat::Torch), dir, ShardFormat::Torch, false);
    QCOMPARE(test::files_in(dir).size(), size_t{3});
  }

  // --force into a folder where a file already has the name a new shard is staged under
  // (<name>.ckptdoc-staged-<pid>): that file is not the export's, so the export is refused naming it, before
  // anything is written; it and the older weights stay byte for byte.
  void existingStagingNameIsRefused() {
    test::TempDir tmp;
    const std::string dir = tmp.file("model");
    const auto t = sized({6, 6, 6});
    write_shards(t, plan_shards(t, 8, ShardFormat::Safetensors), dir, ShardFormat::Safetensors, false);
    const std::string theirs =
        dir + "/model-00002-of-00003.safetensors.ckptdoc-staged-" + std::to_string(::getpid());
    test::write_text(theirs, "a file this export did not make\n");
    std::map<std::string, std::string> before;
    for (const auto& f : test::files_in(dir)) before[f] = test::read_text(dir + "/" + f);
    const auto again = sized({6, 6, 7});
    try {
      write_shards(again, plan_shards(again, 8, ShardFormat::Safetensors), dir, ShardFormat::Safetensors,
                   true);
      QFAIL("exported over a file under a staging name");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::OutputExists);
      QVERIFY2(std::string(e.what()).find(theirs) != std::string::npos, e.what());
    }
    std::map<std::string, std::string> after;
    for (const auto& f : test::files_in(dir)) after[f] = test::read_text(dir + "/" + f);
    QVERIFY(after == before);  // nothing written, nothing replaced or removed
  }

  void outputThatIsAFileIsRefused() {
    test::TempDir tmp;
    test::write_text(tmp.file("f"), "x");
    const auto t = sized({1});
    try {
      write_shards(t, plan_shards(t, 8, ShardFormat::Torch), tmp.file("f"), ShardFormat::Torch, true);
      QFAIL("wrote into a file");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("names a folder") != std::string::npos, e.what());
    }
  }
};

CKPTDOC_TEST_MAIN(TestWeightsShards)
#include "test_weights_shards.moc"
