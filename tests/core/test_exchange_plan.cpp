// The exchange plan of a distributed re-partition: replaying its pieces on old partitions built from
// DeepSpeed's layout rules must give exactly the new partitions those rules describe, every element once,
// for ZeRO-1/2 flat groups and ZeRO-3 sub-groups, growing and shrinking dp.
#include <QtTest>
#include <map>
#include <random>

#include "ckptdoc/sources/checkpoint/exchange_plan.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/writer.h"

using namespace ckptdoc;
using deepspeed::GroupLayout;
using deepspeed::ParamEntry;

namespace {

// A value that names its param and element, exact in float32.
float value_of(size_t param, int64_t e) {
  return static_cast<float>(param * 100000 + static_cast<size_t>(e) + 1);
}

int dp_of(const GroupLayout& g) {
  return static_cast<int>(g.partitions.size());
}

int64_t zero3_len(const GroupLayout& g) {
  int64_t n = 0;
  for (const auto& p : g.params) n += deepspeed::zero3_partition_numel(p.numel, dp_of(g));
  return n;
}

// Partitions [rank][element] of one group, straight from the layout rules (not from exchange_plan.h).
std::vector<std::vector<float>> partitions(const GroupLayout& g, bool zero3,
                                           const std::map<std::string, size_t>& id) {
  const int dp = dp_of(g);
  std::vector<std::vector<float>> parts(static_cast<size_t>(dp));
  for (int r = 0; r < dp; ++r) {
    auto& part = parts[static_cast<size_t>(r)];
    if (!zero3) {
      part.assign(static_cast<size_t>(g.partition_numel), 0.0f);
      for (const auto& p : g.params)
        for (int64_t e = 0; e < p.numel; ++e) {
          const int64_t flat = p.offset + e;
          if (flat / g.partition_numel == r)
            part[static_cast<size_t>(flat % g.partition_numel)] = value_of(id.at(p.name), e);
        }
    } else {
      part.assign(static_cast<size_t>(zero3_len(g)), 0.0f);
      for (const auto& p : g.params) {
        const int64_t len = deepspeed::zero3_partition_numel(p.numel, dp);
        for (int64_t k = 0; k < len; ++k)
          if (const int64_t e = r * len + k; e < p.numel)
            part[static_cast<size_t>(p.offset + k)] = value_of(id.at(p.name), e);
      }
    }
  }
  return parts;
}

// The old rank that holds element e of param p, by the layout rules.
int holder(const GroupLayout& g, const ParamEntry& p, int64_t e, bool zero3) {
  if (zero3) return static_cast<int>(e / deepspeed::zero3_partition_numel(p.numel, dp_of(g)));
  return static_cast<int>((p.offset + e) / g.partition_numel);
}

std::vector<ParamEntry> random_params(std::mt19937& rng, size_t count, const std::string& prefix = "p") {
  std::vector<ParamEntry> ps;
  std::uniform_int_distribution<int64_t> numel(1, 3000);
  for (size_t i = 0; i < count; ++i) {
    const int64_t n = i % 5 == 0 ? 1 : numel(rng);  // tiny params sit on partition edges
    ps.push_back(ParamEntry{prefix + std::to_string(i), {n}, n, 0});
  }
  return ps;
}

}  // namespace

class TestExchangePlan : public QObject {
  Q_OBJECT

  // Replays the pieces and compares with the new layout's partitions; also checks order and piece bounds.
  static void check(const std::vector<GroupLayout>& olds, const std::vector<GroupLayout>& news, bool zero3,
                    int64_t max_len) {
    std::map<std::string, size_t> id;
    std::map<std::string, std::pair<const GroupLayout*, const ParamEntry*>> old_place;
    for (const auto& g : olds)
      for (const auto& p : g.params) {
        id.emplace(p.name, id.size());
        old_place[p.name] = {&g, &p};
      }
    const auto pieces = repair::exchange_pieces(olds, news, zero3, max_len);
    std::vector<std::vector<std::vector<float>>> got, want;
    std::vector<std::vector<std::vector<int>>> writes;
    for (const auto& g : news) {
      want.push_back(partitions(g, zero3, id));
      got.push_back(want.back());
      writes.emplace_back();
      for (auto& part : got.back()) {
        std::fill(part.begin(), part.end(), 0.0f);
        writes.back().emplace_back(part.size(), 0);
      }
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto& pc = pieces[i];
      QVERIFY(pc.len > 0 && pc.len <= max_len);
      if (i > 0) {
        const auto& pr = pieces[i - 1];
        QVERIFY(std::tie(pr.new_group, pr.new_rank, pr.new_offset) <
                std::tie(pc.new_group, pc.new_rank, pc.new_offset));
      }
      const auto& [og, op] = old_place.at(pc.param);
      auto& part = got[static_cast<size_t>(pc.new_group)][static_cast<size_t>(pc.new_rank)];
      auto& count = writes[static_cast<size_t>(pc.new_group)][static_cast<size_t>(pc.new_rank)];
      for (int64_t k = 0; k < pc.len; ++k) {
        const int64_t e = pc.first + k;
        QCOMPARE(holder(*og, *op, e, zero3), pc.old_rank);  // read from the rank that has it
        const auto at = static_cast<size_t>(pc.new_offset + k);
        QVERIFY(at < part.size());
        part[at] = value_of(id.at(pc.param), e);
        ++count[at];
      }
    }
    for (size_t g = 0; g < news.size(); ++g)
      for (size_t r = 0; r < want[g].size(); ++r) {
        QVERIFY2(got[g][r] == want[g][r], qPrintable(QString("group %1 rank %2").arg(g).arg(r)));
        for (int c : writes[g][r]) QVERIFY(c <= 1);  // no element written twice
      }
  }

 private slots:
  void zero12FlatGroupsAnyDpToAnyDp() {
    std::mt19937 rng(7);
    const auto rules = deepspeed::zero12_rules_for_version("0.12.6+c00388a2e");
    for (int from : {1, 2, 3, 8})
      for (int to : {1, 2, 5, 7}) {
        std::vector<GroupLayout> olds, news;
        for (int gi = 0; gi < 2; ++gi) {
          auto ps = random_params(rng, gi == 0 ? 9 : 4, "g" + std::to_string(gi) + ".p");
          olds.push_back(deepspeed::layout_zero12(gi, ps, from, rules));
          news.push_back(deepspeed::layout_zero12(gi, ps, to, rules));
        }
        check(olds, news, false, 1 << 20);
        check(olds, news, false, 97);  // pieces split
        if (QTest::currentTestFailed()) qWarning("dp %d -> %d", from, to);
      }
  }

  void bf16OptimizerAndOldAlignmentRules() {
    std::mt19937 rng(11);
    auto ps = random_params(rng, 12);
    check({deepspeed::layout_bf16_optimizer(0, ps, 4)}, {deepspeed::layout_bf16_optimizer(0, ps, 3)}, false,
          1 << 20);
    const auto old_rules = deepspeed::zero12_rules_for_version("0.5.0");
    check({deepspeed::layout_zero12(0, ps, 2, old_rules)}, {deepspeed::layout_zero12(0, ps, 6, old_rules)},
          false, 50);
  }

  // ZeRO-3: the new layout may also cut the params into different sub-groups.
  void zero3SubGroupsRegrouped() {
    std::mt19937 rng(3);
    for (int from : {1, 2, 4})
      for (int to : {1, 3, 8}) {
        auto ps = random_params(rng, 10);
        const std::vector<ParamEntry> a(ps.begin(), ps.begin() + 6), b(ps.begin() + 6, ps.end());
        const std::vector<ParamEntry> c(ps.begin(), ps.begin() + 3), d(ps.begin() + 3, ps.end());
        check({deepspeed::layout_zero3(0, a, from), deepspeed::layout_zero3(1, b, from)},
              {deepspeed::layout_zero3(0, c, to), deepspeed::layout_zero3(1, d, to)}, true, 1 << 20);
        check({deepspeed::layout_zero3(0, ps, from)}, {deepspeed::layout_zero3(0, ps, to)}, true, 13);
      }
  }

  void unknownOrResizedParamIsRefused() {
    const auto rules = deepspeed::zero12_rules_for_version("0.12.6");
    std::vector<ParamEntry> ps{{"a", {10}, 10, 0}}, other{{"b", {10}, 10, 0}}, bigger{{"a", {11}, 11, 0}};
    const auto old_groups = std::vector<GroupLayout>{deepspeed::layout_zero12(0, ps, 2, rules)};
    QVERIFY_THROWS_EXCEPTION(
        std::exception,
        repair::exchange_pieces(old_groups, {deepspeed::layout_zero12(0, other, 2, rules)}, false, 8));
    QVERIFY_THROWS_EXCEPTION(
        std::exception,
        repair::exchange_pieces(old_groups, {deepspeed::layout_zero12(0, bigger, 2, rules)}, false, 8));
  }
};

QTEST_APPLESS_MAIN(TestExchangePlan)
#include "test_exchange_plan.moc"
