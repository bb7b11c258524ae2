// short_list (short_list.h): the one spelling of "a few of many names" in findings. Every name when they fit,
// the first few and a count of the rest when they do not, nothing for none. joined: every name. plural
// (plural.h): a count with its noun. three_significant_digits and two_digits (number_text.h): numbers in
// messages and file names.
#include <QTest>
#include <string>
#include <vector>

#include "ckptdoc/number_text.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/short_list.h"
#include "test_support.h"

using namespace ckptdoc;

class TestShortList : public QObject {
  Q_OBJECT

 private slots:
  void noNamesIsEmpty() { QCOMPARE(short_list({}), std::string()); }

  void namesThatFitAreAllListed() {
    QCOMPARE(short_list({"a"}), std::string("a"));
    QCOMPARE(short_list({"a", "b", "c", "d", "e"}), std::string("a, b, c, d, e"));
  }

  void theRestAreCounted() {
    const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f", "g"};
    QCOMPARE(short_list(names), std::string("a, b, c, d, e and 2 more"));
    QCOMPARE(short_list(names, 3), std::string("a, b, c and 4 more"));
  }

  void joinedListsEveryName() {
    QCOMPARE(joined({}), std::string());
    QCOMPARE(joined({"optimizer.pt"}), std::string("optimizer.pt"));
    QCOMPARE(joined({"a", "b", "c", "d", "e", "f", "g"}), std::string("a, b, c, d, e, f, g"));
  }

  void pluralAddsAnSUnlessOne() {
    QCOMPARE(plural(0, "file"), std::string("0 files"));
    QCOMPARE(plural(1, "param"), std::string("1 param"));
    QCOMPARE(plural(2, "storage item"), std::string("2 storage items"));
  }

  // number_text.h: a measure in a message keeps three significant digits, as every rule printed it.
  void threeSignificantDigitsAsPrintfG() {
    QCOMPARE(three_significant_digits(0.000123456), std::string("0.000123"));
    QCOMPARE(three_significant_digits(1234.5), std::string("1.23e+03"));
    QCOMPARE(three_significant_digits(2.0), std::string("2"));
    QCOMPARE(three_significant_digits(-0.5), std::string("-0.5"));
  }

  // DeepSpeed's file names write an mp rank or a layer with at least two digits.
  void twoDigitsZeroPads() {
    QCOMPARE(two_digits(0), std::string("00"));
    QCOMPARE(two_digits(7), std::string("07"));
    QCOMPARE(two_digits(123), std::string("123"));
  }
};

CKPTDOC_TEST_MAIN(TestShortList)
#include "test_short_list.moc"
