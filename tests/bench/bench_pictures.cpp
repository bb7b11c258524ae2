// The layout picture's cost per frame: session::layout_raster over 1024 ranks x 2000 params (a ZeRO-1/2 cut,
// and a ZeRO-3 cut where every param has a fragment on every rank, 2M fragments) at a 1216 x 630 map, the
// rows thinner than a pixel, for the param and the exact-fraction shades; and the overview strip. A view
// recomputes the raster only when the map moves (pan, zoom, resize, selection), so this is the cost of a
// panning frame. Usage: bench_pictures [RANKS] [PARAMS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "ckptdoc/session/pictures.h"

using namespace ckptdoc;

namespace {

model::GroupLayout zero12(int ranks, int params) {
  model::GroupLayout g;
  int64_t n = 0;
  for (int i = 0; i < params; ++i) {
    model::ParamEntry pe;
    pe.name = "p" + std::to_string(i);
    pe.numel = 1000 + (i * 7919) % 50000;
    pe.shape = {pe.numel};
    pe.offset = n;
    n += pe.numel;
    g.params.push_back(pe);
  }
  g.numel = n;
  g.partition_numel = (n + ranks - 1) / ranks;
  g.padded_numel = g.partition_numel * ranks;
  int p = 0;
  int64_t used = 0;
  for (int r = 0; r < ranks; ++r) {
    model::RankPartition part;
    part.rank = r;
    int64_t off = 0;
    while (off < g.partition_numel && p < params) {
      const int64_t take = std::min(g.partition_numel - off, g.params[static_cast<size_t>(p)].numel - used);
      part.fragments.push_back({p, used, off, take});
      off += take;
      used += take;
      if (used == g.params[static_cast<size_t>(p)].numel) ++p, used = 0;
    }
    g.partitions.push_back(part);
  }
  return g;
}

model::GroupLayout zero3(int ranks, int params) {
  model::GroupLayout g;
  int64_t off = 0;
  for (int i = 0; i < params; ++i) {
    model::ParamEntry pe;
    pe.name = "p" + std::to_string(i);
    pe.numel = 1000 + (i * 7919) % 50000;
    pe.shape = {pe.numel};
    pe.offset = off;
    off += (pe.numel + ranks - 1) / ranks;
    g.params.push_back(pe);
  }
  g.partition_numel = off;
  for (int r = 0; r < ranks; ++r) {
    model::RankPartition part;
    part.rank = r;
    for (int i = 0; i < params; ++i) {
      const auto& pe = g.params[static_cast<size_t>(i)];
      const int64_t per = (pe.numel + ranks - 1) / ranks;
      const int64_t start = std::min<int64_t>(pe.numel, per * r),
                    n = std::min<int64_t>(per, pe.numel - start);
      if (n > 0) part.fragments.push_back({i, start, pe.offset, n});
    }
    g.partitions.push_back(part);
  }
  return g;
}

std::shared_ptr<const session::HealthMap> health(const model::GroupLayout& g, int stale_rank) {
  model::Catalog cat;
  cat.groups.push_back(g);
  analysis::Report report;
  for (const auto& p : g.params) {
    analysis::ParamReport pr;
    pr.name = p.name;
    report.params.push_back(pr);
  }
  for (const auto& part : g.partitions)
    for (const auto& f : part.fragments) {
      DivergenceStats d;
      d.count = static_cast<uint64_t>(f.numel);
      d.exact = part.rank == stale_rank ? 0 : d.count;
      report.params[static_cast<size_t>(f.param)].per_rank[part.rank] = d;
    }
  return session::HealthMap::build(cat, report);
}

double ms_of(const std::function<void()>& fn, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024, params = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int w = 1280, h = 654;
  std::printf("layout_raster, %d ranks x %d params, %d x %d pixels (median of 20):\n", ranks, params, w, h);
  for (const auto& named :
       {std::pair{"ZeRO-1/2", zero12(ranks, params)}, std::pair{"ZeRO-3  ", zero3(ranks, params)}}) {
    const char* name = named.first;
    const auto& group = named.second;  // a plain reference: clang before C++20 P1091 cannot capture a binding
    size_t fragments = 0;
    for (const auto& p : group.partitions) fragments += p.fragments.size();
    const auto hm = health(group, ranks / 2);
    for (auto shade : {session::Shade::Param, session::Shade::ExactFraction}) {
      session::LayoutRasterRequest rq;
      rq.shade = shade;
      rq.width = w;
      rq.height = h;
      rq.background = 0x0F0F0FFFu;
      rq.geometry.label_width = 64;
      rq.geometry.header_height = 4;
      rq.geometry.rank_count = ranks;
      rq.geometry.partition_numel = group.partition_numel;
      rq.geometry.fit(w);
      rq.geometry.fit_rows(h, 24);
      const double ms = ms_of([&] { (void)session::layout_raster(group, hm.get(), rq); }, 20);
      std::printf("  %s %9zu fragments  %-36s %7.2f ms\n", name, fragments,
                  session::shade_label(shade).data(), ms);
    }
  }
  return 0;
}
