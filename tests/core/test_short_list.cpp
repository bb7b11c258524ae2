// short_list (short_list.h): the one spelling of "a few of many names" in findings. Every name when they fit,
// the first few and a count of the rest when they do not, nothing for none. joined: every name. plural
// (plural.h): a count with its noun.
#include <QTest>
#include <string>
#include <vector>

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
};

CKPTDOC_TEST_MAIN(TestShortList)
#include "test_short_list.moc"
