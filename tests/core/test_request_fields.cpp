// Refusals name request fields, not a front end's options (request_field.h): the core marks a field
// ("{lp_source}") and each front end names it as it registered at start-up; the CLI by its flags, the desktop
// views by their controls' labels. Driven through make_plan on a committed real DeepSpeed checkpoint and the
// CLI.
#include <QtTest>
#include <filesystem>
#include <optional>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/session/request_field_labels.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "test_support.h"

using namespace ckptdoc;

namespace {

std::string refusal_of(const deepspeed::Checkpoint& ckpt, const std::string& out,
                       const repair::RepairRequest& rq) {
  try {
    repair::make_plan(ckpt, out, rq);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Resets the process's namer when a test function ends, whatever it set.
struct NamerGuard {
  ~NamerGuard() { set_request_field_namer(nullptr); }
};

}  // namespace

class TestRequestFields : public QObject {
  Q_OBJECT

 private slots:
  void marksAreRenderedAndOtherBracesKept() {
    const auto upper = [](RequestField f) { return "<" + std::string(request_field_id(f)) + ">"; };
    QCOMPARE(render_request_fields("use {lp_source} with {refresh_fp32}", upper),
             std::string("use <lp_source> with <refresh_fp32>"));
    // A path's braces and a brace without its pair stay as they are; a mark after them is still named.
    QCOMPARE(render_request_fields("/runs/{exp}/ckpt {open {force}", upper),
             std::string("/runs/{exp}/ckpt {open <force>"));
    QCOMPARE(render_request_fields("{unknown_field} {", upper), std::string("{unknown_field} {"));
    for (int i = 0; i < kRequestFieldCount; ++i) {
      const auto f = static_cast<RequestField>(i);
      QCOMPARE(request_field_from_id(request_field_id(f)), std::optional<RequestField>(f));
    }
  }

  void coreNamesFieldsByTheirIdsWhenNoFrontEndRegistered() {
    NamerGuard guard;
    set_request_field_namer(nullptr);
    const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    test::TempDir dir;
    repair::RepairRequest rq;
    rq.world_size = 4;
    rq.target = test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint";
    const std::string why = refusal_of(*ckpt, dir.file("out"), rq);
    QVERIFY2(has(why, "world_size and target are alternatives"), why.c_str());
    QVERIFY2(!has(why, "--") && !has(why, "{"), why.c_str());
  }

  // Paths in a refusal are never rendered: a folder named "{force}" was shown as "force" (or, in the CLI,
  // "--force"). The output check and make_plan's refusals keep it as it is, and still name their fields.
  void pathsInRefusalsAreNotRendered() {
    NamerGuard guard;
    set_request_field_namer(nullptr);
    test::TempDir dir;
    const std::string odd = dir.file("{force}");
    std::filesystem::create_directories(odd);
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", odd + "/ck");
    const auto ckpt = deepspeed::Checkpoint::open(odd + "/ck");
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    std::string why = refusal_of(*ckpt, odd + "/ck/out", rq);  // inside the input
    QVERIFY2(has(why, odd + "/ck/out is inside the input checkpoint " + odd + "/ck;"), why.c_str());
    std::filesystem::create_directories(odd + "/full");
    test::write_text(odd + "/full/notes.txt", "mine");
    why = refusal_of(*ckpt, odd + "/full", rq);  // not empty, no --force
    QVERIFY2(has(why, odd + "/full exists and is not empty (pass force to replace"), why.c_str());
    rq.force = true;
    why = refusal_of(*ckpt, odd + "/full", rq);  // --force, but not a checkpoint
    QVERIFY2(has(why, odd + "/full holds 'notes.txt'"), why.c_str());
    QVERIFY2(has(why, "; force replaces only"), why.c_str());
  }

  void viewsNameTheirControls() {
    NamerGuard guard;
    set_request_field_namer(&session::request_field_label);
    const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    test::TempDir dir;
    repair::RepairRequest none;
    const std::string why = refusal_of(*ckpt, dir.file("out"), none);
    QVERIFY2(has(why, "\u201cRefresh fp32 masters\u201d") && has(why, "\u201cReset optimizer state\u201d"),
             why.c_str());
    QVERIFY2(!has(why, "--refresh-fp32") && !has(why, "{"), why.c_str());
    // An option the views lack is named as the command line's, so the user knows where it is.
    repair::RepairRequest lp;
    lp.reset_optimizer = true;
    lp.lp_source = dir.file("weights.safetensors");
    const std::string lp_why = refusal_of(*ckpt, dir.file("out"), lp);
    QVERIFY2(has(lp_why, "command line's --lp-source") && has(lp_why, "\u201cRefresh fp32 masters\u201d"),
             lp_why.c_str());
  }

  void cliNamesItsFlags() {
    const std::string ck = test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint";
    test::TempDir dir;
    const auto r = test::run_cli(
        {"repair", ck, "-o", dir.file("out"), "--repartition", "--world-size", "4", "--target", ck});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(has(r.err, "--world-size and --target are alternatives"), r.err.c_str());
    const auto lp = test::run_cli(
        {"repair", ck, "-o", dir.file("out"), "--reset-optimizer", "--lp-source", dir.file("w.safetensors")});
    CKPTDOC_EXPECT_EXIT(lp, 2);
    QVERIFY2(has(lp.err, "--lp-source: only used with --refresh-fp32"), lp.err.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestRequestFields)
#include "test_request_fields.moc"
