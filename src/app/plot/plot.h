// `stoa plot`: charts from run logs. Reads each run's step log (steps.jsonl) and eval JSONs,
// writes the data files and a gnuplot script into `out`, runs gnuplot on it, and prints a JSON
// list of the files written. See docs/design/plot.md for the charts and their fields.
#pragma once
#include <string>
#include <vector>

namespace stoa::app {

struct PlotOptions {
  std::vector<std::string> runs;    // run or demo directories, one line per run in each chart
  std::vector<std::string> labels;  // the n-th names the n-th run (default: its name)
  std::string out;
  std::string gnuplot = "gnuplot";
};

// Exit status 0; errors (a run without a usable step, gnuplot failing) throw stoa::Error.
int plot_runs(const PlotOptions& options);

}  // namespace stoa::app
