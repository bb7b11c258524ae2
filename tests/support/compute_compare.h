#pragma once
// Comparison of compute results for Qt Test: counts must match exactly, sums within a relative tolerance.
#include <QString>
#include <QTest>
#include <cmath>

#include "ckptdoc/compute/statistics.h"

namespace ckptdoc::test {

inline bool close_rel(double a, double b, double rel) {
  if (a == b) return true;
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

inline QString diff_log(const LogHistogram& a, const LogHistogram& b) {
  if (a.zeros != b.zeros) return QString("zeros %1 vs %2").arg(a.zeros).arg(b.zeros);
  if (a.underflow != b.underflow) return QString("underflow %1 vs %2").arg(a.underflow).arg(b.underflow);
  if (a.overflow != b.overflow) return QString("overflow %1 vs %2").arg(a.overflow).arg(b.overflow);
  if (a.nonfinite != b.nonfinite) return QString("nonfinite %1 vs %2").arg(a.nonfinite).arg(b.nonfinite);
  for (size_t i = 0; i < a.counts.size(); ++i)
    if (a.counts[i] != b.counts[i]) return QString("bin %1: %2 vs %3").arg(i).arg(a.counts[i]).arg(b.counts[i]);
  return {};
}

// Empty when equal (counts exact, sums within rel).
inline QString diff_values(const ValueStats& a, const ValueStats& b, double rel) {
#define CKPTDOC_CMP_U(f) \
  if (a.f != b.f) return QString(#f " %1 vs %2").arg(a.f).arg(b.f);
#define CKPTDOC_CMP_D(f) \
  if (!close_rel(a.f, b.f, rel)) return QString(#f " %1 vs %2").arg(a.f, 0, 'g', 17).arg(b.f, 0, 'g', 17);
  CKPTDOC_CMP_U(count) CKPTDOC_CMP_U(nan) CKPTDOC_CMP_U(pos_inf) CKPTDOC_CMP_U(neg_inf) CKPTDOC_CMP_U(zeros)
  CKPTDOC_CMP_U(subnormals) CKPTDOC_CMP_U(negatives)
  CKPTDOC_CMP_D(min) CKPTDOC_CMP_D(max) CKPTDOC_CMP_D(sum) CKPTDOC_CMP_D(sum_sq)
  if (auto d = diff_log(a.log_abs, b.log_abs); !d.isEmpty()) return "log_abs " + d;
  if (auto d = diff_log(a.log_abs_negative, b.log_abs_negative); !d.isEmpty()) return "log_abs_negative " + d;
  return {};
}

inline QString diff_divergence(const DivergenceStats& a, const DivergenceStats& b, double rel) {
  CKPTDOC_CMP_U(count) CKPTDOC_CMP_U(exact) CKPTDOC_CMP_U(nonfinite)
  CKPTDOC_CMP_D(max_abs) CKPTDOC_CMP_D(sum_abs) CKPTDOC_CMP_D(sum_sq_diff) CKPTDOC_CMP_D(sum_sq_lp)
  CKPTDOC_CMP_D(sum_sq_fp32)
  for (size_t i = 0; i < a.ulp.counts.size(); ++i)
    if (a.ulp.counts[i] != b.ulp.counts[i])
      return QString("ulp bucket %1: %2 vs %3").arg(i).arg(a.ulp.counts[i]).arg(b.ulp.counts[i]);
  if (auto d = diff_log(a.log_abs_diff, b.log_abs_diff); !d.isEmpty()) return "log_abs_diff " + d;
  return {};
#undef CKPTDOC_CMP_U
#undef CKPTDOC_CMP_D
}

}  // namespace ckptdoc::test

#define CKPTDOC_EXPECT_SAME(diff_expr)           \
  do {                                           \
    const QString _d = (diff_expr);              \
    QVERIFY2(_d.isEmpty(), qPrintable(_d));      \
  } while (0)
