// Counts and sizes a checkpoint claims are bounded before anything is sized by them: a corrupted world size,
// partition count, stage or param shape is a ckptdoc::Error naming the file and the field, raised at once
// (before this, dp_world_size 2^31-1 made inspect loop for minutes and allocate without end).
#include <QtTest>
#include <chrono>
#include <filesystem>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/compute/placement.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct Ckpt {
  std::string save_dir, tag_dir;
};

Ckpt synth(const test::TempDir& dir, int stage) {
  deepspeed::SynthOptions o;
  o.stage = stage;
  o.dp = 2;
  const auto r = deepspeed::write_synthetic_checkpoint(dir.file("ck"), o);
  return {r.save_dir, r.save_dir + "/" + r.tag};
}

// Rewrites a file of the checkpoint with `edit` applied to its pickle tree.
void edit_file(const std::string& path, const std::function<void(Value&)>& edit) {
  Value root;
  {
    const TorchFile tf = TorchFile::open(path);
    root = tf.root.clone();
    edit(root);
    deepspeed::write_checkpoint_file(path + ".new", root);
  }
  fs::rename(path + ".new", path);
}

// Opening must fail fast with an Error naming `file` and `field`.
void expect_refused(const std::string& save_dir, const std::string& file, const std::string& field) {
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)deepspeed::Checkpoint::open(save_dir);
    QFAIL("a corrupted count was accepted");
  } catch (const Error& e) {
    const std::string m = e.what();
    QVERIFY2(m.find(fs::path(file).filename().string()) != std::string::npos, m.c_str());
    QVERIFY2(m.find(field) != std::string::npos, m.c_str());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  QVERIFY2(s < 5.0, std::to_string(s).c_str());  // generous: minutes before the bound
}

constexpr int64_t kHuge = 2147483647;

}  // namespace

class TestCatalogBounds : public QObject {
  Q_OBJECT

 private slots:
  void dpWorldSize() {
    test::TempDir dir;
    const auto ck = synth(dir, 2);
    const std::string model = ck.tag_dir + "/mp_rank_00_model_states.pt";
    edit_file(model, [](Value& r) { r.set("dp_world_size", Value::integer(kHuge)); });
    expect_refused(ck.save_dir, model, "dp_world_size");
  }

  void partitionCount() {
    test::TempDir dir;
    const auto ck = synth(dir, 2);
    const std::string optim = ck.tag_dir + "/zero_pp_rank_1_mp_rank_00_optim_states.pt";
    edit_file(optim, [](Value& r) {
      r.get_mut("optimizer_state_dict")
          ->set("partition_count", Value::list({Value::integer(2), Value::integer(kHuge)}));
    });
    expect_refused(ck.save_dir, optim, "partition_count");
  }

  void partitionCountZero3() {
    test::TempDir dir;
    const auto ck = synth(dir, 3);
    const std::string optim = ck.tag_dir + "/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    edit_file(optim, [](Value& r) {
      r.get_mut("optimizer_state_dict")->set("partition_count", Value::integer(-5));
    });
    expect_refused(ck.save_dir, optim, "partition_count");
  }

  void mpWorldSizeAndStage() {
    test::TempDir dir;
    const auto ck = synth(dir, 2);
    const std::string model = ck.tag_dir + "/mp_rank_00_model_states.pt";
    edit_file(model, [](Value& r) { r.set("mp_world_size", Value::integer(int64_t{1} << 40)); });
    expect_refused(ck.save_dir, model, "mp_world_size");
    test::TempDir dir2;
    const auto ck2 = synth(dir2, 2);
    const std::string optim = ck2.tag_dir + "/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    edit_file(optim,
              [](Value& r) { r.get_mut("optimizer_state_dict")->set("zero_stage", Value::integer(kHuge)); });
    expect_refused(ck2.save_dir, optim, "zero_stage");
  }

  // A param shape whose element count overflows (or is negative) would wrap every offset of its group.
  void paramShapes() {
    test::TempDir dir;
    const auto ck = synth(dir, 2);
    const std::string model = ck.tag_dir + "/mp_rank_00_model_states.pt";
    edit_file(model, [](Value& r) {
      Value& g0 = r.get_mut("param_shapes")->items_mut()[0];
      auto& first = g0.dict_mut().items.front();
      first.second = Value::size({int64_t{1} << 40, int64_t{1} << 40});
    });
    expect_refused(ck.save_dir, model, "param_shapes");
    test::TempDir dir2;
    const auto ck2 = synth(dir2, 2);
    const std::string model2 = ck2.tag_dir + "/mp_rank_00_model_states.pt";
    edit_file(model2, [](Value& r) {
      r.get_mut("param_shapes")->items_mut()[0].dict_mut().items.front().second = Value::size({-3, 4});
    });
    expect_refused(ck2.save_dir, model2, "negative");
  }

  // One error type leaves the core: what used to be std::invalid_argument is a ckptdoc::Error.
  void coreThrowsOnlyErrors() {
    QVERIFY_THROWS_EXCEPTION(
        Error, deepspeed::layout_zero12(0, {}, 0, deepspeed::zero12_rules_for_version("0.12.6")));
    QVERIFY_THROWS_EXCEPTION(Error, deepspeed::layout_zero3(0, {}, 0));
    QVERIFY_THROWS_EXCEPTION(Error, place_ranks({{0, 1}}, 0));
    QVERIFY_THROWS_EXCEPTION(Error, analysis::density_2d({}, {}, 0));
  }

  // In range is still fine: the largest accepted world size lays out (and reports the missing files).
  void largestAcceptedWorldSizeIsUsable() {
    test::TempDir dir;
    const auto ck = synth(dir, 2);
    const std::string model = ck.tag_dir + "/mp_rank_00_model_states.pt";
    edit_file(model, [](Value& r) { r.set("dp_world_size", Value::integer(deepspeed::kMaxWorldSize)); });
    const auto c = deepspeed::Checkpoint::open(ck.save_dir);
    bool mismatch = false;
    for (const auto& p : c->catalog().problems) mismatch = mismatch || p.code == "world-size-mismatch";
    QVERIFY(mismatch);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestCatalogBounds)
#include "test_catalog_bounds.moc"
