// pickle_may_hold_str against pickles CPython writes (protocols 0-5, torch.save's data.pkl, a Trainer-like
// training_args.bin) and the str opcodes it no longer writes: true for every pickle holding the str, as
// CPython or ckptdoc's unpickler reads it (else a renamed rank file goes unrecognised), false for one that
// only holds longer names containing it (else it is unpickled for nothing).
#include <QJsonArray>
#include <QtTest>
#include <functional>
#include <set>
#include <unordered_set>

#include "ckptdoc/format/pickle_strings.h"
#include "ckptdoc/format/unpickler.h"
#include "pickle_fixtures.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

// Whether a str equal to `s` is anywhere in the value ckptdoc's unpickler makes of the pickle.
bool unpickled_holds(const std::vector<uint8_t>& pickle, const std::string& s) {
  const auto root = unpickle(pickle).value;
  std::unordered_set<const void*> seen;
  bool found = false;
  std::function<void(const Value&)> walk = [&](const Value& v) {
    if (v.is(Value::Kind::Str) && v.as_str() == s) found = true;
    if (const void* id = v.identity(); id && !seen.insert(id).second) return;
    v.for_each_child(walk);
  };
  walk(root);
  return found;
}

}  // namespace

class TestPickleStrings : public QObject {
  Q_OBJECT

 private slots:
  void spotsWholeStrsOnly() {
    TempDir dir;
    const auto made = run_python(script("fixtures/make_str_pickles.py"), {dir.path()});
    CKPTDOC_EXPECT_EXIT(made, 0);
    const auto held = read_json(dir.file("strs.json"));  // file -> the strs CPython's pickle.loads finds
    QVERIFY(held.size() >= 30);
    int with = 0, without = 0;
    for (auto it = held.begin(); it != held.end(); ++it) {
      const auto bytes = read_bytes(dir.file(it.key().toStdString()));
      QVERIFY(!bytes.empty());
      std::set<std::string> by_python;
      for (const auto& s : it.value().toArray()) by_python.insert(s.toString().toStdString());
      for (const std::string s : {"module", "optimizer_state_dict"}) {
        const bool holds = by_python.count(s) || unpickled_holds(bytes, s);
        (holds ? with : without)++;
        QVERIFY2(pickle_may_hold_str(bytes, s) == holds,
                 qPrintable(it.key() + ": " + QString::fromStdString(s) + (holds ? " missed" : " seen")));
      }
    }
    // Both sides are shown: the Trainer's training_args and longer names at every protocol are among those
    // without; every str opcode among those with.
    QVERIFY(with >= 18);
    QVERIFY(without >= 30);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestPickleStrings)
#include "test_pickle_strings.moc"
