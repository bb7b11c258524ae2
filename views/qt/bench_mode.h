#pragma once
// ckptdoc-gui --bench N: times the window's real paints (tests/bench/bench_app_1b.sh). Prints the time from
// process start to the first paint of the overview with the checkpoint open (or of the empty window), then
// N frames of panning the layout map and N of scrolling the params table, each frame timed from the input
// to the end of the paint that shows it (the repaint manager paints and flushes the window inside one
// event; the frame ends when that event returns), and quits with 0.
namespace ckptdoc::gui {

class MainWindow;

// `opening`: a checkpoint is being opened (the frames wait for its analysis). Call before the window shows.
void armBench(MainWindow& window, int frames, bool opening);

}  // namespace ckptdoc::gui
