// Tensor-parallel merge rules (sources/deepspeed/tp_rules.h): the precedence DeepSpeed's
// ds_to_universal.py::merge_tp_slices applies, Python re.match's start-anchored matching, and rule files that
// say what is wrong with them.
#include <QTest>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/tp_rules.h"
#include "test_support.h"

using namespace ckptdoc;
using deepspeed::TpMerge;

namespace {

deepspeed::TpRules megatron_like() {
  deepspeed::TpRules r;
  r.source = "test";
  r.replicated = {R"(\d+\.input_layernorm\.)", R"(\d+\.mlp\.dense_4h_to_h\.bias)"};
  r.average = {R"(\d+\.norm_to_average\.)"};
  r.row_parallel = {R"(\d+\.mlp\.dense_4h_to_h\.weight)"};
  r.vocabulary = {R"(\d+\.word_embeddings\.weight)"};
  r.sub_params_cat_dim_0 = {R"(\d+\.mlp\.dense_h_to_4h\.weight)"};
  r.original_vocab_size = 50;
  r.default_cat_dim = 0;
  return r;
}

}  // namespace

class TestTpRules : public QObject {
  Q_OBJECT

 private slots:
  void followsDeepSpeedsOrder() {
    const auto r = megatron_like();
    QCOMPARE(r.rule_for("3.input_layernorm.weight")->kind, TpMerge::Replicated);
    QCOMPARE(r.rule_for("3.mlp.dense_4h_to_h.bias")->kind, TpMerge::Replicated);
    QCOMPARE(r.rule_for("7.norm_to_average.weight")->kind, TpMerge::Average);
    QCOMPARE(r.rule_for("2.mlp.dense_h_to_4h.weight")->kind, TpMerge::SubParams2);
    const auto row = r.rule_for("2.mlp.dense_4h_to_h.weight");
    QCOMPARE(row->kind, TpMerge::Concat);
    QCOMPARE(row->cat_dim, 1);
    const auto vocab = r.rule_for("0.word_embeddings.weight");
    QCOMPARE(vocab->kind, TpMerge::Concat);
    QCOMPARE(vocab->cat_dim, 0);
    QVERIFY(vocab->vocabulary);
    // Anything else: DeepSpeed's default, concatenation on dim 0.
    const auto other = r.rule_for("5.attention.query_key_value.weight");
    QCOMPARE(other->kind, TpMerge::Concat);
    QCOMPARE(other->cat_dim, 0);
    QVERIFY(other->pattern.empty());
  }

  void matchesAtTheStartLikePythonsReMatch() {
    deepspeed::TpRules r;
    r.source = "test";
    r.replicated = {R"(ln\.)"};
    QVERIFY(r.rule_for("ln.weight").has_value());
    QVERIFY(!r.rule_for("1.ln.weight").has_value());     // re.match does not search
    QVERIFY(r.rule_for("ln.weight.extra").has_value());  // nor anchor at the end
  }

  void withoutDefaultAParamHasNoRule() {
    auto r = megatron_like();
    r.default_cat_dim.reset();
    QVERIFY(!r.rule_for("5.attention.dense.weight").has_value());
    r.cat_dims = {{R"(\d+\.attention\.)", 1}};
    QCOMPARE(r.rule_for("5.attention.dense.weight")->cat_dim, 1);
  }

  void ambiguousPatternsAreAnError() {
    deepspeed::TpRules r;
    r.source = "rules.json";
    r.replicated = {R"(\d+\.ln)", R"(3\.)"};
    try {
      r.rule_for("3.ln.weight");
      QFAIL("two matching patterns of one list were accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("matches both") != std::string::npos, e.what());
    }
  }

  void ruleFilesSayWhatIsWrong() {
    test::TempDir dir;
    const auto path = dir.file("rules.json");
    test::write_text(path, R"({"tp_replicated_parameter_patterns": ["ln"], "cat_dim": {"fc\\.": 1},
                               "default_cat_dim": 0, "original_vocab_size": 7})");
    const auto r = deepspeed::read_tp_rules(path);
    QCOMPARE(r.replicated.size(), size_t{1});
    QCOMPARE(*r.default_cat_dim, 0);
    QCOMPARE(*r.original_vocab_size, int64_t{7});
    QCOMPARE(r.rule_for("fc.weight")->cat_dim, 1);
    for (const char* bad :
         {R"([1, 2])", R"({"tp_replicated_parameter_patterns": "ln"})", R"({"unknown_key": []})",
          R"({"cat_dim": {"x": -1}})", R"({"original_vocab_size": 0})", "not json"}) {
      test::write_text(path, bad);
      try {
        deepspeed::read_tp_rules(path);
        QFAIL((std::string("accepted: ") + bad).c_str());
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
      }
    }
    try {
      deepspeed::read_tp_rules(dir.file("absent.json"));
      QFAIL("a missing rule file was accepted");
    } catch (const Error&) {
    }
  }

  void invalidRegularExpressionsAreNamed() {
    deepspeed::TpRules r;
    r.source = "rules.json";
    r.replicated = {"(unclosed"};
    try {
      r.rule_for("x");
      QFAIL("an invalid pattern was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("(unclosed") != std::string::npos, e.what());
    }
  }
};

CKPTDOC_TEST_MAIN(TestTpRules)
#include "test_tp_rules.moc"
