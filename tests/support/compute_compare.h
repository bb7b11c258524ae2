#pragma once
// Qt Test layer over compute_diff.h: CKPTDOC_EXPECT_SAME(diff_...(a, b, rel)) fails the test function with
// the difference when the diff is not empty.
#include <QTest>

#include "compute_diff.h"

#define CKPTDOC_EXPECT_SAME(diff_expr)                \
  do {                                                \
    const std::string _ckptdoc_d = (diff_expr);       \
    QVERIFY2(_ckptdoc_d.empty(), _ckptdoc_d.c_str()); \
  } while (0)
