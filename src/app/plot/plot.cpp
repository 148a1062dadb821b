// `stoa plot`: charts from run logs. Reads each run's step log (steps.jsonl) and eval JSONs,
// writes the data files and a gnuplot script into --out, runs Debian's gnuplot on it, and prints
// a JSON list of the files written. Several --run directories share each chart, one line per
// run (ablations); --label names them in the given order. Torch-free: it only reads files, so it
// is in every build. See docs/design/plot.md for the charts and the fields they come from.
#include "app/plot/plot.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/plot/plot_data.h"
#include "app/plot/plot_gnuplot.h"
#include "app/plot/plot_script.h"
#include "core/error.h"

namespace stoa::app {
namespace fs = std::filesystem;

int plot_runs(const PlotOptions& o) {
  STOA_CHECK(o.labels.size() <= o.runs.size(), ErrorKind::kInvalidArgument,
             "plot: ", o.labels.size(), " --label for ", o.runs.size(),
             " --run; labels name the runs in order");
  std::vector<plot::RunData> runs;
  for (size_t i = 0; i < o.runs.size(); i++) {
    runs.push_back(plot::load_run(o.runs[i], i < o.labels.size() ? o.labels[i] : ""));
    const auto& r = runs.back();
    std::fprintf(stderr, "plot: %s: %zu steps, %zu evals, wall clock from %s (%s)\n",
                 r.label.c_str(), r.steps.size(), r.evals.size(), plot::clock_source_name(r.clock),
                 r.steps_path.c_str());
    if (r.lines_skipped > 0)
      std::fprintf(stderr, "plot: %s: skipped %lld malformed line(s) of %s\n", r.label.c_str(),
                   static_cast<long long>(r.lines_skipped), r.steps_path.c_str());
    for (const auto& w : r.warnings) std::fprintf(stderr, "plot: warning: %s\n", w.c_str());
  }
  const plot::PlotFiles files = plot::write_plot_inputs(runs, o.out);
  const std::string log = plot::run_gnuplot(o.gnuplot, files.script);
  nlohmann::json written = nlohmann::json::array();
  for (const auto& png : files.charts) {
    std::error_code ec;
    STOA_CHECK(fs::is_regular_file(png, ec) && fs::file_size(png, ec) > 0, ErrorKind::kIo,
               "plot: gnuplot exited cleanly but did not write ", png, " (see ", log, ")");
    written.push_back(png);
  }
  for (const auto& d : files.data) written.push_back(d);
  written.push_back(files.script);
  written.push_back(log);
  std::printf("%s\n", written.dump(2).c_str());
  return 0;
}

}  // namespace stoa::app
