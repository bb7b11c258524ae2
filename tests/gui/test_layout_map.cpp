// The partition layout view: the pure pixel → (rank, fragment) mapping on a hand-built layout, zoom and
// pan keep it right, and painting 1024 ranks with thousands of fragments stays fast.
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QSignalSpy>
#include <QtTest>

#include "layout_geometry.h"
#include "layout_map.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

// deepspeed-format.md §5.1's worked example: dp = 3, params a (5 elements) then b (3): P = 4,
// rank0 = a[0:4]; rank1 = a[4] b[0:3]; rank2 = padding.
model::GroupLayout workedExample() {
  model::GroupLayout g;
  g.numel = 8;
  g.padded_numel = 12;
  g.partition_numel = 4;
  g.params.resize(2);
  g.params[0].name = "a";
  g.params[0].shape = {5};
  g.params[0].numel = 5;
  g.params[1].name = "b";
  g.params[1].shape = {3};
  g.params[1].numel = 3;
  g.params[1].offset = 5;
  auto rank = [](int r, int64_t real, std::vector<model::Fragment> fragments) {
    model::RankPartition p;
    p.rank = r;
    p.saved_numel = real;
    p.real_numel = real;
    p.padding = 4 - real;
    p.fragments = std::move(fragments);
    return p;
  };
  auto frag = [](int param, int64_t param_offset, int64_t partition_offset, int64_t numel) {
    model::Fragment f;
    f.param = param;
    f.param_offset = param_offset;
    f.partition_offset = partition_offset;
    f.numel = numel;
    return f;
  };
  g.partitions = {rank(0, 4, {frag(0, 0, 0, 4)}), rank(1, 4, {frag(0, 4, 0, 1), frag(1, 0, 1, 3)}),
                  rank(2, 0, {})};
  return g;
}

LayoutGeometry geometryFor(const model::GroupLayout& g) {
  LayoutGeometry geo;
  geo.label_width = 50;
  geo.header_height = 20;
  geo.row_height = 10;
  geo.row_gap = 2;
  geo.rank_count = static_cast<int>(g.partitions.size());
  geo.partition_numel = g.partition_numel;
  geo.elements_per_pixel = 0.1;  // 10 px per element
  return geo;
}

// Centre pixel of element e on rank r.
QPointF at(const LayoutGeometry& geo, int rank, double element) {
  return {geo.x_of(element + 0.5), geo.row_top(rank) + geo.row_height / 2.0};
}

model::GroupLayout bigLayout(int ranks, int params) {
  model::GroupLayout g;
  int64_t n = 0;
  for (int i = 0; i < params; ++i) {
    const int64_t numel = 1000 + (i * 7919) % 50000;
    model::ParamEntry pe;
    pe.name = "layers." + std::to_string(i) + ".weight";
    pe.shape = {numel};
    pe.numel = numel;
    pe.offset = n;
    g.params.push_back(std::move(pe));
    n += numel;
  }
  g.numel = n;
  const int64_t align = 2 * ranks;
  g.padded_numel = (n + align - 1) / align * align;
  g.partition_numel = g.padded_numel / ranks;
  int p = 0;
  int64_t pOff = 0;
  for (int r = 0; r < ranks; ++r) {
    model::RankPartition part;
    part.rank = r;
    int64_t off = 0;
    while (off < g.partition_numel && p < params) {
      const int64_t take = std::min(g.partition_numel - off, g.params[static_cast<size_t>(p)].numel - pOff);
      model::Fragment f;
      f.param = p;
      f.param_offset = pOff;
      f.partition_offset = off;
      f.numel = take;
      part.fragments.push_back(f);
      off += take;
      pOff += take;
      if (pOff == g.params[static_cast<size_t>(p)].numel) {
        ++p;
        pOff = 0;
      }
    }
    part.padding = g.partition_numel - off;
    part.saved_numel = off;
    part.real_numel = off;
    g.partitions.push_back(std::move(part));
  }
  return g;
}

}  // namespace

class TestLayoutMap : public QObject {
  Q_OBJECT
 private slots:
  void pixelMapsToFragment() {
    const auto g = workedExample();
    const auto geo = geometryFor(g);
    auto hit = hitTest(g, geo, at(geo, 0, 2));
    QVERIFY(hit);
    QCOMPARE(hit->rank, 0);
    QCOMPARE(hit->fragment, 0);
    QCOMPARE(hit->param, 0);
    QCOMPARE(hit->element, int64_t{2});
    hit = hitTest(g, geo, at(geo, 1, 0));
    QVERIFY(hit);
    QCOMPARE(hit->rank, 1);
    QCOMPARE(hit->param, 0);  // a[4]
    hit = hitTest(g, geo, at(geo, 1, 3));
    QVERIFY(hit);
    QCOMPARE(hit->fragment, 1);
    QCOMPARE(hit->param, 1);  // b
    hit = hitTest(g, geo, at(geo, 2, 1));
    QVERIFY(hit);
    QCOMPARE(hit->rank, 2);
    QCOMPARE(hit->fragment, -1);  // padding
  }

  void pixelsOutsideRowsMapToNothing() {
    const auto g = workedExample();
    const auto geo = geometryFor(g);
    QVERIFY(!hitTest(g, geo, {10, geo.row_top(0) + 2}));            // label column
    QVERIFY(!hitTest(g, geo, {geo.x_of(1), 5}));                    // ruler
    QVERIFY(!hitTest(g, geo, {geo.x_of(1), geo.row_top(0) + 11}));  // gap between rows
    QVERIFY(!hitTest(g, geo, at(geo, 0, 4)));                       // past the partition
    QVERIFY(!hitTest(g, geo, {geo.x_of(1), geo.row_top(3) + 1}));   // below the last rank
  }

  void zoomAndPanKeepMappingRight() {
    const auto g = workedExample();
    auto geo = geometryFor(g);
    const double x = geo.x_of(3.5);
    geo.zoom_at(x, 4.0);  // the element under x stays put
    QCOMPARE(geo.element_at(x), 3.5);
    geo.first_element = 3;  // pan so element 3 is at the left edge
    const auto hit = hitTest(g, geo, {geo.label_width + 1.0, geo.row_top(1) + 5});
    QVERIFY(hit);
    QCOMPARE(hit->element, int64_t{3});
    QCOMPARE(hit->param, 1);
    geo.scroll_y = geo.row_height + geo.row_gap;  // rank 1 now at the top
    QCOMPARE(geo.rank_at(geo.header_height + 1).value_or(-1), 1);
  }

  void widgetClickSelectsParam() {
    const auto g = workedExample();
    LayoutMap map;
    map.resize(600, 200);
    map.setGroup(nullptr, &g);
    map.geometry() = geometryFor(g);
    QSignalSpy spy(&map, &LayoutMap::paramClicked);
    QTest::mouseClick(&map, Qt::LeftButton, {}, at(map.geometry(), 1, 2).toPoint());
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.first().first().toInt(), 1);
    QCOMPARE(map.selectedParam(), 1);
    const auto hit = hitTest(g, map.geometry(), at(map.geometry(), 1, 2));
    QVERIFY(map.describe(*hit).contains("b"));
  }

  void paintsThousandsOfFragmentsOn1024RanksQuickly() {
    const auto g = bigLayout(1024, 5000);
    LayoutMap map;
    map.resize(1400, 900);
    map.setGroup(nullptr, &g);
    map.fitToWidth();
    QImage img(map.size(), QImage::Format_ARGB32);
    QElapsedTimer t;
    t.start();
    for (int i = 0; i < 5; ++i) map.render(&img);
    const qint64 ms = t.elapsed();
    QVERIFY2(ms < 2500, qPrintable(QString("5 paints took %1 ms").arg(ms)));
    // Hit-testing every rank's middle is a binary search each.
    const auto& geo = map.geometry();
    const auto hit = hitTest(
        g, geo, {geo.x_of(static_cast<double>(g.partition_numel) / 2), geo.row_top(10) + geo.pitch() / 2});
    QVERIFY(hit);
    QCOMPARE(hit->rank, 10);
    QVERIFY(hit->param >= 0);
  }
};

QTEST_MAIN(TestLayoutMap)
#include "test_layout_map.moc"
