// shape_text (format/shape_text.h): the one spelling of a tensor's shape in every command, finding and view:
// its numbers in brackets, comma-separated, for a scalar, a vector, a matrix and a shape with an empty dim.
#include <QTest>
#include <string>

#include "ckptdoc/format/shape_text.h"
#include "test_support.h"

using namespace ckptdoc;

class TestShapeText : public QObject {
  Q_OBJECT

 private slots:
  void shapesAreTheirNumbersInBrackets() {
    QCOMPARE(shape_text({}), std::string("[]"));
    QCOMPARE(shape_text({13}), std::string("[13]"));
    QCOMPARE(shape_text({301, 96}), std::string("[301, 96]"));
    QCOMPARE(shape_text({2, 0, 4}), std::string("[2, 0, 4]"));
  }
};

CKPTDOC_TEST_MAIN(TestShapeText)
#include "test_shape_text.moc"
