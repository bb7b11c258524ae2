// The packed histogram counts (BinCounts) a report keeps per param: they read, add and merge exactly like an
// array of N counts, whatever widths the counts need; and the histograms of a diagnosis of a real DeepSpeed
// checkpoint, merged packed across ranks and tasks, equal counts made here element by element with frexp.
#include <QtTest>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "compute_reference.h"
#include "test_support.h"

using namespace ckptdoc;

namespace {

constexpr size_t kN = LogHistogram::kBins;
using Dense = std::array<uint64_t, kN>;

// Counts of every magnitude a width boundary can see, in a random non-zero range.
Dense random_dense(std::mt19937_64& gen) {
  static const uint64_t kValues[] = {1,     2,     254,           255,           256,
                                     65535, 65536, 4294967295ull, 4294967296ull, ~uint64_t{0} / 4};
  Dense d{};
  const size_t lo = gen() % kN, hi = lo + gen() % (kN - lo);
  const size_t widest = gen() % std::size(kValues);
  for (size_t i = lo; i <= hi; ++i)
    if (gen() % 3 != 0) d[i] = kValues[gen() % (widest + 1)];
  return d;
}

void expect_equal(const BinCounts<kN>& c, const Dense& d) {
  for (size_t i = 0; i < kN; ++i)
    if (c[i] != d[i]) QFAIL(qPrintable(QStringLiteral("bin %1: %2 != %3").arg(i).arg(c[i]).arg(d[i])));
  QVERIFY(c.dense() == d);
  size_t n = 0;
  for (uint64_t v : c) QCOMPARE(v, d[n++]);  // the iterator reads the same N counts
  QCOMPARE(n, kN);
  for (size_t i = 0; i < kN; ++i)
    if (d[i] != 0) QVERIFY(i >= c.first() && i < c.first() + c.stored());  // every non-zero bin is stored
}

// Counts of the log-magnitude bins made with frexp (compute_reference.h), in plain arrays.
struct RefHistogram {
  Dense bins{};
  uint64_t zeros = 0, underflow = 0, overflow = 0, nonfinite = 0;
  void add(double v) {
    if (!std::isfinite(v)) {
      ++nonfinite;
    } else if (v == 0) {
      ++zeros;
    } else {
      const int b = test::ref_log_bin(std::fabs(v));
      if (b < 0)
        ++underflow;
      else if (b >= static_cast<int>(kN))
        ++overflow;
      else
        ++bins[static_cast<size_t>(b)];
    }
  }
};

void expect_histogram(const LogHistogram& h, const RefHistogram& r, const std::string& what) {
  for (size_t i = 0; i < kN; ++i)
    if (h.counts[i] != r.bins[i])
      QFAIL(qPrintable(QString::fromStdString(what) +
                       QStringLiteral(" bin %1: %2 != %3").arg(i).arg(h.counts[i]).arg(r.bins[i])));
  QCOMPARE(h.zeros, r.zeros);
  QCOMPARE(h.underflow, r.underflow);
  QCOMPARE(h.overflow, r.overflow);
  QCOMPARE(h.nonfinite, r.nonfinite);
}

}  // namespace

class TestBinCounts : public QObject {
  Q_OBJECT

 private slots:
  void emptyReadsAsZeros() {
    BinCounts<kN> c;
    QVERIFY(c.empty());
    QCOMPARE(c.heap_bytes(), size_t{0});
    expect_equal(c, Dense{});
    c.assign(Dense{});
    QVERIFY(c.empty());
    QVERIFY(c == BinCounts<kN>());
  }

  void assignedCountsReadBackAtEveryWidth() {
    std::mt19937_64 gen(7);
    for (int round = 0; round < 500; ++round) {
      const Dense d = random_dense(gen);
      BinCounts<kN> c(d);
      expect_equal(c, d);
      QVERIFY(c.heap_bytes() <= c.stored() * 8);
      BinCounts<kN> copy = c;  // deep copy
      BinCounts<kN> moved = std::move(c);
      expect_equal(copy, d);
      expect_equal(moved, d);
      QVERIFY(copy == moved);
      c = copy;
      expect_equal(c, d);
    }
  }

  // Small counts take a byte each, and only the bins from the first to the last non-zero one are kept.
  void storesOnlyTheRangeInTheNarrowestWidth() {
    Dense d{};
    d[100] = 3;
    d[109] = 255;
    BinCounts<kN> c(d);
    QCOMPARE(c.first(), size_t{100});
    QCOMPARE(c.stored(), size_t{10});
    QCOMPARE(c.heap_bytes(), size_t{10});
    d[105] = 70000;
    c.assign(d);
    QCOMPARE(c.heap_bytes(), size_t{40});
  }

  // add() and set() against a plain array: in place, past the range's ends, and past a width's largest count.
  void addAndSetMatchAnArray() {
    std::mt19937_64 gen(11);
    for (int round = 0; round < 50; ++round) {
      Dense d = round % 2 ? random_dense(gen) : Dense{};
      BinCounts<kN> c(d);
      for (int k = 0; k < 400; ++k) {
        const size_t i = gen() % kN;
        const uint64_t v = gen() % 4 == 0 ? (uint64_t{1} << (gen() % 40)) : 1;
        if (gen() % 5 == 0) {
          d[i] = v;
          c.set(i, v);
        } else {
          d[i] += v;
          c.add(i, v);
        }
      }
      expect_equal(c, d);
    }
    BinCounts<kN> c;
    Dense d{};
    for (int k = 0; k < 70000; ++k) c.add(42);  // 1 byte, then 2, then 4 bytes wide
    d[42] = 70000;
    expect_equal(c, d);
  }

  void mergeIsTheElementwiseSum() {
    std::mt19937_64 gen(13);
    for (int round = 0; round < 500; ++round) {
      const Dense a = random_dense(gen), b = round % 7 == 0 ? Dense{} : random_dense(gen);
      Dense sum{};
      for (size_t i = 0; i < kN; ++i) sum[i] = a[i] + b[i];  // no wrap: every count below 2^62
      BinCounts<kN> x(a);
      x.merge(BinCounts<kN>(b));
      expect_equal(x, sum);
      BinCounts<kN> y(b);
      y.merge(BinCounts<kN>(a));
      expect_equal(y, sum);
    }
  }

  // A diagnosis of real DeepSpeed checkpoints merges each param's histograms packed, rank by rank and task by
  // task: every bin equals a count made here from the saved tensors, element by element with frexp.
  void diagnosisHistogramsEqualIndependentCountsOnFixtures() {
    for (const char* name : {"zero2_fp16_ws2", "zero1_fp16_ws2", "zero2_bf16_ws2"}) {
      const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture(name));
      analysis::DiagnoseOptions o;
      o.device = DeviceKind::Cpu;
      const analysis::Report report = deepspeed::diagnose(*ckpt, o);
      const auto& cat = ckpt->catalog();
      size_t checked = 0;
      for (const auto& g : cat.groups) {
        std::vector<RefHistogram> fp32(g.params.size()), fp32_neg(g.params.size()), avg(g.params.size()),
            avg_sq(g.params.size());
        for (const auto& part : g.partitions) {
          const auto master = ckpt->fp32_partition(g.index, part.rank);
          const auto m = ckpt->moment_partition(g.index, part.rank, "exp_avg");
          const auto v = ckpt->moment_partition(g.index, part.rank, "exp_avg_sq");
          QVERIFY(master && m && v);
          QCOMPARE(master->dtype, DType::F32);
          const std::vector<uint8_t> mb = master->to_bytes(), ab = m->to_bytes(), vb = v->to_bytes();
          auto value = [](const std::vector<uint8_t>& bytes, int64_t i) {
            float f;
            std::memcpy(&f, bytes.data() + static_cast<size_t>(i) * 4, 4);
            return static_cast<double>(f);
          };
          for (const auto& f : part.fragments)
            for (int64_t i = f.partition_offset; i < f.partition_offset + f.numel; ++i) {
              const auto p = static_cast<size_t>(f.param);
              fp32[p].add(value(mb, i));
              if (value(mb, i) < 0) fp32_neg[p].add(value(mb, i));
              avg[p].add(value(ab, i));
              avg_sq[p].add(value(vb, i));
            }
        }
        for (size_t i = 0; i < g.params.size(); ++i) {
          const analysis::ParamReport* r = nullptr;
          for (const auto& p : report.params)
            if (p.name == g.params[i].name && p.group == g.index) r = &p;
          QVERIFY(r && r->fp32 && r->exp_avg && r->exp_avg_sq);
          const std::string what = std::string(name) + " " + r->name;
          expect_histogram(r->fp32->log_abs, fp32[i], what + " fp32");
          expect_histogram(r->fp32->log_abs_negative, fp32_neg[i], what + " fp32 negative");
          expect_histogram(r->exp_avg->log_abs, avg[i], what + " exp_avg");
          expect_histogram(r->exp_avg_sq->log_abs, avg_sq[i], what + " exp_avg_sq");
          ++checked;
        }
      }
      QCOMPARE(checked, report.params.size());
      QVERIFY(checked > 0);
    }
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestBinCounts)
#include "test_bin_counts.moc"
