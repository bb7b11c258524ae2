#pragma once
// What `repair --drop-optimizer` of a Megatron-core save must be, as megatron_drop_check.py (megatron-core's
// own load of the copy) reports it: the optimizer's keys gone and the rest the input's, the common state's
// "optimizer" entry gone and the rest the input's, the model bit for bit, no optimizer loadable from the
// copy, and a fresh optimizer's step. Used by every Megatron-core drop test (0.16 and 0.19 layouts alike).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

namespace ckptdoc::test {

// `repair` is the repair's --json, `judged` the judge's JSON. A failed check fails the calling test (the
// caller returns when QTest::currentTestFailed()).
inline void expect_megatron_drop_judged(const QJsonObject& repair, const QJsonObject& judged) {
  const QByteArray shown = QJsonDocument(judged).toJson(QJsonDocument::Compact);
  QCOMPARE(repair["keys_dropped"].toInt(), judged["optimizer_keys_in"].toInt());
  QVERIFY2(judged["optimizer_keys_out"].toArray().isEmpty(), shown.constData());
  QVERIFY2(judged["other_keys_equal"].toBool(), shown.constData());
  QCOMPARE(judged["common_dropped"].toArray(), (QJsonArray{"optimizer"}));
  QVERIFY2(judged["common_rest_equal"].toBool(), shown.constData());
  QVERIFY2(judged["weights_differ"].toArray().isEmpty(), shown.constData());
  QVERIFY(judged["weights_equal"].toInt() > 0);
  QVERIFY2(!judged["optimizer_load_error"].isNull(), "megatron-core loaded an optimizer from the output");
  QVERIFY2(judged["step_ok"].toBool(), shown.constData());
}

}  // namespace ckptdoc::test
